"""``applicative.examples.digits``: the Vec transformer learns to reverse digits, trained through the learning
layer (``applicative.training.fit``): the minibatches the old hand-written loop drew, the figures it reached,
a resume after a kill equal to the uninterrupted run, and the command line (train, evaluate, plot, SIGTERM).

Runs under the suite's jax_enable_x64 (see conftest.py), so it also checks that the
example works with 64-bit types enabled.
"""

from __future__ import annotations

import math
import os
import signal
import subprocess
import sys
from pathlib import Path

import jax
import numpy as np
import pytest

from applicative.examples.digits import VOCABULARY, Config, DigitModel, evaluate, main, train
from applicative.examples.digits.data import source
from applicative.examples.digits.training import description, learner, optimiser, settings
from applicative.training import State, restore
from applicative.training.loop import _killed_after
from tests.applicative.tolerance import float32

ROOT = Path(__file__).parent.parent.parent
CHANCE_LOSS = math.log(VOCABULARY)  # cross entropy of the uniform prediction
CHANCE_ACCURACY = 1 / VOCABULARY
TINY = Config(width=16, hidden=32, heads=2, head_features=8, batch=16, test_size=64, per_epoch=5)
TINY_FLAGS = ["--width", "16", "--hidden", "32", "--heads", "2", "--head-features", "8", "--batch", "16",
              "--test-size", "64", "--per-epoch", "5"]  # fmt: skip
RUN = ["--quiet", *TINY_FLAGS, "--steps", "15", "--seed", "2"]


@pytest.mark.slow
def test_reversal_training_beats_chance() -> None:
    """60 steps of 64 sequences: far from converged, far from chance too. The figures are those of the loop the
    example had before the learning layer (a jitted step drawing its own minibatch), measured on it: seed 0
    reached a loss of 2.6541 -> 0.20171 and a test accuracy of 0.96338 (seed 1: 2.6215 -> 0.32062, 0.92773);
    the port gives them bit for bit on the CPU; a GPU's TF32 products give 2.6541 -> 0.20156 (emulated)."""
    result = train(60, seed=0, config=Config(batch=64, test_size=512), log=False)
    assert result.initial_loss == pytest.approx(2.6541366577148438, rel=float32(1e-5)["rtol"])
    assert result.final_loss == pytest.approx(0.20170548558235168, rel=float32(1e-3)["rtol"])
    assert result.test_accuracy == pytest.approx(0.96337890625, abs=4 / 4096)  # 512 x 8 test tokens
    assert result.final_loss < 0.5 * CHANCE_LOSS
    assert result.test_accuracy > CHANCE_ACCURACY + 0.4
    assert result.step == 60


def test_step_s_draws_the_old_loops_minibatch() -> None:
    """The old loop drew step s's minibatch inside its jitted step from the s-th key of
    ``jax.random.split(data_key, steps)``, data_key the second of ``split(PRNGKey(seed), 3)``."""
    data_key = jax.random.split(jax.random.PRNGKey(3), 3)[1]
    old_keys = jax.random.split(data_key, 60)
    drawn = source(batch=64, steps=60, per_epoch=100)
    for step in (0, 1, 59):
        tokens, targets = drawn.draw(3, step)
        assert isinstance(tokens, np.ndarray)
        assert tokens.shape == (64, 8)
        np.testing.assert_array_equal(tokens, np.asarray(jax.random.randint(old_keys[step], (64, 8), 0, 10)))
        np.testing.assert_array_equal(targets, tokens[:, ::-1])
    assert not np.array_equal(drawn.draw(3, 1)[0], drawn.draw(3, 0)[0])
    with pytest.raises(ValueError, match="step 60 is outside the run's 60 steps"):
        drawn.draw(3, 60)


def test_the_settings_are_the_runs_description() -> None:
    config = Config(width=32, per_epoch=7)
    assert settings(description(config, 90, 4)) == (config, 90, 4)
    with pytest.raises(ValueError, match="not a run of the digits example's settings"):
        settings(description(config, 90, 4).replace('"width"', '"depth"'))
    with pytest.raises(ValueError, match="does not describe a run of the digits example"):
        settings('{"steps": 3}')
    with pytest.raises(ValueError, match=r"Config\.batch = 0 must be a positive integer"):
        Config(batch=0)
    with pytest.raises(ValueError, match="train: steps = 0 must be positive"):
        train(0)


def _checkpoint(directory: Path) -> State[DigitModel]:
    return restore(directory, learner(TINY), optimiser(TINY, 15), seed=2)


