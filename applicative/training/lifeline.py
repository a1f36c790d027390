"""The run's lifeline: the meeting's connections stay open while the processes run, so that a process that dies or
stops on its own is named on every other within seconds, and they stop.

JAX notices a dead process at its heartbeat's timeout (100 s), and a process waiting on a collective with it
meanwhile prints gloo's "Connection reset by peer" traceback and then waits for that timeout; a process that ends
through Python while the others wait on it (Ctrl-C, an uncaught error, SIGTERM while JAX joins them) leaves them
waiting, and itself waits at exit for JAX's shutdown barrier, 300 s. ``hold`` keeps the connections
``rendezvous.meet`` returned (process 0: one to each other process; the others: one to process 0) and watches them
from a daemon thread. Four words travel on them:

- goodbye (``{"bye": true}``): a process that ends in order, with the others (its work done, a stop or an
  error every process meets at the same step), says it at exit (``atexit``), and nothing is reported;
- stop (``{"stop": i, "why": ..., "saved": ..., "status": ...}``): a process that ends otherwise (``stop``:
  Ctrl-C, SIGTERM outside the training loop, an error, its own or one every process meets) says why, what the
  run has saved and its exit status, and ends at once, without JAX's shutdown barrier. Every other process that
  has not ended by itself within ``GRACE`` seconds writes "stopped: process I WHY: process J stops too: SAVED"
  and ends with 75 (``stopping.Stopped``'s: the advice in SAVED, a rerun or ``--resume``, continues the run),
  or, after another's error, "error: process I ...", with 1;
- nothing: a connection that closes without goodbye or stop is a process that died (SIGKILL, a crash: its
  kernel closes it at once; a host lost: the beats it no longer acknowledges drop it after ``UNANSWERED``
  seconds), and every
  other process writes "error: process I (at ADDRESS) of the run is gone ..." and ends with status 1 at once;
- a beat (``{"beat": true}``), every ``BEAT_EVERY`` seconds from a thread of its own: a process silent for ``SILENT``
  seconds is stopped (SIGSTOP, Ctrl-Z) or hung, and every other process ends as for a death, naming it ("...
  has sent nothing for 20 s ..."), well before JAX's heartbeat (which ended such a run after 60-100 s with its
  own raw lines).

Process 0 relays what it learns of one process to the others (``{"gone": i, "at": address}``, or the stop), and
ends last: it waits, up to ``GRACE`` seconds more, for the others to close their connections, because its JAX
runtime holds the coordinator without which theirs ends them with a fatal log line of its own. A process ends
with ``os._exit`` (its main thread may be waiting on a collective that will never end); the run's last
checkpoint stays. The text each process writes is prefixed with the command line's name (``speaking_as``).
"""

from __future__ import annotations

import atexit
import contextlib
import os
import selectors
import socket
import sys
import threading
import time
from collections.abc import Callable

from applicative.training.wire import BYE, GONE, STOP, Lines, Malformed, Shape, encode, parse

__all__ = ["BEAT_EVERY", "GRACE", "KEEPALIVE", "SILENT", "UNANSWERED", "Lifeline", "explains", "hold", "holding",
           "speaking_as", "stop"]  # fmt: skip

KEEPALIVE = (2, 1, 3)
"""TCP keepalive: idle seconds before the first probe, seconds between probes, probes lost before the connection
is: a host that vanished from a connection with nothing to send is noticed within about 5 s."""

UNANSWERED = 6.0
"""Seconds what a process sent (its beats) may go unacknowledged before its kernel drops the connection
(``TCP_USER_TIMEOUT``): a host lost (its power, its cable, a partition) is named within about this, where the
kernel would retransmit for 15 minutes and keepalive probes only an idle connection. A host that is up
acknowledges at once, even when its process is stopped or busy (``SILENT`` names those)."""

BEAT_EVERY = 1.0
"""Seconds between a process's beats on its connections."""

SILENT = 20.0
"""Seconds without a word (a beat) after which a process is taken as stopped or hung: long enough for a
process whose Python is busy (a compilation, a checkpoint, a loaded host) to beat, short enough to come before
JAX's heartbeat (it ended a run with a stopped process after 60 to 100 s)."""

GRACE = 2.0
"""Seconds a process told that another stopped waits for its own ending (the same stop met at the same step,
whose checkpoint it may be writing) before it ends, saying so."""

STOPPED = 75
"""The status of a process ended by another's stop: ``stopping.Stopped.exit_status`` (not imported: a cycle)."""

End = Callable[[str | None, int], None]
"""What ends this process: its message (None: it wrote its own) and its exit status."""


