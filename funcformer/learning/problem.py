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

Every prediction of a task can be checked a posteriori: ``residual(x, u, solver)`` is the task's PDE residual
of u mapped through an inverse Laplacian, relative to ||u|| (an estimate of the relative error; each
task's ``residual`` says how close, and what it costs), and it is invariant under the
normalisation: residual(x, u) = residual(x', u / c). ``load_solver(DIR, check=True)`` and
``funcformer.learning.trust`` use it. A problem built from a user's arrays (``funcformer.learning.arrays``)
has neither an exact solver nor a residual: ``solve`` and ``residual`` are None.
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import hashlib
import inspect
import reprlib
import sys
import types
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Generic, Protocol, TypeVar

import numpy as np

from applicative.training.store import cached_arrays
from funcformer.learning import metric
from funcformer.learning.metric import truncate
from funcformer.model import ModelConfig

__all__ = ["DataConfigLike", "Dataset", "Problem", "check_problem", "code_digest", "make_dataset"]


class DataConfigLike(Protocol):
    """What every task's ``DataConfig`` holds: the parameters that define its datasets (a frozen
    dataclass of ints), among them the resolution n and the size of the exact solutions."""

    __dataclass_fields__: ClassVar[dict[str, Any]]

    @property
    def n(self) -> int:
        """Chebyshev coefficients per axis of the model's inputs and outputs."""
        ...

    @property
    def solver(self) -> int:
        """The exact solver's resolution, the argument of ``Problem.solve`` and ``Problem.residual``."""
        ...

    @property
    def solution_size(self) -> int:
        """Chebyshev coefficients per axis of the exact solutions (those the metric compares with)."""
        ...


T = TypeVar("T", bound=DataConfigLike)


@dataclass(frozen=True, eq=False)
class Dataset(Generic[T]):
    """``count`` inputs with their truncated targets, and the exact solutions for the metric."""

    data_config: T
    seed: int
    inputs: np.ndarray
    """(count, n, n) inputs."""
    u: np.ndarray
    """(count, n, n) targets: the exact solutions truncated to n x n."""
    u_fine: np.ndarray | None
    """(count, m, m) exact solutions, m = ``data_config.solution_size`` >= n (None in a training set,
    which needs only u)."""

    def exact(self) -> np.ndarray:
        """The fine solutions, for the metric."""
        if self.u_fine is None:
            raise ValueError("this dataset was made without its fine solutions (fine=False)")
        return self.u_fine

    def truncation_floor(self) -> dict[str, float]:
        """The error of the truncated exact solutions: what a perfect n x n model scores on this set."""
        return metric.truncation_floor(self.exact(), self.data_config.n)


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
    data_config: Callable[..., T]
    """The task's data configuration from its fields (its ``DataConfig`` dataclass; no fields: the default)."""
    model: ModelConfig
    """The default model."""
    test_seed: int
    """The held-out seed of the test set; training refuses it."""
    normalise: Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]]
    """float64 inputs (B, n, n) -> (the model's inputs (B, n, n), log2 of the factors (B,)): see the module."""
    draw: Callable[[T, int, int], np.ndarray] | None = None
    """(data config, seed, count) -> (count, n, n) inputs, float64, drawn in order (the first samples of a
    larger count are a smaller count's); None for a problem of a user's arrays (``stored``)."""
    solve: Callable[[np.ndarray, int], np.ndarray] | None = None
    """The exact solver, ((B, n, n) inputs, the config's ``solver``) -> (B, m, m) solutions, m the config's
    ``solution_size`` (timed beside the model); None for a problem that has none (a user's data,
    ``funcformer.learning.arrays``), whose runs time no solver."""
    residual: Callable[[np.ndarray, np.ndarray, int], np.ndarray] | None = None
    """The a-posteriori check: ((B, n, n) inputs, (B, n, n) predicted outputs, the config's ``solver``) -> (B,) relative
    residuals, float64, invariant under ``normalise`` (see the module); None for a problem that has none,
    whose predictions ``load_solver(DIR, check=True)`` refuses to check and ``evaluate`` does not calibrate."""
    stored: Callable[[T, int, int, bool], Dataset[T]] | None = None
    """For a problem of a user's arrays: (data config, seed, count, keep the fine solutions) -> the dataset,
    from memory; None for a task that draws and solves its data (``draw``, ``solve``)."""
    defaults: Mapping[str, Any] = field(default_factory=dict)
    """The default run's settings where they differ from ``settings.RunConfig``'s."""
    command: str | None = None
    """The task's command line (``python -m funcformer.poisson``), named in messages that say how to
    resume or evaluate a run; None for a problem that has none, whose messages name the Python call."""

    def dataset(self, cache_dir: str | Path, config: T, seed: int, count: int, fine: bool = True) -> Dataset[T]:
        """The first ``count`` samples of ``seed``: the problem's ``stored`` arrays, or ``make_dataset``'s
        through an on-disk cache (``cached_arrays``), one .npz file under ``cache_dir`` per dataset, as
        large as the largest count asked for. Its key is what the data depend on: the task's name, the
        config's fields, the seed and a SHA-256 of the source code that draws and solves them
        (``code_digest``), so that a change of the code regenerates them, and a stale dataset is never
        read. The file holds the inputs and the solutions, all of them if ``fine``, else only the n x n
        targets (a training set)."""
        if self.stored is not None:
            return self.stored(config, seed, count, fine)
        digest = code_digest(self)
        fields = dataclasses.asdict(config)
        stem = "_".join([self.name, digest.hex()[:8], *(f"{key}{value}" for key, value in fields.items())])
        path = Path(cache_dir) / f"{stem}_seed{seed}{'' if fine else '_truncated'}.npz"
        n, m = config.n, config.solution_size if fine else config.n

        def arrays() -> dict[str, np.ndarray]:
            made = make_dataset(self, config, seed, count)
            return {"inputs": made.inputs, "u": truncate(made.exact(), m)}

        key = np.array([*fields.values(), seed, fine, *np.frombuffer(digest, np.int64)], dtype=np.int64)
        stored = cached_arrays(path, key, count, {"inputs": (n, n), "u": (m, m)}, arrays)
        u = stored["u"]
        return Dataset(config, seed, stored["inputs"], truncate(u, n), u if fine else None)

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


