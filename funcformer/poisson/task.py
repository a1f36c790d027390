"""The Poisson task (docs/poisson.md) in float64 numpy: sources, the reference solver, the metric, datasets.

Functions are 2-D Chebyshev series in the ``numpy.polynomial.chebyshev.chebval2d`` convention:
C[i, j] multiplies T_i(x) T_j(y), axis 1 of a batch is x, axis 2 is y.

    sources   f = sum_{i,j < k-2} a_ij phi_i(x) phi_j(y), phi_i = T_{i+2} - T_i, a_ij = g_ij / ((1+i)(1+j))
    solve     u_xx + u_yy = f, u = 0 on the boundary, by collocation at ``fine`` Chebyshev-Gauss-Lobatto
              points, diagonalising the 1-D second derivative: U = V ((V^-1 F V^-T) / (l_i + l_j)) V^T
    metric    ||u_pred - u||_2 / ||u||_2 over the uniform 64 x 64 grid x_k = -1 + 2k/63, boundary included
    residual  ||e|| / ||u|| for a predicted u, e the residual f - (u_xx + u_yy) through the inverse Laplacian,
              e = -u on the boundary: with the exact inverse, e = solve(f) - u, the prediction's error

The solver is linear, so it is precomputed into two matrices per (n, fine): coefficients of u =
R ((E f E^T) / (l_i + l_j)) R^T with E = V^-1 (T_j at interior points) and R = (values -> coefficients) V.

The numerics (Lobatto points, the DCT-I, the fast diagonalisation, the norm) are the functional core's,
``applicative.instances.chebyshev``; the solver's accuracy and cost are in docs/poisson.md.

>>> task = DataConfig()
>>> data = make_dataset(task, seed=1, count=2)
>>> data.f.shape, data.u.shape, data.u_fine.shape
((2, 16, 16), (2, 16, 16), (2, 64, 64))
>>> relative_l2(np.zeros_like(data.u), data.u_fine).tolist()
[1.0, 1.0]
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from applicative.instances.chebyshev import (
    dirichlet_eigen,
    lobatto_points,
    lobatto_to_coefficients,
    norm2d,
    vandermonde,
)
from funcformer._fields import check_fields
from funcformer.learning import metric
from funcformer.learning import problem as learning
from funcformer.learning.metric import GRID, grid_values, relative_l2, summary, truncate
from funcformer.learning.problem import cached_dataset
from funcformer.learning.trust import relative

__all__ = [
    "FINE",
    "GRID",
    "TEST_SEED",
    "TRAIN_SEED",
    "DataConfig",
    "Dataset",
    "K",
    "N",
    "grid_values",
    "load_dataset",
    "lobatto_points",
    "make_dataset",
    "normalise",
    "phi_basis",
    "relative_l2",
    "residual",
    "solve",
    "sources",
    "strong_residual",
    "summary",
    "truncate",
    "truncation_floor",
]

N = 16
"""Model resolution: Chebyshev coefficients per axis."""
K = 12
"""Source degree bound: every coefficient of degree >= K is zero."""
FINE = 64
"""Reference solver resolution: Chebyshev-Gauss-Lobatto points per axis."""

TRAIN_SEED = 0
"""Default training seed."""
TEST_SEED = 2**31 - 1
"""The held-out test seed; training must never use it (``Problem.check_train_seed``)."""

_FORMAT = 2
"""Version of the cached file layout and of the generator; bump it to invalidate old caches."""
_CHUNK = 1024
"""Samples per batch in the solver: bounds the temporaries to a few tens of MB."""


@dataclass(frozen=True)
class DataConfig:
    """The parameters that define the task's datasets: n coefficients per axis (the model's
    resolution), the inputs' degree k, and the grid ``fine`` of the exact solver."""

    n: int = N
    k: int = K
    fine: int = FINE

    def __post_init__(self) -> None:
        check_fields(self)
        if self.k < 3:
            raise ValueError(f"DataConfig.k = {self.k}: need k >= 3 (phi_0 = T_2 - T_0 has degree 2)")
        if self.n < self.k:
            raise ValueError(f"DataConfig.n = {self.n}: need n >= k = {self.k} to hold the sources")
        if self.fine < max(2 * self.n, 16):
            raise ValueError(f"DataConfig.fine = {self.fine}: need fine >= max(2 n, 16) = {max(2 * self.n, 16)}")


# Sources


