"""Process 0's side of the meeting (``rendezvous``): one thread serves every connection at once (``selectors``),
proves and counts the other processes, drops everything else, and answers them all.

A connection is greeted with a challenge and must send its whole hello, at most ``wire.LINE`` bytes, within
``wire.HELLO_SECONDS`` of connecting; at most ``PENDING`` wait at once, the oldest dropped for a new one. A
line that is not a hello (malformed bytes, deep nesting, another protocol, fields of other types), a wrong proof,
silence, a slow drip or a flood is dropped: a log line (this module's logger; past ``LOGGED`` of them, counted),
the connection reset, and the meeting goes on; a wrong proof is told so first (its process ends, named), a
second process 0 is told the place is taken. A proven process that leaves before the end is waited for again;
one that says SIGTERM stopped it stops every process (``stopping.Stopped``). At ``timeout`` seconds the
``StartupError`` names the processes that came, those that did not, and what was dropped meanwhile. Process 0
stopped by SIGTERM tells those that came, then listens ``FAREWELL_SECONDS`` more (or until every missing process
has come) and tells each process that comes and proves itself, so that none waits for it until its timeout.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import selectors
import socket
import struct
import time
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import NoReturn

from applicative.training.stopping import NOTHING_SAVED, Stopped, raise_early
from applicative.training.wire import (
    FAREWELL,
    HELLO,
    HELLO_SECONDS,
    PROTOCOL,
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

__all__ = ["FAREWELL_SECONDS", "LOGGED", "PENDING", "Host", "PortInUse", "StartupError", "listen", "split"]

FAREWELL_SECONDS = 10.0
"""Seconds a process stopped by SIGTERM before the processes met spends telling the others (process 0: those
that come; any other: process 0), that none waits for it until its timeout."""

PENDING = 32
"""Connections process 0 serves at once before they are proven; past it, the oldest is dropped."""
_ACCEPTED = 8
"""Connections accepted at once, before what the others sent is read."""
LOGGED = 20
"""Dropped connections logged one by one; the ones past it are counted, and summed up at the end."""

_log = logging.getLogger("applicative.training.rendezvous")

_DROPPED = {
    "proof": f"with a wrong proof of membership (another ${SECRET}?)",
    "malformed": "that sent no hello of this protocol",
    "slow": f"that sent no whole hello within {HELLO_SECONDS:g} s",
    "closed": "closed without a hello",
    "crowd": f"beyond {PENDING} at once",
    "zero": "from a second process 0, refused (id 0 given twice?)",
}


class StartupError(RuntimeError):
    """The processes of a run could not all meet: the message names what is wrong and which processes."""


class PortInUse(StartupError):
    """Process 0 cannot listen: the port is taken (``rendezvous`` asks what holds it)."""


def _reset(connection: socket.socket) -> None:
    """Close at once (a reset): no TIME_WAIT of process 0 is left on the coordinator's port."""
    with contextlib.suppress(OSError):
        connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    connection.close()


@dataclass
class _Unproven:
    address: str
    challenge: str
    deadline: float
    lines: Lines = field(default_factory=Lines)


@dataclass
class _Peer:
    connection: socket.socket
    address: str
    start: str
    lines: Lines = field(default_factory=Lines)


