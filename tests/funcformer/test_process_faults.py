"""A run on two processes as an operator meets its faults (``python -m funcformer.poisson train`` started on this
machine, 127.0.0.1, one CPU device each, as in test_processes.py): strangers' bytes at the coordinator's port,
SIGTERM from a command's first instant, a process killed by SIGKILL, an id 0 given twice.

- Random and adversarial lines (a seeded generator, and the ones that crashed, stalled or misled process 0)
  thrown at the port while the processes meet change nothing: the run trains.
- SIGTERM while the command imports, makes its data, writes its step-0 checkpoint or waits at the meeting (for
  the others, or for process 0's answer): exit status 75 at once on every process and a line saying what is
  saved; what it says to do next (the same command, or ``--resume``) ends as the uninterrupted run, bit for bit.
- A process killed by SIGKILL is named by the other, which ends within seconds (JAX's heartbeat took 76-95 s).
- Id 0 given twice: the second is told so, in its own words, and the run of the first goes on.

Every process is started in its own session and killed by its own id if it outlives its time. Slow (CI runs them).
"""

import contextlib
import json
import os
import random
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from applicative.training.processes import ENVIRONMENT
from tests.funcformer.test_processes import (
    FLAGS,
    STEPS,
    TIMEOUT,
    _assert_bitwise_equal,
    _checkpoint,
    _finish,
    _kill,
    _start,
    uninterrupted_run,
)
from tests.funcformer.test_rendezvous import ADVERSARIAL, connection, free_port

# ``processes`` marks the tests whose processes reach JAX's distributed runtime (pyproject.toml says the rule)

SHORT = [*FLAGS, "--steps", "40"]  # the last --steps counts
SECRET = "a secret the launcher gave every process"


@pytest.fixture
def running() -> Iterator[list[subprocess.Popen[str]]]:
    """The processes a test starts: any left running at its end is killed by its own id."""
    started: list[subprocess.Popen[str]] = []
    yield started
    for process in started:
        _kill(process)


def _several(port: int, i: int, timeout: float = 60, processes: int = 2) -> list[str]:
    return ["--coordinator", f"127.0.0.1:{port}", "--processes", str(processes), "--process-id", str(i),
            "--startup-timeout", f"{timeout:g}"]  # fmt: skip


def _listening(port: int) -> None:
    try:
        connection(port, TIMEOUT).close()
    except OSError:
        pytest.fail("process 0 never listened")


def _step(directory: Path) -> int:
    try:
        return int(_checkpoint(directory)["step"])
    except (OSError, ValueError, KeyError):
        return -1


@pytest.mark.processes
@pytest.mark.slow
def test_random_and_adversarial_lines_at_the_port_change_nothing_and_the_run_trains(
    tmp_path: Path, running: list[subprocess.Popen[str]]
) -> None:
    port, out, cache = free_port(), tmp_path / "run", tmp_path / "cache"
    running.append(_start(["--out", str(out), *SHORT, *_several(port, 0)], cache, secret=SECRET))
    _listening(port)
    generator = random.Random(54)
    lines = [*ADVERSARIAL, b"\n", b" " * 2000 + b"\n"]
    lines += [generator.randbytes(generator.randrange(1, 3000)) for _ in range(40)]
    lines += [json.dumps({"protocol": "applicative-rendezvous/2", "process": 1, "processes": 2, "start":
                          "starts a new run", "challenge": f"{generator.getrandbits(128):032x}", "proof":
                          f"{generator.getrandbits(256):064x}"}).encode() + b"\n"]  # fmt: skip
    held = []
    for line in lines:
        with contextlib.suppress(OSError):
            stranger = socket.create_connection(("127.0.0.1", port))
            stranger.sendall(line)
            held.append(stranger)
    running.append(_start(["--out", str(tmp_path / "other"), *SHORT, *_several(port, 1)], cache, secret=SECRET))
    (status0, _, err0), (status1, _, err1) = _finish(running)
    assert (status0, status1) == (0, 0), err0 + err1
    assert _step(out) == 40
    nested = ("JSON nested too deep", "JSON, but not an object: list")  # 1,000 [ crashed process 0 (Python 3.11's
    assert any(f"dropped a connection from 127.0.0.1: {why}" in err0 for why in nested)  # RecursionError; not 3.12)
    assert "rendezvous: all came; dropped meanwhile: " in err0
    for stranger in held:
        stranger.close()


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory: pytest.TempPathFactory) -> dict[str, np.ndarray]:
    """The checkpoint of the short run on one process, uninterrupted."""
    return uninterrupted_run(tmp_path_factory, "processes-short", SHORT)


