"""The processes of a run meet before JAX joins them: every one comes, once, in a bounded time, or none starts.

``jax.distributed.initialize`` waits for the missing processes until its own timeout and then ends the
process from C++ (a fatal log, no Python exception), with a message that names no process; a coordinator
port already in use ends process 0 with a segfault on some JAX releases. ``meet`` runs first, on the
coordinator's own address, and turns each of these into a ``StartupError`` that names what went wrong:

- process 0 listens on ``bind`` (the address JAX's coordinator will take: every interface by default) and
  is refused at once if it cannot, the port being in use;
- every other process connects to ``coordinator`` and says its id, its count of processes and the start
  it was asked for (``start``: a new run or a resumed one); process 0 refuses an id given to two
  processes, a count or a start that differs from its own, naming the processes, and tells everyone;
- a process that never comes: at ``timeout`` seconds process 0 names the processes that did not come,
  and tells those that did; a process that cannot reach process 0 says so at its own ``timeout``.

When all have come, process 0 answers each "go", closes its listener, and ``jax.distributed.initialize``
follows on every process (its clients retry until the coordinator listens on the freed port).

The exchange is a line of JSON each way over TCP (``_HELLO``'s fields, then ``{"go": true}``,
``{"missing": [...]}`` while waiting, or ``{"error": "..."}``); a connection that does not speak it is
closed and ignored, as a stray one would be.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import BinaryIO, NoReturn

__all__ = ["StartupError", "meet"]

_PROTOCOL = "funcformer-rendezvous/1"
_RETRY = 0.2
"""Seconds between a process's attempts to reach process 0."""


class StartupError(RuntimeError):
    """The processes of a run could not all meet: the message names what is wrong and which processes."""


@dataclass
class _Peer:
    connection: socket.socket
    address: str
    start: str


def meet(coordinator: str, processes: int, process_id: int, *, start: str, timeout: float, bind: str) -> None:
    """Meet the other ``processes - 1`` processes of the run before JAX joins them (module docstring).

    ``coordinator`` is process 0's ``host:port``; ``bind`` the ``host:port`` process 0 listens on
    (``[::]:port``: every interface); ``start`` what this process was asked to do (every process must
    say the same); ``timeout`` the seconds to wait for all. StartupError naming the processes otherwise."""
    if processes == 1:
        return
    if process_id == 0:
        _host(bind, processes, start, timeout)
    else:
        _join(coordinator, processes, process_id, start, timeout)


def _split(address: str) -> tuple[str, int]:
    """("host", port) of "host:port" or "[v6]:port"; ValueError naming the address otherwise."""
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit():
        raise ValueError(f"a coordinator address is host:port, got {address!r}")
    return host.strip("[]"), int(port)


def _send(connection: socket.socket, message: dict[str, object]) -> None:
    with contextlib.suppress(OSError):  # a peer that left says so itself
        connection.sendall(json.dumps(message).encode() + b"\n")


def _receive(file: BinaryIO) -> dict[str, object]:
    """The next line of ``file`` as a JSON object; ValueError if it is not one (or the peer closed)."""
    message = json.loads(file.readline(65536))
    if not isinstance(message, dict):
        raise ValueError(f"not a message: {message!r}")
    return message