class Host:
    """Process 0's side of the meeting: one thread serving every connection (``selectors``)."""

    def __init__(self, processes: int, start: str, timeout: float, secret: bytes) -> None:
        self.processes, self.start, self.timeout, self.secret = processes, start, timeout, secret
        self.selector = selectors.DefaultSelector()
        self.unproven: dict[socket.socket, _Unproven] = {}
        self.peers: dict[int, _Peer] = {}
        self.dropped: Counter[str] = Counter()
        self.senders: dict[str, set[str]] = {}
        self.farewell: str | None = None  # process 0 stopped: what each process that comes is told
        self.told: set[object] = set()  # the ids of those told so

    def meet(self, bind: str) -> dict[int, socket.socket]:
        """Listen on ``bind``, wait for every other process, answer them all; their open connections."""
        server = listen(bind)
        server.setblocking(False)
        self.selector.register(server, selectors.EVENT_READ)
        deadline = time.monotonic() + self.timeout
        try:
            raise_early()  # stopped while it started: the others are told, as those that come within FAREWELL_SECONDS
            while len(self.peers) < self.processes - 1:
                if time.monotonic() >= deadline:
                    self._refuse(self.peers.values(), self._never_came())
                self._serve(server, deadline)
        except Stopped as stopped:
            if stopped.here:
                self._farewell(server, "process 0 was stopped by SIGTERM while the processes met")
            raise
        finally:
            self.selector.close()
            server.close()
            for connection in list(self.unproven):
                _reset(connection)
            if len(self.peers) < self.processes - 1:
                for peer in self.peers.values():
                    peer.connection.close()
        if self.dropped:
            _log.warning("rendezvous: all came; dropped meanwhile: %s", self._summary())
        for peer in self.peers.values():
            peer.connection.setblocking(True)
            send(peer.connection, {"go": True})
        return {i: peer.connection for i, peer in self.peers.items()}

    def _serve(self, server: socket.socket, deadline: float) -> None:
        """One wait (until ``deadline`` at most): drop the connections out of time, accept and read the others."""
        now = time.monotonic()
        for connection in [c for c, u in self.unproven.items() if u.deadline <= now]:
            self._drop(connection, "slow", "no whole hello in time")
        wake = min([deadline, *(u.deadline for u in self.unproven.values())])
        events = self.selector.select(max(wake - now, 0.0))
        for key, _ in sorted(events, key=lambda event: event[0].fileobj is server):  # new ones last
            if key.fileobj is server:
                self._accept(server)
            else:
                self._read(key.fileobj)  # type: ignore[arg-type]  # our sockets

    def _farewell(self, server: socket.socket, told: str) -> None:
        """Process 0 stopped: tell the processes that came, then, for ``FAREWELL_SECONDS`` or until every missing
        process came, each that comes and proves itself (``_hello``); a second SIGTERM ends it."""
        self._tell({"stopped": told})
        for peer in self.peers.values():
            self.selector.unregister(peer.connection)
        self.farewell, missing = told, self._missing()
        end = time.monotonic() + FAREWELL_SECONDS
        with contextlib.suppress(Stopped):
            while time.monotonic() < end and not set(missing) <= self.told:
                self._serve(server, end)

    def _accept(self, server: socket.socket) -> None:
        """A few new connections (the others wait in the listener's backlog while these are read), each greeted
        with its challenge; past ``PENDING`` unproven, the oldest is dropped for each."""
        for _ in range(_ACCEPTED):
            try:
                connection, (address, *_) = server.accept()
            except BlockingIOError:
                return
            except OSError as error:  # out of descriptors: make room
                _log.warning("rendezvous: cannot accept a connection: %s", os.strerror(error.errno or 0))
                if self.unproven:
                    self._drop(next(iter(self.unproven)), "crowd", "the oldest, to make room")
                return
            address = address.removeprefix("::ffff:")  # an IPv4 peer of a dual-stack listener
            if len(self.unproven) >= PENDING:
                self._drop(next(iter(self.unproven)), "crowd", "the oldest, to make room")
            connection.setblocking(False)
            greeting = {"protocol": PROTOCOL, "challenge": challenge()}
            self.unproven[connection] = _Unproven(address, str(greeting["challenge"]), time.monotonic() + HELLO_SECONDS)
            self.selector.register(connection, selectors.EVENT_READ)
            try:
                connection.send(encode(greeting))
            except OSError:
                self._drop(connection, "closed", "gone before its challenge")

    def _read(self, connection: socket.socket) -> None:
        peers = [(i, p) for i, p in self.peers.items() if p.connection is connection]
        if connection not in self.unproven and not peers:
            return  # dropped by an event before it in the same batch
        try:
            data = connection.recv(4096)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if connection in self.unproven:
            unproven = self.unproven[connection]
            if not data:
                return self._drop(connection, "closed", "closed without a hello")
            try:
                unproven.lines.feed(data)
            except Malformed as why:
                return self._drop(connection, "malformed", str(why))
            if (line := unproven.lines.take()) is not None:
                self._hello(connection, unproven, line)
            return
        [(i, peer)] = peers
        try:
            if not data:
                raise ConnectionError
            peer.lines.feed(data)
        except (ConnectionError, Malformed):
            _log.warning("rendezvous: process %d (at %s) left before the run started; waiting for it", i, peer.address)
            self.selector.unregister(connection)
            connection.close()
            del self.peers[i]
            return self._tell({"missing": self._missing()})
        while (line := peer.lines.take()) is not None:
            with contextlib.suppress(Malformed):
                parse(line, STOPPED)  # the one thing a process that came says: SIGTERM stopped it
                told = f"process {i} was stopped by SIGTERM while the processes met"
                self._tell({"stopped": told})
                raise Stopped(f"stopped: {told}: {NOTHING_SAVED}")

    def _hello(self, connection: socket.socket, unproven: _Unproven, line: bytes) -> None:
        """A whole first line: a proven process joins (or is refused, and the run with it); anything else is dropped."""
        try:
            hello = parse(line, HELLO, FAREWELL)
            if hello["protocol"] != PROTOCOL:
                raise Malformed(f"another protocol, {hello['protocol']!r}")
            if unproven.lines.take() is not None or unproven.lines.buffer:
                raise Malformed("more than a hello")
        except Malformed as why:
            return self._drop(connection, "malformed", str(why))
        i, count, start = hello["process"], hello["processes"], str(hello["start"])
        said = [i, count, start, *([hello["stopped"]] if "stopped" in hello else [])]
        if not proven(hello["proof"], self.secret, "process", unproven.challenge, hello["challenge"], *said):
            send(connection, {"refused": f"its proof of membership is wrong: give every process the same ${SECRET}"})
            return self._drop(connection, "proof", f"a wrong proof of membership, saying it is process {i}", told=True)
        send(connection, {"proof": proof(self.secret, "process 0", unproven.challenge, hello["challenge"])})
        if self.farewell is not None or "stopped" in hello:
            del self.unproven[connection]
            self.selector.unregister(connection)
            if self.farewell is not None:  # process 0 was stopped: this process is told, and need not wait
                send(connection, {"stopped": self.farewell})
                self.told.add(i)
                return connection.close()
            connection.close()  # a process stopped before it came: every process stops
            told = f"process {i} was stopped by SIGTERM while the processes met"
            self._tell({"stopped": told})
            raise Stopped(f"stopped: {told}: {NOTHING_SAVED}")
        if i == 0:  # a second process 0, which found the port taken: refused alone (another run's, perhaps)
            send(connection, {"error": "process 0 listens here already"})
            return self._drop(connection, "zero", "a second process 0 (id 0 given twice?), refused", told=True)
        del self.unproven[connection]
        peer = _Peer(connection, unproven.address, start)
        problem = _refusal(i, count, peer, self.peers, self.processes, self.start)
        if problem or not isinstance(i, int):
            self._refuse([*self.peers.values(), peer], problem)
        self.peers[i] = peer
        self._tell({"missing": self._missing()})

    def _drop(self, connection: socket.socket, kind: str, why: str, *, told: bool = False) -> None:
        """Forget an unproven connection: reset it, or close it in order where it was ``told`` why (a reset
        would discard what it has not read yet)."""
        unproven = self.unproven.pop(connection)
        self.selector.unregister(connection)
        if told:
            connection.close()
        else:
            _reset(connection)
        self.dropped[kind] += 1
        self.senders.setdefault(kind, set()).add(unproven.address)
        dropped = sum(self.dropped.values())
        if dropped <= LOGGED:
            _log.warning("rendezvous: dropped a connection from %s: %s", unproven.address, why)
        if dropped == LOGGED:
            _log.warning("rendezvous: %d connections dropped; the next are counted, not logged", dropped)

    def _missing(self) -> list[int]:
        return [i for i in range(1, self.processes) if i not in self.peers]

    def _tell(self, message: dict[str, object]) -> None:
        for peer in self.peers.values():
            peer.connection.setblocking(True)
            peer.connection.settimeout(1.0)  # a process that does not read is not waited for
            send(peer.connection, message)
            peer.connection.setblocking(False)

    def _refuse(self, peers: Iterable[_Peer], message: str) -> NoReturn:
        """Tell every process that came why the run cannot start, then raise it here (process 0)."""
        for peer in peers:
            peer.connection.setblocking(True)
            peer.connection.settimeout(1.0)
            send(peer.connection, {"error": message})
        raise StartupError(message)

    def _never_came(self) -> str:
        came = sorted(self.peers)
        message = (
            f"{named(self._missing())} never came within {self.timeout:g} s "
            f"({named(came) + ' came' if came else 'no other process came'}; started? given the same --coordinator "
            f"and --processes {self.processes}?)"
        )
        return f"{message}; dropped meanwhile: {self._summary()}" if self.dropped else message

    def _summary(self) -> str:
        """The connections dropped, by kind, with their senders (a few)."""
        parts = []
        for kind, count in self.dropped.items():
            senders = sorted(self.senders[kind])
            shown = ", ".join(senders[:3]) + (f" and {len(senders) - 3} more" if len(senders) > 3 else "")
            parts.append(f"{count} connection{'s' if count > 1 else ''} {_DROPPED[kind]} from {shown}")
        return "; ".join(parts)


