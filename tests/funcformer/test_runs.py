"""Run directories and caches under bad input and concurrent use: one process holds a run at a time,
a run that fails before its first step leaves nothing behind, killed writers' temporaries are cleaned,
bad configs and checkpoints are refused by name, and the dataset cache is bounded and can be cleared."""

import dataclasses
import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import filelock
import jax.numpy as jnp
import numpy as np
import pytest

from applicative.training import TrainingDiverged
from applicative.training import loop as training_loop
from applicative.training import steps as training_steps
from applicative.training.checkpoints import State, save
from applicative.training.files import CHECKPOINT, CONFIG, LOCK, RunInUse
from applicative.training.loop import _killed_after
from funcformer.darcy import PROBLEM as DARCY
from funcformer.learning import RunConfig, load, load_solver, loop, read_run, steps, train
from funcformer.learning.cli import main as cli_main
from funcformer.model import ModelConfig, init
from funcformer.poisson import PROBLEM

TINY = ModelConfig(channels=2, heads=1, head_channels=1, hidden_channels=2, layers=1)
RUN = RunConfig.of(PROBLEM, model=TINY, steps=4, batch=4, train_size=16, checkpoint_every=2, warmup=0)
TINY_FLAGS = ["--channels", "2", "--heads", "1", "--head-channels", "1", "--hidden-channels", "2", "--layers", "1"]
SMALL_FLAGS = ["--batch", "4", "--train-size", "16", "--warmup", "0", "--quiet", "--test-size", "8"]


def main(argv: list[str]) -> int:
    return cli_main(PROBLEM, argv)


@pytest.fixture(autouse=True)
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    directory = tmp_path / "cache"
    monkeypatch.setenv("FUNCFORMER_CACHE", str(directory))
    return directory


@pytest.fixture
def holder(tmp_path: Path) -> Iterator[subprocess.Popen[str]]:
    """Another process, holding the lock of the run directory ``held`` for ten minutes."""
    out = tmp_path / "run"
    out.mkdir()
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            f"import filelock, time; lock = filelock.FileLock({str(out / LOCK)!r}); lock.acquire(); "
            "print('held', flush=True); time.sleep(600)",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdout is not None
    assert holder.stdout.readline().strip() == "held"
    yield holder
    holder.kill()
    holder.wait()


@pytest.fixture
def held(tmp_path: Path, holder: subprocess.Popen[str]) -> Path:
    """A run directory whose lock another process holds."""
    return tmp_path / "run"


# One process at a time


