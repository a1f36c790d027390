"""``rendezvous.meet``, the processes' meeting before JAX joins them, with each process a thread of this one on
127.0.0.1 (no JAX): every way a start can fail ends, on every process that came, within the timeout, in an
error that names what is wrong and which processes; whatever else connects (any bytes, silence, a slow drip, a
flood, a forged hello, a process with another secret) is dropped, and the processes still meet. The same cases
with real processes and JAX after the meeting: tests/funcformer/test_processes.py and test_process_faults.py."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from applicative.training import rendezvous
from applicative.training.hosting import FAREWELL_SECONDS, PENDING, Host
from applicative.training.rendezvous import StartupError, meet
from applicative.training.stopping import NOTHING_SAVED, Stopped
from applicative.training.wire import GREETING, HELLO_SECONDS, LINE, Lines, parse, proof

TIMEOUT = 1.5


def free_port() -> int:
    """A port of 127.0.0.1 that no one listens on (the system's pick, released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def connection(port: int, within: float = 5.0) -> socket.socket:
    """A connection to 127.0.0.1:``port``, tried again every 5 ms while it fails (its listener not up yet), for
    ``within`` seconds, then the last error; each try given 1 s (a full backlog drops a connection silently), the
    connection made blocking."""
    deadline = time.monotonic() + within
    while True:
        try:
            made = socket.create_connection(("127.0.0.1", port), timeout=1)
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.005)
        else:
            made.settimeout(None)
            return made


def _meet(
    ids: Sequence[int],
    processes: int | Sequence[int],
    starts: Sequence[str] | None = None,
    port: int | None = None,
    secrets: Sequence[bytes] | None = None,
    timeout: float = TIMEOUT,
    meanwhile: float = 0.0,
) -> tuple[list[str | None], float]:
    """Each of ``ids`` meeting as a thread (process 0 first, the others ``meanwhile`` seconds later, in order),
    with its count of ``processes``, its start and its secret: each one's error (None if it met) and the
    seconds until the last ended. The connections each one met with are closed."""
    port = port or free_port()
    counts = [processes] * len(ids) if isinstance(processes, int) else list(processes)
    starts = starts or ["starts a new run"] * len(ids)
    secrets = secrets or [b"the run's"] * len(ids)
    errors: list[str | None] = [None] * len(ids)

    def one(k: int) -> None:
        try:
            met = meet(f"127.0.0.1:{port}", counts[k], ids[k], start=starts[k], timeout=timeout,
                       bind=f"127.0.0.1:{port}", secret=secrets[k])  # fmt: skip
            for connection in met.values():
                connection.close()
        except StartupError as error:
            errors[k] = str(error)

    began = time.monotonic()
    threads = [threading.Thread(target=one, args=(k,)) for k in range(len(ids))]
    for k, thread in enumerate(threads):
        thread.start()
        time.sleep(0.05 + (meanwhile if k == 0 else 0))  # process 0 listens first, the others come in order
    for thread in threads:
        thread.join(timeout=3 * timeout + 10)
    assert not any(thread.is_alive() for thread in threads), "a process of the meeting never ended"
    return errors, time.monotonic() - began


def test_processes_that_all_come_meet_and_free_the_port_for_jax() -> None:
    port = free_port()
    errors, seconds = _meet([0, 2, 1], 3, port=port)
    assert errors == [None, None, None]
    assert seconds < TIMEOUT
    socket.create_server(("127.0.0.1", port)).close()  # the coordinator can take the port


def test_the_port_is_free_for_jax_while_the_lifeline_holds_its_connections() -> None:
    port, met = free_port(), {}

    def host() -> None:
        met.update(meet(f"127.0.0.1:{port}", 2, 0, start="", timeout=5, bind=f"127.0.0.1:{port}"))

    thread = threading.Thread(target=host)
    thread.start()
    time.sleep(0.1)
    joined = meet(f"127.0.0.1:{port}", 2, 1, start="", timeout=5, bind="")
    thread.join()
    socket.create_server(("127.0.0.1", port)).close()  # what JAX's coordinator does next
    for connection in [*met.values(), *joined.values()]:
        connection.close()


def test_one_process_meets_no_one() -> None:
    assert meet("127.0.0.1:1", 1, 0, start="", timeout=TIMEOUT, bind="127.0.0.1:1") == {}  # nothing listens there


def test_a_process_that_never_comes_is_named_on_every_process_that_came() -> None:
    errors, seconds = _meet([0, 1], 4)
    assert errors[0] == (
        f"processes 2, 3 never came within {TIMEOUT:g} s (process 1 came; started? given the same --coordinator "
        "and --processes 4?)"
    )
    assert errors[1] == f"process 0: {errors[0]}"
    assert TIMEOUT <= seconds < TIMEOUT + 1