def _when(phase: str, out: Path, process: subprocess.Popen[str]) -> None:
    """Wait for ``phase`` of the command: "imports" (its handler of a SIGTERM at start-up set, ``_sigterm``: the
    first of its imports), "data" (its config.json written, the data being made), "step 0" (its step-0 checkpoint
    written)."""
    deadline = time.monotonic() + TIMEOUT
    while (
        (phase == "imports" and not _catches_sigterm(process.pid))
        or (phase == "data" and not (out / "config.json").exists())
        or (phase == "step 0" and _step(out) < 0)
    ):
        assert process.poll() is None, process.communicate()[1]
        assert time.monotonic() < deadline, f"the command never reached {phase!r} within {TIMEOUT} s"
        time.sleep(0.002)


def _catches_sigterm(pid: int) -> bool:
    """Whether process ``pid`` handles SIGTERM itself (Linux's /proc: the mask of the signals it catches): not a
    fixed wait from its start, after which a loaded machine's interpreter may not have reached the library's first
    import yet, and SIGTERM's default would end it with no word (status -15)."""
    with contextlib.suppress(OSError), open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("SigCgt:"):
                return bool(int(line.split()[1], 16) >> (signal.SIGTERM - 1) & 1)
    return False


@pytest.mark.slow
@pytest.mark.parametrize("phase", ["imports", "data", "step 0"])
def test_sigterm_from_the_first_instant_ends_with_75_saying_what_is_saved_and_what_it_says_ends_the_run(
    phase: str, tmp_path: Path, uninterrupted: dict[str, np.ndarray], running: list[subprocess.Popen[str]]
) -> None:
    """Where SIGTERM ended the process with 143 and no word, and left a directory that ``--resume`` refused as
    holding no run ("config.json is missing")."""
    out, cache = tmp_path / "run", tmp_path / "cache"
    running.append(_start(["--out", str(out), *SHORT], cache))
    _when(phase, out, running[0])
    os.kill(running[0].pid, signal.SIGTERM)
    began = time.monotonic()
    [(status, _, err)] = _finish(running)
    assert status == 75, err
    assert time.monotonic() - began < 30  # a grace period's (Slurm's, Kubernetes'): at the end of a compilation
    line = err.strip().splitlines()[-1]
    assert line.startswith("python -m funcformer.poisson train: stopped by SIGTERM")
    if "nothing saved yet: run the same command again" in line:
        again = ["--out", str(out), *SHORT]
    elif "after step" in line:  # a loaded machine: the signal came once the loop had begun, which says so
        assert line.endswith(f"checkpointed there in {out}: continue the run with --resume")
        again = ["--out", str(out), "--resume", "--quiet"]
    else:
        assert f"{out} holds the run's config.json" in line
        assert line.endswith(("--resume starts the same run", "--resume continues it"))
        again = ["--out", str(out), "--resume", "--quiet"]
    running[:] = [_start(again, cache)]
    [(status, _, err)] = _finish(running)
    assert status == 0, err
    _assert_bitwise_equal(_checkpoint(out), uninterrupted)


def _waiting(port: int) -> None:
    """Wait until a process is connected to process 0 at ``port`` (a TCP connection to it, established), and
    for it to have said who it is."""
    deadline = time.monotonic() + TIMEOUT
    while time.monotonic() < deadline:
        for table in ("/proc/net/tcp", "/proc/net/tcp6"):
            with contextlib.suppress(OSError), open(table) as rows:
                for row in list(rows)[1:]:
                    _, _, remote, state, *_ = row.split()
                    if state == "01" and int(remote.rpartition(":")[2], 16) == port:
                        time.sleep(1.0)
                        return
        time.sleep(0.05)
    pytest.fail("no process ever connected to process 0")


def _both_stopped(running: list[subprocess.Popen[str]], signalled: int, within: float) -> None:
    """Processes 0 and 1 of ``running`` end with 75 within ``within`` seconds of now, nothing saved: the one
    SIGTERM stopped saying so, the other told which (while the processes met)."""
    began = time.monotonic()
    results = _finish(running)
    assert [status for status, _, _ in results] == [75, 75], results
    assert time.monotonic() - began < within
    says = "stopped by SIGTERM: nothing saved yet: run the same command again"
    told = f"stopped: process {signalled} was stopped by SIGTERM while the processes met: {says.partition(': ')[2]}"
    assert results[signalled][2].strip().endswith(f"train: {says}")
    assert results[1 - signalled][2].strip().endswith(f"train: {told}")


