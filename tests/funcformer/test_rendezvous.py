"""``rendezvous.meet``, the processes' meeting before JAX joins them, with each process a thread of this one on
127.0.0.1 (no JAX): every way a start can fail ends, on every process that came, within the timeout, in an
error that names what is wrong and which processes. The same cases with real processes and JAX after the
meeting: tests/funcformer/test_processes.py."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Sequence

import pytest

from applicative.training.rendezvous import StartupError, meet

TIMEOUT = 1.5


def free_port() -> int:
    """A port of 127.0.0.1 that no one listens on (the system's pick, released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _meet(
    ids: Sequence[int], processes: int | Sequence[int], starts: Sequence[str] | None = None, port: int | None = None
) -> tuple[list[str | None], float]:
    """Each of ``ids`` meeting as a thread (process 0 first), with its count of ``processes`` and its start:
    each one's error (None if it met) and the seconds until the last ended."""
    port = port or free_port()
    counts = [processes] * len(ids) if isinstance(processes, int) else list(processes)
    starts = starts or ["starts a new run"] * len(ids)
    errors: list[str | None] = [None] * len(ids)

    def one(k: int) -> None:
        try:
            meet(f"127.0.0.1:{port}", counts[k], ids[k], start=starts[k], timeout=TIMEOUT, bind=f"127.0.0.1:{port}")
        except StartupError as error:
            errors[k] = str(error)

    began = time.monotonic()
    threads = [threading.Thread(target=one, args=(k,)) for k in range(len(ids))]
    for thread in threads:
        thread.start()
        time.sleep(0.05)  # process 0 listens first, the others come in order
    for thread in threads:
        thread.join(timeout=3 * TIMEOUT + 10)
    assert not any(thread.is_alive() for thread in threads), "a process of the meeting never ended"
    return errors, time.monotonic() - began


def test_processes_that_all_come_meet_and_free_the_port_for_jax() -> None:
    port = free_port()
    errors, seconds = _meet([0, 2, 1], 3, port=port)
    assert errors == [None, None, None]
    assert seconds < TIMEOUT
    socket.create_server(("127.0.0.1", port)).close()  # the coordinator can take the port


def test_one_process_meets_no_one() -> None:
    meet("127.0.0.1:1", 1, 0, start="", timeout=TIMEOUT, bind="127.0.0.1:1")  # nothing listens at port 1


def test_a_process_that_never_comes_is_named_on_every_process_that_came() -> None:
    errors, seconds = _meet([0, 1], 4)
    assert errors[0] == (
        f"processes 2, 3 never came within {TIMEOUT:g} s (started? given the same --coordinator and --processes 4?)"
    )
    assert errors[1] == f"process 0: {errors[0]}"
    assert TIMEOUT <= seconds < TIMEOUT + 1


def test_an_id_given_twice_stops_every_process_at_once() -> None:
    errors, seconds = _meet([0, 1, 1], 3)  # process 2 never comes: no one waits for it
    assert errors[0] == "two processes were given id 1: one at 127.0.0.1 and one at 127.0.0.1"
    assert errors[1:] == [f"process 0: {errors[0]}"] * 2
    assert seconds < TIMEOUT


def test_a_second_process_0_finds_the_port_taken() -> None:
    port = free_port()
    taken = rf"process 0 cannot listen on 127\.0\.0\.1:{port} .*: Address already in use"
    with socket.create_server(("127.0.0.1", port)), pytest.raises(StartupError, match=taken):  # another process 0
        meet(f"127.0.0.1:{port}", 2, 0, start="", timeout=TIMEOUT, bind=f"127.0.0.1:{port}")


@pytest.mark.parametrize(
    ("processes", "starts", "message"),
    [
        (
            [2, 3],
            None,
            "process 1 (at 127.0.0.1) was started for 3 processes, process 0 for 2: give every process the same "
            "--processes",
        ),
        (
            2,
            ["resumes the run (--resume)", "starts a new run"],
            "process 1 starts a new run, and process 0 resumes the run (--resume): give every process the same command",
        ),
    ],
)
def test_processes_asked_for_different_runs_are_refused_by_number(
    processes: int | list[int], starts: list[str] | None, message: str
) -> None:
    errors, seconds = _meet([0, 1], processes, starts)
    assert errors == [message, f"process 0: {message}"]
    assert seconds < TIMEOUT


def test_a_process_that_cannot_reach_process_0_says_so_in_time() -> None:
    port = free_port()
    began = time.monotonic()
    with pytest.raises(StartupError, match=rf"process 1: process 0 was not reached at 127\.0\.0\.1:{port} .*nothing"):
        meet(f"127.0.0.1:{port}", 2, 1, start="", timeout=TIMEOUT, bind="")
    assert TIMEOUT <= time.monotonic() - began < TIMEOUT + 1
    with socket.create_server(("127.0.0.1", port)), pytest.raises(StartupError, match="something listens there"):
        meet(f"127.0.0.1:{port}", 2, 1, start="", timeout=TIMEOUT, bind="")  # a program that never answers


def test_a_stray_connection_is_ignored() -> None:
    port = free_port()
    errors: list[str | None] = []

    def host() -> None:
        try:
            meet(f"127.0.0.1:{port}", 2, 0, start="", timeout=3 * TIMEOUT, bind=f"127.0.0.1:{port}")
            errors.append(None)
        except StartupError as error:
            errors.append(str(error))

    thread = threading.Thread(target=host)
    thread.start()
    time.sleep(0.1)
    with socket.create_connection(("127.0.0.1", port)) as stray:
        stray.sendall(b"GET / HTTP/1.1\r\n\r\n")
        meet(f"127.0.0.1:{port}", 2, 1, start="", timeout=3 * TIMEOUT, bind="")
    thread.join()
    assert errors == [None]
