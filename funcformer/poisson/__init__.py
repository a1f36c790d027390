"""The Poisson operator-learning task (docs/poisson.md) and its Funcformer demo.

``task``: sources, the spectral reference solver, cached datasets (the metric is the shared one); ``families``: source
families for out-of-distribution tests. Training, checkpoints, evaluation, plots and the CLI
(``python -m funcformer.poisson``) are the shared operator-learning layer's (``funcformer.learning``),
given this task as ``PROBLEM``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal, overload

import numpy as np

from funcformer import learning
from funcformer.learning import CheckedSolver, Problem, RunConfig, Solver, train
from funcformer.model import ModelConfig
from funcformer.poisson.task import TEST_SEED, DataConfig, load_dataset, normalise, residual, solve

__all__ = ["MODEL", "PROBLEM", "DataConfig", "RunConfig", "evaluate", "load_solver", "train"]

MODEL = ModelConfig(mixers="k")
"""The default model: four learned kernel integrals along x and y in turn (``mixers="k"``, every other
field ``ModelConfig``'s default); docs/poisson.md, "Choosing the architecture", has the search that chose it."""


def _solve(f: np.ndarray, task: DataConfig) -> np.ndarray:
    return solve(f, task.fine)


def _residual(f: np.ndarray, u: np.ndarray, task: DataConfig) -> np.ndarray:
    return residual(f, u, task.fine)


PROBLEM: Problem[DataConfig] = Problem(
    name="poisson",
    title="Poisson",
    input="source f",
    output="potential u",
    task=DataConfig,
    model=MODEL,
    dataset=load_dataset,
    test_seed=TEST_SEED,
    normalise=normalise,
    solve=_solve,
    residual=_residual,
    command="python -m funcformer.poisson",
)
"""The Poisson task for the training layer: ``RunConfig.of(PROBLEM, steps=...)`` is a run of it."""


@overload
def load_solver(path: str | Path, *, check: Literal[False] = False) -> Solver: ...


@overload
def load_solver(path: str | Path, *, check: Literal[True]) -> CheckedSolver: ...


@overload
def load_solver(path: str | Path, *, check: bool) -> Solver | CheckedSolver: ...


def load_solver(path: str | Path, *, check: bool = False) -> Solver | CheckedSolver:
    """The Poisson run in ``path`` as a function from numpy source coefficients (B, P, Q) to potential
    coefficients (B, P, Q), any counts, projected onto the model's 16 x 16 (``funcformer.learning.load_solver``,
    which documents the projection, dtypes and sizes).
    With ``check``, each result also carries every prediction's residual and distance, and a batch
    with samples above the run's calibrated thresholds warns (``funcformer.learning.trust``)."""
    return learning.load_solver(path, PROBLEM, check=check)


def evaluate(path: str | Path, test_size: int = 1024) -> dict[str, Any]:
    """Test metrics of the Poisson run in ``path`` (``funcformer.learning.evaluate``, which documents
    them), written to its metrics.json."""
    return learning.evaluate(path, PROBLEM, test_size)