def test_a_run_resumed_after_a_kill_is_the_uninterrupted_run(tmp_path: Path) -> None:
    """Killed after 7 steps (its last checkpoint at step 5, an epoch's end), then resumed: the same losses, held-out
    errors and parameters as a run of 15 steps without a stop, bit for bit."""
    straight = train(15, 2, TINY, out=tmp_path / "straight", log=True)
    with _killed_after(7):
        train(15, 2, TINY, out=tmp_path / "resumed", log=True)
    assert _checkpoint(tmp_path / "resumed").step == 5
    resumed = train(15, 2, TINY, out=tmp_path / "resumed", resume=True, log=True)
    assert resumed._replace(seconds=0) == straight._replace(seconds=0)
    a, b = _checkpoint(tmp_path / "straight"), _checkpoint(tmp_path / "resumed")
    assert (a.step, len(a.losses), [e for e, _ in a.held_out]) == (15, 15, [1, 2, 3])
    assert (a.losses, a.held_out) == (b.losses, b.held_out)
    assert a.held_out[-1][1] == pytest.approx(1 - straight.test_accuracy, abs=1e-12)
    for x, y in zip(jax.tree_util.tree_leaves(a.model), jax.tree_util.tree_leaves(b.model), strict=True):
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))
    assert (a.losses[0], a.losses[-1]) == (straight.initial_loss, straight.final_loss)


def test_the_command_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """train, evaluate and plot a run through ``main``; a second train into its directory is refused, as is a
    resume with other settings; evaluate and plot of no run."""
    run = str(tmp_path / "run")
    assert main(["train", "--out", run, *RUN]) == 0
    trained = capsys.readouterr().out
    assert "epoch 3/3: loss " in trained
    assert "held-out error" in trained
    assert "test token accuracy: " in trained
    assert main(["evaluate", run]) == 0
    evaluated = capsys.readouterr().out
    assert evaluated.splitlines()[-1].split(" in ")[0] == trained.splitlines()[-1].split(" in ")[0]
    assert evaluate(run).step == 15
    assert main(["plot", run]) == 0
    assert capsys.readouterr().out == f"wrote {tmp_path / 'run' / 'loss.png'}\n"
    assert (tmp_path / "run" / "loss.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert main(["train", "--out", run, *RUN]) == 1
    assert "python -m applicative.examples.digits train: error: " in capsys.readouterr().err
    assert main(["train", "--out", run, "--resume", *RUN[:-1], "3"]) == 1
    differ = f"--resume continues {run} with its own settings; given otherwise: --seed: 2 in the run, 3 given\n"
    assert capsys.readouterr().err.endswith(differ)
    budget = str(tmp_path / "budget")  # a budget spent in the first epoch: stopped at its end, then resumed
    assert main(["train", "--out", budget, "--seconds", "1e-6", *RUN]) == 75  # not finished: --resume goes on
    assert "stopped at step 5 of 15: continue with --resume" in capsys.readouterr().out
    assert main(["train", "--out", budget, "--resume", "--quiet"]) == 0  # the run's settings, read back
    assert "epoch 2/3" in capsys.readouterr().out
    assert evaluate(budget)._replace(seconds=0) == evaluate(run)._replace(seconds=0)
    for name in ("evaluate", "plot"):
        assert main([name, str(tmp_path / "nothing")]) == 1
        assert f"digits {name}: error: no trained run at " in capsys.readouterr().err


@pytest.mark.slow
def test_sigterm_checkpoints_exits_75_and_resume_finishes(tmp_path: Path) -> None:
    """``python -m applicative.examples.digits train`` sent SIGTERM after its first epoch's line exits 75,
    checkpointed; ``--resume`` finishes the run: the uninterrupted run's losses and parameters."""
    arguments = [sys.executable, "-m", "applicative.examples.digits", "train", "--out", str(tmp_path / "run"),
                 "--steps", "400", "--seed", "2", "--quiet", *TINY_FLAGS]  # fmt: skip
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "JAX_PLATFORMS": "cpu", "JAX_ENABLE_X64": "1"}  # as this suite
    process = subprocess.Popen(arguments, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True, start_new_session=True)  # fmt: skip
    try:
        assert process.stdout is not None
        first = process.stdout.readline()
        assert first.startswith("epoch 1/80: loss "), first
        process.send_signal(signal.SIGTERM)
        _, err = process.communicate(timeout=120)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.communicate()
    assert process.returncode == 75, err
    assert "train: stopped by SIGTERM after step " in err
    stopped = restore(tmp_path / "run", learner(TINY), optimiser(TINY, 400), seed=2)
    assert 5 <= stopped.step < 400
    resumed = subprocess.run([*arguments, "--resume"], cwd=ROOT, env=env, capture_output=True, text=True,
                             timeout=300, check=False)  # fmt: skip
    assert resumed.returncode == 0, resumed.stderr
    straight = [*arguments[:5], str(tmp_path / "straight"), *arguments[6:]]  # the same program, uninterrupted
    assert subprocess.run(straight, cwd=ROOT, env=env, capture_output=True, timeout=300).returncode == 0
    a = restore(tmp_path / "straight", learner(TINY), optimiser(TINY, 400), seed=2)
    b = restore(tmp_path / "run", learner(TINY), optimiser(TINY, 400), seed=2)
    assert (b.step, b.losses, b.held_out) == (400, a.losses, a.held_out)
    for x, y in zip(jax.tree_util.tree_leaves(a.model), jax.tree_util.tree_leaves(b.model), strict=True):
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))