def test_an_id_given_twice_stops_every_process_at_once() -> None:
    errors, seconds = _meet([0, 1, 1], 3)  # process 2 never comes: no one waits for it
    assert errors[0] == "two processes were given id 1: one at 127.0.0.1 and one at 127.0.0.1"
    assert errors[1:] == [f"process 0: {errors[0]}"] * 2
    assert seconds < TIMEOUT


def test_a_second_process_0_is_told_so_and_the_first_goes_on() -> None:
    """Id 0 given twice: the second process 0 finds the port taken by a process 0 of its run (it proves it
    holds the run's secret) and says so, in its own words; the first is not ended by it, and meets process 1."""
    errors, seconds = _meet([0, 0, 1], 2, timeout=3 * TIMEOUT)
    assert str(errors[1]).startswith("two processes were given id 0: one listens at 127.0.0.1:")
    assert errors[::2] == [None, None]
    assert seconds < 3 * TIMEOUT


def test_a_second_process_0_finds_the_port_taken_by_another_program() -> None:
    port = free_port()
    taken = rf"process 0 cannot listen on 127\.0\.0\.1:{port} .*: Address already in use; another program"
    with socket.create_server(("127.0.0.1", port)), pytest.raises(StartupError, match=taken):
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
    assert time.monotonic() - began < 2 * TIMEOUT + 2


