"""The bytes the processes of a run exchange before and beside JAX (``rendezvous``, ``lifeline``): bounded lines of
flat JSON, read against a deadline and checked field by field, the proofs that a process belongs to the run, and
the shapes of the meeting's messages (``GREETING`` ... ``STOPPED``: rendezvous's docstring tells the exchange;
``BEAT``, ``BYE``, ``GONE`` and ``STOP``: the lifeline's).

A message is one line of at most ``LINE`` bytes: a JSON object whose values are strings, integers, booleans or
lists of integers. ``parse`` turns any other bytes (too long, not UTF-8, not JSON, nested 1,000 deep, another
shape, a field of another type) into ``Malformed``, never another exception, so that a stranger's bytes cost
the reader a log line and nothing else. ``Lines`` cuts a connection's bytes into lines, a line past ``LINE``
bytes being ``Malformed`` as soon as it is; ``read`` waits for one line until a deadline for the whole line,
however slowly its bytes come.

A proof is an HMAC-SHA256, keyed with the run's secret (``$APPLICATIVE_RUN_SECRET``, ``SECRET``: the same bytes
on every process of a run, given at launch), of the challenges of both sides and what the prover says: it shows
that the prover holds the secret, for this exchange only (a proof overheard is worth nothing on another
connection), without sending the secret. With the empty secret (none given) anyone who speaks the protocol can
make one.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import re
import secrets
import socket
import time
from collections.abc import Callable, Mapping, Sequence

__all__ = ["HELLO_SECONDS", "LINE", "PROTOCOL", "SECRET", "Lines", "Malformed", "Shape", "challenge", "encode", "named",
           "parse", "proof", "proven", "send"]  # fmt: skip

LINE = 1024
"""The longest line a reader takes, in bytes (a process's hello is about 300)."""
PROTOCOL = "applicative-rendezvous/2"
HELLO_SECONDS = 5.0
"""Seconds a connection has, from its start, to send its whole hello (and process 0 its answer's first lines)."""
SECRET = "APPLICATIVE_RUN_SECRET"
"""The environment variable that holds the run's secret (``processes.initialize``), named in messages."""

_HEX32 = re.compile(r"[0-9a-f]{32}")
_HEX64 = re.compile(r"[0-9a-f]{64}")


class Malformed(ValueError):
    """Bytes that are not a message of the expected shape; the text says why, for a log line."""


def is_text(limit: int) -> Callable[[object], bool]:
    """A check: a string of at most ``limit`` characters."""
    return lambda value: isinstance(value, str) and len(value) <= limit


def is_integer(value: object) -> bool:
    """An int, not a bool (JSON's ``true`` is not a process)."""
    return isinstance(value, int) and not isinstance(value, bool)


def is_challenge(value: object) -> bool:
    return isinstance(value, str) and _HEX32.fullmatch(value) is not None


def is_proof(value: object) -> bool:
    return isinstance(value, str) and _HEX64.fullmatch(value) is not None


def is_true(value: object) -> bool:
    return value is True


def is_integers(value: object) -> bool:
    return isinstance(value, list) and len(value) <= 4096 and all(map(is_integer, value))


def encode(message: Mapping[str, object]) -> bytes:
    """A message as the line that carries it."""
    return json.dumps(message, separators=(",", ":")).encode() + b"\n"


def parse(line: bytes, *shapes: Mapping[str, Callable[[object], bool]]) -> dict[str, object]:
    """The message of ``line``: an object with exactly the fields of one of ``shapes``, each value passing its
    check; ``Malformed`` (why, in a few words) otherwise."""
    if len(line) > LINE:
        raise Malformed(f"a line longer than {LINE} bytes")
    try:
        message = json.loads(line)
    except RecursionError:
        raise Malformed("JSON nested too deep") from None
    except ValueError:  # not UTF-8, not JSON (UnicodeDecodeError and JSONDecodeError are ValueErrors)
        raise Malformed("not JSON") from None
    if not isinstance(message, dict):
        raise Malformed(f"JSON, but not an object: {type(message).__name__}")
    fields = next((shape for shape in shapes if set(shape) == set(message)), None)
    if fields is None:
        raise Malformed(f"an object of {len(message)} fields, not a message of the protocol")
    wrong = [name for name, check in fields.items() if not check(message[name])]
    if wrong:
        raise Malformed(f"an object whose {', '.join(wrong)} {'is' if len(wrong) == 1 else 'are'} of the wrong type")
    return message


class Lines:
    """A connection's bytes cut into lines: ``feed`` what ``recv`` gave, ``take`` each whole line."""

    def __init__(self) -> None:
        self.buffer = bytearray()
        self.lines: list[bytes] = []

    def feed(self, data: bytes) -> None:
        """Add ``data``; ``Malformed`` once a line is longer than ``LINE`` bytes, whole or not."""
        self.buffer += data
        *whole, rest = bytes(self.buffer).split(b"\n")
        self.buffer = bytearray(rest)
        self.lines += whole
        if len(self.buffer) > LINE or any(len(line) > LINE for line in whole):
            raise Malformed(f"a line longer than {LINE} bytes")

    def take(self) -> bytes | None:
        """The first whole line not taken yet, without its newline; None if there is none."""
        return self.lines.pop(0) if self.lines else None

    def read(self, connection: socket.socket, deadline: float) -> bytes:
        """The next line from the blocking ``connection``, whole by ``deadline`` (``time.monotonic``) however slowly
        it comes: ``TimeoutError`` past it, ``ConnectionError`` if the peer closed first, ``Malformed``."""
        while (line := self.take()) is None:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("no whole line in time")
            connection.settimeout(left)
            data = connection.recv(4096)
            if not data:
                raise ConnectionError("closed by the peer")
            self.feed(data)
        return line


def challenge() -> str:
    """A fresh challenge: 128 random bits, in hex."""
    return secrets.token_hex(16)


def proof(secret: bytes, role: str, *said: object) -> str:
    """The proof that the holder of ``secret``, as ``role``, says ``said`` (the challenges first)."""
    return hmac.new(secret, json.dumps([role, *said]).encode(), hashlib.sha256).hexdigest()


def proven(given: object, secret: bytes, role: str, *said: object) -> bool:
    """Whether ``given`` is ``proof(secret, role, *said)`` (compared in constant time)."""
    return is_proof(given) and hmac.compare_digest(str(given), proof(secret, role, *said))


def send(connection: socket.socket, message: Mapping[str, object]) -> None:
    """``message`` on ``connection``, or nothing if it is closed (a peer that left says so itself)."""
    with contextlib.suppress(OSError):
        connection.sendall(encode(message))


def named(ids: Sequence[object]) -> str:
    """"process 1", "processes 1, 2"."""
    return f"process {ids[0]}" if len(ids) == 1 else f"processes {', '.join(map(str, ids))}"


Shape = Mapping[str, Callable[[object], bool]]
GREETING: Shape = {"protocol": is_text(64), "challenge": is_challenge}
HELLO: Shape = {**GREETING, "process": is_integer, "processes": is_integer, "start": is_text(200), "proof": is_proof}
FAREWELL: Shape = {**HELLO, "stopped": is_text(200)}
"""The hello of a process stopped by SIGTERM before it met process 0: it comes only to say so."""
PROVEN: Shape = {"proof": is_proof}
REFUSED: Shape = {"refused": is_text(1000)}
MISSING: Shape = {"missing": is_integers}
GO: Shape = {"go": is_true}
ERROR: Shape = {"error": is_text(1000)}
STOPPED: Shape = {"stopped": is_text(1000)}
BYE: Shape = {"bye": is_true}
GONE: Shape = {"gone": is_integer, "at": is_text(100)}
BEAT: Shape = {"beat": is_true}
STOP: Shape = {"stop": is_integer, "why": is_text(300), "saved": is_text(600), "status": is_integer}
