"""The Poisson operator-learning task (docs/poisson.md): u_xx + u_yy = f, f -> u, as one ``Problem``.

What is Poisson's own, in float64 numpy: the sources, the reference solver, the normalisation and the
a-posteriori check; ``PROBLEM`` hands them to the shared operator-learning layer (``funcformer.learning``),
which makes the datasets, trains, checkpoints, evaluates, plots and serves the runs
(``funcformer.learning.load_solver(DIR, PROBLEM)``), and runs the command line
(``python -m funcformer.poisson``). ``families`` holds source families for out-of-distribution tests.

Functions are 2-D Chebyshev series in the ``numpy.polynomial.chebyshev.chebval2d`` convention:
C[i, j] multiplies T_i(x) T_j(y), axis 1 of a batch is x, axis 2 is y.

    sources   f = sum_{i,j < k-2} a_ij phi_i(x) phi_j(y), phi_i = T_{i+2} - T_i, a_ij = g_ij / ((1+i)(1+j))
    solve     u_xx + u_yy = f, u = 0 on the boundary, by collocation at ``points`` Chebyshev-Gauss-Lobatto
              points, diagonalising the 1-D second derivative: U = V ((V^-1 F V^-T) / (l_i + l_j)) V^T
    metric    ||u_pred - u||_2 / ||u||_2 over the uniform 64 x 64 grid x_k = -1 + 2k/63, boundary included
    residual  ||e|| / ||u|| for a predicted u, e the residual f - (u_xx + u_yy) through the inverse Laplacian,
              e = -u on the boundary: with the exact inverse, e = solve(f) - u, the prediction's error

The solver is linear, so it is precomputed into two matrices per (n, points): coefficients of u =
R ((E f E^T) / (l_i + l_j)) R^T with E = V^-1 (T_j at interior points) and R = (values -> coefficients) V.

The numerics (Lobatto points, the DCT-I, the fast diagonalisation, the norm) are the numpy collocation
kit's, ``applicative.instances.collocation``; the solver's accuracy and cost are in docs/poisson.md.

>>> data = make_dataset(PROBLEM, DataConfig(), seed=1, count=2)
>>> data.inputs.shape, data.u.shape, data.u_fine.shape
((2, 16, 16), (2, 16, 16), (2, 64, 64))
>>> relative_l2(np.zeros_like(data.u), data.u_fine).tolist()
[1.0, 1.0]
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from applicative.instances.collocation import (
    dirichlet_eigen,
    lobatto_points,
    lobatto_to_coefficients,
    norm2d,
    vandermonde,
)
from funcformer._fields import check_data_config
from funcformer.learning import Problem, RunConfig
from funcformer.learning.metric import GRID, grid_values, relative_l2, summary, truncate
from funcformer.learning.problem import make_dataset
from funcformer.learning.trust import relative
from funcformer.model import ModelConfig

__all__ = [
    "GRID",
    "MODEL",
    "PROBLEM",
    "SOLVER_POINTS",
    "TEST_SEED",
    "TRAIN_SEED",
    "DataConfig",
    "K",
    "N",
    "RunConfig",
    "grid_values",
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
]

N = 16
"""Model resolution: Chebyshev coefficients per axis."""
K = 12
"""Source degree bound: every coefficient of degree >= K is zero."""
SOLVER_POINTS = 64
"""The reference solver's resolution: Chebyshev-Gauss-Lobatto points per axis."""

TRAIN_SEED = 0
"""Default training seed."""
TEST_SEED = 2**31 - 1
"""The held-out test seed; training must never use it (``Problem.check_train_seed``)."""

_CHUNK = 1024
"""Samples per batch in the solver: bounds the temporaries to a few tens of MB."""


@dataclass(frozen=True)
class DataConfig:
    """The parameters that define the task's datasets: n coefficients per axis (the model's
    resolution), the inputs' degree k, and the exact solver's ``solver_points`` per axis."""

    n: int = N
    k: int = K
    solver_points: int = SOLVER_POINTS

    def __post_init__(self) -> None:
        check_data_config(self, 3, " (phi_0 = T_2 - T_0 has degree 2)", "sources", "solver_points")

    @property
    def solver(self) -> int:
        """The exact solver's argument (``solve``, ``residual``): ``solver_points``."""
        return self.solver_points

    @property
    def solution_size(self) -> int:
        """Coefficients per axis of the exact solutions: ``solver_points``."""
        return self.solver_points


# Sources


def phi_basis(n: int, k: int) -> np.ndarray:
    """P (n x (k-2)) with P[m, i] = [m == i+2] - [m == i]: coefficients of phi_i = T_{i+2} - T_i as columns."""
    p = np.zeros((n, k - 2))
    i = np.arange(k - 2)
    p[i + 2, i] = 1.0
    p[i, i] = -1.0
    return p


def _amplitudes(config: DataConfig, seed: int, count: int) -> np.ndarray:
    """a[s, i, j] = g[s, i, j] / ((1+i)(1+j)), g = default_rng(seed).standard_normal((count, k-2, k-2))."""
    g = np.random.default_rng(seed).standard_normal((count, config.k - 2, config.k - 2))
    scale = 1.0 + np.arange(config.k - 2)
    a: np.ndarray = g / np.multiply.outer(scale, scale)
    return a


