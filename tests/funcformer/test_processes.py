"""A run on two processes, as it will be used: ``python -m funcformer.poisson train`` started twice on this
machine, joined by ``jax.distributed`` (127.0.0.1, CPU collectives over gloo), one CPU device each.

The reference is the same run in one process with two devices (``--xla_force_host_platform_device_count=2``),
whose checkpoint the two processes must reproduce bit for bit: weights, optimiser state and losses. Every
process is started in its own session and killed by its own id if it outlives its time, so no test can
leave one behind or wait on a collective for ever. The runs are marked slow (about a minute on two cores):
CI runs them. The functions of ``processes`` are also checked in one process, where they change nothing.
"""

import contextlib
import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np
import pytest

from applicative.training import processes
from funcformer.learning import RunConfig
from funcformer.poisson import PROBLEM
from tests import once
from tests.compiling import xla_flags
from tests.funcformer.test_rendezvous import free_port

# ``processes`` marks the tests whose processes reach JAX's distributed runtime (pyproject.toml says the rule)

ROOT = Path(__file__).parents[2]
STEPS = 240
FLAGS = [
    *("--steps", str(STEPS), "--batch", "4", "--train-size", "16", "--warmup", "0", "--checkpoint-every", "2"),
    *("--channels", "2", "--heads", "1", "--head-channels", "1", "--hidden-channels", "2", "--layers", "1"),
    *("--quiet", "--test-size", "8"),
]
TIMEOUT = 180.0
"""Seconds a process may take before the test kills it (a run here takes about 10)."""


def _start(
    arguments: Sequence[str], cache: Path, devices: int = 1, secret: str | None = None, on: Sequence[str] = ()
) -> subprocess.Popen[str]:
    """``funcformer.poisson train ARGUMENTS`` in a session of its own, run by the command ``on`` (another host's
    network: ``ip netns exec NAME``) where given."""
    env = {
        **os.environ,
        "JAX_PLATFORMS": "cpu",
        "XLA_FLAGS": xla_flags(f"--xla_force_host_platform_device_count={devices}"),
        "FUNCFORMER_CACHE": str(cache),
        **({} if secret is None else {processes.ENVIRONMENT["secret"]: secret}),
    }
    return subprocess.Popen(
        [*on, sys.executable, "-m", "funcformer.poisson", "train", *arguments],
        env=env,
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


def _two(
    arguments: Sequence[Sequence[str]], caches: Sequence[Path], ids: Sequence[int] = (0, 1), port: int | None = None
) -> list[subprocess.Popen[str]]:
    """Processes ``ids`` (0 and 1) of a run of two, each with its own further ``arguments`` and dataset cache."""
    port = port or free_port()
    return [
        _start([*a, "--coordinator", f"127.0.0.1:{port}", "--processes", "2", "--process-id", str(i)], cache)
        for i, a, cache in zip(ids, arguments, caches, strict=True)
    ]


def _kill(process: subprocess.Popen[str]) -> None:
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGKILL)
    process.communicate()


def _finish(processes: Sequence[subprocess.Popen[str]]) -> list[tuple[int, str, str]]:
    """Each process's (exit status, stdout, stderr); one still running after ``TIMEOUT`` is killed."""
    deadline, results = time.monotonic() + TIMEOUT, []
    for process in processes:
        try:
            out, err = process.communicate(timeout=max(deadline - time.monotonic(), 1.0))
        except subprocess.TimeoutExpired:
            for p in processes:
                _kill(p)
            pytest.fail(f"a process of the run was still running after {TIMEOUT:.0f} s: killed")
        results.append((process.returncode, out, err))
    return results


@pytest.fixture
def started() -> Iterator[list[subprocess.Popen[str]]]:
    """The processes a test starts: any left running at its end is killed by its own id."""
    running: list[subprocess.Popen[str]] = []
    yield running
    for process in running:
        _kill(process)


def _checkpoint(directory: Path) -> dict[str, np.ndarray]:
    """A run's checkpoint without its training time (the one field that differs between equal runs)."""
    with np.load(directory / "checkpoint.npz", allow_pickle=False) as stored:
        return {name: stored[name] for name in stored.files if name != "seconds"}


