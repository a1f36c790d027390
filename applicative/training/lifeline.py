"""The run's lifeline: the meeting's connections stay open while the processes run, so that a process that dies
is named on every other within seconds, and they stop.

JAX notices a dead process at its heartbeat's timeout (100 s), and a process waiting on a collective with it
meanwhile prints gloo's "Connection reset by peer" traceback and then waits for that timeout; its message
names no process. ``hold`` keeps the connections ``rendezvous.meet`` returned (process 0: one to each other
process; the others: one to process 0) and watches them from a daemon thread. A process that ends through
Python (its work done, an error, SIGTERM) says goodbye first (``{"bye": true}``, at exit); a connection that
closes without it is a process that died (SIGKILL, a crash: its kernel closes it at once; a host lost: TCP's
keepalive notices within about ``KEEPALIVE`` seconds). Process 0 tells the others which (``{"gone": i,
"at": address}``), and every process that learns it writes "error: process I (at ADDRESS) of the run is gone
..." to stderr and ends with status 1 at once (``os._exit``: its main thread may be waiting on a collective
that will never end). The run's last checkpoint stays, and ``--resume`` continues from it.

A process that is alive but stuck (stopped with SIGSTOP, a hung device) keeps its connection: JAX's
heartbeat remains the only judge of that.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import selectors
import socket
import sys
import threading
from collections.abc import Callable

from applicative.training.wire import BYE, GONE, Lines, Malformed, Shape, encode, parse

__all__ = ["KEEPALIVE", "hold"]

KEEPALIVE = (2, 1, 3)
"""TCP keepalive: idle seconds before the first probe, seconds between probes, probes lost before the connection
is: a host that vanished is noticed within about 5 s."""


def hold(
    connections: dict[int, socket.socket], me: int, *, end: Callable[[str], None] | None = None
) -> Callable[[], None]:
    """Watch ``connections`` (other process's id -> its open connection) of process ``me`` from a daemon thread,
    and say goodbye on them at this process's exit (``atexit``), or sooner by calling what is returned. When one
    closes without a goodbye, or process 0 says another is gone, ``end(message)`` is called once (by default: the
    message on stderr, then ``os._exit(1)``)."""
    if not connections:
        return lambda: None
    for connection in connections.values():
        _keep_alive(connection)
    watch = _Watch(connections, me, end or _end)
    atexit.register(watch.leave)
    threading.Thread(target=watch.run, name="lifeline", daemon=True).start()
    return watch.leave


def _keep_alive(connection: socket.socket) -> None:
    with contextlib.suppress(OSError, AttributeError):  # where the system has no such options, its defaults
        connection.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
        idle, interval, count = KEEPALIVE
        connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPIDLE, idle)
        connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPINTVL, interval)
        connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPCNT, count)


def _end(message: str) -> None:
    with contextlib.suppress(OSError, ValueError):
        sys.stdout.flush()
        sys.stderr.flush()
    os.write(2, f"\n{message}\n".encode(errors="replace"))  # one write: a line of its own among others' output
    os._exit(1)


class _Watch:
    def __init__(self, connections: dict[int, socket.socket], me: int, end: Callable[[str], None]) -> None:
        self.connections, self.me, self.end = dict(connections), me, end
        self.addresses = {i: _address(c) for i, c in connections.items()}
        self.leaving = threading.Event()
        self.lock = threading.Lock()  # one of ``leave`` and a report of the thread, not both

    def leave(self) -> None:
        """At exit: goodbye on every connection, and no report after it."""
        with self.lock:
            self.leaving.set()
            for connection in self.connections.values():
                with contextlib.suppress(OSError):
                    connection.settimeout(1.0)
                    connection.sendall(encode({"bye": True}))

    def run(self) -> None:
        with selectors.DefaultSelector() as selector:
            lines = {i: Lines() for i in self.connections}
            for i, connection in self.connections.items():
                selector.register(connection, selectors.EVENT_READ, i)
            while selector.get_map() and not self.leaving.is_set():
                for key, _ in selector.select():
                    self._read(key.data, lines[key.data], selector)

    def _read(self, i: int, lines: Lines, selector: selectors.BaseSelector) -> None:
        """What process ``i``'s connection says: goodbye, process 0's word that another is gone, or its end."""
        try:
            data = self.connections[i].recv(4096)
            lines.feed(data)
        except (OSError, Malformed):
            data = b""
        for line in iter(lines.take, None):
            if _is(line, BYE):
                selector.unregister(self.connections[i])  # it left in order
                return
            if _is(line, GONE):
                gone = parse(line, GONE)
                self._report(gone["gone"], str(gone["at"]))  # type: ignore[arg-type]  # an int: parse checked it
        if not data:
            selector.unregister(self.connections[i])
            self._report(i, self.addresses[i])

    def _report(self, i: int, address: str) -> None:
        """Process ``i`` died: process 0 tells the others; every process ends, naming it."""
        with self.lock:
            if self.leaving.is_set():
                return
            if self.me == 0:
                for j, connection in self.connections.items():
                    if j != i:
                        with contextlib.suppress(OSError):
                            connection.settimeout(1.0)
                            connection.sendall(encode({"gone": i, "at": address}))
            self.leaving.set()
            self.end(
                f"error: process {i} (at {address}) of the run is gone (killed, crashed, or its host lost): process "
                f"{self.me} stops too; continue the run from its last checkpoint with --resume"
            )


def _is(line: bytes, shape: Shape) -> bool:
    try:
        parse(line, shape)
    except Malformed:
        return False
    return True


def _address(connection: socket.socket) -> str:
    try:
        return str(connection.getpeername()[0]).removeprefix("::ffff:")
    except OSError:
        return "an unknown address"