def phi_basis(n: int, k: int) -> np.ndarray:
    """P (n x (k-2)) with P[m, i] = [m == i+2] - [m == i]: coefficients of phi_i = T_{i+2} - T_i as columns."""
    p = np.zeros((n, k - 2))
    i = np.arange(k - 2)
    p[i + 2, i] = 1.0
    p[i, i] = -1.0
    return p


def _amplitudes(task: DataConfig, seed: int, count: int) -> np.ndarray:
    """a[s, i, j] = g[s, i, j] / ((1+i)(1+j)), g = default_rng(seed).standard_normal((count, k-2, k-2))."""
    g = np.random.default_rng(seed).standard_normal((count, task.k - 2, task.k - 2))
    scale = 1.0 + np.arange(task.k - 2)
    a: np.ndarray = g / np.multiply.outer(scale, scale)
    return a


def sources(task: DataConfig, seed: int, count: int) -> np.ndarray:
    """(count, n, n) chebval2d coefficient matrices of f = sum_{i,j<k-2} a_ij phi_i(x) phi_j(y),
    phi_k = T_{k+2} - T_k, a_ij = g_ij / ((1+i)(1+j)), g standard normal from np.random.default_rng(seed).

    F = P A P^T with P from ``phi_basis``; g is drawn in one call, ``standard_normal((count, k-2, k-2))``,
    so sample s is g[s] and the first samples of a larger count equal a smaller count's.
    """
    if count < 0:
        raise ValueError(f"sources: count = {count} must be >= 0")
    p = phi_basis(task.n, task.k)
    f: np.ndarray = p @ _amplitudes(task, seed, count) @ p.T
    return f