def _step(directory: Path) -> int:
    try:
        return int(_checkpoint(directory)["step"])
    except (OSError, ValueError, KeyError):  # not written yet (each checkpoint appears whole: os.replace)
        return -1


def _assert_bitwise_equal(a: dict[str, np.ndarray], b: dict[str, np.ndarray]) -> None:
    assert sorted(a) == sorted(b)
    differ = [name for name in a if not np.array_equal(a[name], b[name])]
    assert not differ, f"arrays differ: {differ}"


def uninterrupted_run(
    tmp_path_factory: pytest.TempPathFactory, name: str, arguments: Sequence[str], devices: int = 1
) -> dict[str, np.ndarray]:
    """The checkpoint of ``funcformer.poisson train ARGUMENTS`` on one process of ``devices`` devices,
    uninterrupted: run once a test run under ``name`` (``tests/once.py``: the xdist workers and both of this
    directory's process test files share it), read by each."""

    def run(root: Path) -> None:
        [(status, _, err)] = _finish([_start(["--out", str(root / "run"), *arguments], root / "cache", devices)])
        assert status == 0, err

    return _checkpoint(once.directory(tmp_path_factory, name, run) / "run")


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> dict[str, np.ndarray]:
    """The checkpoint of the run in one process with two devices, uninterrupted."""
    return uninterrupted_run(tmp_path_factory, "processes-reference", FLAGS, devices=2)


@pytest.mark.processes
@pytest.mark.slow
def test_two_processes_sharing_a_run_directory_train_as_one_process_with_two_devices(
    tmp_path: Path, reference: dict[str, np.ndarray], started: list[subprocess.Popen[str]]
) -> None:
    out = tmp_path / "shared"  # both processes are given the same --out, as on a shared file system
    started += _two([["--out", str(out), *FLAGS]] * 2, [tmp_path / "cache0", tmp_path / "cache1"])
    (status0, report, err0), (status1, silent, err1) = _finish(started)
    assert (status0, status1) == (0, 0), err0 + err1
    _assert_bitwise_equal(_checkpoint(out), reference)
    assert len(reference["losses"]) == STEPS
    assert "test relative L2 error (8 held-out samples)" in report  # the owner evaluates and reports
    assert "test relative" not in silent  # the other only trains (gloo may print its connection)
    written = [".lock", "checkpoint.npz", "config.json", "history.csv", "metrics.json", "tensorboard"]
    assert sorted(path.name for path in out.iterdir()) == written  # by process 0 alone


@pytest.mark.processes
@pytest.mark.slow
def test_a_run_whose_processes_are_killed_resumes_to_the_uninterrupted_run_bit_for_bit(
    tmp_path: Path, reference: dict[str, np.ndarray], started: list[subprocess.Popen[str]]
) -> None:
    owner, other = tmp_path / "owner", tmp_path / "other"  # each process its own --out: the other never writes
    caches = [tmp_path / "cache0", tmp_path / "cache1"]

    def kill_midway(which: int, arguments: Sequence[Sequence[str]]) -> int:
        """Start the two processes, kill process ``which`` once a checkpoint two steps on is written, then
        the survivor (waiting on a collective that will never complete); the step the run is left at."""
        start = max(_step(owner), 0)
        started[:] = _two(arguments, caches)
        while _step(owner) < start + 4:
            assert started[0].poll() is None, started[0].communicate()[1]
            time.sleep(0.01)
        for process in (started[which], started[1 - which]):
            _kill(process)
        left = _step(owner)
        assert start < left < STEPS, "the run ended before it could be killed: raise STEPS"
        return left

    first = kill_midway(1, [["--out", str(owner), *FLAGS], ["--out", str(other), *FLAGS]])
    assert not other.exists()
    second = kill_midway(0, [["--out", str(d), "--resume", "--quiet"] for d in (owner, other)])
    assert first < second
    # and the rest on one process with two devices: a run resumes on any number of processes
    [(status, _, err)] = _finish([_start(["--out", str(owner), "--resume", "--quiet"], caches[0], devices=2)])
    assert status == 0, err
    _assert_bitwise_equal(_checkpoint(owner), reference)


