"""A trained run as a solver, and its evaluation on the held-out test set beside the floor and the baselines."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from funcformer.learning._files import default_cache
from funcformer.learning.metric import apply_linear, fit_least_squares, relative_l2, summary, truncation_floor
from funcformer.learning.problem import Problem
from funcformer.learning.training import METRICS, Run, holding_run, load, optimiser, read_run, write_atomically
from funcformer.model import Funcformer, parameter_count

__all__ = ["Solver", "as_solver", "evaluate", "load_solver"]

Solver = Callable[[np.ndarray], np.ndarray]


def load_solver(path: str | Path, problem: Problem[Any] | None = None) -> Solver:
    """The run in ``path`` as a function: numpy input coefficients (B, N, N) -> output coefficients
    (B, N, N), both in the ``chebval2d`` convention; with ``problem``, a run of another task is refused.

    The inputs are normalised by the run's ``Problem.normalise`` on the host, in float64 (or the
    input's dtype where wider); the model computes in its own dtype (float32); its output is scaled by
    the normalisation's factor times the run's stored output scale, in float64 (the factor as a power
    of two times a number near 1, so that it neither overflows nor underflows before the product
    does), and returned in the input's dtype. Inputs must be real floating point and finite; a
    prediction beyond the range of the input's dtype raises a ValueError naming the sample.

    Loading reads ``config.json`` and ``checkpoint.npz`` only, and generates no data. A run saved
    before runs stored their output scale raises ``training.NoStoredScale``, which says how to add it.
    """
    directory = Path(path)
    run = read_run(directory, problem)
    state = load(directory, run, optimiser(run))
    return as_solver(state.model, state.scale, run, directory)


def as_solver(model: Funcformer, scale: float, run: Run, directory: Path) -> Solver:
    """``model`` (trained on ``run`` with output scale ``scale``, saved in ``directory``) as a
    validating numpy function; see ``load_solver``."""
    n = run.task.n
    dtype = jax.tree_util.tree_leaves(model)[0].dtype
    compiled = jax.jit(lambda m, x: jax.vmap(m)(x))
    name = f"load_solver({directory})"

    def solver(x: np.ndarray) -> np.ndarray:
        a = np.asarray(x)
        if a.ndim != 3 or a.shape[1:] != (n, n):
            raise ValueError(f"{name}: expected {run.problem.input} coefficients of shape (B, {n}, {n}), got {a.shape}")
        if not np.issubdtype(a.dtype, np.floating):
            raise TypeError(f"{name}: expected real floating-point {run.problem.input}, got dtype {a.dtype}")
        if not np.all(np.isfinite(a)):
            raise ValueError(f"{name}: the {run.problem.input} coefficients contain NaN or infinite values")
        work = np.promote_types(a.dtype, np.float64)
        inputs, log2_factors = run.problem.normalise(a.astype(work))
        unit = np.asarray(compiled(model, jnp.asarray(inputs.astype(dtype)))).astype(work) * scale
        # c u' as 2^k (2^(l - k) u'), k = round(l): neither the factor nor the product over- or underflows early.
        zero = np.isneginf(log2_factors)  # c = 0: a zero prediction
        log2 = np.where(zero, 0.0, log2_factors)
        k = np.round(log2)
        with np.errstate(over="ignore"):
            scaled = np.ldexp(unit * np.exp2(log2 - k)[:, None, None], k.astype(int)[:, None, None])
            result = np.where(zero[:, None, None], 0.0, scaled).astype(a.dtype)
        overflow = np.flatnonzero(~np.all(np.isfinite(result), axis=(1, 2)))
        if overflow.size:
            i = overflow[0]
            size = (np.log2(np.max(np.abs(unit[i]))) + log2[i]) * np.log10(2.0)
            raise ValueError(
                f"{name}: the prediction for sample {i} would reach about 1e{size:.0f}, beyond the range of "
                f"{a.dtype} (largest {np.finfo(a.dtype).max:.3g}); {overflow.size} of {len(a)} samples overflow"
            )
        return result

    return solver


def evaluate(path: str | Path, test_size: int = 1024, problem: Problem[Any] | None = None) -> dict[str, Any]:
    """Test metrics of the run in ``path`` (written to its metrics.json): relative L2 error (mean,
    median, p95) beside the truncation floor and two baselines fitted on the run's training set (the
    mean target, and the least-squares linear map from inputs to targets), and seconds per prediction
    (batch ``test_size``) vs per exact solve; with ``problem``, a run of another task is refused. It
    holds the run directory (``holding_run``): a run in another process's use is refused."""
    directory = Path(path)
    with holding_run(directory):
        return _evaluate(directory, test_size, problem)


def _evaluate(directory: Path, test_size: int, problem: Problem[Any] | None) -> dict[str, Any]:
    run = read_run(directory, problem)
    state = load(directory, run, optimiser(run))
    solver = as_solver(state.model, state.scale, run, directory)
    test = run.problem.dataset(default_cache(), run.task, run.problem.test_seed, test_size, True)
    train = run.problem.dataset(default_cache(), run.task, run.seed, run.train_size, False)
    solver(test.inputs)  # compile
    start = time.perf_counter()
    predicted = solver(test.inputs)
    model_seconds = time.perf_counter() - start
    start = time.perf_counter()
    run.problem.solve(test.inputs, run.task)
    solve_seconds = time.perf_counter() - start
    mean_target = np.broadcast_to(train.u.mean(axis=0), test.u.shape)
    linear = apply_linear(fit_least_squares(train.inputs, train.u), test.inputs)
    metrics = {
        "problem": run.problem.name,
        "test": summary(relative_l2(predicted, test.exact())),
        "truncation_floor": truncation_floor(test.exact(), run.task.n),
        "mean_predictor": summary(relative_l2(mean_target, test.exact())),
        "least_squares": summary(relative_l2(linear, test.exact())),
        "test_size": test_size,
        "parameters": parameter_count(state.model),
        "steps": state.step,
        "train_seconds": state.seconds,
        "seconds_per_prediction": model_seconds / test_size,
        "seconds_per_solve": solve_seconds / test_size,
    }
    write_atomically(directory / METRICS, json.dumps(metrics, indent=2))
    return metrics