@pytest.mark.slow
@pytest.mark.parametrize("signalled", [0, 1])
def test_sigterm_while_the_processes_meet_ends_every_process_that_came_with_75(
    signalled: int, tmp_path: Path, running: list[subprocess.Popen[str]]
) -> None:
    """Processes 0 and 1 of three wait for process 2 at the meeting; SIGTERM to either ends both with 75, nothing
    saved, where it ended the signalled one with 143 and left the other waiting until its timeout."""
    port, cache = free_port(), tmp_path / "cache"
    running.append(_start(["--out", str(tmp_path / "run"), *SHORT, *_several(port, 0, processes=3)], cache))
    _listening(port)
    running.append(_start(["--out", str(tmp_path / "run"), *SHORT, *_several(port, 1, processes=3)], cache))
    _waiting(port)
    os.kill(running[signalled].pid, signal.SIGTERM)
    _both_stopped(running, signalled, within=20)


@pytest.mark.processes
@pytest.mark.slow
@pytest.mark.parametrize("signalled", [0, 1])
def test_sigterm_while_one_process_imports_ends_both_with_75_and_the_same_commands_run(
    signalled: int, tmp_path: Path, running: list[subprocess.Popen[str]]
) -> None:
    """Processes 0 and 1 of two started together, SIGTERM to either while it imports its modules (``_sigterm``):
    both end with 75 within seconds, nothing saved, where the signalled one ended at once and the other waited
    for it its whole start-up timeout ("never came", "nothing listens"); the same commands then train."""
    port, cache = free_port(), tmp_path / "cache"
    commands = [["--out", str(tmp_path / "run"), *SHORT, *_several(port, i)] for i in (0, 1)]
    running += [_start(command, cache) for command in commands]
    _when("imports", tmp_path / "run", running[signalled])
    os.kill(running[signalled].pid, signal.SIGTERM)
    _both_stopped(running, signalled, within=15)
    assert not (tmp_path / "run").exists()
    running[:] = [_start(command, cache) for command in commands]
    assert [status for status, _, _ in _finish(running)] == [0, 0]


@pytest.mark.slow
def test_sigterm_before_process_0_answered_ends_both_with_75_at_once(
    tmp_path: Path, running: list[subprocess.Popen[str]]
) -> None:
    """Process 1 is stopped by SIGTERM while it waits for process 0's answer (process 0 held by SIGSTOP, as one
    busy starting is): process 0, going on, is told and ends with 75 naming it, where it waited its whole
    startup timeout and said process 1 never came."""
    port, cache = free_port(), tmp_path / "cache"
    running.append(_start(["--out", str(tmp_path / "run"), *SHORT, *_several(port, 0)], cache))
    _listening(port)
    os.kill(running[0].pid, signal.SIGSTOP)
    running.append(_start(["--out", str(tmp_path / "run"), *SHORT, *_several(port, 1)], cache))
    _waiting(port)  # process 1's connection, taken by the system's backlog, waits for process 0's greeting
    os.kill(running[1].pid, signal.SIGTERM)
    time.sleep(0.5)
    os.kill(running[0].pid, signal.SIGCONT)
    _both_stopped(running, 1, within=15)


