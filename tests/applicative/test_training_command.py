"""``applicative.training.command``: the exit statuses and messages of a training command line, and the plot
of a run's history read back from its checkpoint (the losses and held-out errors ``fit`` stored)."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import weakref
from collections.abc import Callable
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from applicative.training import Arrays, Learner, TrainingDiverged, checkpoints, command, fit, restore, stopping
from applicative.training import loop as training_loop
from applicative.training.checkpoints import history

Params = dict[str, jax.Array]
INPUTS = np.random.default_rng(1).normal(size=(8, 3))


def learner() -> Learner[Params]:
    def loss(params: Params, a: jax.Array, u: jax.Array) -> jax.Array:
        return 0.5 * (params["p"] - jnp.mean(a)) ** 2 + 1e-3

    return Learner(lambda seed: {"p": jnp.zeros(())}, loss, lambda params, a: jnp.full(len(a), params["p"]))


def train(directory: Path, resume: bool = False, sigterm_in_epoch: int | None = None) -> None:
    def validate(params: Params) -> float:
        if sigterm_in_epoch is not None and len(history_seen) + 1 == sigterm_in_epoch:
            os.kill(os.getpid(), signal.SIGTERM)
        history_seen.append(1)
        return float(params["p"]) ** 2 + 0.5

    history_seen: list[int] = []
    fit(learner(), optax.sgd(0.5), Arrays(INPUTS, INPUTS, 2), directory, description=json.dumps({"m": 1}),
        steps=12, resume=resume, progress=False, validate=validate)  # fmt: skip


def test_the_exit_statuses_and_messages(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert command.run("prog", "train", lambda: train(tmp_path / "a")) == 0
    assert command.run("prog", "train", lambda: train(tmp_path / "a")) == 1
    assert "prog train: error: " in capsys.readouterr().err  # already holds a run: --resume, or another --out
    assert command.run("prog", "train", lambda: train(tmp_path / "b", sigterm_in_epoch=2)) == 75
    err = capsys.readouterr().err
    assert err.startswith("prog train: stopped by SIGTERM after step 8, checkpointed there in ")
    assert command.run("prog", "train", lambda: train(tmp_path / "b", resume=True)) == 0
    straight, resumed = (restore(tmp_path / d, learner(), optax.sgd(0.5)) for d in ("a", "b"))
    assert resumed.losses == straight.losses
    assert float(resumed.model["p"]) == float(straight.model["p"])

    def diverged() -> None:
        raise TrainingDiverged("loss is nan at step 3")

    assert command.run("prog", "train", diverged) == 1
    assert capsys.readouterr().err == "prog train: error: loss is nan at step 3\n"


def test_the_flags(tmp_path: Path) -> None:
    parser = argparse.ArgumentParser(prog="prog")
    command.add_flags(parser)
    args = parser.parse_args(["--out", str(tmp_path), "--resume", "--seconds", "2.5", "--quiet"])
    assert (args.out, args.resume, args.seconds, args.quiet) == (tmp_path, True, 2.5, True)
    with pytest.raises(SystemExit):
        parser.parse_args(["--out", str(tmp_path), "--seconds", "0"])


@pytest.mark.end_to_end
def test_a_command_lines_process_ends_with_its_status_and_its_objects_frozen() -> None:
    """``end_process``: the status, the handlers ``atexit`` runs and the streams flushed as by ``sys.exit``, every
    object frozen before them (what the collector's sweeps at shutdown skip)."""
    script = (
        "import atexit, gc\n"
        "from applicative.training.command import end_process\n"
        "atexit.register(lambda: print(f'frozen {gc.get_freeze_count() > 10_000}'))\n"
        "print('written', end=' ')\n"
        "end_process(3)\n"
    )
    root = str(Path(__file__).parents[2])
    ended = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                           env={**os.environ, "PYTHONPATH": root})  # fmt: skip
    assert (ended.returncode, ended.stdout) == (3, "written frozen True\n"), ended.stderr


def test_the_plot_reads_the_runs_history(tmp_path: Path) -> None:
    train(tmp_path)
    losses, held_out = history(tmp_path)
    state = restore(tmp_path, learner(), optax.sgd(0.5))
    assert (losses, held_out) == (state.losses, state.held_out)
    assert [epoch for epoch, _ in held_out] == [1, 2, 3]
    path = command.plot(tmp_path, per_epoch=4)
    assert path == tmp_path / "loss.png"
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    with pytest.raises(FileNotFoundError, match="no checkpoint at"):
        history(tmp_path / "nothing")


