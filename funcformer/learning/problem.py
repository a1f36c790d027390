"""``Problem``: what the shared training layer needs to know of an operator-learning task.

A task (``funcformer.poisson``, ``funcformer.darcy``) defines its data and its exact solver; this
layer trains, checkpoints, resumes, evaluates, plots and serves any of them through one ``Problem``
value, which the task's package exports as ``PROBLEM``. The model maps n x n Chebyshev coefficients
to n x n coefficients; a problem says how its inputs are normalised before the model sees them:

    x  ->  (x', log2 c) = normalise(x)    (host, float64; x' the model's input, c >= 0 a factor)
    u  ~   c * scale * model(x')          (scale: the run's output scale, ``training.output_scale``)

The factor comes as its base-2 logarithm (-inf for c = 0), so that inputs of any finite size give
a finite prediction wherever the prediction itself is finite.

A normalisation that is an exact symmetry of the operator (Poisson: linearity, x' = f / ||f||;
Darcy: a constant shift of the log-permeability, x' = kappa - mean(kappa), c = exp(-mean(kappa)))
leaves the model only the part of the problem that is not. Training and ``load_solver`` use the
same ``normalise``: one definition, on the host in float64.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, Protocol, TypeVar

import numpy as np

from funcformer.model import Config

__all__ = ["Dataset", "Problem", "TaskParameters", "problem_named"]


class TaskParameters(Protocol):
    """The parameters that define a task's datasets (a frozen dataclass of ints)."""

    @property
    def n(self) -> int:
        """Chebyshev coefficients per axis of the model's inputs and outputs."""
        ...


class Dataset(Protocol):
    """``count`` inputs with their truncated targets, and the exact solutions for the metric."""

    @property
    def inputs(self) -> np.ndarray:
        """(count, n, n) inputs."""
        ...

    @property
    def u(self) -> np.ndarray:
        """(count, n, n) targets: the exact solutions truncated to n x n."""
        ...

    def exact(self) -> np.ndarray:
        """(count, m, m) exact solutions (m >= n), for the metric."""
        ...


T = TypeVar("T", bound=TaskParameters)


@dataclass(frozen=True, eq=False)
class Problem(Generic[T]):
    """An operator-learning task as the training layer sees it (one value per task: compared by identity)."""

    name: str
    """The task's package, ``funcformer.<name>``, which exports this value as ``PROBLEM``."""
    title: str
    """The task's name in messages and figures ("Poisson")."""
    input: str
    """What the inputs are, for figures ("source f")."""
    output: str
    """What the outputs are, for figures ("potential u")."""
    task: Callable[..., T]
    """The task's parameters, from their fields (its ``Task`` dataclass)."""
    model: Config
    """The default model."""
    dataset: Callable[[Path, T, int, int, bool], Dataset]
    """(cache directory, task, seed, count, keep the fine solutions) -> a cached dataset."""
    test_seed: int
    """The held-out seed of the test set; training refuses it."""
    normalise: Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]]
    """float64 inputs (B, n, n) -> (the model's inputs (B, n, n), log2 of the factors (B,)): see the module."""
    solve: Callable[[np.ndarray, T], np.ndarray]
    """The exact solver, (B, n, n) inputs -> (B, m, m) solutions (timed beside the model)."""
    defaults: Mapping[str, Any] = field(default_factory=dict)
    """The default run's settings where they differ from ``training.Run``'s."""

    def check_train_seed(self, seed: int) -> int:
        """``seed``, or a ValueError if it is the held-out ``test_seed``."""
        if seed == self.test_seed:
            raise ValueError(f"training seed {seed} is the {self.title} task's held-out test seed")
        return seed

    def __repr__(self) -> str:
        return f"Problem({self.name!r})"


def problem_named(name: str) -> Problem[Any]:
    """The ``PROBLEM`` of the package ``funcformer.<name>`` (how a saved run finds its task)."""
    if not name.isidentifier():
        raise ValueError(f"no operator-learning task named {name!r}")
    try:
        module = importlib.import_module(f"funcformer.{name}")
    except ImportError as error:
        raise ValueError(f"no operator-learning task named {name!r} ({error})") from error
    problem = getattr(module, "PROBLEM", None)
    if not isinstance(problem, Problem):
        raise ValueError(f"funcformer.{name} defines no PROBLEM: not an operator-learning task")
    return problem