def _host(bind: str, processes: int, start: str, timeout: float) -> None:
    """Process 0: listen on ``bind``, wait for processes 1 .. processes - 1, answer all."""
    host, port = _split(bind)
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    try:
        server = socket.create_server(
            (host, port), family=family, dualstack_ipv6=family == socket.AF_INET6 and socket.has_dualstack_ipv6()
        )
    except OSError as error:
        raise StartupError(
            f"process 0 cannot listen on {bind} for the run's coordinator: {os.strerror(error.errno or 0)}; another "
            "program (another run's coordinator?) holds the port, or the address is not this host's: choose "
            "another port in --coordinator"
        ) from None
    peers: dict[int, _Peer] = {}
    deadline = time.monotonic() + timeout
    with server, contextlib.ExitStack() as connections:
        while len(peers) < processes - 1:
            left = deadline - time.monotonic()
            if left <= 0:
                missing = [i for i in range(1, processes) if i not in peers]
                _refuse(peers.values(), f"{_named(missing)} never came within {timeout:g} s (started? given the "
                        f"same --coordinator and --processes {processes}?)")  # fmt: skip
            server.settimeout(left)
            try:
                connection, (address, *_) = server.accept()
                address = address.removeprefix("::ffff:")  # an IPv4 peer of a dual-stack listener
            except TimeoutError:
                continue
            connections.enter_context(connection)
            connection.settimeout(min(max(left, 1.0), 10.0))
            try:
                hello = _receive(connection.makefile("rb"))
            except (OSError, ValueError):
                continue  # not one of ours (closed at the end)
            if hello.get("protocol") != _PROTOCOL:
                continue
            connection.settimeout(None)
            peer = _Peer(connection, address, str(hello.get("start")))
            i = hello.get("process")
            problem = _problem(i, hello.get("processes"), peer, peers, processes, start)
            if problem or not isinstance(i, int):
                _refuse([*peers.values(), peer], problem)
            peers[i] = peer
            missing = [j for j in range(1, processes) if j not in peers]
            for each in peers.values():
                _send(each.connection, {"missing": missing})
        for peer in peers.values():
            _send(peer.connection, {"go": True})
        for peer in peers.values():  # each closes first, so that no TIME_WAIT of ours holds the port
            peer.connection.settimeout(5.0)
            with contextlib.suppress(OSError):
                peer.connection.recv(1)


def _problem(i: object, count: object, peer: _Peer, peers: dict[int, _Peer], processes: int, start: str) -> str:
    """Why process 0 refuses the process ``peer`` that says it is process ``i`` of ``count``; "" if it does not."""
    if count != processes:
        return (
            f"process {i} (at {peer.address}) was started for {count} processes, process 0 for {processes}: give "
            "every process the same --processes"
        )
    if not isinstance(i, int) or not 0 <= i < processes:
        return f"a process at {peer.address} has id {i}, not one of 1..{processes - 1}"
    if i == 0 or i in peers:
        first = "this one (process 0)" if i == 0 else f"one at {peers[i].address}"
        return f"two processes were given id {i}: {first} and one at {peer.address}"
    if peer.start != start:
        return f"process {i} {peer.start}, and process 0 {start}: give every process the same command"
    return ""


def _refuse(peers: Iterable[_Peer], message: str) -> NoReturn:
    """Tell every process that came why the run cannot start, then raise it here (process 0)."""
    for peer in peers:
        _send(peer.connection, {"error": message})
    raise StartupError(message)


def _named(ids: Sequence[object]) -> str:
    return f"process {ids[0]}" if len(ids) == 1 else f"processes {', '.join(map(str, ids))}"


def _join(coordinator: str, processes: int, process_id: int, start: str, timeout: float) -> None:
    """Any process but 0: reach process 0 at ``coordinator``, say who it is, wait for its answer."""
    host, port = _split(coordinator)
    deadline = time.monotonic() + timeout
    hello = {"protocol": _PROTOCOL, "process": process_id, "processes": processes, "start": start}
    missing: object = None  # what process 0 last said it waits for; None until it answered
    connected = False  # something listens at the address
    while time.monotonic() < deadline:
        try:
            with socket.create_connection((host, port), timeout=max(deadline - time.monotonic(), 0.1)) as connection:
                connected = True
                _send(connection, hello)
                file = connection.makefile("rb")
                while True:
                    connection.settimeout(max(deadline - time.monotonic(), 0.1))
                    message = _receive(file)
                    if "error" in message:
                        raise StartupError(f"process 0: {message['error']}")
                    if message.get("go"):
                        return
                    missing = message.get("missing")
        except (OSError, ValueError):  # not listening yet, gone, or not ours: try again
            time.sleep(_RETRY)
    if missing is None:
        why = (
            "something listens there, but not a run's process 0 waiting for the others (a run started without this "
            "process, one with its id? another program?)"
            if connected
            else "nothing listens there: started? on that host? a firewall between?"
        )
        raise StartupError(
            f"process {process_id}: process 0 was not reached at {coordinator} within {timeout:g} s: {why}"
        )
    waited = _named(missing) if isinstance(missing, list) and missing else "the others"
    raise StartupError(
        f"process {process_id}: the run did not start within {timeout:g} s: process 0, reached at {coordinator}, "
        f"was still waiting for {waited}"
    )