def test_the_loss_figure_marks_held_out_errors_of_zero(tmp_path: Path) -> None:
    """A held-out error of 0 (a task learned exactly) has no place on the log scale: it is marked, not lost."""
    from applicative.training.plots import loss_figure

    figure = loss_figure([1.0, 0.5, 0.25, 0.125], held_out=[(1, 0.5), (3, 0.0)])
    lines = {line.get_label(): line for line in figure.axes[0].get_lines()}
    assert np.asarray(lines["held-out error"].get_xdata()).tolist() == [1]
    assert np.asarray(lines["held-out error 0"].get_xdata()).tolist() == [3]
    assert np.asarray(lines["held-out error 0"].get_ydata()).tolist() == [0.125]


# SIGTERM before the loop: a command line stops at once, with 75 and what is saved (in-loop: above)


def _sigterm() -> None:
    os.kill(os.getpid(), signal.SIGTERM)
    time.sleep(5)  # the handler raises before this ends
    raise AssertionError("SIGTERM did not stop the command")


def _fit(directory: Path, init: Callable[[int], Params] | None = None, resume: bool = False) -> None:
    made = learner()
    fit(Learner(init or made.init, made.loss, made.predict), optax.sgd(0.5), Arrays(INPUTS, INPUTS, 2), directory,
        description=json.dumps({"m": 1}), steps=12, resume=resume, progress=False)  # fmt: skip


def test_sigterm_before_anything_is_written_stops_with_75_saying_so(capsys: pytest.CaptureFixture[str]) -> None:
    before = signal.getsignal(signal.SIGTERM)
    assert command.run("prog", "train", _sigterm) == 75
    assert capsys.readouterr().err == "prog train: stopped by SIGTERM: nothing saved yet: run the same command again\n"
    assert signal.getsignal(signal.SIGTERM) == before