def hold(
    connections: dict[int, socket.socket], me: int, *, end: End | None = None, silent: float = SILENT
) -> Lifeline | None:
    """Watch ``connections`` (other process's id -> its open connection) of process ``me`` from a daemon thread,
    and say goodbye on them at this process's exit (``atexit``), or sooner (``Lifeline.leave``). When one
    closes without a word, or process 0 says another is gone, ``end(message, 1)`` is called once; when one says it
    stopped, ``end(message, 75)`` after ``GRACE`` seconds unless this process ends first (by default: the message
    on stderr, then ``os._exit``). The run's ``stop`` and ``explains`` are this lifeline's from now on; None
    for no connection (one process)."""
    global _held
    if not connections:
        return None
    for connection in connections.values():
        _keep_alive(connection)
    watch = Lifeline(connections, me, end or _end, silent)
    _held = watch
    atexit.register(watch.leave)
    threading.Thread(target=watch.run, name="lifeline", daemon=True).start()
    threading.Thread(target=watch.beat, name="lifeline beat", daemon=True).start()
    return watch


def stop(why: str, saved: str, status: int) -> None:
    """This process ends on its own, ``why`` ("was stopped by SIGINT (Ctrl-C)", "failed: ..."), the run having
    ``saved`` what the text says ("DIR holds ...: --resume continues it"): where a lifeline is held, every other
    process is told, and this one ends with ``status`` (process 0 once the others have closed their connections,
    within ``GRACE`` seconds and a half; its own message written before). Without a lifeline (one process), it
    returns."""
    watch = _held
    if watch is not None:
        watch.stop(why, saved, status)


def explains(timeout: float = 1.0) -> bool:
    """Whether the lifeline knows, within ``timeout`` seconds, why this process's work failed: another process
    died or stopped (a collective with it broke). It then ends this process itself, naming that process, and the
    caller need say nothing (gloo's traceback would only hide the line that matters)."""
    watch = _held
    return watch is not None and watch.explains(timeout)


def holding() -> bool:
    """Whether this process holds a run's lifeline (it is one of several)."""
    return _held is not None


def speaking_as(prefix: str) -> None:
    """Begin the lifeline's messages with ``prefix``: the command line's "PROG NAME"."""
    global _prefix
    _prefix = f"{prefix}: " if prefix else ""


_held: Lifeline | None = None
_prefix = ""


def _keep_alive(connection: socket.socket) -> None:
    with contextlib.suppress(OSError, AttributeError):  # where the system has no such options, its defaults
        connection.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
        idle, interval, count = KEEPALIVE
        connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPIDLE, idle)
        connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPINTVL, interval)
        connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPCNT, count)
        connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_USER_TIMEOUT, round(UNANSWERED * 1000))


def _end(message: str | None, status: int) -> None:
    with contextlib.suppress(OSError, ValueError):
        sys.stdout.flush()
        sys.stderr.flush()
    if message is not None:  # one write: a line of its own among others' output
        os.write(2, f"\n{_prefix}{message}\n".encode(errors="replace"))
    os._exit(status)