def normalise(f: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(f / ||f||, log2 ||f||) for (B, n, n) sources (the model's input and factor; ``Problem.normalise``):
    the operator is linear, so the model sees unit sources and a layer norm cannot lose their size.
    Computed as f = 2^e y with the largest |y| in [1/2, 1), exactly, so that no source's norm over-
    or underflows; a zero source gives a zero input and log2 0 = -inf."""
    f = np.asarray(f)
    _, exponent = np.frexp(np.max(np.abs(f), axis=(1, 2)))
    y = np.ldexp(f, -exponent[:, None, None])
    norm = norm2d(y)
    zero = norm == 0
    inputs = y / np.where(zero, 1.0, norm)[:, None, None]
    with np.errstate(divide="ignore"):
        return inputs, np.where(zero, -np.inf, np.log2(norm) + exponent)


# The reference solver


@functools.cache
def _operator(n: int, fine: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(E, R, 1 / (l_i + l_j)) such that solve(f) = R ((E f E^T) / (l_i + l_j)) R^T for n x n f: with
    d2 = V diag(l) V^-1 the Dirichlet second derivative at the interior Lobatto points (``dirichlet_eigen``,
    eigenpairs by ascending l), E = V^-1 T (T_j at the interior points) and R = (values -> coefficients) V."""
    lam, v, _ = dirichlet_eigen(fine)
    e = np.linalg.solve(v, vandermonde(lobatto_points(fine)[1:-1], n))
    r = lobatto_to_coefficients(fine)[:, 1:-1] @ v
    inverse = 1.0 / np.add.outer(lam, lam)
    for a in (e, r, inverse):
        a.flags.writeable = False
    return e, r, inverse


def solve(f: np.ndarray, fine: int = FINE) -> np.ndarray:
    """Chebyshev spectral solver of u_xx + u_yy = f on [-1,1]^2, u = 0 on the boundary.
    f: (B, n, n) coefficients (any n <= fine); returns (B, fine, fine) coefficients of u.

    Collocation at the fine x fine Lobatto points: exact for u of degree < fine in each variable.
    """
    f = np.asarray(f, dtype=np.float64)
    if f.ndim != 3 or f.shape[1] != f.shape[2]:
        raise ValueError(f"solve: f must have shape (B, n, n), got {f.shape}")
    if not 1 <= f.shape[1] <= fine:
        raise ValueError(f"solve: f has {f.shape[1]} coefficients per axis, need 1 <= n <= fine = {fine}")
    e, r, inverse = _operator(f.shape[1], fine)
    u = np.empty((f.shape[0], fine, fine))
    for start in range(0, f.shape[0], _CHUNK):
        w = e @ f[start : start + _CHUNK] @ e.T * inverse
        u[start : start + _CHUNK] = r @ w @ r.T
    return u


# The a-posteriori check


def _pair(name: str, f: np.ndarray, u: np.ndarray, fine: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """f and u as float64 batches (B, n, n) and (B, m, m), with n, m <= fine if given; else a ValueError."""
    f, u = np.asarray(f, dtype=np.float64), np.asarray(u, dtype=np.float64)
    if f.ndim != 3 or u.ndim != 3 or f.shape[1] != f.shape[2] or u.shape[1] != u.shape[2] or len(f) != len(u):
        raise ValueError(f"{name}: need f and u of shapes (B, n, n) and (B, m, m), got {f.shape} and {u.shape}")
    if fine is not None and not (f.shape[1] <= fine and u.shape[1] <= fine):
        raise ValueError(f"{name}: f and u need at most fine = {fine} coefficients per axis, got {f.shape}, {u.shape}")
    return f, u


def residual(f: np.ndarray, u: np.ndarray, fine: int = FINE) -> np.ndarray:
    """The a-posteriori check of potentials u predicted for sources f (``Problem.residual``): (B,)
    relative residuals ||e|| / ||u||, L2 norms on [-1, 1]^2 (``chebyshev.norm2d``), f (B, n, n) and
    u (B, m, m) coefficients, n, m <= fine.

    e solves e_xx + e_yy = f - (u_xx + u_yy) inside, e = -u on the boundary (collocated at ``fine``
    Lobatto points, as ``solve``): the residual of u mapped through the inverse Laplacian, a norm in
    which the high modes of a truncated prediction weigh as little as they do in its error. Here the
    inverse Laplacian is the solution operator, so e = solve(f, fine) - u exactly: the prediction's
    error at the collocation resolution, for the cost of one solve. Invariant under ``normalise``
    (residual(f, u) = residual(f / c, u / c)); 0 where e and u are both zero, inf where only u is.
    """
    f, u = _pair("residual", f, u, fine)
    e = solve(f, fine)
    m = u.shape[1]
    e[:, :m, :m] -= u
    return relative(norm2d(e), norm2d(u))


def strong_residual(f: np.ndarray, u: np.ndarray) -> np.ndarray:
    """The PDE's residual in L2, for comparison with ``residual``: (B,) ||u_xx + u_yy - f|| / ||f||
    (exact, in coefficients: ``numpy.polynomial.chebyshev.chebder``), f (B, n, n), u (B, m, m);
    the boundary values of u are not part of it. 0 where both norms are zero, inf where only f's is."""
    f, u = _pair("strong_residual", f, u)
    size = max(f.shape[1], u.shape[1])
    r = np.zeros((len(f), size, size))
    m = u.shape[1]
    if m > 2:
        r[:, : m - 2, :m] += np.polynomial.chebyshev.chebder(u, 2, axis=1)
        r[:, :m, : m - 2] += np.polynomial.chebyshev.chebder(u, 2, axis=2)
    r[:, : f.shape[1], : f.shape[1]] -= f
    return relative(norm2d(r), norm2d(f))


# Datasets


class Dataset(learning.Dataset[DataConfig]):
    """``count`` sources f with their truncated targets u and the exact solutions u_fine for the metric."""

    @property
    def f(self) -> np.ndarray:
        """The sources, (count, n, n): the model's inputs."""
        return self.inputs


def make_dataset(task: DataConfig, seed: int, count: int, fine: bool = True) -> Dataset:
    """Draw ``count`` sources with ``seed`` and solve them at ``task.fine`` (keeping the fine
    solutions only if ``fine``: 32 KB a sample at fine = 64)."""
    f = sources(task, seed, count)
    u_fine = solve(f, task.fine)
    return Dataset(task, seed, f, truncate(u_fine, task.n), u_fine if fine else None)


def load_dataset(cache_dir: str | Path, task: DataConfig, seed: int, count: int, fine: bool = True) -> Dataset:
    """``make_dataset``'s first ``count`` sources of ``seed``, through the on-disk cache under cache_dir
    (``learning.problem.cached_dataset``: one checked file per task and seed, never a stale dataset)."""
    return cached_dataset(
        Dataset,
        cache_dir,
        "poisson",
        _FORMAT,
        task,
        seed,
        count,
        fine,
        task.fine,
        lambda: make_dataset(task, seed, count),
        "f",
    )


def truncation_floor(test: Dataset) -> dict[str, float]:
    """The error of the truncated exact solution: what a perfect n x n model scores on ``test``."""
    return metric.truncation_floor(test.exact(), test.task.n)