def test_a_run_in_another_processs_use_is_refused_at_once(
    held: Path, holder: subprocess.Popen[str], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Refused without waiting for the lock: every attempt to take it makes one try (no blocking, a zero
    timeout), and the refusals all come while the other process still holds it (it holds it for ten
    minutes)."""
    attempts: list[bool] = []  # whether each attempt to take a lock could wait
    acquire = filelock.BaseFileLock.acquire

    def recorded(lock: filelock.BaseFileLock, timeout: float | None = None, **options: Any) -> Any:
        blocking = options.get("blocking", lock.blocking)
        attempts.append(blocking is not False and (lock.timeout if timeout is None else timeout) != 0)
        return acquire(lock, timeout, **options)

    monkeypatch.setattr(filelock.BaseFileLock, "acquire", recorded)
    with pytest.raises(RunInUse, match=re.escape(f"{held} is in use by another process")):
        train(RUN, held, progress=False)
    for command in (["train", "--out", str(held), *TINY_FLAGS], ["train", "--out", str(held), "--resume"],
                    ["evaluate", str(held)], ["plot", str(held)]):  # fmt: skip
        assert main(command) == 1
        assert "is in use by another process" in capsys.readouterr().err
    assert attempts == [False] * 5  # one attempt per refusal, none that could wait
    assert holder.poll() is None, "the holder still holds the lock: the refusals did not wait for it"
    assert sorted(path.name for path in held.iterdir()) == [LOCK]  # nothing written


@pytest.mark.end_to_end
def test_two_training_processes_never_share_a_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "run"
    first = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "funcformer.poisson",
            "train",
            "--out",
            str(out),
            "--steps",
            "100000",
            "--checkpoint-every",
            "1",
            *TINY_FLAGS,
            *SMALL_FLAGS,
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 120
        while not (out / CHECKPOINT).exists():  # the first process is training
            assert first.poll() is None, first.communicate()[1]
            assert time.monotonic() < deadline
            time.sleep(0.2)
        assert main(["train", "--out", str(out), "--resume", "--quiet"]) == 1
        assert "is in use by another process" in capsys.readouterr().err
        assert main(["train", "--out", str(out), "--channels", "4", "--quiet"]) == 1
        assert "is in use by another process" in capsys.readouterr().err
    finally:
        first.send_signal(signal.SIGKILL)
        first.wait()
    # A killed process holds nothing: its run resumes here, from its last checkpoint.
    run = read_run(out, PROBLEM)
    saved = load(out, run).step
    with _killed_after(1):
        resumed = train(run, out, resume=True, progress=False)
    assert resumed.step == saved + 1


# A run that fails before its first step leaves nothing


@pytest.mark.filterwarnings("ignore:overflow encountered in cast:RuntimeWarning")  # 1e300 in float32
def test_a_run_that_diverges_at_its_first_step_leaves_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "run"
    flags = ["--steps", "4", *TINY_FLAGS, *SMALL_FLAGS]
    assert main(["train", "--out", str(out), "--learning-rate", "1e300", "--clip", "1e300", *flags]) == 1
    assert "at the first step; stopped, nothing kept" in capsys.readouterr().err
    assert not (out / CONFIG).exists()
    assert not (out / CHECKPOINT).exists()
    assert main(["train", "--out", str(out), *flags]) == 0  # the rerun is not refused


@pytest.mark.parametrize(
    ("flag", "value", "message"),
    [
        ("--learning-rate", "inf", "RunConfig.learning_rate must be a finite number, got inf"),
        ("--learning-rate", "nan", "must be positive, got nan"),
        ("--clip", "inf", "RunConfig.clip must be a finite number, got inf"),
        ("--seed", "99999999999999999999", "RunConfig.seed must be at most 2**63 - 1"),
    ],
)
def test_a_bad_flag_is_refused_before_anything_is_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], flag: str, value: str, message: str
) -> None:
    out = tmp_path / "run"
    try:
        status = main(["train", "--out", str(out), flag, value, *TINY_FLAGS, *SMALL_FLAGS])
    except SystemExit as exit_:  # argparse's own refusal
        status = int(str(exit_.code))
    assert status != 0
    assert message in capsys.readouterr().err
    assert not out.exists() or not any(out.iterdir())


def test_an_interrupted_first_step_leaves_nothing_but_a_later_one_keeps_the_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = 0
    real = training_steps.make_block

    def interrupted_at(step: int) -> object:
        def make(*parts: Any) -> object:
            inner = real(*parts)

            def step_fn(*args: Any) -> object:
                nonlocal calls
                calls += 1
                if calls > step:
                    raise KeyboardInterrupt
                return inner(*args)

            return step_fn

        return make

    monkeypatch.setattr(training_loop, "make_block", interrupted_at(0))
    with pytest.raises(KeyboardInterrupt):
        train(RUN, tmp_path / "first", progress=False)
    assert not (tmp_path / "first" / CONFIG).exists()
    calls = 0
    monkeypatch.setattr(training_loop, "make_block", interrupted_at(3))  # after the step-2 checkpoint
    with pytest.raises(KeyboardInterrupt):
        train(RUN, tmp_path / "later", progress=False)
    assert load(tmp_path / "later", RUN).step == 2


def test_temporaries_of_killed_writers_are_removed_when_the_run_is_next_held(tmp_path: Path) -> None:
    with _killed_after(2):
        train(RUN, tmp_path, progress=False)
    stale = [tmp_path / f"{CHECKPOINT}k1ll3d.tmp", tmp_path / f"{CONFIG}x7.tmp", tmp_path / "metrics.jsonq.tmp"]
    for path in stale:
        path.write_bytes(b"half a file")
    mine = tmp_path / "notes.tmp"  # not a file of the run's: kept
    mine.write_text("mine")
    train(RUN, tmp_path, resume=True, progress=False)
    assert not any(path.exists() for path in stale)
    assert mine.read_text() == "mine"


# Bad configs and checkpoints


def test_a_config_that_is_not_utf8_or_has_a_float_width_is_refused_by_name(tmp_path: Path) -> None:
    train(RUN, tmp_path, progress=False)
    config = tmp_path / CONFIG
    text = config.read_text()
    config.write_bytes(b"\xff\xfe" + text.encode("utf-16-le"))
    with pytest.raises(ValueError, match=re.escape(f"{config} is not a run configuration: not UTF-8 text")):
        load_solver(tmp_path, PROBLEM)
    fields = json.loads(text)
    fields["model"]["channels"] = 8.0
    config.write_text(json.dumps(fields))
    with pytest.raises(ValueError, match=re.escape(f"{config}: not a valid run configuration "
                                                   "(ModelConfig.channels must be an int, got 8.0)")):  # fmt: skip
        load_solver(tmp_path, PROBLEM)
    fields["model"]["channels"], fields["steps"] = 2, True
    config.write_text(json.dumps(fields))
    with pytest.raises(ValueError, match=r"RunConfig\.steps must be an int, got True"):
        load_solver(tmp_path, PROBLEM)


@pytest.mark.parametrize("damage", ["NaN weights", "an extra array", "an int array", "a complex array"])
def test_a_checkpoint_with_bad_arrays_is_refused(tmp_path: Path, damage: str) -> None:
    train(RUN, tmp_path, progress=False)
    path = tmp_path / CHECKPOINT
    with np.load(path) as stored:
        arrays = {key: stored[key] for key in stored.files}
    weight = arrays["leaf_0"]
    if damage == "NaN weights":
        arrays["leaf_0"] = np.full_like(weight, np.nan)
    elif damage == "an extra array":
        arrays["leaf_999"] = weight
    elif damage == "an int array":
        arrays["leaf_0"] = weight.astype(np.int32)
    else:
        arrays["leaf_0"] = weight.astype(np.complex64)
    np.savez(path, **arrays)
    message = {
        "NaN weights": "array 0 holds NaN or infinite values",
        "an extra array": "holds arrays the configuration has no place for: leaf_999",
        "an int array": "array 0 is int32, the configuration needs float32",
        "a complex array": "array 0 is complex64, the configuration needs float32",
    }[damage]
    with pytest.raises(ValueError, match=re.escape(f"{path}: {message}" if damage != "an extra array" else message)):
        load(tmp_path, RUN)


# Bounded caches


def test_plotting_one_sample_generates_no_dataset_the_size_of_its_index(
    tmp_path: Path, cache: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "run"
    assert main(["train", "--out", str(out), "--steps", "2", *TINY_FLAGS, *SMALL_FLAGS]) == 0
    before = {path.name: path.stat().st_size for path in cache.iterdir()}
    assert main(["plot", str(out), "--sample", "100000"]) == 1
    assert "--sample must be an index of the 1024-sample test set, got 100000" in capsys.readouterr().err
    assert main(["plot", str(out), "--sample", "5", "--test-size", "8"]) == 0
    assert {path.name: path.stat().st_size for path in cache.iterdir()} == before  # read from evaluate's file


def test_the_cache_command_locates_lists_and_clears_the_tasks_datasets(
    tmp_path: Path, cache: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    PROBLEM.dataset(cache, PROBLEM.data_config(), 7, 3, True)
    other = cache / "darcy_v1_other.npz"  # another task's file: not this task's to clear
    other.write_bytes(b"")
    assert main(["cache"]) == 0
    printed = capsys.readouterr().out
    assert f"of Poisson datasets in 1 files under {cache}" in printed
    assert "_seed7.npz" in printed
    assert main(["cache", "--clear"]) == 0
    assert [path.name for path in cache.iterdir()] == [other.name]
    assert os.path.exists(other)


def test_a_diverging_later_step_keeps_the_last_checkpoint(tmp_path: Path) -> None:
    run = RunConfig.of(PROBLEM, model=TINY, steps=6, batch=4, train_size=16, checkpoint_every=1, warmup=3,
                 learning_rate=1e30, clip=1e30)  # fmt: skip
    with pytest.raises(TrainingDiverged) as error:
        train(run, tmp_path, progress=False)
    saved = load(tmp_path, run).step
    assert saved > 0
    assert f"(step {saved}) is kept" in str(error.value)


def test_a_run_saved_before_runs_named_their_task_is_refused_saying_to_train_again(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    train(RUN, tmp_path, progress=False)
    unnamed = {key: value for key, value in json.loads(RUN.to_json()).items() if key != "problem"}
    (tmp_path / CONFIG).write_text(json.dumps(unnamed))
    message = "is a run configuration of an older format (saved before runs named their task"
    with pytest.raises(ValueError, match=re.escape(message)):
        load_solver(tmp_path, PROBLEM)
    for problem in (PROBLEM, DARCY):
        assert cli_main(problem, ["evaluate", str(tmp_path)]) == 1
        assert "train the run again (`python -m funcformer." in capsys.readouterr().err


# What a checkpoint holds, read back at its boundaries


def test_a_checkpoint_reads_back_its_step_losses_seconds_and_stored_scale(tmp_path: Path) -> None:
    model = init(RUN.seed, RUN.model)
    state = State(model, steps.optimiser(RUN).init(model), 3, [0.5, 0.25, 0.125], 0.75, 12.5)
    save(tmp_path, RUN.to_json(), state)
    back = load(tmp_path, RUN)
    assert (back.step, back.losses, back.scale, back.seconds) == (3, [0.5, 0.25, 0.125], 0.75, 12.5)
    for bad in (0.0, -0.75, np.inf):  # a zero scale would make every prediction zero
        save(tmp_path, RUN.to_json(), dataclasses.replace(state, scale=bad))
        with pytest.raises(ValueError, match=re.escape(f"stored output scale is {bad}, not a positive finite number")):
            load(tmp_path, RUN)


def test_a_transposed_weight_is_refused_though_its_size_fits(tmp_path: Path) -> None:
    model = init(RUN.seed, RUN.model)
    save(tmp_path, RUN.to_json(), State(model, steps.optimiser(RUN).init(model), 0, [], 0.75))
    path = tmp_path / CHECKPOINT
    with np.load(path) as stored:
        arrays = {key: stored[key] for key in stored.files}
    i = next(i for i in range(len(arrays)) if arrays[f"leaf_{i}"].shape != arrays[f"leaf_{i}"].shape[::-1])
    shape = arrays[f"leaf_{i}"].shape
    arrays[f"leaf_{i}"] = arrays[f"leaf_{i}"].T.copy()
    np.savez(path, **arrays)
    needs = f"array {i} has shape {shape[::-1]}, the configuration needs {shape}"
    with pytest.raises(ValueError, match=re.escape(needs)):
        load(tmp_path, RUN)


def loss_nan_at(nan_step: int) -> Callable[..., object]:
    """``applicative.training.steps.make_block`` whose step ``nan_step`` reports a NaN loss (its update is the real
    one)."""
    real = training_steps.make_block

    def make(*parts: Any) -> object:
        inner = real(*parts)

        def step_fn(*args: Any) -> tuple[Any, Any, Any]:
            model, opt_state, loss = inner(*args)
            return model, opt_state, jnp.where(args[-1] == nan_step, jnp.nan, loss)

        return step_fn

    return make


def test_a_non_finite_loss_is_reported_at_its_own_step_after_the_last_checkpoint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The loss of step 3 (the fourth) is NaN: the losses kept are those of steps 0 and 1, with the checkpoint
    of the two steps done, and the message names step 3 and that checkpoint."""
    monkeypatch.setattr(training_loop, "make_block", loss_nan_at(3))
    monkeypatch.setattr(loop, "output_scale", lambda problem, task: 1.0)  # no 1024 samples to generate
    message = "loss is nan at step 3; stopped. The last good checkpoint (step 2) is kept"
    with pytest.raises(TrainingDiverged, match=re.escape(message)):
        train(RUN, tmp_path, progress=False)
    kept = load(tmp_path, RUN)
    assert (kept.step, len(kept.losses)) == (2, 2)


def test_the_progress_bars_reads_change_no_loss_checkpoint_or_report(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """With the bar redrawn at every step (``_SHOW_EVERY`` below 0), the losses are read one step behind
    between checkpoints (steps 5 to 7 here): the losses and the checkpoint are those of a run without a bar,
    and a NaN loss at step 6 stops both runs with the same report."""
    run = RunConfig.of(PROBLEM, model=TINY, steps=9, batch=4, train_size=16, checkpoint_every=5, warmup=0)
    monkeypatch.setattr(loop, "output_scale", lambda problem, task: 1.0)  # no 1024 samples to generate
    quiet = train(run, tmp_path / "quiet", progress=False)
    monkeypatch.setattr(training_loop, "_SHOW_EVERY", -1.0)
    shown = train(run, tmp_path / "shown", progress=True)
    assert "loss=" in capsys.readouterr().err
    assert shown.losses == quiet.losses == load(tmp_path / "shown", run).losses
    assert len(shown.losses) == 9
    monkeypatch.setattr(training_loop, "make_block", loss_nan_at(6))
    for progress in (False, True):
        out = tmp_path / f"nan, progress {progress}"
        with pytest.raises(TrainingDiverged, match=re.escape("loss is nan at step 6; stopped. The last good "
                                                             "checkpoint (step 5) is kept")):  # fmt: skip
            train(run, out, progress=progress)
        assert load(out, run).losses == quiet.losses[:5]