@pytest.mark.processes
@pytest.mark.slow
def test_processes_whose_training_data_differ_are_refused_by_number(
    tmp_path: Path, started: list[subprocess.Popen[str]]
) -> None:
    # process 1's dataset cache holds the training set with its inputs scaled by 1.5: a stale or foreign
    # cache, or another version of the data's code, as a silent difference between hosts would be
    caches = [tmp_path / "cache0", tmp_path / "cache1"]
    PROBLEM.dataset(caches[1], RunConfig.of(PROBLEM).data_config, 0, 16, False)  # the training set of seed 0
    [training] = caches[1].glob("poisson_*_seed0_truncated.npz")
    with np.load(training) as stored:
        arrays = {name: stored[name] for name in stored.files}
    np.savez(training, **{**arrays, "inputs": 1.5 * arrays["inputs"]})
    out = tmp_path / "run"
    started += _two([["--out", str(out), *FLAGS]] * 2, caches)
    results = _finish(started)
    assert [status for status, _, _ in results] == [1, 1]
    for _, _, err in results:
        assert "the 2 processes hold different training data: process 1 differs from process 0" in err
    assert sorted(path.name for path in out.iterdir()) == [".lock"]  # refused before anything is written


@pytest.mark.processes
@pytest.mark.slow
def test_an_error_of_the_owner_reaches_every_process_at_once(
    tmp_path: Path, started: list[subprocess.Popen[str]]
) -> None:
    missing = tmp_path / "missing"  # --resume of a run that does not exist: the owner finds out, and says so
    started += _two([["--out", str(missing), "--resume", "--quiet"]] * 2, [tmp_path / "cache"] * 2)
    (status0, _, err0), (status1, _, err1) = _finish(started)
    assert (status0, status1) == (1, 1)
    assert f"error: no trained run at {missing}: no such directory" in err0
    assert f"error: process 0: no trained run at {missing}: no such directory" in err1


@pytest.mark.slow
@pytest.mark.parametrize("resumed", [0, 1])
def test_processes_asked_to_start_differently_are_refused_at_once_by_number(
    resumed: int, tmp_path: Path, started: list[subprocess.Popen[str]]
) -> None:
    """One process resumes the run, the other starts a new one (each order): both refused, naming both, before
    JAX joins them, where both waited on mismatched collectives until killed."""
    run, fresh = ["--out", str(tmp_path / "run"), "--resume", "--quiet"], ["--out", str(tmp_path / "new"), *FLAGS]
    began = time.monotonic()
    started += _two([run, fresh] if resumed == 0 else [fresh, run], [tmp_path / "cache"] * 2)
    results = _finish(started)
    assert [status for status, _, _ in results] == [1, 1]
    says = {0: "resumes the run (--resume)", 1: "starts a new run"}
    refusal = f"process 1 {says[1 - resumed]}, and process 0 {says[resumed]}: give every process the same command"
    assert f"error: {refusal}" in results[0][2]
    assert f"error: process 0: {refusal}" in results[1][2]
    assert time.monotonic() - began < 60
    assert not (tmp_path / "new").exists()


@pytest.mark.processes
@pytest.mark.slow
@pytest.mark.parametrize("signalled", [0, 1])
def test_sigterm_to_either_process_stops_both_after_one_step_and_the_run_resumes_bit_for_bit(
    signalled: int, tmp_path: Path, reference: dict[str, np.ndarray], started: list[subprocess.Popen[str]]
) -> None:
    """SIGTERM (a preemption) to one process once the run has made a few steps: both exit with status 75
    after the same step, which process 0 checkpoints; ``--resume`` on both ends as the uninterrupted run."""
    out, caches = tmp_path / "run", [tmp_path / "cache0", tmp_path / "cache1"]
    started += _two([["--out", str(out), *FLAGS]] * 2, caches)
    deadline = time.monotonic() + TIMEOUT
    while _step(out) < 0:  # the step-0 checkpoint: the run has started
        assert started[0].poll() is None, started[0].communicate()[1]
        assert time.monotonic() < deadline
        time.sleep(0.01)
    time.sleep(1.0)
    os.kill(started[signalled].pid, signal.SIGTERM)
    results = _finish(started)
    stopped = _step(out)
    assert 0 < stopped < STEPS, "the run ended before it could be stopped: raise STEPS"
    assert [status for status, _, _ in results] == [75, 75]
    assert f"stopped by SIGTERM after step {stopped}, checkpointed there in {out}: continue" in results[0][2]
    assert f"stopped by SIGTERM after step {stopped}, checkpointed there by process 0: continue" in results[1][2]
    started[:] = _two([["--out", str(out), "--resume", "--quiet"]] * 2, caches)
    assert [status for status, _, _ in _finish(started)] == [0, 0]
    _assert_bitwise_equal(_checkpoint(out), reference)