@pytest.mark.processes
@pytest.mark.slow
@pytest.mark.parametrize("signalled", [0, 1])
def test_sigterm_while_jax_joins_the_processes_ends_both_with_one_advice_that_works(
    signalled: int, tmp_path: Path, on_two_devices: dict[str, np.ndarray], running: list[subprocess.Popen[str]]
) -> None:
    """SIGTERM to one process a second after the meeting, while ``jax.distributed`` joins them (whatever phase
    it lands in on a loaded machine): both end within 20 s with 75 and the same advice, and following it ends as
    the uninterrupted run. Process 0 signalled there said "stopped by SIGTERM" and did not exit, and both
    waited 300 s; process 1 signalled there was told to run the same command, process 0 to ``--resume``, which
    then failed. The run is FLAGS' 240 steps, not SHORT's 40, which a quiet machine once finished within that
    second (both exited 0)."""
    port, out, cache = free_port(), tmp_path / "run", tmp_path / "cache"
    running.append(_start(["--out", str(out), *FLAGS, *_several(port, 0)], cache))
    _listening(port)
    running.append(_start(["--out", str(out), *FLAGS, *_several(port, 1)], cache))
    _waiting(port)  # process 1 has said who it is, a second ago: the meeting ends, and JAX joins them
    os.kill(running[signalled].pid, signal.SIGTERM)
    began = time.monotonic()
    results = _finish(running)
    assert time.monotonic() - began < 20
    assert [status for status, _, _ in results] == [75, 75], results
    lines = [err.strip().splitlines()[-1] for _, _, err in results]
    advice = lines[signalled].rpartition(": ")[2]
    assert advice in ("run the same command again", "--resume continues it", "--resume starts the same run",
                      "continue the run with --resume"), lines  # fmt: skip
    assert all(line.endswith(advice) for line in lines), lines
    again = [*FLAGS] if advice == "run the same command again" else ["--resume", "--quiet"]
    port = free_port()
    running[:] = [_start(["--out", str(out), *again, *_several(port, i)], cache) for i in (0, 1)]
    assert [status for status, _, _ in _finish(running)] == [0, 0]
    _assert_bitwise_equal(_checkpoint(out), on_two_devices)


@pytest.fixture(scope="module")
def on_two_devices(tmp_path_factory: pytest.TempPathFactory) -> dict[str, np.ndarray]:
    """The checkpoint of FLAGS' run (240 steps) on one process with two devices, uninterrupted: what two
    processes of one device each make, bit for bit (test_processes.py's reference, the same run made once)."""
    return uninterrupted_run(tmp_path_factory, "processes-reference", FLAGS, devices=2)


def _training(tmp_path: Path, running: list[subprocess.Popen[str]]) -> None:
    """Processes 0 and 1 of a run into ``tmp_path / "run"``, started (into ``running``) and past their fourth step."""
    port, out, cache = free_port(), tmp_path / "run", tmp_path / "cache"
    running += [_start(["--out", str(out), *FLAGS, *_several(port, i)], cache) for i in (0, 1)]
    deadline = time.monotonic() + TIMEOUT
    while _step(out) < 4:
        assert running[0].poll() is None, running[0].communicate()[1]
        assert time.monotonic() < deadline
        time.sleep(0.01)


@pytest.mark.processes
@pytest.mark.slow
@pytest.mark.parametrize("killed", [1, 0])
def test_a_process_killed_is_named_by_the_other_which_ends_within_seconds(
    killed: int, tmp_path: Path, running: list[subprocess.Popen[str]]
) -> None:
    """SIGKILL to one process once the run has made a few steps: the other ends with status 1 within 10 s,
    naming it, where process 0 printed gloo's traceback and waited 76-95 s for JAX's heartbeat. (Process 0
    killed, JAX's runtime on process 1 loses its coordinator and ends it at once too, often before the lifeline
    can, saying that "the leader task" died.)"""
    _training(tmp_path, running)
    os.killpg(running[killed].pid, signal.SIGKILL)
    began = time.monotonic()
    status, _, err = _finish([running[1 - killed]])[0]
    assert time.monotonic() - began < 10
    named = (
        f"error: process {killed} (at 127.0.0.1) of the run is gone (killed, crashed, or its host lost): process "
        f"{1 - killed} stops too; continue the run from its last checkpoint with --resume"
    )
    if killed == 0 and named not in err:  # JAX's runtime, which loses its coordinator with process 0, came first:
        # it ends the process with a fatal log line, SIGABRT (-6) where the last gloo call was still in flight
        assert "Either the leader task was preempted/died/restarted unexpectedly" in err, err
        assert status in (1, -signal.SIGABRT), err
    else:
        assert status == 1, err
        assert any(line.endswith(f"train: {named}") for line in err.splitlines()), err  # a line of its own


