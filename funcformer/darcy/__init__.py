"""The Darcy-flow operator-learning task (docs/darcy.md): -div(exp(kappa) grad u) = 1, kappa -> u.

``task``: log-permeabilities, the spectral reference solver, the normalisation, cached datasets (the
metric is the shared one, ``funcformer.learning.metric``). Training, checkpoints, evaluation, plots
and the CLI (``python -m funcformer.darcy``) are the shared operator-learning layer's
(``funcformer.learning``), given this task as ``PROBLEM``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal, overload

import numpy as np

from funcformer import learning
from funcformer.darcy.task import TEST_SEED, DataConfig, load_dataset, normalise, residual, solve
from funcformer.learning import CheckedSolver, Problem, RunConfig, Solver, train
from funcformer.model import ModelConfig

__all__ = ["MODEL", "PROBLEM", "DataConfig", "RunConfig", "evaluate", "load_solver", "train"]

MODEL = ModelConfig(channels=8, hidden_channels=16, layers=4, axes="xxyy", mixers="km", points=16)
"""The default model: a kernel integral along x, an MLP, a kernel integral along y, an MLP (8
channels, 16 in the MLPs), the MLPs' ReLU at 16 Chebyshev points; docs/darcy.md, "Choosing the
architecture", has the search that chose it."""


def _solve(kappa: np.ndarray, task: DataConfig) -> np.ndarray:
    return solve(kappa, task.fine)


def _residual(kappa: np.ndarray, u: np.ndarray, task: DataConfig) -> np.ndarray:
    return residual(kappa, u, task.fine)


PROBLEM: Problem[DataConfig] = Problem(
    name="darcy",
    title="Darcy",
    input="log-permeability kappa",
    output="pressure u",
    task=DataConfig,
    model=MODEL,
    dataset=load_dataset,
    test_seed=TEST_SEED,
    normalise=normalise,
    solve=_solve,
    residual=_residual,
    command="python -m funcformer.darcy",
    defaults={"steps": 8000},
)
"""The Darcy task for the training layer: ``RunConfig.of(PROBLEM, steps=...)`` is a run of it."""


@overload
def load_solver(path: str | Path, *, check: Literal[False] = False) -> Solver: ...


@overload
def load_solver(path: str | Path, *, check: Literal[True]) -> CheckedSolver: ...


@overload
def load_solver(path: str | Path, *, check: bool) -> Solver | CheckedSolver: ...


def load_solver(path: str | Path, *, check: bool = False) -> Solver | CheckedSolver:
    """The Darcy run in ``path`` as a function from numpy log-permeability coefficients (B, P, Q) to
    pressure coefficients (B, P, Q), any counts, projected onto the model's 16 x 16
    (``funcformer.learning.load_solver``, which documents the projection, dtypes and sizes).
    With ``check``, each result also carries every prediction's residual and distance, and a batch
    with samples above the run's calibrated thresholds warns (``funcformer.learning.trust``)."""
    return learning.load_solver(path, PROBLEM, check=check)


def evaluate(path: str | Path, test_size: int = 1024) -> dict[str, Any]:
    """Test metrics of the Darcy run in ``path`` (``funcformer.learning.evaluate``, which documents
    them), written to its metrics.json."""
    return learning.evaluate(path, PROBLEM, test_size)