@pytest.mark.processes
@pytest.mark.slow
@pytest.mark.usefixtures("python_sigint")
@pytest.mark.parametrize("interrupted", [0, 1])
def test_ctrl_c_to_either_process_ends_both_within_seconds_and_the_run_resumes_bit_for_bit(
    interrupted: int, tmp_path: Path, reference: dict[str, np.ndarray], started: list[subprocess.Popen[str]]
) -> None:
    """SIGINT (Ctrl-C) to one process once the run has made a few steps: it ends at once with 130, saying what is
    saved; the other within 10 s with 75, naming it and saying the same, where both waited 300 s for JAX's
    shutdown barrier and exited 1 with its raw lines. What they say, ``--resume``, ends as the uninterrupted run."""
    out, caches = tmp_path / "run", [tmp_path / "cache0", tmp_path / "cache1"]
    started += _two([["--out", str(out), *FLAGS]] * 2, caches)  # (with Python's SIGINT: python_sigint)
    deadline = time.monotonic() + TIMEOUT
    while _step(out) < 4:
        assert started[0].poll() is None, started[0].communicate()[1]
        assert time.monotonic() < deadline
        time.sleep(0.01)
    assert not _ignores_sigint(started[interrupted].pid)
    os.kill(started[interrupted].pid, signal.SIGINT)
    began = time.monotonic()
    results = _finish(started)
    assert time.monotonic() - began < 10
    assert [status for status, _, _ in results] == [130 if i == interrupted else 75 for i in (0, 1)], results
    assert all("warning: no $APPLICATIVE_RUN_SECRET: any program of this host may join" in err for _, _, err in results)
    stopped = _step(out)
    assert 0 < stopped < STEPS, "the run ended before it could be interrupted: raise STEPS"
    saved = (f"{out} holds the run's checkpoint at step {stopped} of {STEPS}: --resume continues it" if interrupted == 0
             else "process 0 holds the run's last checkpoint: --resume continues it")  # fmt: skip
    last = [err.strip().splitlines()[-1] for _, _, err in results]
    assert last[interrupted].endswith(f"train: stopped by SIGINT (Ctrl-C): {saved}")
    other = 1 - interrupted
    assert last[other].endswith(f"train: stopped: process {interrupted} was stopped by SIGINT (Ctrl-C): process "
                                f"{other} stops too: {saved}")  # fmt: skip
    started[:] = _two([["--out", str(out), "--resume", "--quiet"]] * 2, caches)
    assert [status for status, _, _ in _finish(started)] == [0, 0]
    _assert_bitwise_equal(_checkpoint(out), reference)


