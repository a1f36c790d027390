"""A ``Problem`` from a user's own data: numpy arrays in memory, no task package, no exact solver.

The data are B pairs (input, output) of functions on [-1, 1]^2 as 2-D Chebyshev series in the
``chebval2d`` convention (C[i, j] multiplies T_i(x) T_j(y)):

    inputs   (B, n, n)   the operator's inputs, at the model's resolution n
    outputs  (B, m, m)   the exact outputs, m >= n

The model maps n x n coefficients to n x n; it is trained on the outputs truncated to n x n and
measured against all m x m of them, so the truncation floor (``metric.truncation_floor``) is the
error of that truncation (0 where m = n). Data sampled at points rather than as coefficients come
through ``lobatto_coefficients`` (values on the Chebyshev-Gauss-Lobatto grid -> the interpolant's
coefficients), or all at once through ``from_values``.

The split is fixed by position: the last ``test_size`` samples are the held-out test set (the
problem's ``test_seed``), the others the training set. There is one training set: every training
seed gives it (a run's seed still draws its initialisation and minibatch order), ``RunConfig.train_size``
takes its first samples and may not exceed it (``RunConfig.of(problem)`` takes all of it), and
``data.output_scale`` averages over its first 1024 samples, or all of them where it holds fewer.
The test seed is ``data.SCALE_SEED``: training refuses the test seed, so the one request for that
seed without the exact outputs (``fine`` false) is ``output_scale``'s, answered from the training set;
with them (``fine`` true) it is the test set's.

The data configuration saved in a run's config.json is an ``ArraysDataConfig``: the resolutions, the sizes of the two
sets and a fingerprint of the arrays (a hash of their float64 values), so a run is read back only by
a problem built from the same arrays; any other is refused (ValueError) by ``read_run``,
``load_solver``, ``evaluate``, ``train(..., resume=True)`` and ``checkpoints.load``.

The problem has no exact solver and no a-posteriori residual (``Problem.solve`` and
``Problem.residual`` are None): ``solver.evaluate`` computes the floor and the baselines from the
data, times no solver and stores no trust calibration, and ``load_solver(DIR, problem, check=True)``
raises a ValueError. Inputs are not normalised by default (x' = x, c = 1: the model sees them as
given); a ``normalise`` with ``Problem.normalise``'s contract may be passed instead.

>>> x = np.random.default_rng(0).standard_normal((10, 4, 4))
>>> problem = from_arrays("doubling", x, 2.0 * x, test_size=2)
>>> problem.data_config().train_samples, problem.data_config().test_samples
(8, 2)
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, cast

import numpy as np

from applicative.instances.collocation import lobatto_to_coefficients
from funcformer._fields import check_fields
from funcformer.learning.data import SCALE_SAMPLES, SCALE_SEED
from funcformer.learning.metric import real_array, series_norm, truncate
from funcformer.learning.problem import Dataset, Problem
from funcformer.learning.settings import RunConfig
from funcformer.model import ModelConfig

__all__ = ["ArraysDataConfig", "from_arrays", "from_values", "lobatto_coefficients", "unnormalised"]

Normalise = Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]]

_BATCH = cast(int, next(f.default for f in dataclasses.fields(RunConfig) if f.name == "batch"))
"""``RunConfig``'s default minibatch, lowered to the training set's size where that is smaller."""


@dataclass(frozen=True)
class ArraysDataConfig:
    """What identifies a problem's arrays (saved as the data configuration of its runs' config.json)."""

    n: int
    """Chebyshev coefficients per axis of the inputs, the model's resolution."""
    m: int
    """Chebyshev coefficients per axis of the exact outputs (m >= n)."""
    train_samples: int
    """The training set's size: the first samples."""
    test_samples: int
    """The test set's size: the last samples."""
    fingerprint: int
    """A 63-bit hash of the arrays' float64 values and shapes (SHA-256, its first 8 bytes halved)."""

    def __post_init__(self) -> None:
        check_fields(self)

    @property
    def solution_size(self) -> int:
        """Coefficients per axis of the exact outputs: ``m``."""
        return self.m

    @property
    def solver(self) -> int:
        """``m``: the problem has no exact solver to hand it to."""
        return self.m


