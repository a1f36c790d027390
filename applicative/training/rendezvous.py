"""The processes of a run meet before JAX joins them: every one comes, once, proven, in a bounded time, or none
starts; whatever else connects is dropped, and changes nothing.

``jax.distributed.initialize`` waits for the missing processes until its own timeout and then ends the
process from C++ (a fatal log, no Python exception), with a message that names no process; a coordinator
port already in use ends process 0 with a segfault on some JAX releases. ``meet`` runs first, on the
coordinator's address, and turns each of these into a ``StartupError`` that names what went wrong:

- process 0 listens on ``bind`` (the address JAX's coordinator will take) and is refused at once if it
  cannot: the port in use (or, when what holds it is a process 0 of this run, an id 0 given twice), or an
  address not this host's;
- every other process connects to ``coordinator``, proves it belongs to the run (it holds the run's
  ``secret``: ``wire.proof``), and says its id, its count of processes and the start it was asked for
  (``start``: a new run or a resumed one); process 0 proves itself in return, refuses an id given to two
  processes, a count or a start that differs from its own, naming the processes, and tells everyone;
- a process that never comes: at ``timeout`` seconds process 0 names the processes that came and those
  that did not, and what it dropped meanwhile, and tells those that came; a process that cannot reach a
  proven process 0 says so at its own ``timeout``; one that finds JAX's coordinator there (the run's processes
  met without it: its id given twice?) says so at once.

Process 0 serves every connection at once (one thread, ``selectors``): a connection must send its whole hello,
at most ``wire.LINE`` bytes, within ``HELLO_SECONDS`` of connecting, at most ``PENDING`` wait at once (the
oldest is dropped for a new one), and any malformed line, wrong proof, silence, slow drip or flood is dropped
with a log line (``logging``, this module's logger), never ending or stalling the meeting: a wrong proof is
told so (its process ends, named), the run goes on waiting. A process that leaves before the end is waited
for again. SIGTERM while they meet (``stopping.Stopped``) stops every process that came, exit status 75, and
those that come within ``FAREWELL_SECONDS`` after it: a process stopped before process 0 listened spends them
reaching it to say so; process 0 stopped tells each that comes.

When all have come, process 0 closes its listener, answers each "go", and ``jax.distributed.initialize``
follows on every process (its clients retry until the coordinator listens on the freed port). The
connections stay open: ``meet`` returns them, the run's lifeline (``lifeline.hold``). JAX's coordinator and
collectives then authenticate no one: the secret keeps strangers out of the meeting, not out of JAX.

The exchange is a line of JSON each way over TCP (``wire``): process 0's ``{"protocol", "challenge"}``; the
hello ``{"protocol", "process", "processes", "start", "challenge", "proof"}`` (and ``"stopped"``, proven with the
rest, from a process stopped before it came: ``wire.FAREWELL``); process 0's ``{"proof"}`` (or
``{"refused"}``), then ``{"missing": [...]}`` as processes come, and ``{"go": true}``, ``{"error": "..."}`` or
``{"stopped": "..."}``; a process that came may say ``{"stopped": "..."}``.
"""

from __future__ import annotations

import contextlib
import socket
import time

from applicative.training.hosting import FAREWELL_SECONDS, Host, PortInUse, StartupError, split
from applicative.training.stopping import NOTHING_SAVED, Stopped, raise_early
from applicative.training.wire import (
    ERROR,
    GO,
    GREETING,
    HELLO_SECONDS,
    MISSING,
    PROTOCOL,
    PROVEN,
    REFUSED,
    SECRET,
    STOPPED,
    Lines,
    Malformed,
    challenge,
    encode,
    named,
    parse,
    proof,
    proven,
    send,
)

__all__ = ["FAREWELL_SECONDS", "SECRET", "StartupError", "meet"]

_RETRY = 0.2
"""Seconds between a process's attempts to reach process 0."""