def test_a_process_that_finds_jaxs_coordinator_says_its_id_was_given_twice_at_once() -> None:
    """Two processes given id 1: the first met process 0, and JAX's coordinator took the port; the second finds
    it there, and says so at once (it waited for a greeting, then said "something listens there", 60 s later).
    Process 0 given twice, JAX's coordinator holding the port: also named. The coordinator is JAX's own, in a
    process of a run of one."""
    port = free_port()
    script = (f"import jax, sys; jax.distributed.initialize('127.0.0.1:{port}', 1, 0); print('up', flush=True); "
              "sys.stdin.read()")  # fmt: skip
    with subprocess.Popen([sys.executable, "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                          env={**os.environ, "JAX_PLATFORMS": "cpu"}) as coordinator:  # fmt: skip
        try:
            assert coordinator.stdout is not None
            assert coordinator.stdout.readline() == "up\n"
            began = time.monotonic()
            given_twice = r"process 1: JAX's coordinator listens at 127\.0\.0\.1:\d+: .*was id 1 given to two processes"
            with pytest.raises(StartupError, match=given_twice):
                meet(f"127.0.0.1:{port}", 2, 1, start="", timeout=60, bind="")
            with pytest.raises(StartupError, match=r"JAX's coordinator of a run that has started listens there"):
                meet(f"127.0.0.1:{port}", 2, 0, start="", timeout=60, bind=f"127.0.0.1:{port}")
            assert time.monotonic() - began < 5
        finally:
            coordinator.kill()


def _sigterm() -> Stopped:
    """The ``Stopped`` this process's own SIGTERM raises (``stopping.stopping``), for a meeting in a thread."""
    stopped = Stopped(f"stopped by SIGTERM: {NOTHING_SAVED}")
    stopped.here = True
    return stopped


def _stopped_then_the_other(stopped: int, ended: dict[int, tuple[str, float]]) -> None:
    """Process ``stopped`` of two meets first, in a thread named "process K", and a patched step of it records
    in ``ended[-1]`` when it raises its SIGTERM's ``Stopped``; the other comes 1 s later. Both end: the stopped one
    with its own SIGTERM's message, the other told in process 0's words, both within 3 s of the signal."""
    port = free_port()

    def one(process: int) -> None:
        try:
            meet(f"127.0.0.1:{port}", 2, process, start="", timeout=30.0, bind=f"127.0.0.1:{port}", secret=b"s")
            ended[process] = ("met", time.monotonic())
        except (Stopped, StartupError) as error:
            ended[process] = (str(error), time.monotonic())

    threads = [threading.Thread(target=one, args=(k,), name=f"process {k}") for k in (stopped, 1 - stopped)]
    threads[0].start()
    time.sleep(1.0)
    threads[1].start()
    for thread, timeout in zip(threads, (FAREWELL_SECONDS + 5, 5), strict=True):
        thread.join(timeout=timeout)
    told = f"stopped: process {stopped} was stopped by SIGTERM while the processes met: {NOTHING_SAVED}"
    assert ended[stopped][0] == f"stopped by SIGTERM: {NOTHING_SAVED}"
    assert ended[1 - stopped][0] == told
    assert max(ended[0][1], ended[1][1]) - ended[-1][1] < 3.0  # the other came 1 s after the signal


def test_a_process_stopped_before_process_0_listens_tells_it_when_it_comes(monkeypatch: pytest.MonkeyPatch) -> None:
    """SIGTERM to process 1 while it waits for process 0 to listen (process 0 still starting): it spends up to
    FAREWELL_SECONDS reaching it, and process 0, coming 1 s later, stops at once, naming it, where it waited for
    it until its timeout ("process 1 never came")."""
    attempt, ended = rendezvous._attempt, dict[int, tuple[str, float]]()

    def stopped_at_first(*args: Any) -> socket.socket | None:
        if threading.current_thread().name == "process 1" and not ended.get(-1):
            ended[-1] = ("signalled", time.monotonic())
            raise _sigterm()
        return attempt(*args)

    monkeypatch.setattr(rendezvous, "_attempt", stopped_at_first)
    _stopped_then_the_other(1, ended)


def test_process_0_stopped_while_it_waits_tells_each_process_that_comes(monkeypatch: pytest.MonkeyPatch) -> None:
    """SIGTERM to process 0 while no other has come: it listens up to FAREWELL_SECONDS more, and process 1, coming
    then, is told at once and stops with 75's message, where it waited its whole timeout and said nothing
    listens; process 0 ends once every missing process was told."""
    serve, ended = Host._serve, dict[int, tuple[str, float]]()

    def stopped_at_first(host: Host, *args: Any) -> None:
        if not ended.get(-1):
            ended[-1] = ("signalled", time.monotonic())
            raise _sigterm()
        serve(host, *args)

    monkeypatch.setattr(Host, "_serve", stopped_at_first)
    _stopped_then_the_other(0, ended)


def test_a_process_with_another_secret_is_refused_by_name_and_the_run_goes_on() -> None:
    errors, _ = _meet([0, 1, 1], 2, secrets=[b"the run's", b"another", b"the run's"], meanwhile=0.1)
    assert "refused it: its proof of membership is wrong: give every process the same $APPLICATIVE_RUN_SECRET" in str(
        errors[1]
    )
    assert errors[::2] == [None, None]  # process 0 met the process with the right secret


class _Host:
    """Process 0 of a run of two meeting in a thread, with the run's secret; ``error`` once it ended."""

    def __init__(self, timeout: float = 10.0, processes: int = 2) -> None:
        self.port, self.error, self.met = free_port(), "not ended", dict[int, socket.socket]()
        self.thread = threading.Thread(target=self._meet, args=(timeout, processes))
        self.thread.start()  # (listening within milliseconds: ``connect`` tries again until it does)

    def _meet(self, timeout: float, processes: int) -> None:
        try:
            self.met = meet(f"127.0.0.1:{self.port}", processes, 0, start="", timeout=timeout,
                            bind=f"127.0.0.1:{self.port}", secret=b"the run's")  # fmt: skip
            self.error = ""
        except StartupError as error:
            self.error = str(error)

    def join(self, process: int = 1) -> float:
        """Process ``process`` comes (its own thread's meeting); the seconds until both met."""
        began = time.monotonic()
        joined = meet(f"127.0.0.1:{self.port}", 2, process, start="", timeout=10, bind="", secret=b"the run's")
        self.thread.join()
        for connection in [*self.met.values(), *joined.values()]:
            connection.close()
        return time.monotonic() - began

    def connect(self) -> socket.socket:
        """A stranger's connection to process 0, once its thread listens (``connection``: no fixed wait for the
        thread, 0.1 s a host, most of the random-bytes test's time)."""
        return connection(self.port)


@pytest.fixture
def host() -> Iterator[_Host]:
    made = _Host()
    yield made
    made.thread.join(timeout=15)


_HELLO = {"protocol": "applicative-rendezvous/2", "process": 1, "processes": 2, "start": "", "challenge": "0" * 32,
          "proof": "0" * 64}  # fmt: skip
ADVERSARIAL = [
    b"[" * 1000 + b"\n",  # nested past Python's recursion limit: crashed process 0 (RecursionError)
    b"{" * 100_000,  # a line with no end, past the bounded size
    b"\xff\xfe\x00garbage\n",  # not UTF-8
    b"GET / HTTP/1.1\r\nHost: x\r\n\r\n",  # another protocol
    b"null\n",
    b'"a string"\n',
    b"[1, 2, 3]\n",
    b"1" * 5000 + b"\n",  # an integer of 5,000 digits
    json.dumps({"protocol": "funcformer-rendezvous/1", "process": 1, "processes": 2, "start": ""}).encode() + b"\n",
    json.dumps({**_HELLO, "process": True}).encode() + b"\n",  # accepted as process 1
    json.dumps({**_HELLO, "processes": 3}).encode() + b"\n",  # another count: ended the run
    json.dumps({**_HELLO, "start": []}).encode() + b"\n",
    json.dumps(_HELLO).encode() + b"\n" + b"x" * 10,  # a hello, and more
]


def test_any_bytes_from_strangers_are_dropped_and_the_processes_still_meet_at_once(host: _Host) -> None:
    """Each adversarial line on its own connection, with six silent connections and one dripping half a hello,
    all kept open: process 1 still meets process 0 at once (they are served together, not one after another)."""
    held = [host.connect() for _ in range(6)]
    drip = host.connect()
    drip.sendall(b'{"protocol": "applicative-rend')
    for line in ADVERSARIAL:
        stranger = host.connect()
        stranger.sendall(line)
        held.append(stranger)
    assert host.join() < HELLO_SECONDS  # before any of the silent ones is even dropped
    assert host.error == ""
    for connection in [*held, drip]:
        connection.close()


def _forge(host: _Host, process: int, secret: bytes) -> tuple[socket.socket, bytes]:
    """A hello of process ``process`` proven with ``secret``, as a stranger who knows the protocol sends it;
    the connection and process 0's first answer."""
    stranger, lines = host.connect(), Lines()
    greeting = parse(lines.read(stranger, time.monotonic() + 5), GREETING)
    mine = "1" * 32
    said = proof(secret, "process", greeting["challenge"], mine, process, 2, "")
    stranger.sendall(json.dumps({"protocol": "applicative-rendezvous/2", "process": process, "processes": 2,
                                 "start": "", "challenge": mine, "proof": said}).encode() + b"\n")  # fmt: skip
    return stranger, lines.read(stranger, time.monotonic() + 5)


def test_a_forged_hello_is_refused_and_the_real_process_takes_its_place(host: _Host) -> None:
    stranger, answer = _forge(host, 1, b"a guess")
    assert b"refused" in answer
    assert host.join() < HELLO_SECONDS
    assert host.error == ""
    stranger.close()


def test_a_flood_of_connections_drops_the_oldest_and_the_process_still_meets(host: _Host) -> None:
    held = [host.connect() for _ in range(3 * PENDING)]
    assert host.join() < HELLO_SECONDS
    assert host.error == ""
    for connection in held:
        connection.close()


def test_the_timeout_names_who_came_who_did_not_and_what_was_dropped() -> None:
    made = _Host(timeout=TIMEOUT, processes=3)
    silent = made.connect()
    _forge(made, 2, b"a guess")[0].close()
    with pytest.raises(StartupError, match=r"^process 0: process 2 never came"):
        meet(f"127.0.0.1:{made.port}", 3, 1, start="", timeout=3 * TIMEOUT, bind="", secret=b"the run's")
    made.thread.join()
    assert made.error.startswith(f"process 2 never came within {TIMEOUT:g} s (process 1 came;")
    assert made.error.endswith("; dropped meanwhile: 1 connection with a wrong proof of membership (another "
                               "$APPLICATIVE_RUN_SECRET?) from 127.0.0.1")  # fmt: skip
    silent.close()


def test_slow_drip_and_silence_never_hold_process_0_past_its_timeout() -> None:
    made = _Host(timeout=TIMEOUT)
    began, drip, silent = time.monotonic(), made.connect(), made.connect()
    drip.sendall(b"{")
    while made.thread.is_alive() and time.monotonic() - began < TIMEOUT + 5:
        drip.sendall(b" ")  # a byte at a time, each in time for a per-recv timeout
        time.sleep(0.2)
    made.thread.join(timeout=1)
    assert made.error.startswith(f"process 1 never came within {TIMEOUT:g} s (no other process came;")
    assert time.monotonic() - began < TIMEOUT + 3
    drip.close()
    silent.close()


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(lines=st.lists(st.binary(max_size=2 * LINE), min_size=1, max_size=4))
def test_random_bytes_never_stop_the_meeting(lines: list[bytes]) -> None:
    made = _Host()
    strangers = []
    for line in lines:
        stranger = made.connect()
        stranger.sendall(line)
        strangers.append(stranger)
    assert made.join() < HELLO_SECONDS
    assert made.error == ""
    for stranger in strangers:
        stranger.close()