def _refusal(i: object, count: object, peer: _Peer, peers: dict[int, _Peer], processes: int, start: str) -> str:
    """Why process 0 refuses the proven process ``peer`` that says it is process ``i`` of ``count``; "" if not."""
    if count != processes:
        return (
            f"process {i} (at {peer.address}) was started for {count} processes, process 0 for {processes}: give "
            "every process the same --processes"
        )
    if not isinstance(i, int) or not 0 <= i < processes:
        return f"a process at {peer.address} has id {i}, not one of 1..{processes - 1}"
    if i in peers:  # an id given twice
        return f"two processes were given id {i}: one at {peers[i].address} and one at {peer.address}"
    if peer.start != start:
        return f"process {i} {peer.start}, and process 0 {start}: give every process the same command"
    return ""


def listen(bind: str) -> socket.socket:
    """Process 0's listener on ``bind``; ``PortInUse`` if the port is taken, StartupError for an address that is
    not this host's."""
    host, port = split(bind)
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    try:
        return socket.create_server(
            (host, port), family=family, dualstack_ipv6=family == socket.AF_INET6 and socket.has_dualstack_ipv6()
        )
    except OSError as error:
        number = error.errno or 0
        why = os.strerror(number) if number > 0 else error.strerror  # a name that does not resolve: getaddrinfo's
        reason = f"process 0 cannot listen on {bind} for the run's coordinator: {why}"
        if error.errno == errno.EADDRINUSE:
            raise PortInUse(reason) from None
        raise StartupError(
            f"{reason}: the address is not one of this host's (behind a NAT? a name for another host?): give "
            "--coordinator-bind this host's own address, or [::]:PORT for every interface"
        ) from None


def split(address: str) -> tuple[str, int]:
    """("host", port) of "host:port" or "[v6]:port"; ValueError naming the address otherwise."""
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit():
        raise ValueError(f"a coordinator address is host:port, got {address!r}")
    return host.strip("[]"), int(port)