def _ignores_sigint(pid: int) -> bool:
    """Whether process ``pid`` ignores SIGINT (its SigIgn mask, Linux's /proc; False where there is none)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    ignored = next((line.split()[1] for line in status.splitlines() if line.startswith("SigIgn:")), "0")
    return bool(int(ignored, 16) & (1 << (signal.SIGINT - 1)))


@pytest.mark.processes
@pytest.mark.slow
def test_an_error_of_one_process_alone_ends_the_other_within_seconds_naming_it(
    tmp_path: Path, started: list[subprocess.Popen[str]]
) -> None:
    """Process 1 cannot make its dataset (its cache a file) while process 0 can: process 1 ends with its error,
    and process 0, waiting for it at a collective, within 10 s with status 1 and one line naming it, where it
    printed gloo's error and waited 300 s for JAX's shutdown barrier."""
    (tmp_path / "not a folder").write_text("")
    started += _two([["--out", str(tmp_path / "run"), *FLAGS]] * 2, [tmp_path / "cache", tmp_path / "not a folder"])
    [(status1, _, err1)] = _finish([started[1]])
    began = time.monotonic()
    [(status0, _, err0)] = _finish([started[0]])
    assert time.monotonic() - began < 10
    assert status1 == 1, err1
    assert status0 == 1, err0
    line = err0.strip().splitlines()[-1]  # one line, no gloo traceback
    assert f"train: error: process 1 ended with an error: [Errno 17] File exists: '{tmp_path / 'not a folder'}'" in line
    assert line.endswith("process 0 stops too: process 0 holds the run's config.json and no checkpoint yet: "
                         "--resume starts the same run"), err0  # fmt: skip
    assert "Traceback" not in err0, err0


@pytest.mark.slow
@pytest.mark.parametrize("case", ["port in use", "a process missing", "an id out of range", "an id given twice"])
def test_a_start_that_cannot_complete_ends_in_time_naming_what_is_wrong(
    case: str, tmp_path: Path, started: list[subprocess.Popen[str]]
) -> None:
    """Each way a start fails, with ``--startup-timeout 3``: every process ends with status 1 within the
    timeout (and its start-up), with an error that names the cause and the processes, where before each one
    waited about 305 s (or segfaulted) and ended in JAX's raw error."""
    port, arguments = free_port(), ["--out", str(tmp_path / "run"), *FLAGS, "--startup-timeout", "3"]
    ids, expected = {
        "port in use": ([0, 1], ["process 0 cannot listen on 127.0.0.1:{port} for the run's coordinator: Address "
                                 "already in use", "process 1: process 0 was not reached at 127.0.0.1:{port} within "
                                 "3 s: something listens there, but not a run's process 0"]),
        "a process missing": ([0], ["process 1 never came within 3 s"]),
        "an id out of range": ([0, 2], ["process 1 never came within 3 s",
                                        "the process id must be in 0..1 for 2 processes, got 2"]),
        "an id given twice": ([0, 1, 1], ["two processes were given id 1: one at 127.0.0.1 and one at 127.0.0.1"] * 3),
    }[case]  # fmt: skip
    with contextlib.ExitStack() as stack:
        if case == "port in use":
            stack.enter_context(socket.create_server(("127.0.0.1", port)))  # another program, listening
        began = time.monotonic()
        count = "3" if case == "an id given twice" else "2"
        several = ["--coordinator", f"127.0.0.1:{port}", "--processes", count, "--process-id"]
        started += [_start([*arguments, *several, str(i)], tmp_path / "cache") for i in ids]
        results = _finish(started)
    assert [status for status, _, _ in results] == [1] * len(ids)
    for (_, _, err), message in zip(results, expected, strict=False):
        assert message.format(port=port) in err
    for _, _, err in results[1:]:  # the others heard process 0's reason, or say why they could not
        assert "error: process" in err or "process id" in err
    assert time.monotonic() - began < 30
    assert "Segmentation" not in "".join(err for _, _, err in results)


