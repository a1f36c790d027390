"""``Problem``: what the shared training layer needs to know of an operator-learning task.

A task (``funcformer.poisson``, ``funcformer.darcy``) defines its data and its exact solver; this
layer trains, checkpoints, resumes, evaluates, plots and serves any of them through one ``Problem``
value, which the task's package exports as ``PROBLEM`` and hands to every function of this layer
(the layer never looks a task up by name: it imports no task). The model maps n x n Chebyshev coefficients
to n x n coefficients; a problem says how its inputs are normalised before the model sees them:

    x  ->  (x', log2 c) = normalise(x)    (host, float64; x' the model's input, c >= 0 a factor)
    u  ~   c * scale * model(x')          (scale: the run's output scale, ``data.output_scale``)

The factor comes as its base-2 logarithm (-inf for c = 0), so that inputs of any finite size give
a finite prediction wherever the prediction itself is finite.

A normalisation that is an exact symmetry of the operator (Poisson: linearity, x' = f / ||f||;
Darcy: a constant shift of the log-permeability, x' = kappa - mean(kappa), c = exp(-mean(kappa)))
leaves the model only the part of the problem that is not. Training and ``load_solver`` use the
same ``normalise``: one definition, on the host in float64.

Every prediction of a task can be checked a posteriori: ``residual(x, u, task)`` is the task's PDE residual
of u mapped through an inverse Laplacian, relative to ||u|| (an estimate of the relative error; each
task's ``residual`` says how close, and what it costs), and it is invariant under the
normalisation: residual(x, u) = residual(x', u / c). ``load_solver(DIR, check=True)`` and
``funcformer.learning.trust`` use it. A problem built from a user's arrays (``funcformer.learning.arrays``)
has neither an exact solver nor a residual: ``solve`` and ``residual`` are None.
"""

from __future__ import annotations

import dataclasses
import reprlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Generic, Protocol, TypeVar

import numpy as np

from funcformer.learning._files import cached_arrays
from funcformer.learning.metric import truncate
from funcformer.model import ModelConfig

__all__ = ["DataConfigLike", "Dataset", "Problem", "cached_dataset", "check_problem"]


class DataConfigLike(Protocol):
    """What every task's ``DataConfig`` holds: the parameters that define its datasets (a frozen
    dataclass of ints), among them the resolution n."""

    __dataclass_fields__: ClassVar[dict[str, Any]]

    @property
    def n(self) -> int:
        """Chebyshev coefficients per axis of the model's inputs and outputs."""
        ...


T = TypeVar("T", bound=DataConfigLike)


@dataclass(frozen=True, eq=False)
class Dataset(Generic[T]):
    """``count`` inputs with their truncated targets, and the exact solutions for the metric."""

    task: T
    seed: int
    inputs: np.ndarray
    """(count, n, n) inputs."""
    u: np.ndarray
    """(count, n, n) targets: the exact solutions truncated to n x n."""
    u_fine: np.ndarray | None
    """(count, m, m) exact solutions, m >= n (None in a training set, which needs only u)."""

    def exact(self) -> np.ndarray:
        """The fine solutions, for the metric."""
        if self.u_fine is None:
            raise ValueError("this dataset was made without its fine solutions (fine=False)")
        return self.u_fine


D = TypeVar("D", bound=Dataset[Any])