@pytest.mark.processes
@pytest.mark.slow
@pytest.mark.parametrize("stopped", [1, 0])
def test_a_process_stopped_by_sigstop_is_named_by_the_other_before_jaxs_heartbeat(
    stopped: int, tmp_path: Path, running: list[subprocess.Popen[str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """SIGSTOP (Ctrl-Z) to one process mid-run: the other ends with status 1 once it has heard nothing from it for
    ``$APPLICATIVE_SILENT`` seconds (``lifeline.SILENT``, 20 s, by default), naming it, where JAX ended both at
    62.7 s with raw "stopped sending heartbeats" lines. 8 s here: the test's worker waits out the silence idle."""
    silent = 8  # (a run that ignored the variable would wait lifeline.SILENT, 20 s: past the bound below)
    monkeypatch.setenv(ENVIRONMENT["silent"], str(silent))
    _training(tmp_path, running)
    os.kill(running[stopped].pid, signal.SIGSTOP)
    began = time.monotonic()
    [(status, _, err)] = _finish([running[1 - stopped]])
    assert silent - 1 < time.monotonic() - began < silent + 10
    assert status == 1, err
    named = (
        f"train: error: process {stopped} (at 127.0.0.1) of the run has sent nothing for {silent} s (stopped, or "
        f"hung): process {1 - stopped} stops too; continue the run from its last checkpoint with --resume"
    )
    assert err.strip().splitlines()[-1].endswith(named), err


@pytest.mark.processes
@pytest.mark.slow
def test_a_stranger_registering_with_jaxs_coordinator_ends_the_run_named_and_resume_finishes_it(
    tmp_path: Path, running: list[subprocess.Popen[str]]
) -> None:
    """What the run's secret does not guard (docs/processes.md, "What it does not guard"): a program without it
    that registers with JAX's coordinator as process 1 once the run has met ends both processes within seconds,
    each with JAX's fatal line or with the project's line that the other is gone (whichever it reads first); JAX's
    line names the stranger (process 1 "tried to connect with a different incarnation") in one at least (another
    may read first that the coordinator's process ended); the last checkpoint stands, and ``--resume`` finishes the
    run."""
    port, out, cache = free_port(), tmp_path / "run", tmp_path / "cache"
    running += [_start(["--out", str(out), *FLAGS, *_several(port, i)], cache, secret=SECRET) for i in (0, 1)]
    deadline = time.monotonic() + TIMEOUT
    while _step(out) < 4:
        assert running[0].poll() is None, running[0].communicate()[1]
        assert time.monotonic() < deadline
        time.sleep(0.01)
    stranger = f"import jax; jax.distributed.initialize('127.0.0.1:{port}', 2, 1, initialization_timeout=20)"
    environment = {**os.environ, "JAX_PLATFORMS": "cpu"}
    running.append(subprocess.Popen([sys.executable, "-c", stranger], env=environment, stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, text=True, start_new_session=True))  # fmt: skip
    began = time.monotonic()
    ended = _finish(running[:2])
    assert time.monotonic() - began < 10
    fatal = "Terminating process because the JAX distributed service detected fatal errors"
    for i, (status, _, err) in enumerate(ended):
        assert status != 0
        # a process may see the other end (the project's watch) before JAX's runtime reads the coordinator's error
        gone = f"train: error: process {1 - i} (at 127.0.0.1) of the run is gone (killed, crashed, or its host lost)"
        assert fatal in err or gone in err, err
    # JAX's line names the stranger in a process that read the error before the coordinator's process ended (in CI
    # once, process 1 read only that the coordinator was gone)
    named = ["1 unexpectedly tried to connect with a different incarnation" in err for _, _, err in ended]
    assert any(named), ended  # ("task:1" in JAX 0.9)
    assert 4 <= _step(out) < STEPS
    [(status, _, err)] = _finish([_start(["--out", str(out), "--resume", "--quiet"], cache)])
    assert status == 0, err
    assert _step(out) == STEPS


@contextlib.contextmanager
def _second_host() -> Iterator[tuple[str, str, list[str]]]:
    """Host B: a network namespace of its own, joined to this one by a virtual cable (a veth pair): this end
    ``A``, the other ``B``, and the command that runs a program on host B. Its end of the cable (on this host) is
    ``ap<pid>a``; ``ip link set ap<pid>a down`` loses host B without a word (no FIN, no RST: what is sent vanishes,
    as when a host loses its power or its cable). Skipped where this user may not make namespaces (root's)."""
    pid = os.getpid()
    name, here, there = f"applicative-{pid}", f"ap{pid}a", f"ap{pid}b"
    a, b = f"10.{200 + pid % 50}.{pid // 50 % 250}.1", f"10.{200 + pid % 50}.{pid // 50 % 250}.2"
    commands = [
        ["ip", "netns", "add", name],
        ["ip", "link", "add", here, "type", "veth", "peer", "name", there],
        ["ip", "link", "set", there, "netns", name],
        ["ip", "addr", "add", f"{a}/24", "dev", here],
        ["ip", "link", "set", here, "up"],
        ["ip", "netns", "exec", name, "ip", "addr", "add", f"{b}/24", "dev", there],
        ["ip", "netns", "exec", name, "ip", "link", "set", there, "up"],
        ["ip", "netns", "exec", name, "ip", "link", "set", "lo", "up"],
    ]
    try:
        for command in commands:
            made = subprocess.run(command, capture_output=True, text=True, check=False)
            if made.returncode != 0:
                pytest.skip(f"no second host here: {' '.join(command)}: {made.stderr.strip()}")
        yield a, b, ["ip", "netns", "exec", name]
    finally:
        subprocess.run(["ip", "link", "del", here], capture_output=True, check=False)
        subprocess.run(["ip", "netns", "del", name], capture_output=True, check=False)


@pytest.mark.processes
@pytest.mark.slow
def test_a_lost_host_is_named_by_both_within_seconds_and_resume_finishes_the_run(
    tmp_path: Path, running: list[subprocess.Popen[str]]
) -> None:
    """Two hosts (process 1 on host B, ``_second_host``; process 0 here at A), the cable to B cut mid-run: each
    process names the other, gone, and ends with status 1 within 10 s (JAX's heartbeat took 60-100 s, and TCP
    alone retransmits for 15 minutes); ``--resume`` on host A alone finishes the run. The processes reach each
    other at A and B only: the run's collectives (gloo) listen where the processes met, not where this host's
    name resolves (here 127.0.0.1, as on many hosts: host B would connect to itself)."""
    out, cache = tmp_path / "run", tmp_path / "cache"
    with _second_host() as (a, b, on_b):
        port = free_port()
        several = ["--processes", "2", "--startup-timeout", "60", "--coordinator", f"{a}:{port}"]
        for i, on in ((0, []), (1, on_b)):
            arguments = ["--out", str(out if i == 0 else tmp_path / "never"), *FLAGS, *several, "--process-id", str(i)]
            running.append(_start(arguments, cache, secret=SECRET, on=on))
        deadline = time.monotonic() + TIMEOUT
        while _step(out) < 4:
            assert running[0].poll() is None, running[0].communicate()[1]
            assert time.monotonic() < deadline
            time.sleep(0.01)
        subprocess.run(["ip", "link", "set", f"ap{os.getpid()}a", "down"], check=True)
        began = time.monotonic()
        ended = _finish(running)
        assert time.monotonic() - began < 10
    for i, (status, _, err) in enumerate(ended):
        named = (
            f"train: error: process {1 - i} (at {(b, a)[i]}) of the run is gone (killed, crashed, or its host lost): "
            f"process {i} stops too; continue the run from its last checkpoint with --resume"
        )
        assert status == 1, err
        assert err.strip().splitlines()[-1].endswith(named), err
    saved = _step(out)
    assert 4 <= saved < STEPS
    [(status, _, err)] = _finish([_start(["--out", str(out), "--resume", "--quiet"], cache)])
    assert status == 0, err
    assert _step(out) == STEPS
    assert not (tmp_path / "never").exists()


@pytest.mark.processes
@pytest.mark.slow
def test_an_id_0_given_twice_is_named_at_once_and_the_run_of_the_first_goes_on(
    tmp_path: Path, running: list[subprocess.Popen[str]]
) -> None:
    """The second process 0 says so, in its own words, where it said the port was in use; the first is not ended
    by it, and trains with process 1."""
    port, cache = free_port(), tmp_path / "cache"
    running.append(_start(["--out", str(tmp_path / "run"), *SHORT, *_several(port, 0)], cache))
    _listening(port)
    [(status, _, err)] = _finish([_start(["--out", str(tmp_path / "second"), *SHORT, *_several(port, 0)], cache)])
    assert status == 1
    assert err.strip().endswith(
        f"train: error: two processes were given id 0: one listens at 127.0.0.1:{port} already, and this one: give "
        "each process its own --process-id"
    )
    running.append(_start(["--out", str(tmp_path / "other"), *SHORT, *_several(port, 1)], cache))
    (status0, _, err0), (status1, _, err1) = _finish(running)
    assert (status0, status1) == (0, 0), err0 + err1
    assert "dropped a connection from 127.0.0.1: a second process 0 (id 0 given twice?), refused" in err0
    assert not (tmp_path / "second").exists()