@pytest.mark.parametrize(
    ("argv", "environment", "several"),
    [
        (["--processes", "2"], None, True),
        (["--processes=3"], None, True),
        (["--processes", "1"], "4", False),  # the flag wins over $JAX_NUM_PROCESSES, as the command line reads them
        ([], "2", True),
        ([], None, False),
        (["--processes"], None, False),
    ],
)
def test_sigterm_while_a_command_of_several_processes_imports_is_carried_to_the_meeting(
    argv: list[str], environment: str | None, several: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``_sigterm`` records a SIGTERM of a run of several processes (it would end any other at once: not called
    here) and ``stopping`` raises it, once, where the meeting calls ``raise_early``: this process's own stop."""
    from applicative import _sigterm

    monkeypatch.setattr("sys.orig_argv", ["python", "-m", "funcformer.poisson", "train", "--out", "x", *argv])
    if environment is None:
        monkeypatch.delenv("JAX_NUM_PROCESSES", raising=False)
    else:
        monkeypatch.setenv("JAX_NUM_PROCESSES", environment)
    assert _sigterm._several() is several
    if not several:
        return
    _sigterm._stop(signal.SIGTERM, None)
    with stopping.stopping():
        with pytest.raises(stopping.Stopped, match=r"^stopped by SIGTERM: nothing saved yet") as raised:
            stopping.raise_early()
        assert raised.value.here
        stopping.raise_early()  # once
    assert not _sigterm.carried()


def test_sigterm_before_the_step_0_checkpoint_leaves_the_config_and_resume_starts_the_same_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    def stopped(seed: int) -> Params:  # the model's initialisation: after the config, before the first checkpoint
        _sigterm()
        return learner().init(seed)

    assert command.run("prog", "train", lambda: _fit(tmp_path / "a", stopped)) == 75
    assert capsys.readouterr().err == (
        f"prog train: stopped by SIGTERM: {tmp_path / 'a'} holds the run's config.json and no checkpoint yet: "
        "--resume starts the same run\n"
    )
    assert sorted(path.name for path in (tmp_path / "a").iterdir()) == [".lock", "config.json"]
    assert command.run("prog", "train", lambda: _fit(tmp_path / "a", resume=True)) == 0
    _fit(tmp_path / "b")
    straight, resumed = (restore(tmp_path / d, learner(), optax.sgd(0.5)) for d in ("b", "a"))
    assert resumed.losses == straight.losses
    assert float(resumed.model["p"]) == float(straight.model["p"])


@pytest.mark.usefixtures("python_sigint")
def test_ctrl_c_in_the_loop_stops_with_130_saying_what_is_saved_and_resume_continues_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Ctrl-C (SIGINT) in the second epoch: status 130 and the last checkpoint named (a traceback before), and
    ``--resume`` ends as the uninterrupted run."""
    assert command.run("prog", "train", lambda: train(tmp_path / "a")) == 0

    def interrupted() -> None:
        def validate(params: Params) -> float:
            if len(seen) == 1:
                os.kill(os.getpid(), signal.SIGINT)
            seen.append(1)
            return 0.5

        seen: list[int] = []
        fit(learner(), optax.sgd(0.5), Arrays(INPUTS, INPUTS, 2), tmp_path / "b", description=json.dumps({"m": 1}),
            steps=12, progress=False, validate=validate)  # fmt: skip

    assert command.run("prog", "train", interrupted) == command.INTERRUPTED == 130
    err = capsys.readouterr().err
    assert err.startswith("prog train: stopped by SIGINT (Ctrl-C): "), err
    assert err.endswith("--resume continues it\n"), err
    assert command.run("prog", "train", lambda: train(tmp_path / "b", resume=True)) == 0
    straight, resumed = (restore(tmp_path / d, learner(), optax.sgd(0.5)) for d in ("a", "b"))
    assert float(resumed.model["p"]) == float(straight.model["p"])


@pytest.mark.usefixtures("python_sigint")
def test_ctrl_c_while_a_checkpoint_is_written_names_that_checkpoint(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ctrl-C just as a checkpoint is written (seen with two processes on a loaded machine: the message named
    step 2 while the run directory held step 4): the KeyboardInterrupt waits for the note, and the message
    names the checkpoint on disk."""
    def save(directory: Path, description: str, state: checkpoints.State[Params], fitted: str = "") -> None:
        checkpoints.save(directory, description, state, fitted=fitted)
        if state.step == 4:
            os.kill(os.getpid(), signal.SIGINT)

    monkeypatch.setattr(training_loop, "save", save)

    def run() -> None:
        fit(learner(), optax.sgd(0.5), Arrays(INPUTS, INPUTS, 2), tmp_path, checkpoint_every=2,
            description=json.dumps({"m": 1}), steps=12, progress=False)  # fmt: skip

    assert command.run("prog", "train", run) == command.INTERRUPTED
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    assert int(np.load(tmp_path / "checkpoint.npz")["step"]) == 4
    err = capsys.readouterr().err
    assert err.endswith(f"{tmp_path} holds the run's checkpoint at step 4 of 12: --resume continues it\n"), err


def test_sigterm_after_the_step_0_checkpoint_says_resume_continues_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    def note(saved: str) -> None:
        noted(saved)
        if "step-0" in saved:
            _sigterm()

    noted = stopping.note
    monkeypatch.setattr(training_loop, "note", note)
    assert command.run("prog", "train", lambda: _fit(tmp_path)) == 75
    assert capsys.readouterr().err == (
        f"prog train: stopped by SIGTERM: {tmp_path} holds the run's config.json and its step-0 checkpoint: "
        "--resume continues it\n"
    )
    monkeypatch.undo()
    assert command.run("prog", "train", lambda: _fit(tmp_path, resume=True)) == 0


def test_a_sigterm_swallowed_on_its_way_stops_the_run_at_its_first_step(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    def swallowing(seed: int) -> Params:  # as a library's ``except BaseException`` would
        with contextlib.suppress(BaseException):
            _sigterm()
        return learner().init(seed)

    assert command.run("prog", "train", lambda: _fit(tmp_path, swallowing)) == 75
    assert capsys.readouterr().err.startswith("prog train: stopped by SIGTERM after step 1, checkpointed there")


@pytest.mark.usefixtures("python_sigint")
@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
def test_a_ctrl_c_swallowed_on_its_way_stops_the_run_at_its_next_step_with_130(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Ctrl-C's ``KeyboardInterrupt`` raised inside a weakref callback, which Python reports ("Exception ignored")
    and swallows (met in CI: one of two processes trained on to its end and exited 0): the run stops at its next
    step all the same, with 130 and what is saved."""

    class Held:
        pass

    def validate(params: Params) -> float:
        if not sent:
            sent.append(True)
            held = Held()
            reference = weakref.ref(held, lambda _: _sigint())
            del held  # the callback runs here: its KeyboardInterrupt goes no further
            assert reference() is None
        return float(params["p"]) ** 2

    def action() -> None:
        fit(learner(), optax.sgd(0.5), Arrays(INPUTS, INPUTS, 2), tmp_path, checkpoint_every=2,
            description=json.dumps({"m": 1}), steps=12, progress=False, validate=validate)  # fmt: skip

    sent: list[bool] = []
    assert command.run("prog", "train", action) == command.INTERRUPTED
    assert sent == [True]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    assert int(np.load(tmp_path / "checkpoint.npz")["step"]) == 2  # the one before validate's step
    assert capsys.readouterr().err.endswith(
        f"prog train: stopped by SIGINT (Ctrl-C): {tmp_path} holds the run's checkpoint at step 2 of 12: --resume "
        "continues it\n"
    )


@pytest.mark.usefixtures("python_sigint")
def test_a_ctrl_c_swallowed_or_turned_into_an_error_outside_the_loop_still_ends_the_command_with_130(
    capsys: pytest.CaptureFixture[str],
) -> None:
    def swallowed() -> None:
        with contextlib.suppress(KeyboardInterrupt):
            _sigint()

    def turned() -> None:
        try:
            _sigint()
        except KeyboardInterrupt:
            raise TypeError("expected a message argument") from None

    for action in swallowed, turned:
        assert command.run("prog", "train", action) == command.INTERRUPTED
        assert capsys.readouterr().err == f"prog train: stopped by SIGINT (Ctrl-C): {stopping.NOTHING_SAVED}\n"
    assert command.run("prog", "train", lambda: None) == 0  # the next command starts afresh


def _sigint() -> None:
    os.kill(os.getpid(), signal.SIGINT)
    time.sleep(5)  # the handler raises before this ends
    raise AssertionError("SIGINT did not interrupt the command")


def test_a_deferred_block_is_not_cut_by_sigterm(capsys: pytest.CaptureFixture[str]) -> None:
    done = []

    def block() -> None:
        with stopping.deferred():
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(0.1)
            done.append(True)
        raise AssertionError("SIGTERM did not stop the command at the block's end")

    assert command.run("prog", "train", block) == 75
    assert done == [True]
    assert "stopped by SIGTERM" in capsys.readouterr().err


def test_sigterm_turned_into_another_error_on_its_way_still_stops_with_75(capsys: pytest.CaptureFixture[str]) -> None:
    """Code that SIGTERM's ``Stopped`` interrupts may raise an error of its own instead: CPython's import machinery
    raises TypeError "expected a message argument" where it could not make an ImportError's (met once in CI,
    SIGTERM at the step-0 checkpoint), which was reported as bad input with status 1."""

    def action() -> None:
        try:
            _sigterm()
        except stopping.Stopped:
            raise TypeError("expected a message argument") from None

    assert command.run("prog", "train", action) == 75
    assert capsys.readouterr().err == (
        "prog train: stopped by SIGTERM (on its way: TypeError: expected a message argument): nothing saved yet: run "
        "the same command again\n"
    )
    assert command.run("prog", "train", lambda: int("x")) == 1  # an error with no SIGTERM is still the error
    assert capsys.readouterr().err == "prog train: error: invalid literal for int() with base 10: 'x'\n"


def test_sigterm_while_the_step_0_checkpoint_is_written_names_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where the step-0 checkpoint was written and its note not yet, the message said "no checkpoint yet"."""
    written = checkpoints.write_history  # what the loop calls

    def write_history(directory: Path, state: checkpoints.State[Params], per_epoch: int) -> None:
        written(directory, state, per_epoch)
        os.kill(os.getpid(), signal.SIGTERM)

    monkeypatch.setattr(training_loop, "write_history", write_history)
    assert command.run("prog", "train", lambda: _fit(tmp_path)) == 75
    assert int(np.load(tmp_path / "checkpoint.npz")["step"]) == 0
    assert capsys.readouterr().err == (
        f"prog train: stopped by SIGTERM: {tmp_path} holds the run's config.json and its step-0 checkpoint: "
        "--resume continues it\n"
    )