@pytest.mark.processes
@pytest.mark.slow
def test_an_id_given_twice_after_the_run_met_is_named_at_once_and_the_run_goes_on(
    tmp_path: Path, started: list[subprocess.Popen[str]]
) -> None:
    """A run of two has met (JAX's coordinator holds the port) when a third process comes, given id 1 as well: it
    ends with status 1 within seconds, naming its id given twice, where it waited 60 s and then blamed "something
    that listens"; the run it found trains on (a run too long to end first, killed at the test's end)."""
    out, caches, port = tmp_path / "run", [tmp_path / "cache0", tmp_path / "cache1"], free_port()
    started += _two([["--out", str(out), *FLAGS, "--steps", "100000"]] * 2, caches, port=port)
    deadline = time.monotonic() + TIMEOUT
    while _step(out) < 2:
        assert started[0].poll() is None, started[0].communicate()[1]
        assert time.monotonic() < deadline
        time.sleep(0.05)
    several = ["--coordinator", f"127.0.0.1:{port}", "--processes", "2", "--process-id", "1"]
    late = _start(["--out", str(tmp_path / "late"), *FLAGS, *several], tmp_path / "cache2")
    started.append(late)
    began = time.monotonic()
    (status, _, err), *_ = _finish([late])
    assert time.monotonic() - began < 15  # its start-up included
    assert status == 1, err
    assert (f"process 1: JAX's coordinator listens at 127.0.0.1:{port}: the run's processes met without this one, "
            "and started (was id 1 given to two processes? give each its own --process-id)") in err, err  # fmt: skip
    then = _step(out)
    while _step(out) < then + 4:
        assert all(process.poll() is None for process in started[:2]), _finish(started[:2])
        assert time.monotonic() < deadline
        time.sleep(0.05)


# In one process


def test_one_process_initializes_nothing_and_its_functions_are_the_identity(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in processes.ENVIRONMENT.values():
        monkeypatch.delenv(name, raising=False)
    assert processes.initialize() is False
    assert processes.is_owner()
    assert processes.from_owner(lambda: b"config") == b"config"

    def missing() -> bytes:
        raise FileNotFoundError("no run")

    with pytest.raises(FileNotFoundError, match=r"^no run$"):  # raised as it is: no "process 0: " prefix
        processes.from_owner(missing)
    processes.agree("training data", np.zeros(3), "text", advice="never refused: one process agrees with itself")


@pytest.mark.parametrize(
    ("arguments", "bind"),
    [(("10.0.0.1:1234", 2, 1), None), (("10.0.0.1:1234", 2, 0), None), (("127.0.0.1:1234", 2, 0), "[::]:1234")],
    ids=["process 1 of another host", "process 0 on its network address", "process 0 on every interface"],
)
def test_a_run_without_a_secret_open_beyond_this_host_is_refused_saying_how_to_give_one(
    arguments: tuple[str, int, int], bind: str | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Closed by default: where a run without $APPLICATIVE_RUN_SECRET listened, or was reached, on a network any
    program could join it or end it. Refused before anything listens or connects."""
    for name in processes.ENVIRONMENT.values():
        monkeypatch.delenv(name, raising=False)
    address = bind or arguments[0]
    with pytest.raises(ValueError, match=rf"a run of several processes at {re.escape(address)} needs a secret, .*"
                                         r"export APPLICATIVE_RUN_SECRET=\$\(openssl rand -hex 16\)"):  # fmt: skip
        processes.initialize(*arguments, bind=bind, timeout=0.5)


@pytest.mark.parametrize(
    ("arguments", "environment", "message"),
    [
        ((None, 2, 2), {}, r"the process id must be in 0\.\.1 for 2 processes, got 2"),
        ((None, 0, None), {}, "the number of processes must be positive, got 0"),
        ((None, None, None), {"JAX_NUM_PROCESSES": "two"}, r"\$JAX_NUM_PROCESSES must be an integer, got 'two'"),
        ((None, None, None), {"JAX_NUM_PROCESSES": "2", "JAX_PROCESS_ID": "-1"}, "must be in 0..1 .* got -1"),
        ((None, 2, 0), {"APPLICATIVE_SILENT": "soon"}, r"\$APPLICATIVE_SILENT must be a number of seconds, got 'soon'"),
        ((None, 2, 0), {"APPLICATIVE_SILENT": "1"}, r"silence must be longer than its beats' interval, 1 s, got 1 s"),
    ],
)
def test_bad_process_settings_are_refused_by_name_before_jax_is_joined(
    arguments: tuple[str | None, int | None, int | None],
    environment: dict[str, str],
    message: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name in processes.ENVIRONMENT.values():
        monkeypatch.delenv(name, raising=False)
    for name, value in environment.items():
        monkeypatch.setenv(name, value)
    with pytest.raises(ValueError, match=message):
        processes.initialize(*arguments)
