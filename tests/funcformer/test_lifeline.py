"""``lifeline.hold``: the meeting's connections, kept while the processes run, name a process that dies or stops on
its own on every other within seconds (each process a thread here, its death a connection closed without a word, its
end the connections it closes). With real processes, SIGKILL and Ctrl-C: tests/funcformer/test_process_faults.py."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable

from applicative.training.lifeline import GRACE, Lifeline, hold
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
    """What ``end`` was called with, per process (its message and exit status), and when; a process that ends
    closes its connections, as its exit does."""

    def __init__(self, met: list[dict[int, socket.socket]] | None = None) -> None:
        self.said: dict[int, str | None] = {}
        self.status: dict[int, int] = {}
        self.began = time.monotonic()
        self.seconds: dict[int, float] = {}
        self.met = met

    def of(self, i: int) -> Callable[[str | None, int], None]:
        def end(message: str | None, status: int) -> None:
            self.said[i], self.status[i] = message, status
            self.seconds[i] = time.monotonic() - self.began
            for connection in self.met[i].values() if self.met else ():
                connection.close()

        return end

    def wait(self, count: int, limit: float = 5.0) -> None:
        while len(self.said) < count and time.monotonic() - self.began < limit:
            time.sleep(0.01)


def test_a_process_that_dies_is_named_by_process_0_at_once() -> None:
    (owner, other), ends = _met(2), _Ends()
    hold(owner, 0, end=ends.of(0))
    other[0].close()  # process 1 dies: its kernel closes its connection, no goodbye
    ends.wait(1)
    assert ends.said == {
        0: "error: process 1 (at 127.0.0.1) of the run is gone (killed, crashed, or its host "
        "lost): process 0 stops too; continue the run from its last checkpoint with --resume"
    }
    assert ends.seconds[0] < 3.0


def test_process_0_dead_is_named_by_the_others_and_a_dead_one_by_everyone() -> None:
    met, ends = _met(3), _Ends()
    held = [hold(met[i], i, end=ends.of(i)) for i in (0, 1)]
    met[2][0].close()  # process 2 dies: process 0 notices, tells process 1, and both stop
    ends.wait(2)
    assert sorted(ends.said) == [0, 1]
    said = str(ends.said[1])
    assert said.startswith("error: process 2 (at 127.0.0.1) of the run is gone")
    assert said.endswith("process 1 stops too; continue the run from its last checkpoint with --resume")
    assert max(ends.seconds.values()) < 3.0
    for lifeline in held:
        assert lifeline is not None
        lifeline.leave()


def test_a_process_that_says_goodbye_is_not_reported() -> None:
    (owner, other), ends = _met(2), _Ends()
    hold(owner, 0, end=ends.of(0))
    lifeline = hold(other, 1, end=ends.of(1))
    assert lifeline is not None
    lifeline.leave()  # process 1 ends through Python (its work done, an error, SIGTERM): at exit it says goodbye
    other[0].close()
    time.sleep(0.5)
    assert ends.said == {}
    owner[1].close()


def _held(met: list[dict[int, socket.socket]], ends: _Ends) -> list[Lifeline]:
    held = [hold(connections, i, end=ends.of(i)) for i, connections in enumerate(met)]
    assert all(lifeline is not None for lifeline in held)
    return [lifeline for lifeline in held if lifeline is not None]


SAVED = "runs/x holds the run's checkpoint at step 12 of 40: --resume continues it"


def test_a_process_that_stops_on_its_own_ends_every_other_after_the_grace_saying_why() -> None:
    """Process 2 of three stops (Ctrl-C): it ends at once, status 130; process 0 relays its word, and each other
    ends after ``GRACE`` seconds with 75, naming it and saying what is saved; process 0 last of all."""
    met = _met(3)
    ends = _Ends(met)
    held = _held(met, ends)
    held[2].stop("was stopped by SIGINT (Ctrl-C)", SAVED, 130)
    ends.wait(3, limit=GRACE + 4)
    assert ends.status == {2: 130, 1: 75, 0: 75}
    assert ends.said[2] is None  # (it wrote its own line)
    for i in (0, 1):
        assert ends.said[i] == f"stopped: process 2 was stopped by SIGINT (Ctrl-C): process {i} stops too: {SAVED}"
        assert GRACE - 0.1 < ends.seconds[i] < GRACE + 2
    assert ends.seconds[0] >= ends.seconds[1]


def test_a_process_told_of_a_stop_that_ends_by_itself_within_the_grace_is_not_ended() -> None:
    """The same stop met by every process at one step (each ends in order, saying goodbye): no one is ended."""
    met = _met(2)
    ends = _Ends(met)
    held = _held(met, ends)
    held[1].stop("was stopped by SIGTERM", SAVED, 75)
    time.sleep(GRACE / 4)
    held[0].leave()  # process 0 ends by itself, in order
    time.sleep(GRACE)
    assert ends.said == {1: None}


def test_a_process_whose_work_broke_after_a_stop_is_ended_at_once_naming_it() -> None:
    """A collective with a process that stopped fails (gloo's error): ``explains`` ends this process at once with
    the stop's line, not after the grace; with nothing heard, it says so within its timeout."""
    met = _met(2)
    ends = _Ends(met)
    held = _held(met, ends)
    began = time.monotonic()
    assert not held[0].explains(0.2)
    assert 0.2 <= time.monotonic() - began < 1.0
    held[1].stop("failed: RuntimeError: out of memory", SAVED, 1)
    time.sleep(0.2)
    assert held[0].explains(1.0)
    assert ends.status == {1: 1, 0: 1}  # (after another's error, 1: after another's stop, 75)
    assert ends.said[0] == f"error: process 1 failed: RuntimeError: out of memory: process 0 stops too: {SAVED}"
    assert ends.seconds[0] < GRACE


def test_a_process_silent_past_the_bound_is_named_as_stopped_or_hung() -> None:
    """Process 1 holds its connection but says nothing (SIGSTOP: its threads stopped, no beat): process 0 ends
    after ``silent`` seconds, naming it, with status 1; a process that beats is never taken for silent."""
    met = _met(3)
    ends = _Ends(met)
    for i in (0, 2):
        hold(met[i], i, end=ends.of(i), silent=1.5)  # process 1 holds nothing: it is stopped
    ends.wait(2, limit=6.0)
    assert ends.status == {0: 1, 2: 1}
    assert ends.said[0] == ("error: process 1 (at 127.0.0.1) of the run has sent nothing for 2 s (stopped, or hung): "
                            "process 0 stops too; continue the run from its last checkpoint with --resume")  # fmt: skip
    assert str(ends.said[2]).startswith("error: process 1 (at 127.0.0.1) of the run ")
    assert 1.5 < ends.seconds[0] < 3.0


def test_process_0_ends_once_the_others_have_closed_their_connections() -> None:
    """Process 0's JAX runtime holds the coordinator, without which the others' runtimes end them with their own
    fatal line: told that process 2 stopped, process 0 ends only once process 1 (slow to end here) has closed its
    connection."""
    met = _met(3)
    ends = _Ends(met)
    slow = ends.of(1)

    def end_slowly(message: str | None, status: int) -> None:
        time.sleep(1.0)
        slow(message, status)

    held = [hold(met[0], 0, end=ends.of(0)), hold(met[1], 1, end=end_slowly), hold(met[2], 2, end=ends.of(2))]
    assert held[2] is not None
    held[2].stop("was stopped by SIGTERM", SAVED, 75)
    ends.wait(3, limit=GRACE + 5)
    assert ends.status == {2: 75, 1: 75, 0: 75}
    assert ends.seconds[0] >= ends.seconds[1]  # (process 1's time is taken once it has slept)