class Lifeline:
    """A process's connections to the others, watched (``hold``): ``leave`` (goodbye), ``stop`` and ``explains``
    as the module's functions of the same names."""

    def __init__(self, connections: dict[int, socket.socket], me: int, end: End, silent: float = SILENT) -> None:
        self.connections, self.me, self.end, self.silent = dict(connections), me, end, silent
        self.addresses = {i: _address(c) for i, c in connections.items()}
        self.heard = dict.fromkeys(connections, time.monotonic())  # when each last said anything
        self.sending = threading.Lock()  # one message at a time on a connection, whole
        self.ending = threading.Event()  # this process ends: no report after it
        self.lock = threading.Lock()  # one ending, not two
        self.closed: set[int] = set()  # the processes whose connection closed
        self.all_closed = threading.Event()
        self.stopped: set[int] = set()  # the processes that said they stopped
        self.failure: str | None = None  # what ends this process, once known: another's death or stop
        self.known = threading.Event()  # ``failure`` is set
        self.status = 1  # the exit status that goes with it
        self.ended = threading.Event()  # ``end`` returned (in tests: it exits the process otherwise)

    def leave(self) -> None:
        """At exit: goodbye on every connection, and no report after it."""
        with self.lock:
            self.ending.set()
            self._say({"bye": True})

    def stop(self, why: str, saved: str, status: int) -> None:
        with self.lock:
            if self.ending.is_set():
                return
            self.ending.set()
            self._say({"stop": self.me, "why": why, "saved": saved, "status": status})
        self._finish(None, status)

    def explains(self, timeout: float) -> bool:
        if not self.known.wait(timeout):
            return False
        with self.lock:
            mine = not self.ending.is_set()  # a stop heard, its grace not over: this process's work broke first
            self.ending.set()
        if mine:
            self._finish(self.failure, self.status)
        else:  # the lifeline's thread ends this process
            self.ended.wait(GRACE + 5.0)
        return True

    def _say(self, message: dict[str, object], but: int | None = None) -> None:
        with self.sending:
            for i, connection in self.connections.items():
                if i == but:
                    continue
                with contextlib.suppress(OSError):
                    connection.settimeout(1.0)
                    connection.sendall(encode(message))

    def beat(self) -> None:
        """A beat on every connection every ``BEAT_EVERY`` seconds, until this process ends."""
        while not self.ending.wait(BEAT_EVERY):
            self._say({"beat": True})

    def run(self) -> None:
        with selectors.DefaultSelector() as selector:
            lines = {i: Lines() for i in self.connections}
            try:
                for i, connection in self.connections.items():
                    selector.register(connection, selectors.EVENT_READ, i)
            except (OSError, ValueError):  # closed already: this process ended
                return
            while selector.get_map() and not self.ended.is_set():
                try:
                    ready = selector.select(timeout=0.5)
                except (OSError, ValueError):  # a connection closed under it: this process is ending
                    return
                for key, _ in ready:
                    self._read(key.data, lines[key.data], selector)
                self._silence(selector)

    def _read(self, i: int, lines: Lines, selector: selectors.BaseSelector) -> None:
        """What process ``i``'s connection says: goodbye, a stop (its own, or process 0's word of another's),
        process 0's word that another is gone, or its end."""
        try:
            data = self.connections[i].recv(4096)
            lines.feed(data)
        except (OSError, Malformed):
            data = b""
        self.heard[i] = time.monotonic()
        for line in iter(lines.take, None):
            if _is(line, BYE):
                self._closed(i, selector)  # it left in order
                return
            if _is(line, STOP):
                said = parse(line, STOP)
                self._stopped(said["stop"], str(said["why"]), str(said["saved"]), said["status"])  # type: ignore[arg-type]
            elif _is(line, GONE):
                gone = parse(line, GONE)
                self._report(gone["gone"], str(gone["at"]))  # type: ignore[arg-type]  # an int: parse checked it
        if not data:
            self._closed(i, selector)
            if not self.stopped:  # (after a stop, the others end too: no death)
                self._report(i, self.addresses[i])

    def _silence(self, selector: selectors.BaseSelector) -> None:
        """A process that has said nothing for ``silent`` seconds (its connection open): stopped or hung."""
        now = time.monotonic()
        for i in sorted(self.connections):
            if i not in self.closed and now - self.heard[i] > self.silent:
                self._closed(i, selector)
                self._report(i, self.addresses[i], f"has sent nothing for {self.silent:.0f} s (stopped, or hung)")
                return

    def _closed(self, i: int, selector: selectors.BaseSelector) -> None:
        with contextlib.suppress(KeyError, ValueError):
            selector.unregister(self.connections[i])
        self.closed.add(i)
        if self.closed == set(self.connections):
            self.all_closed.set()

    def _report(self, i: int, address: str, what: str = "is gone (killed, crashed, or its host lost)") -> None:
        """Process ``i`` died (or is stopped: ``what``): process 0 tells the others; every process ends, naming
        it."""
        with self.lock:
            if self.ending.is_set():
                return
            if self.me == 0:
                self._say({"gone": i, "at": address}, but=i)
            self.ending.set()
            self.failure = (
                f"error: process {i} (at {address}) of the run {what}: process {self.me} stops too; continue the "
                "run from its last checkpoint with --resume"
            )
            self.known.set()
        # (in a thread of its own: this one goes on reading, which tells ``_finish`` when the others have gone)
        threading.Thread(target=self._finish, args=(self.failure, 1), name="lifeline end", daemon=True).start()

    def _stopped(self, i: int, why: str, saved: str, status: int) -> None:
        """Process ``i`` stopped on its own (exit ``status``): process 0 tells the others; each ends after ``GRACE``
        seconds unless it ends by itself first, with 1 after another's error, 75 after another's stop."""
        with self.lock:
            if self.ending.is_set() or i in self.stopped:
                return
            self.stopped.add(i)
            if self.me == 0:
                self._say({"stop": i, "why": why, "saved": saved, "status": status}, but=i)
            self.status = 1 if status == 1 else STOPPED
            kind = "error" if status == 1 else "stopped"
            self.failure = f"{kind}: process {i} {why}: process {self.me} stops too: {saved}"
            self.known.set()
        timer = threading.Timer(GRACE, self._stop_too)
        timer.daemon = True  # a process that ends in order meanwhile is not kept
        timer.start()

    def _stop_too(self) -> None:
        with self.lock:
            if self.ending.is_set() or self.failure is None:
                return
            self.ending.set()
        self._finish(self.failure, self.status)

    def _finish(self, message: str | None, status: int) -> None:
        """End this process (``end``): process 0 once the others have closed their connections, or ``GRACE``
        seconds and a half have passed (without process 0's JAX runtime and its coordinator, theirs would end
        them with a fatal log line of its own)."""
        if self.me == 0:
            self.all_closed.wait(GRACE + 0.5)
        self.end(message, status)
        self.ended.set()


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