def cached_dataset(
    kind: Callable[[T, int, np.ndarray, np.ndarray, np.ndarray | None], D],
    cache_dir: str | Path,
    name: str,
    version: int,
    task: T,
    seed: int,
    count: int,
    fine: bool,
    fine_size: int,
    make: Callable[[], D],
    inputs: str = "inputs",
) -> D:
    """The dataset ``make()`` draws and solves (``count`` samples of ``seed``, with their (fine_size,
    fine_size) solutions), through an on-disk cache (``cached_arrays``): one .npz file under ``cache_dir``
    per dataset, named after ``name``, ``version``, the task's fields and ``seed``, which also stores
    those numbers to check them by, and holds the largest count asked for (the first samples of a seed
    do not depend on the count: ``make`` must draw them in order). A missing, stale, corrupt or too
    small file is regenerated. The file holds the inputs (under ``inputs``) and the solutions, all of
    them if ``fine``, else only the n x n targets (a training set); ``kind`` builds the result."""
    fields = dataclasses.asdict(task)
    stem = "_".join([f"{name}_v{version}", *(f"{key}{value}" for key, value in fields.items())])
    path = Path(cache_dir) / f"{stem}_seed{seed}{'' if fine else '_truncated'}.npz"
    m = fine_size if fine else task.n

    def arrays() -> dict[str, np.ndarray]:
        made = make()
        return {inputs: made.inputs, "u": truncate(made.exact(), m)}

    stored = cached_arrays(
        path,
        np.array([version, *fields.values(), seed, fine], dtype=np.int64),
        count,
        {inputs: (task.n, task.n), "u": (m, m)},
        arrays,
    )
    u = stored["u"]
    return kind(task, seed, stored[inputs], truncate(u, task.n), u if fine else None)


@dataclass(frozen=True, eq=False)
class Problem(Generic[T]):
    """An operator-learning task as the training layer sees it: the functions that make, normalise and
    solve its data, and its default settings (one value per task: compared by identity). Unlike the
    settings records (``ModelConfig``, a task's ``DataConfig``, ``RunConfig``) it is code, not data: a
    run's config.json saves it by ``name`` only."""

    name: str
    """The task's name: saved in each run's config.json (a run of another task is refused by it)."""
    title: str
    """The task's name in messages and figures ("Poisson")."""
    input: str
    """What the inputs are, for figures ("source f")."""
    output: str
    """What the outputs are, for figures ("potential u")."""
    task: Callable[..., T]
    """The task's parameters, from their fields (its ``DataConfig`` dataclass)."""
    model: ModelConfig
    """The default model."""
    dataset: Callable[[Path, T, int, int, bool], Dataset[T]]
    """(cache directory, task, seed, count, keep the fine solutions) -> a cached dataset."""
    test_seed: int
    """The held-out seed of the test set; training refuses it."""
    normalise: Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]]
    """float64 inputs (B, n, n) -> (the model's inputs (B, n, n), log2 of the factors (B,)): see the module."""
    solve: Callable[[np.ndarray, T], np.ndarray] | None = None
    """The exact solver, (B, n, n) inputs -> (B, m, m) solutions (timed beside the model); None for a
    problem that has none (``funcformer.learning.arrays``: a user's data), whose runs time no solver."""
    residual: Callable[[np.ndarray, np.ndarray, T], np.ndarray] | None = None
    """The a-posteriori check: ((B, n, n) inputs, (B, n, n) predicted outputs, task) -> (B,) relative
    residuals, float64, invariant under ``normalise`` (see the module); None for a problem that has none,
    whose predictions ``load_solver(DIR, check=True)`` refuses to check and ``evaluate`` does not calibrate."""
    defaults: Mapping[str, Any] = field(default_factory=dict)
    """The default run's settings where they differ from ``settings.RunConfig``'s."""
    command: str | None = None
    """The task's command line (``python -m funcformer.poisson``), named in messages that say how to
    resume or evaluate a run; None for a problem that has none, whose messages name the Python call."""

    def check_train_seed(self, seed: int) -> int:
        """``seed``, or a ValueError if it is the held-out ``test_seed``."""
        if seed == self.test_seed:
            raise ValueError(f"training seed {seed} is the {self.title} task's held-out test seed")
        return seed

    def invocation(self, arguments: str, call: str) -> str:
        """How a user runs one of the task's jobs, quoted for a message: ``command arguments`` where the
        task has a command line, else the Python ``call``."""
        return f"`{self.command} {arguments}`" if self.command else f"`{call}`"

    def __repr__(self) -> str:
        return f"Problem({self.name!r})"


def check_problem(problem: object, what: str) -> None:
    """A TypeError naming ``what`` and the value given unless ``problem`` is a ``Problem``."""
    if not isinstance(problem, Problem):
        raise TypeError(
            f"{what}: problem must be a funcformer.learning.Problem (a task's PROBLEM, such as "
            f"funcformer.poisson.PROBLEM, or funcformer.learning.from_arrays' result), got {reprlib.repr(problem)}"
        )
