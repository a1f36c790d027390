"""Training, checkpoints, resuming, the solver interface and the CLI of ``funcformer.poisson``, on a tiny model."""

import re
import time
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from applicative.training import State
from applicative.training.checkpoints import history
from applicative.training.files import CHECKPOINT
from applicative.training.loop import _killed_after
from funcformer.learning import RunConfig, data, default_cache, load, load_solver, read_run, steps, train
from funcformer.learning.cli import main as cli_main
from funcformer.learning.steps import optimiser
from funcformer.model import Funcformer, ModelConfig, init
from funcformer.poisson import PROBLEM, DataConfig, solve, truncate
from tests.applicative.tolerance import float32

TINY = ModelConfig(channels=2, heads=1, head_channels=1, hidden_channels=2, layers=1)
RUN = RunConfig.of(PROBLEM, model=TINY, steps=6, batch=4, train_size=16, checkpoint_every=2, warmup=0)


def main(argv: list[str]) -> int:
    """The Poisson command line."""
    return cli_main(PROBLEM, argv)


TINY_FLAGS = ["--channels", "2", "--heads", "1", "--head-channels", "1", "--hidden-channels", "2", "--layers", "1"]


@pytest.fixture(autouse=True)
def cache(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    directory = tmp_path_factory.getbasetemp() / "cache"
    monkeypatch.setenv("FUNCFORMER_CACHE", str(directory))
    return directory


def _leaves(state: State[Funcformer]) -> list[np.ndarray]:
    return [np.asarray(x) for x in jax.tree_util.tree_leaves((state.model, state.opt_state))]


def test_a_resumed_run_equals_an_uninterrupted_one(tmp_path: Path) -> None:
    whole = train(RUN, tmp_path / "whole", progress=False)
    # A "kill" after 3 steps of the second run: its checkpoint holds step 2, step 3 is lost.
    with _killed_after(3):
        cut = train(RUN, tmp_path / "cut", progress=False)
    assert cut.step == 3
    assert load(tmp_path / "cut", RUN).step == 2
    resumed = train(RUN, tmp_path / "cut", resume=True, progress=False)
    assert resumed.step == whole.step == RUN.steps
    assert resumed.losses == whole.losses
    for a, b in zip(_leaves(resumed), _leaves(whole), strict=True):
        np.testing.assert_array_equal(a, b)
    assert whole.losses[-1] < whole.losses[0]
    assert not list((tmp_path / "cut").glob("*.tmp"))  # atomic writes leave no temporaries


def test_each_epoch_is_its_own_permutation_drawn_from_seed_and_epoch() -> None:
    # The documented order, written out: epoch e visits np.random.default_rng([seed, e]).permutation
    # in batches, the last incomplete batch dropped; epochs differ, so does another seed.
    run = RunConfig.of(PROBLEM, model=TINY, steps=12, batch=4, train_size=18, seed=5)
    epochs = []
    for epoch in range(3):
        taken = np.concatenate([steps.batch_indices(run, 4 * epoch + i) for i in range(4)])
        np.testing.assert_array_equal(taken, np.random.default_rng([5, epoch]).permutation(18)[:16])
        epochs.append(taken)
    assert not np.array_equal(epochs[0], epochs[1])
    assert not np.array_equal(epochs[1], epochs[2])
    other = RunConfig.of(PROBLEM, model=TINY, steps=12, batch=4, train_size=18, seed=6)
    assert not np.array_equal(steps.batch_indices(other, 0), steps.batch_indices(run, 0))


def test_the_loop_takes_the_documented_minibatches_on_the_device(tmp_path: Path) -> None:
    """``train`` (minibatches gathered inside the jitted step, losses read back lazily) against a plain
    loop that gathers each step's ``batch_indices`` on the host and waits for every loss: the same
    losses and weights, bitwise, over three epochs of a training set the batch does not divide."""
    run = RunConfig.of(PROBLEM, model=TINY, steps=13, batch=4, train_size=18, checkpoint_every=5, warmup=0)
    trained = train(run, tmp_path, progress=False)
    model = init(run.seed, run.model)
    opt = optimiser(run)
    opt_state = opt.init(model)
    x, t = data.training_arrays(run, trained.scale)

    @jax.jit
    def update(model: Funcformer, opt_state: optax.OptState, xb: jax.Array, tb: jax.Array) -> tuple[Any, ...]:
        value, grads = jax.value_and_grad(steps.loss)(model, xb, tb)
        updates, opt_state = opt.update(grads, opt_state, model)
        return optax.apply_updates(model, updates), opt_state, value

    losses = []
    for step in range(run.steps):
        rows = steps.batch_indices(run, step)
        model, opt_state, value = update(model, opt_state, jnp.asarray(x[rows]), jnp.asarray(t[rows]))
        losses.append(float(value))
    assert trained.losses == losses
    for a, b in zip(_leaves(trained), jax.tree_util.tree_leaves((model, opt_state)), strict=True):
        np.testing.assert_array_equal(a, np.asarray(b))


@pytest.mark.parametrize(("steps", "warmup"), [(200, 20), (1000, 100)])
def test_the_learning_rate_warms_up_linearly_then_decays_as_a_cosine(steps: int, warmup: int) -> None:
    """Adam's update for a constant gradient 1 is -lr(t) (up to its eps): the schedule, step by step,
    against lr(t) = peak t / w, then 0.01 peak + 0.99 peak (1 + cos(pi (t - w) / (steps - w))) / 2, with
    w = min(warm-up, steps / 10): 200 steps asked to warm up for 100 warm up for 20."""
    run = RunConfig.of(PROBLEM, model=TINY, steps=steps, warmup=100, learning_rate=1e-2, clip=1.0)
    opt = optimiser(run)

    def step(state: optax.OptState, _: None) -> tuple[optax.OptState, jax.Array]:
        update, state = opt.update(jnp.ones(()), state)
        return state, -update

    _, rates = jax.lax.scan(step, opt.init(jnp.zeros(())), None, length=steps)
    t = np.arange(steps)
    cosine = 1e-4 + (1e-2 - 1e-4) * (1 + np.cos(np.pi * (t - warmup) / (steps - warmup))) / 2
    expected = np.where(t < warmup, 1e-2 * t / warmup, cosine)
    np.testing.assert_allclose(np.asarray(rates), expected, rtol=1e-5, atol=1e-12)  # optax works in float32


def test_the_loss_is_the_relative_l2_error_of_the_truncated_solution() -> None:
    data = PROBLEM.dataset(default_cache(), DataConfig(), seed=5, count=3)
    exact = truncate(solve(data.inputs), 16)
    # predicting u + 0.1 u scores 0.1
    errors = steps.series_relative_l2(jax.numpy.asarray(1.1 * exact), jax.numpy.asarray(exact))
    np.testing.assert_allclose(errors, 0.1, rtol=1e-12)
    # the norm: Gauss-Legendre quadrature of u^2 on a tensor grid
    x, w = np.polynomial.legendre.leggauss(40)
    values = np.polynomial.chebyshev.chebgrid2d(x, x, exact[0])
    expected = np.sqrt(w @ values**2 @ w)
    np.testing.assert_allclose(steps.l2_norm(jax.numpy.asarray(exact[:1]))[0], expected, rtol=1e-12)


def test_checkpoint_errors_are_clear(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match=r"no trained run at .*none: no such directory"):
        train(RUN, tmp_path / "none", resume=True, progress=False)
    train(RUN, tmp_path / "run", progress=False)
    with pytest.raises(FileExistsError, match="already holds a run"):
        train(RUN, tmp_path / "run", progress=False)
    other = RunConfig.of(PROBLEM, model=TINY, steps=7, batch=4, train_size=16, checkpoint_every=2, warmup=0)
    with pytest.raises(ValueError, match="settings differ: steps: "):
        load(tmp_path / "run", other)
    (tmp_path / "run" / CHECKPOINT).write_bytes(b"not a checkpoint")
    with pytest.raises(ValueError, match="corrupt or not a checkpoint"):
        load(tmp_path / "run", RUN)
    (tmp_path / "run" / CHECKPOINT).unlink()
    with pytest.raises(FileNotFoundError, match="no checkpoint"):
        load_solver(tmp_path / "run", PROBLEM)


@pytest.mark.slow
def test_load_solver_predicts_and_validates(tmp_path: Path) -> None:
    state = train(RUN, tmp_path, progress=False)
    solver = load_solver(tmp_path, PROBLEM)
    f = PROBLEM.dataset(default_cache(), DataConfig(), seed=9, count=3).inputs
    predicted = solver(f)
    assert predicted.shape == (3, 16, 16)
    assert predicted.dtype == np.float64
    # the model on each source scaled to unit norm, scaled back (the operator is linear)
    norms = np.asarray(steps.l2_norm(jax.numpy.asarray(f)))
    scale = data.output_scale(PROBLEM, DataConfig())
    assert state.scale == scale  # stored when the run started
    direct = np.stack(
        [np.asarray(state.model(jax.numpy.asarray(x / n, np.float32))) for x, n in zip(f, norms, strict=True)]
    )
    np.testing.assert_allclose(predicted, direct * (norms * scale)[:, None, None], **float32(1e-5, 1e-7))
    np.testing.assert_allclose(solver(2.0 * f), 2.0 * predicted, **float32(1e-5, 1e-7))
    with pytest.raises(ValueError, match=r"expected source f coefficients of shape \(B, P, Q\).* got \(16, 16\)"):
        solver(f[0])
    assert solver(f[:, :12, :12]).shape == (3, 12, 12)  # any count: tests/funcformer/test_resolution.py
    with pytest.raises(TypeError, match="real floating-point"):
        solver(f.astype(np.complex128))
    with pytest.raises(ValueError, match="NaN"):
        solver(np.full_like(f, np.nan))


@pytest.mark.end_to_end
def test_the_cli_trains_evaluates_and_plots(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "run"
    flags = ["--steps", "4", "--batch", "4", "--train-size", "16", "--checkpoint-every", "2", "--warmup", "0"]
    assert main(["train", "--out", str(out), *flags, *TINY_FLAGS, "--quiet", "--test-size", "8"]) == 0
    printed = capsys.readouterr().out
    assert "test relative L2 error (8 held-out samples)" in printed
    # a line an epoch of 4 steps, with the loss on the held-out samples: the learning curve the checkpoint keeps
    assert re.search(r"^epoch 1/1: loss \d\.\d{4}e[-+]\d\d, .* s, held-out error \d\.\d{4}e[-+]\d\d$", printed, re.M)
    assert [epoch for epoch, _ in history(out)[1]] == [1]
    for line in ("model", "truncation floor", "mean of the training set", "least squares"):
        assert re.search(rf"{line}.* mean \d\.\d{{3}}e[-+]\d\d  median .* p95 ", printed), line
    assert (out / "metrics.json").exists()
    # the call it prints for the checked solver is a call that works
    assert "funcformer.learning.load_solver(DIR, funcformer.poisson.PROBLEM, check=True) flags residuals" in printed
    assert load_solver(out, PROBLEM, check=True)(np.zeros((1, 16, 16))).u.shape == (1, 16, 16)
    assert main(["evaluate", str(out), "--test-size", "8"]) == 0
    assert "truncation floor" in capsys.readouterr().out
    assert main(["plot", str(out)]) == 0
    assert (out / "prediction.png").stat().st_size > 0
    assert (out / "loss.png").stat().st_size > 0
    # resuming a finished run keeps it, the flags given agreeing with it; resuming with other settings is refused
    assert main(["train", "--out", str(out), "--resume", "--quiet", "--test-size", "8", *flags[:2], *TINY_FLAGS]) == 0
    assert main(["train", "--out", str(out), "--resume", "--steps", "9", "--layer-norm"]) == 1
    assert capsys.readouterr().err.endswith(
        f"--resume continues {out} with its own settings; given otherwise: --steps: 4 in the run, 9 given; "
        "--layer-norm: false in the run, true given\n"
    )


def test_the_cli_validates_its_arguments(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["train", "--out", str(tmp_path), "--steps", "-3"])
    assert "--steps: must be positive, got -3" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["train"])
    assert "--out" in capsys.readouterr().err
    assert main(["train", "--out", str(tmp_path / "a"), "--axes", "xz"]) == 1
    assert "ModelConfig.axes" in capsys.readouterr().err
    assert main(["train", "--out", str(tmp_path / "b"), "--batch", "64", "--train-size", "32"]) == 1
    assert "exceeds RunConfig.train_size" in capsys.readouterr().err
    assert main(["train", "--out", str(tmp_path / "c"), "--seed", "-1"]) == 1
    assert "RunConfig.seed must be >= 0, got -1" in capsys.readouterr().err
    assert main(["evaluate", str(tmp_path / "missing")]) == 1
    assert "no trained run" in capsys.readouterr().err


def test_the_progress_bar_is_tqdms_and_counts_from_the_resumed_step(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with _killed_after(2):
        train(RUN, tmp_path, progress=False)
    assert not capsys.readouterr().err
    train(RUN, tmp_path, resume=True, progress=True)
    bar = capsys.readouterr().err
    assert bar.startswith("\rtrain:")  # tqdm's text bar, redrawn in place
    assert f"{RUN.steps}/{RUN.steps}" in bar
    assert "loss=" in bar
    assert " 0/" not in bar
    assert f" 2/{RUN.steps}" in bar


def test_the_cli_changes_only_the_flags_given_from_the_default_run() -> None:
    from applicative.training import settings
    from funcformer.learning.cli import Flags, _parser

    def run(*argv: str) -> RunConfig:
        args = _parser(PROBLEM).parse_args(["train", "--out", "x", *argv])
        return settings.chosen(Flags, args, defaults=Flags.of(RunConfig.of(PROBLEM))).run(PROBLEM)

    assert run() == RunConfig.of(PROBLEM)
    assert run().model.mixers == "k"  # the default model is kernel layers (docs/poisson.md)
    attention = run("--mixers", "a", "--channels", "4")
    assert attention.model == ModelConfig(mixers="a", channels=4)
    assert attention.steps == RunConfig.of(PROBLEM).steps


def test_a_resumed_runs_seconds_add_to_those_saved_in_its_checkpoint(tmp_path: Path) -> None:
    with _killed_after(2):
        train(RUN, tmp_path, progress=False)  # its checkpoint: step 2
    path = tmp_path / CHECKPOINT
    with np.load(path) as stored:
        arrays = {key: stored[key] for key in stored.files}
    np.savez(path, **{**arrays, "seconds": np.asarray(1000.0)})  # as a first session of 1000 s would leave it
    start = time.perf_counter()
    resumed = train(RUN, tmp_path, resume=True, progress=False)
    elapsed = time.perf_counter() - start
    assert resumed.step == RUN.steps
    assert 1000.0 < resumed.seconds < 1000.0 + elapsed
    assert load(tmp_path, RUN).seconds == resumed.seconds


def test_the_cli_stops_at_its_budget_and_resumes_to_the_uninterrupted_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--seconds: a budget of a microsecond stops after the first epoch (4 steps of 12), checkpointed; --resume
    ends where an uninterrupted run ends, bit for bit."""
    flags = ["--steps", "12", "--batch", "4", "--train-size", "16", "--checkpoint-every", "100", "--warmup", "0"]
    common = [*flags, *TINY_FLAGS, "--quiet", "--test-size", "8"]
    assert main(["train", "--out", str(tmp_path / "straight"), *common]) == 0
    assert main(["train", "--out", str(tmp_path / "budget"), *common, "--seconds", "1e-6"]) == 75
    assert "stopped after step 4 of 12 (--seconds): continue the run with --resume" in capsys.readouterr().out
    assert main(["train", "--out", str(tmp_path / "budget"), "--resume", "--quiet", "--test-size", "8"]) == 0
    run = read_run(tmp_path / "straight", PROBLEM)
    straight, budget = load(tmp_path / "straight", run), load(tmp_path / "budget", run)
    assert budget.losses == straight.losses
    assert [epoch for epoch, _ in budget.held_out] == [1, 2, 3]
    assert all(np.array_equal(a, b) for a, b in zip(_leaves(budget), _leaves(straight), strict=True))
