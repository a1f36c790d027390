"""The Darcy-flow operator-learning task (docs/darcy.md): -div(exp(kappa) grad u) = 1, kappa -> u.

``task``: log-permeabilities, the spectral reference solver, the normalisation, cached datasets (the
metric is the shared one, ``funcformer.learning.metric``). Training, checkpoints, evaluation, plots
and the CLI (``python -m funcformer.darcy``) are the shared operator-learning layer's
(``funcformer.learning``), given this task as ``PROBLEM``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal, overload

import numpy as np

from funcformer import learning
from funcformer.darcy.task import TEST_SEED, Task, load_dataset, normalise, residual, solve
from funcformer.learning import CheckedSolver, Problem, Run, Solver, evaluate, train
from funcformer.model import Config

__all__ = ["MODEL", "PROBLEM", "Run", "Task", "evaluate", "load_solver", "train"]

MODEL = Config(channels=8, hidden_channels=16, layers=4, axes="xxyy", mixers="km", points=16)
"""The default model: a kernel integral along x, an MLP, a kernel integral along y, an MLP, the MLPs'
ReLU at 16 Chebyshev points (README, "Darcy flow": as accurate as attention, at half its cost and a
third of its parameters; kernel layers alone, which are linear, do 5x worse; 32 points cost a third
more and gained nothing)."""


def _solve(kappa: np.ndarray, task: Task) -> np.ndarray:
    return solve(kappa, task.fine)


def _residual(kappa: np.ndarray, u: np.ndarray, task: Task) -> np.ndarray:
    return residual(kappa, u, task.fine)


PROBLEM: Problem[Task] = Problem(
    name="darcy",
    title="Darcy",
    input="log-permeability kappa",
    output="pressure u",
    task=Task,
    model=MODEL,
    dataset=load_dataset,
    test_seed=TEST_SEED,
    normalise=normalise,
    solve=_solve,
    residual=_residual,
    defaults={"steps": 8000},
)
"""The Darcy task for the training layer: ``Run.of(PROBLEM, steps=...)`` is a run of it."""


@overload
def load_solver(path: str | Path, *, check: Literal[False] = False) -> Solver: ...


@overload
def load_solver(path: str | Path, *, check: Literal[True]) -> CheckedSolver: ...


@overload
def load_solver(path: str | Path, *, check: bool) -> Solver | CheckedSolver: ...


def load_solver(path: str | Path, *, check: bool = False) -> Solver | CheckedSolver:
    """The Darcy run in ``path`` as a function from numpy log-permeability coefficients (B, 16, 16) to
    pressure coefficients (B, 16, 16) (``funcformer.learning.load_solver``, which documents dtypes and sizes).
    With ``check``, each result also carries every prediction's residual and distance, and a batch
    with samples above the run's calibrated thresholds warns (``funcformer.learning.trust``)."""
    return learning.load_solver(path, PROBLEM, check=check)