def meet(
    coordinator: str, processes: int, process_id: int, *, start: str, timeout: float, bind: str, secret: bytes = b""
) -> dict[int, socket.socket]:
    """Meet the other ``processes - 1`` processes of the run before JAX joins them (module docstring); the open
    connections to them (process 0: each other's; the others: process 0's), the run's lifeline, {} for one.

    ``coordinator`` is process 0's ``host:port``; ``bind`` the ``host:port`` process 0 listens on
    (``[::]:port``: every interface); ``start`` what this process was asked to do (every process must
    say the same); ``timeout`` the seconds to wait for all; ``secret`` the run's, the same on every process.
    StartupError naming the processes otherwise; ``Stopped`` after SIGTERM, on every process that came."""
    if processes == 1:
        return {}
    if process_id != 0:
        return {0: _join(coordinator, processes, process_id, start, timeout, secret)}
    try:
        return Host(processes, start, timeout, secret).meet(bind)
    except PortInUse as taken:
        _ask_what_listens(bind, processes, start, secret)
        raise StartupError(
            f"{taken}; another program holds the port (another run's coordinator? this run's, started already "
            "with another process given id 0?): choose another port in --coordinator"
        ) from None


def _ask_what_listens(bind: str, processes: int, start: str, secret: bytes) -> None:
    """Where process 0 cannot listen on ``bind``: StartupError if a process 0 of this run (it holds the run's
    secret) listens there, an id 0 given twice, or JAX's coordinator of a run that has started; nothing if what
    listens is anything else."""
    host, port = split(bind)
    hello: dict[str, object] = {"process": 0, "processes": processes, "start": start}
    try:
        _attempt((host if host not in ("", "::", "0.0.0.0") else "localhost", port), hello, secret,
                 time.monotonic() + 2.0, {})  # fmt: skip
    except _Said:
        raise StartupError(
            f"two processes were given id 0: one listens at {bind} already, and this one: give each process its own "
            "--process-id"
        ) from None
    except _Met:
        raise StartupError(
            f"process 0 cannot listen on {bind}: JAX's coordinator of a run that has started listens there (this "
            "run's, started with another process given id 0? another run's?): give each process its own --process-id, "
            "or choose another port in --coordinator"
        ) from None
    except (OSError, Malformed, StartupError):
        pass


class _Said(Exception):
    """Process 0's word that the run cannot start (its ``error``)."""


class _Met(Exception):
    """What listens at process 0's address is JAX's coordinator: the run's processes met without this one."""


def _jax_listens(connection: socket.socket, deadline: float) -> bool:
    """Whether ``connection``'s first bytes, by ``deadline``, are an HTTP/2 SETTINGS frame on stream 0, which a
    gRPC server such as JAX's coordinator sends as a connection opens (process 0's greeting is a JSON line)."""
    connection.settimeout(max(deadline - time.monotonic(), 0.01))
    try:
        head = connection.recv(9, socket.MSG_PEEK)
    except TimeoutError:
        return False
    return len(head) == 9 and head[0] == 0 and head[3] == 0x04 and head[5:] == bytes(4)


def _prove(
    connection: socket.socket,
    address: tuple[str, int],
    lines: Lines,
    said: dict[str, object],
    secret: bytes,
    deadline: float,
) -> None:
    """Prove ``said`` (the hello's process, processes and start) to process 0 on ``connection`` (to ``address``),
    and check its proof in return. ``_Met``: JAX's coordinator listens there; TimeoutError or Malformed: not a
    proven process 0; StartupError: refused."""
    if _jax_listens(connection, min(deadline, time.monotonic() + HELLO_SECONDS)):
        raise _Met
    greeting = parse(lines.read(connection, min(deadline, time.monotonic() + HELLO_SECONDS)), GREETING)
    if greeting["protocol"] != PROTOCOL:
        raise Malformed("another protocol")
    mine = challenge()
    fields = [said["process"], said["processes"], said["start"], *([said["stopped"]] if "stopped" in said else [])]
    evidence = proof(secret, "process", greeting["challenge"], mine, *fields)
    connection.sendall(encode({"protocol": PROTOCOL, **said, "challenge": mine, "proof": evidence}))
    answer = parse(lines.read(connection, min(deadline, time.monotonic() + HELLO_SECONDS)), PROVEN, REFUSED)
    if "refused" in answer:
        raise StartupError(f"process {said['process']}: process 0, at {address[0]}:{address[1]}, refused it: "
                           f"{answer['refused']}")  # fmt: skip
    if not proven(answer["proof"], secret, "process 0", greeting["challenge"], mine):
        raise Malformed("a process 0 that did not prove it holds the run's secret")