def make_dataset(problem: Problem[T], config: T, seed: int, count: int, fine: bool = True) -> Dataset[T]:
    """``count`` inputs of ``seed`` drawn by the problem (``Problem.draw``) and solved exactly
    (``Problem.solve``), uncached; the fine solutions are kept only if ``fine``. A TypeError for a
    problem that does not draw and solve its data (a user's arrays)."""
    if problem.draw is None or problem.solve is None:
        raise TypeError(f"{problem!r} does not draw and solve its data: its datasets are its arrays")
    inputs = problem.draw(config, seed, count)
    u_fine = problem.solve(inputs, config.solver)
    return Dataset(config, seed, inputs, truncate(u_fine, config.n), u_fine if fine else None)


@functools.cache
def code_digest(problem: Problem[Any]) -> bytes:
    """A SHA-256 of the source of the modules that define the problem's ``draw`` and ``solve``, and of the
    library modules (``applicative``, ``funcformer``) that those modules import: what a dataset's numbers
    depend on, besides its config and seed. The imports are read from the source, not from what a
    process happens to have imported, so every process computes the same digest."""
    sources = {f.__module__: inspect.getsource(sys.modules[f.__module__]) for f in (problem.draw, problem.solve) if f}
    for name in list(sources):
        for imported, path in _library_imports(sources[name], sys.modules[name]).items():
            sources[imported] = path.read_text(encoding="utf-8")
    digest = hashlib.sha256()
    for name in sorted(sources):
        digest.update(name.encode())
        digest.update(sources[name].encode())
    return digest.digest()


def _library_imports(source: str, module: types.ModuleType) -> dict[str, Path]:
    """The ``applicative`` and ``funcformer`` modules, and their files, that ``module``'s ``source``
    imports (``import a.b``, ``from a import b`` of a submodule b or of a name defined in a, relative
    imports resolved), whether or not this process has imported them (``if TYPE_CHECKING:`` counts)."""
    package = module.__name__ if hasattr(module, "__path__") else module.__name__.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            parts = package.split(".")[: package.count(".") + 2 - node.level] if node.level else []
            base = ".".join([*parts, *([node.module] if node.module else [])])
            found |= {f"{base}.{a.name}" if _library_file(f"{base}.{a.name}") else base for a in node.names}
    return {name: path for name in found if (path := _library_file(name))}


def _library_file(name: str) -> Path | None:
    """The source file of module ``name`` of ``applicative`` or ``funcformer``, found on disk; None for a
    name that is not one."""
    top, *rest = name.split(".")
    if top not in ("applicative", "funcformer"):
        return None
    path = Path(inspect.getfile(sys.modules[top])).parent.joinpath(*rest)
    for candidate in (path.with_suffix(".py"), path / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def check_problem(problem: object, what: str) -> None:
    """A TypeError naming ``what`` and the value given unless ``problem`` is a ``Problem``."""
    if not isinstance(problem, Problem):
        raise TypeError(
            f"{what}: problem must be a funcformer.learning.Problem (a task's PROBLEM, such as "
            f"funcformer.poisson.PROBLEM, or funcformer.learning.from_arrays' result), got {reprlib.repr(problem)}"
        )
