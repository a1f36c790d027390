"""A trained run as a solver, and its evaluation on the held-out test set (the metric of docs/poisson.md)."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from applicative.instances.chebyshev import gram
from funcformer.model import Funcformer, parameter_count
from funcformer.poisson.task import TEST_SEED, load_dataset, relative_l2, solve, summary, truncation_floor
from funcformer.poisson.training import (
    METRICS,
    Run,
    default_cache,
    load,
    optimiser,
    read_run,
    write_atomically,
)

__all__ = ["Solver", "as_solver", "evaluate", "load_solver"]

Solver = Callable[[np.ndarray], np.ndarray]


def load_solver(path: str | Path) -> Solver:
    """The run in ``path`` as a function: numpy source coefficients (B, N, N) -> potential
    coefficients (B, N, N), both in the ``chebval2d`` convention.

    Dtypes: the model computes in its own dtype (float32); the result has the input's dtype. Each
    source is scaled to unit L2 norm and the model's output scaled back by that norm times the run's
    stored output scale; the norm and both scalings are computed on the host in float64 (or the
    input's dtype where wider), after dividing the source by a power of two near its largest
    coefficient. So any finite source, from 1e-300 to 1e300, gives a finite prediction, and the
    prediction for s f is s times that for f to float32 rounding. A prediction beyond the range of
    the input's dtype (or of float64) raises a ValueError; a zero source predicts zero.

    Loading reads ``config.json`` and ``checkpoint.npz`` only, and generates no data. A run saved
    before runs stored their output scale raises ``training.NoStoredScale``, which says how to add it.
    """
    directory = Path(path)
    run = read_run(directory)
    state = load(directory, run, optimiser(run))
    return as_solver(state.model, state.scale, run, directory)


def as_solver(model: Funcformer, scale: float, run: Run, directory: Path) -> Solver:
    """``model`` (trained on ``run`` with output scale ``scale``, saved in ``directory``) as a
    validating numpy function; see ``load_solver``."""
    n = run.task.n
    dtype = jax.tree_util.tree_leaves(model)[0].dtype
    compiled = jax.jit(lambda m, f: jax.vmap(m)(f))
    g = gram(n)

    def solver(f: np.ndarray) -> np.ndarray:
        a = np.asarray(f)
        if a.ndim != 3 or a.shape[1:] != (n, n):
            raise ValueError(
                f"load_solver({directory}): expected source coefficients of shape (B, {n}, {n}), got {a.shape}"
            )
        if not np.issubdtype(a.dtype, np.floating):
            raise TypeError(f"load_solver({directory}): expected real floating-point sources, got dtype {a.dtype}")
        if not np.all(np.isfinite(a)):
            raise ValueError(f"load_solver({directory}): the sources contain NaN or infinite coefficients")
        work = np.promote_types(a.dtype, np.float64)
        # f = 2^e y with the largest |y| in [1/2, 1): exact, and y's norm neither overflows nor underflows.
        _, exponent = np.frexp(np.max(np.abs(a.astype(work)), axis=(1, 2)))
        exponent = exponent[:, None, None]
        y = np.ldexp(a.astype(work), -exponent)
        norm = np.sqrt(np.sum((g @ y @ g) * y, axis=(1, 2)))[:, None, None]
        zero = norm == 0  # f = 0 predicts u = 0
        norm = np.where(zero, 1.0, norm)
        unit = np.asarray(compiled(model, jnp.asarray((y / norm).astype(dtype)))).astype(work) * (norm * scale)
        with np.errstate(over="ignore"):
            result = np.where(zero, 0.0, np.ldexp(unit, exponent)).astype(a.dtype)
        overflow = np.flatnonzero(~np.all(np.isfinite(result), axis=(1, 2)))
        if overflow.size:
            i = overflow[0]
            size = (np.log2(np.max(np.abs(unit[i]))) + exponent[i, 0, 0]) * np.log10(2.0)
            raise ValueError(
                f"load_solver({directory}): the prediction for source {i} would reach about 1e{size:.0f}, "
                f"beyond the range of {a.dtype} (largest {np.finfo(a.dtype).max:.3g}); "
                f"{overflow.size} of {len(a)} sources overflow"
            )
        return result

    return solver


def evaluate(path: str | Path, test_size: int = 1024) -> dict[str, Any]:
    """Test metrics of the run in ``path`` (written to its metrics.json): relative L2 error
    (mean, median, p95) beside the truncation floor, and seconds per prediction vs per solve."""
    directory = Path(path)
    run = read_run(directory)
    state = load(directory, run, optimiser(run))
    solver = as_solver(state.model, state.scale, run, directory)
    test = load_dataset(default_cache(), run.task, TEST_SEED, test_size)
    solver(test.f)  # compile
    start = time.perf_counter()
    predicted = solver(test.f)
    model_seconds = time.perf_counter() - start
    start = time.perf_counter()
    solve(test.f, run.task.fine)
    solve_seconds = time.perf_counter() - start
    metrics = {
        "test": summary(relative_l2(predicted, test.exact())),
        "truncation_floor": truncation_floor(test),
        "test_size": test_size,
        "parameters": parameter_count(state.model),
        "steps": state.step,
        "train_seconds": state.seconds,
        "seconds_per_prediction": model_seconds / test_size,
        "seconds_per_solve": solve_seconds / test_size,
    }
    write_atomically(directory / METRICS, json.dumps(metrics, indent=2))
    return metrics
