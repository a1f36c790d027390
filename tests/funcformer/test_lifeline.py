"""``lifeline.hold``: the meeting's connections, kept while the processes run, name a process that dies on every
other within a second or so (each process a thread here, its death a connection closed without a goodbye). With real
processes and SIGKILL: tests/funcformer/test_process_faults.py."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable

from applicative.training.lifeline import hold
from applicative.training.rendezvous import meet
from tests.funcformer.test_rendezvous import free_port


def _met(processes: int) -> list[dict[int, socket.socket]]:
    """Each process's connections once all met (threads of this process)."""
    port, met = free_port(), [dict[int, socket.socket]() for _ in range(processes)]

    def one(i: int) -> None:
        met[i] = meet(f"127.0.0.1:{port}", processes, i, start="", timeout=10, bind=f"127.0.0.1:{port}")

    threads = [threading.Thread(target=one, args=(i,)) for i in range(processes)]
    for thread in threads:
        thread.start()
        time.sleep(0.05)
    for thread in threads:
        thread.join(timeout=15)
    return met


class _Ends:
    """What ``end`` was called with, per process, and when."""

    def __init__(self) -> None:
        self.said: dict[int, str] = {}
        self.began = time.monotonic()
        self.seconds: dict[int, float] = {}

    def of(self, i: int) -> Callable[[str], None]:
        def end(message: str) -> None:
            self.said[i] = message
            self.seconds[i] = time.monotonic() - self.began

        return end

    def wait(self, count: int, limit: float = 5.0) -> None:
        while len(self.said) < count and time.monotonic() - self.began < limit:
            time.sleep(0.01)


def test_a_process_that_dies_is_named_by_process_0_at_once() -> None:
    (owner, other), ends = _met(2), _Ends()
    hold(owner, 0, end=ends.of(0))
    other[0].close()  # process 1 dies: its kernel closes its connection, no goodbye
    ends.wait(1)
    assert ends.said == {0: "error: process 1 (at 127.0.0.1) of the run is gone (killed, crashed, or its host "
                            "lost): process 0 stops too; continue the run from its last checkpoint with --resume"}
    assert ends.seconds[0] < 3.0


def test_process_0_dead_is_named_by_the_others_and_a_dead_one_by_everyone() -> None:
    met, ends = _met(3), _Ends()
    leave = [hold(met[i], i, end=ends.of(i)) for i in (0, 1)]
    met[2][0].close()  # process 2 dies: process 0 notices, tells process 1, and both stop
    ends.wait(2)
    assert sorted(ends.said) == [0, 1]
    assert ends.said[1].startswith("error: process 2 (at 127.0.0.1) of the run is gone")
    assert ends.said[1].endswith("process 1 stops too; continue the run from its last checkpoint with --resume")
    assert max(ends.seconds.values()) < 3.0
    for bye in leave:
        bye()


def test_a_process_that_says_goodbye_is_not_reported() -> None:
    (owner, other), ends = _met(2), _Ends()
    hold(owner, 0, end=ends.of(0))
    leave = hold(other, 1, end=ends.of(1))
    leave()  # process 1 ends through Python (its work done, an error, SIGTERM): at exit it says goodbye
    other[0].close()
    time.sleep(0.5)
    assert ends.said == {}
    owner[1].close()
