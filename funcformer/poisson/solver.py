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

from funcformer.model import Funcformer, parameter_count
from funcformer.poisson.task import TEST_SEED, load_dataset, relative_l2, solve, summary, truncation_floor
from funcformer.poisson.training import (
    METRICS,
    Run,
    default_cache,
    load,
    optimiser,
    output_scale,
    predict,
    read_run,
    write_atomically,
)

__all__ = ["Solver", "as_solver", "evaluate", "load_solver"]

Solver = Callable[[np.ndarray], np.ndarray]


def load_solver(path: str | Path) -> Solver:
    """The run in ``path`` as a function: numpy source coefficients (B, N, N) -> potential
    coefficients (B, N, N), both in the ``chebval2d`` convention."""
    directory = Path(path)
    run = read_run(directory)
    return as_solver(load(directory, run, optimiser(run)).model, run, directory)


def as_solver(model: Funcformer, run: Run, directory: Path) -> Solver:
    """``model`` (trained on ``run``, saved in ``directory``) as a validating numpy function."""
    n, scale = run.task.n, output_scale(run.task)
    dtype = jax.tree_util.tree_leaves(model)[0].dtype
    compiled = jax.jit(lambda m, f: predict(m, f, scale))

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
        return np.asarray(compiled(model, jnp.asarray(a, dtype)), a.dtype)

    return solver


def evaluate(path: str | Path, test_size: int = 1024) -> dict[str, Any]:
    """Test metrics of the run in ``path`` (written to its metrics.json): relative L2 error
    (mean, median, p95) beside the truncation floor, and seconds per prediction vs per solve."""
    directory = Path(path)
    run = read_run(directory)
    state = load(directory, run, optimiser(run))
    solver = as_solver(state.model, run, directory)
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