def _attempt(
    address: tuple[str, int], said: dict[str, object], secret: bytes, deadline: float, seen: dict[str, object]
) -> socket.socket | None:
    """One connection to process 0 at ``address``: prove ``said`` (``_prove``), wait for "go" until ``deadline``;
    the open connection then, None if nothing listens. ``seen`` records what was found ("listening", "proven",
    process 0's last "missing", "told" it was stopped). OSError, TimeoutError or Malformed: not a proven process
    0, or gone; StartupError: refused; ``_Said``: process 0's error; ``_Met``: JAX's coordinator listens there;
    ``Stopped``."""
    try:
        connection = socket.create_connection(address, timeout=max(deadline - time.monotonic(), 0.1))
    except OSError:
        return None
    seen["listening"] = True
    lines, proved = Lines(), False
    try:
        _prove(connection, address, lines, said, secret, deadline)
        seen["proven"] = proved = True
        while True:
            message = parse(lines.read(connection, deadline), MISSING, GO, ERROR, STOPPED)
            if "error" in message:
                raise _Said(message["error"])
            if "stopped" in message:
                raise Stopped(f"stopped: {message['stopped']}: {NOTHING_SAVED}")
            if "go" in message:
                connection.settimeout(None)
                return connection
            seen["missing"] = message["missing"]
    except Stopped as stopped:
        if stopped.here and proved:
            send(connection, {"stopped": f"process {said['process']} was stopped by SIGTERM while the processes met"})
            seen["told"] = True
        connection.close()
        raise
    except BaseException:
        connection.close()
        raise


def _farewell(address: tuple[str, int], said: dict[str, object], secret: bytes) -> None:
    """This process, stopped by SIGTERM before a proven process 0 heard it: for ``FAREWELL_SECONDS``, reach process
    0 at ``address`` and say so in a hello it proves (``wire.FAREWELL``), that process 0 stops every process
    that came instead of waiting for this one until its timeout. Nothing if it cannot; a second SIGTERM ends it."""
    farewell = {**said, "stopped": "by SIGTERM"}
    deadline = time.monotonic() + FAREWELL_SECONDS
    with contextlib.suppress(Stopped):
        while time.monotonic() < deadline:
            try:
                with socket.create_connection(address, timeout=max(deadline - time.monotonic(), 0.1)) as connection:
                    _prove(connection, address, Lines(), farewell, secret, deadline)
                    return
            except (OSError, Malformed, StartupError, _Met):
                time.sleep(_RETRY)


def _join(
    coordinator: str, processes: int, process_id: int, start: str, timeout: float, secret: bytes
) -> socket.socket:
    """Any process but 0: reach a proven process 0 at ``coordinator``, say who it is, wait for its "go"."""
    address = split(coordinator)
    deadline = time.monotonic() + timeout
    seen: dict[str, object] = {}
    said: dict[str, object] = {"process": process_id, "processes": processes, "start": start}
    try:
        raise_early()  # stopped while it started: process 0 is told (``_farewell``)
        while time.monotonic() < deadline:
            try:
                connection = _attempt(address, said, secret, deadline, seen)
                if connection is not None:
                    return connection
            except _Said as error:
                raise StartupError(f"process 0: {error}") from None
            except _Met:
                raise StartupError(
                    f"process {process_id}: JAX's coordinator listens at {coordinator}: the run's processes met "
                    f"without this one, and started (was id {process_id} given to two processes? give each its own "
                    "--process-id)"
                ) from None
            except (OSError, Malformed):  # not listening yet, gone, or not a proven process 0: try again
                pass
            time.sleep(_RETRY)
    except Stopped as stopped:
        if stopped.here and "told" not in seen:
            _farewell(address, said, secret)
        raise
    missing = seen.get("missing")
    if "proven" not in seen:
        why = (
            "something listens there, but not a run's process 0 waiting for the others (another program? one given "
            f"another ${SECRET}? a run started without this process?)"
            if "listening" in seen
            else "nothing listens there: started? on that host? a firewall between?"
        )
        raise StartupError(
            f"process {process_id}: process 0 was not reached at {coordinator} within {timeout:g} s: {why}"
        )
    waited = named(missing) if isinstance(missing, list) and missing else "the others"
    raise StartupError(
        f"process {process_id}: the run did not start within {timeout:g} s: process 0, reached at {coordinator}, "
        f"was still waiting for {waited}"
    )