def sources(config: DataConfig, seed: int, count: int) -> np.ndarray:
    """(count, n, n) chebval2d coefficient matrices of f = sum_{i,j<k-2} a_ij phi_i(x) phi_j(y),
    phi_k = T_{k+2} - T_k, a_ij = g_ij / ((1+i)(1+j)), g standard normal from np.random.default_rng(seed).

    F = P A P^T with P from ``phi_basis``; g is drawn in one call, ``standard_normal((count, k-2, k-2))``,
    so sample s is g[s] and the first samples of a larger count equal a smaller count's.
    """
    if count < 0:
        raise ValueError(f"sources: count = {count} must be >= 0")
    p = phi_basis(config.n, config.k)
    f: np.ndarray = p @ _amplitudes(config, seed, count) @ p.T
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
def _operator(n: int, points: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(E, R, 1 / (l_i + l_j)) such that solve(f) = R ((E f E^T) / (l_i + l_j)) R^T for n x n f: with
    d2 = V diag(l) V^-1 the Dirichlet second derivative at the interior Lobatto points (``dirichlet_eigen``,
    eigenpairs by ascending l), E = V^-1 T (T_j at the interior points) and R = (values -> coefficients) V."""
    lam, v, _ = dirichlet_eigen(points)
    e = np.linalg.solve(v, vandermonde(lobatto_points(points)[1:-1], n))
    r = lobatto_to_coefficients(points)[:, 1:-1] @ v
    inverse = 1.0 / np.add.outer(lam, lam)
    for a in (e, r, inverse):
        a.flags.writeable = False
    return e, r, inverse


def solve(f: np.ndarray, points: int = SOLVER_POINTS) -> np.ndarray:
    """Chebyshev spectral solver of u_xx + u_yy = f on [-1,1]^2, u = 0 on the boundary.
    f: (B, n, n) coefficients (any n <= points); returns (B, points, points) coefficients of u.

    Collocation at the points x points Lobatto points: exact for u of degree < points in each variable.
    """
    f = np.asarray(f, dtype=np.float64)
    if f.ndim != 3 or f.shape[1] != f.shape[2]:
        raise ValueError(f"solve: f must have shape (B, n, n), got {f.shape}")
    if not 1 <= f.shape[1] <= points:
        raise ValueError(f"solve: f has {f.shape[1]} coefficients per axis, need 1 <= n <= points = {points}")
    e, r, inverse = _operator(f.shape[1], points)
    u = np.empty((f.shape[0], points, points))
    for start in range(0, f.shape[0], _CHUNK):
        w = e @ f[start : start + _CHUNK] @ e.T * inverse
        u[start : start + _CHUNK] = r @ w @ r.T
    return u


# The a-posteriori check


def _pair(name: str, f: np.ndarray, u: np.ndarray, points: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """f and u as float64 batches (B, n, n) and (B, m, m), with n, m <= points if given; else a ValueError."""
    f, u = np.asarray(f, dtype=np.float64), np.asarray(u, dtype=np.float64)
    if f.ndim != 3 or u.ndim != 3 or f.shape[1] != f.shape[2] or u.shape[1] != u.shape[2] or len(f) != len(u):
        raise ValueError(f"{name}: need f and u of shapes (B, n, n) and (B, m, m), got {f.shape} and {u.shape}")
    if points is not None and not (f.shape[1] <= points and u.shape[1] <= points):
        raise ValueError(f"{name}: f and u need at most {points} coefficients per axis, got {f.shape}, {u.shape}")
    return f, u


def residual(f: np.ndarray, u: np.ndarray, points: int = SOLVER_POINTS) -> np.ndarray:
    """The a-posteriori check of potentials u predicted for sources f (``Problem.residual``): (B,)
    relative residuals ||e|| / ||u||, L2 norms on [-1, 1]^2 (``collocation.norm2d``), f (B, n, n) and
    u (B, m, m) coefficients, n, m <= points.

    e solves e_xx + e_yy = f - (u_xx + u_yy) inside, e = -u on the boundary (collocated at ``points``
    Lobatto points, as ``solve``): the residual of u mapped through the inverse Laplacian, a norm in
    which the high modes of a truncated prediction weigh as little as they do in its error. Here the
    inverse Laplacian is the solution operator, so e = solve(f, points) - u exactly: the prediction's
    error at the collocation resolution, for the cost of one solve. Invariant under ``normalise``
    (residual(f, u) = residual(f / c, u / c)); 0 where e and u are both zero, inf where only u is.
    """
    f, u = _pair("residual", f, u, points)
    e = solve(f, points)
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


# The task


MODEL = ModelConfig(mixers="k")
"""The default model: four learned kernel integrals along x and y in turn (``mixers="k"``, every other
field ``ModelConfig``'s default); docs/poisson.md, "Choosing the architecture", has the search that chose it."""

PROBLEM: Problem[DataConfig] = Problem(
    name="poisson",
    title="Poisson",
    input="source f",
    output="potential u",
    data_config=DataConfig,
    model=MODEL,
    test_seed=TEST_SEED,
    normalise=normalise,
    draw=sources,
    solve=solve,
    residual=residual,
    command="python -m funcformer.poisson",
)
"""The Poisson task for the training layer: ``RunConfig.of(PROBLEM, steps=...)`` is a run of it."""