def unnormalised(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """No normalisation, ``from_arrays``' default: (x, 0), x (B, n, n) -> the model's inputs x itself and
    log2 of the factors c = 1, zeros (B,)."""
    x = np.asarray(x)
    return x, np.zeros(x.shape[0])


def lobatto_coefficients(values: np.ndarray) -> np.ndarray:
    """The coefficients of the interpolants of values on the Lobatto grid: (B, p, q) -> (B, p, q), float64.

    values[b, k, l] = f_b(x_k, y_l) with x = ``collocation.lobatto_points(p)``, y = ``lobatto_points(q)``
    (each decreasing from 1 to -1) -> C_b = A_p V_b A_q^T (``collocation.lobatto_to_coefficients``), the
    coefficients of the polynomial of degree < p in x and < q in y through those values, in the
    ``chebval2d`` convention: exactly f_b's own where f_b is such a polynomial. A batch of other shape,
    p or q below 2, or values that are not real numbers raise a ValueError or a TypeError."""
    v = _real(values, "lobatto_coefficients: values")
    if v.ndim != 3 or min(v.shape[1:]) < 2:
        raise ValueError(f"lobatto_coefficients: need values of shape (B, p, q), p, q >= 2, got {v.shape}")
    c: np.ndarray = lobatto_to_coefficients(v.shape[1]) @ v @ lobatto_to_coefficients(v.shape[2]).T
    return c


def from_arrays(
    name: str,
    inputs: np.ndarray,
    outputs: np.ndarray,
    *,
    test_size: int,
    title: str | None = None,
    input: str = "input",
    output: str = "output",
    model: ModelConfig | None = None,
    normalise: Normalise | None = None,
) -> Problem[ArraysDataConfig]:
    """The operator inputs -> outputs, learnt from these samples, as a ``Problem`` (see the module).

    ``inputs`` (B, n, n) and ``outputs`` (B, m, m), m >= n, are coefficients in the ``chebval2d``
    convention (copied as float64: later changes to the arrays do not reach the problem); the last
    ``test_size`` samples are the test set, 1 <= test_size < B. ``name`` is saved in each run's
    config.json (a run of another name is refused), ``title`` (default ``name``), ``input`` and
    ``output`` name them in messages and figures. ``model`` is the default model (default
    ``ModelConfig(n=n, mixers="k")``, kernel integrals along x and y; its n must be the inputs'), and
    ``normalise`` the inputs' normalisation (default ``unnormalised``). ``RunConfig.of(problem)`` trains on
    the whole training set. Arrays of other shapes, counts or kinds (a list of arrays of different shapes,
    complex numbers), fewer than 2 samples, NaN or infinite values, values too large to measure (a
    sample whose L2 norm overflows float64), outputs that are all zero where the output scale is taken
    (no scale to normalise the targets by), or a model of another resolution raise a ValueError or a
    TypeError naming the array."""
    if not isinstance(name, str) or not name:
        raise ValueError(f"from_arrays: name must be a non-empty string, got {name!r}")
    x = _real(inputs, f"from_arrays({name!r}): inputs")
    u = _real(outputs, f"from_arrays({name!r}): outputs")
    if x.ndim != 3 or x.shape[1] != x.shape[2] or x.shape[1] < 1:
        raise ValueError(f"from_arrays({name!r}): inputs must be coefficients of shape (B, n, n), got {x.shape}")
    if u.ndim != 3 or u.shape[1] != u.shape[2] or u.shape[0] != x.shape[0] or u.shape[1] < x.shape[1]:
        raise ValueError(
            f"from_arrays({name!r}): outputs must be coefficients of shape (B, m, m) with the inputs' B = "
            f"{x.shape[0]} and m >= n = {x.shape[1]}, got {u.shape}"
        )
    samples, n = x.shape[0], x.shape[1]
    if samples < 2:
        raise ValueError(
            f"from_arrays({name!r}): {samples} sample{'s' * (samples != 1)}; at least 2 are needed, one to train "
            "on and one to test on (test_size)"
        )
    if isinstance(test_size, bool) or not isinstance(test_size, int | np.integer) or not 1 <= test_size < samples:
        raise ValueError(
            f"from_arrays({name!r}): test_size must be an int from 1 to {samples - 1} (the samples less one for "
            f"training), got {test_size!r}"
        )
    for array, what in ((x, "inputs"), (u, "outputs")):
        _check_values(f"from_arrays({name!r})", array, what)
    if model is not None and model.n != n:
        raise ValueError(f"from_arrays({name!r}): the model's n = {model.n} differs from the inputs' n = {n}")
    train = samples - int(test_size)
    targets = truncate(u, n)
    scaled = min(train, SCALE_SAMPLES)  # the training samples data.output_scale averages over
    if not np.any(targets[:scaled]):
        raise ValueError(
            f"from_arrays({name!r}): the outputs are all zero in their first {n} x {n} coefficients (the model's "
            f"resolution) over the {scaled} training samples that set the output scale (data.output_scale): "
            "there is no scale to normalise the targets by"
        )
    data = ArraysDataConfig(n, u.shape[1], train, int(test_size), _fingerprint(x, u))
    for array in (x, u, targets):
        array.flags.writeable = False
    label = title or name

    def data_config(**fields: Any) -> ArraysDataConfig:
        if not fields:
            return data
        given = ArraysDataConfig(**fields)
        if given != data:
            differ = [f.name for f in dataclasses.fields(data) if getattr(given, f.name) != getattr(data, f.name)]
            raise ValueError(
                f"a run of other data than this {label} problem's arrays (fields differ: {', '.join(differ)}; "
                f"the run's {given}, these arrays' {data}): load it with a problem built from the arrays it "
                "was trained on"
            )
        return data

    def stored(given: ArraysDataConfig, seed: int, count: int, fine: bool) -> Dataset[ArraysDataConfig]:
        data_config(**dataclasses.asdict(given))
        if seed == SCALE_SEED and fine:
            if count > data.test_samples:
                raise ValueError(
                    f"{label}: {count} test samples asked for (evaluate's test_size), the arrays hold "
                    f"{data.test_samples} (from_arrays' test_size)"
                )
            rows = slice(train, train + count)
        elif seed == SCALE_SEED:  # data.output_scale's request: no training seed is the test seed
            rows = slice(0, min(count, train))
        elif count > train:
            raise ValueError(
                f"RunConfig.train_size = {count} exceeds the {train} training samples of the {label} arrays "
                f"({samples} samples, the last {data.test_samples} held out for testing)"
            )
        else:
            rows = slice(0, count)
        return Dataset(data, seed, x[rows], targets[rows], u[rows] if fine else None)

    return Problem(
        name=name,
        title=label,
        input=input,
        output=output,
        data_config=data_config,
        model=ModelConfig(n=n, mixers="k") if model is None else model,
        test_seed=SCALE_SEED,
        normalise=unnormalised if normalise is None else normalise,
        stored=stored,
        defaults={"train_size": train, "batch": min(_BATCH, train)},
    )


def from_values(
    name: str,
    inputs: np.ndarray,
    outputs: np.ndarray,
    *,
    test_size: int,
    title: str | None = None,
    input: str = "input",
    output: str = "output",
    model: ModelConfig | None = None,
    normalise: Normalise | None = None,
) -> Problem[ArraysDataConfig]:
    """``from_arrays`` of samples given as values on Lobatto grids: inputs (B, n, n) on the n x n grid and
    outputs (B, m, m) on the m x m grid, m >= n >= 2 (values[b, k, l] at (x_k, y_l), x = y =
    ``collocation.lobatto_points``), through ``lobatto_coefficients``. The model's inputs and outputs are
    the interpolants' coefficients: a solver loaded from a run takes ``lobatto_coefficients`` of values."""
    return from_arrays(
        name,
        lobatto_coefficients(inputs),
        lobatto_coefficients(outputs),
        test_size=test_size,
        title=title,
        input=input,
        output=output,
        model=model,
        normalise=normalise,
    )


def _real(array: np.ndarray, what: str) -> np.ndarray:
    """``array`` as a new float64 array, checked by ``metric.real_array`` (real numbers, not a ragged list)."""
    return np.array(real_array(array, what), dtype=np.float64)


def _check_values(name: str, array: np.ndarray, what: str) -> None:
    """A ValueError naming ``what``, counting the values and samples at fault, unless every value of the
    float64 batch ``array`` (B, k, k) is finite and every sample's L2 norm (a sum of squares) is too."""
    bad = ~np.isfinite(array)
    if bad.any():
        rows = bad.any(axis=(1, 2))
        raise ValueError(
            f"{name}: the {what} contain NaN or infinite values: {np.count_nonzero(bad)} of their {array.size} "
            f"values, in {np.count_nonzero(rows)} of the {len(array)} samples (the first, sample {np.argmax(rows)})"
        )
    with np.errstate(over="ignore", invalid="ignore"):
        rows = ~np.isfinite(series_norm(array))
    if rows.any():
        i = int(np.argmax(rows))
        raise ValueError(
            f"{name}: the {what} of {np.count_nonzero(rows)} of the {len(array)} samples overflow float64 when "
            f"measured: their L2 norms (sums of squares) exceed {np.finfo(np.float64).max:.3g} (the first, "
            f"sample {i}, holds a coefficient of {np.max(np.abs(array[i])):.3g}); scale the data down"
        )


def _fingerprint(inputs: np.ndarray, outputs: np.ndarray) -> int:
    """A 63-bit hash of two float64 arrays: their shapes and values (``ArraysDataConfig.fingerprint``)."""
    digest = hashlib.sha256()
    for array in (inputs, outputs):
        digest.update(np.asarray(array.shape, np.int64).tobytes())
        digest.update(np.ascontiguousarray(array, np.float64).tobytes())
    return int.from_bytes(digest.digest()[:8], "big") >> 1
