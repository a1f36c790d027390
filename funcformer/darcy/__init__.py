"""The Darcy-flow operator-learning task (docs/darcy.md): -div(exp(kappa) grad u) = 1, kappa -> u, as one
``Problem``.

What is Darcy's own, in float64 numpy: the log-permeabilities, the reference solver, the normalisation
and the a-posteriori check; ``PROBLEM`` hands them to the shared operator-learning layer
(``funcformer.learning``), which makes the datasets, trains, checkpoints, evaluates, plots and serves
the runs (``funcformer.learning.load_solver(DIR, PROBLEM)``), and runs the command line
(``python -m funcformer.darcy``).

Functions are 2-D Chebyshev series in the ``numpy.polynomial.chebyshev.chebval2d`` convention, as for
Poisson: C[i, j] multiplies T_i(x) T_j(y), axis 1 of a batch is x, axis 2 is y. The metric, the grid and
the truncation are the shared layer's (``funcformer.learning.metric``, Poisson's too), re-exported here; the
numerics (Lobatto points, collocation derivatives, the DCT-I, the fast diagonalisation, the norm) are the
numpy collocation kit's, ``applicative.instances.collocation`` (the derivative matrix and the integral
weights, ``applicative.instances.chebyshev``'s).

    permeabilities  kappa = sum_{i,j < k} b_ij T_i(x) T_j(y), b_ij = g_ij / ((1+i)(1+j)); a = exp(kappa)
    solve           -div(a grad u) = f (default 1), u = 0 on the boundary, by collocation of
                    -a (u_xx + u_yy) - a_x u_x - a_y u_y = f at the (degree + 1)^2 Chebyshev-Gauss-Lobatto
                    points, divided by a: -(u_xx + u_yy) - kappa_x u_x - kappa_y u_y = f / a, solved for
                    the (degree - 1)^2 interior unknowns by scipy's GMRES preconditioned with the exact
                    inverse Laplacian (the fast diagonalisation, ``collocation.dirichlet_eigen``); a dense
                    LU as the fallback
    residual        ||e|| / ||u|| for a predicted u: e the residual of the divided equation through that
                    inverse Laplacian, e = -u on the boundary (an estimate of the prediction's error)

The exact solver's resolution is its polynomial degree M (M + 1 points per axis), as in docs/darcy.md,
where the solver's accuracy and cost are.

>>> data = make_dataset(PROBLEM, DataConfig(), seed=1, count=2)
>>> data.inputs.shape, data.u.shape, data.u_fine.shape
((2, 16, 16), (2, 16, 16), (2, 33, 33))
>>> relative_l2(np.zeros_like(data.u), data.u_fine).tolist()
[1.0, 1.0]
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np
from scipy.sparse.linalg import LinearOperator, gmres

from applicative.instances.chebyshev import derivative_matrix, integral_weights
from applicative.instances.collocation import (
    dirichlet_derivatives,
    dirichlet_eigen,
    evaluate_grid,
    lobatto_points,
    lobatto_to_coefficients,
    norm2d,
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
    "SOLVER_DEGREE",
    "TEST_SEED",
    "TRAIN_SEED",
    "DataConfig",
    "K",
    "N",
    "RunConfig",
    "grid_values",
    "make_dataset",
    "mean_value",
    "normalise",
    "permeabilities",
    "relative_l2",
    "residual",
    "solve",
    "strong_residual",
    "summary",
    "truncate",
]

N = 16
"""Model resolution: Chebyshev coefficients per axis."""
K = 8
"""Log-permeability degree bound: every coefficient of kappa of degree >= K is zero."""
SOLVER_DEGREE = 32
"""Reference solver degree M: (M + 1) Chebyshev-Gauss-Lobatto points per axis."""

TRAIN_SEED = 0
"""Default training seed."""
TEST_SEED = 2**31 - 2
"""The held-out test seed (not Poisson's); training must never use it (``Problem.check_train_seed``)."""

_CHUNK = 256
"""Samples whose coefficients are evaluated at the nodes at once (GMRES then solves them one by one)."""
_DENSE_CHUNK = 16
"""Samples per dense solve: 16 interior matrices of 961^2 doubles are 118 MB at degree = 32."""
_ITERATIONS = 60
"""GMRES's restart length; after two cycles a sample falls back to the dense solve (20 to 28
iterations suffice at degree = 32)."""
_TOLERANCE = 1e-13
"""GMRES stops when every residual is below this times the right-hand side's norm."""


@dataclass(frozen=True)
class DataConfig:
    """The parameters that define the task's datasets: n coefficients per axis (the model's
    resolution), the inputs' degree k, and the exact solver's ``solver_degree`` M (M + 1 Chebyshev-Gauss-
    Lobatto points per axis)."""

    n: int = N
    k: int = K
    solver_degree: int = SOLVER_DEGREE

    def __post_init__(self) -> None:
        check_data_config(self, 1, "", "permeabilities", "solver_degree")

    @property
    def solver(self) -> int:
        """The exact solver's argument (``solve``, ``residual``): ``solver_degree``."""
        return self.solver_degree

    @property
    def solution_size(self) -> int:
        """Coefficients per axis of the exact solutions: ``solver_degree + 1``."""
        return self.solver_degree + 1


# Permeabilities


def permeabilities(config: DataConfig, seed: int, count: int) -> np.ndarray:
    """(count, n, n) chebval2d coefficient matrices of the log-permeability kappa: b_ij = g_ij / ((1+i)(1+j))
    for i, j < k and zero above, g = default_rng(seed).standard_normal((count, k, k)), drawn in one call
    (sample s is g[s], so the first samples of a larger count equal a smaller count's)."""
    if count < 0:
        raise ValueError(f"permeabilities: count = {count} must be >= 0")
    g = np.random.default_rng(seed).standard_normal((count, config.k, config.k))
    scale = 1.0 + np.arange(config.k)
    kappa = np.zeros((count, config.n, config.n))
    kappa[:, : config.k, : config.k] = g / np.multiply.outer(scale, scale)
    return kappa


def mean_value(c: np.ndarray) -> np.ndarray:
    """The mean over [-1, 1]^2 of each function of a (B, n, n) batch: (1/4) sum_ij c_ij w_i w_j,
    w_i = integral of T_i over [-1, 1]."""
    w = integral_weights(c.shape[-1])
    means: np.ndarray = np.einsum("bij,i,j->b", c, w, w) / 4.0
    return means


def normalise(kappa: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(kappa - m, log2 exp(-m)) for (B, n, n) log-permeabilities, m = ``mean_value(kappa)`` (the model's
    input and factor; ``Problem.normalise``). Exact: adding a constant c to kappa divides the
    permeability by exp(-c), so u(kappa + c) = exp(-c) u(kappa); the model sees only zero-mean kappa."""
    kappa = np.asarray(kappa)
    m = mean_value(kappa)
    shifted = kappa.copy()
    shifted[:, 0, 0] -= m  # T_0(x) T_0(y) = 1
    return shifted, -m / np.log(2.0)


# The reference solver


@functools.cache
def _operator(degree: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(d1, d2, V, V^-1, 1 / (l_i + l_j)) on the degree - 1 interior nodes per axis, u = 0 on the boundary:
    the first and second differentiation matrices and the eigendecomposition d2 = V diag(l) V^-1, in
    ascending order of l (``dirichlet_derivatives``, ``dirichlet_eigen``)."""
    d1, d2 = dirichlet_derivatives(degree + 1)
    lam, v, vi = dirichlet_eigen(degree + 1)
    inverse = 1.0 / np.add.outer(lam, lam)
    inverse.flags.writeable = False
    return d1, d2, v, vi, inverse


def _interior_values(c: np.ndarray, degree: int) -> np.ndarray:
    """(B, m, m) coefficients -> (B, degree - 1, degree - 1) values at the interior Lobatto nodes."""
    x = lobatto_points(degree + 1)[1:-1]
    return evaluate_grid(c, x, x)


def _gmres(kx: np.ndarray, ky: np.ndarray, rhs: np.ndarray, degree: int) -> tuple[np.ndarray, bool]:
    """Solve A u = rhs, A u = -(u_xx + u_yy) - kx u_x - ky u_y on the (p, p) interior nodes of one sample,
    by scipy's GMRES preconditioned with the exact inverse Laplacian (fast diagonalisation). Returns the
    solution and whether it reached a relative residual of ``_TOLERANCE`` within ``_ITERATIONS``."""
    d1, d2, v, vi, inverse = _operator(degree)
    p = rhs.shape[0]

    def operator(u: np.ndarray) -> np.ndarray:
        u = u.reshape(p, p)
        a: np.ndarray = -(d2 @ u + u @ d2.T) - kx * (d1 @ u) - ky * (u @ d1.T)
        return a.ravel()

    def preconditioner(r: np.ndarray) -> np.ndarray:  # (-laplacian)^-1
        z: np.ndarray = -(v @ ((vi @ r.reshape(p, p) @ vi.T) * inverse) @ v.T)
        return z.ravel()

    shape = (p * p, p * p)
    a, m = LinearOperator(shape, matvec=operator), LinearOperator(shape, matvec=preconditioner)
    u, info = gmres(a, rhs.ravel(), M=m, rtol=_TOLERANCE, atol=0.0, restart=_ITERATIONS, maxiter=2)
    return np.asarray(u).reshape(p, p), info == 0


def _dense(kx: np.ndarray, ky: np.ndarray, rhs: np.ndarray, degree: int) -> np.ndarray:
    """The same system by LAPACK's dense LU of the (degree - 1)^2 interior unknowns (the fallback)."""
    d1, d2, _, _, _ = _operator(degree)
    eye = np.eye(degree - 1)
    laplacian = -(np.kron(d2, eye) + np.kron(eye, d2))
    dx, dy = np.kron(d1, eye), np.kron(eye, d1)  # x-major: index p * (degree - 1) + q is the node (x_p, y_q)
    batch = rhs.shape[0]
    matrices = laplacian - kx.reshape(batch, -1, 1) * dx - ky.reshape(batch, -1, 1) * dy
    solution: np.ndarray = np.linalg.solve(matrices, rhs.reshape(batch, -1, 1)).reshape(rhs.shape)
    return solution


def solve(
    kappa: np.ndarray, degree: int = SOLVER_DEGREE, f: np.ndarray | None = None, dense: bool = False
) -> np.ndarray:
    """Chebyshev collocation solver of -div(exp(kappa) grad u) = f on [-1,1]^2, u = 0 on the boundary.
    kappa: (B, n, n) coefficients of the log-permeability (n <= degree + 1); f: (B, m, m) coefficients of
    the source (any m), default f = 1. Returns (B, degree + 1, degree + 1) coefficients of u, the interpolant
    of the collocation solution at the (degree + 1)^2 Lobatto points (``truncate`` keeps the leading n x n).

    The PDE is collocated as -(u_xx + u_yy) - kappa_x u_x - kappa_y u_y = f exp(-kappa), which is
    -a (u_xx + u_yy) - a_x u_x - a_y u_y = f divided by a > 0, with kappa and its derivatives exact.
    The collocation system is solved by preconditioned GMRES to a relative residual of 1e-13 (about
    20 iterations), samples that do not get there by a dense LU; ``dense`` uses the LU for all.
    """
    kappa = np.asarray(kappa, dtype=np.float64)
    if kappa.ndim != 3 or kappa.shape[1] != kappa.shape[2]:
        raise ValueError(f"solve: kappa must have shape (B, n, n), got {kappa.shape}")
    n, batch = kappa.shape[1], kappa.shape[0]
    if not 1 <= n <= degree + 1:
        raise ValueError(f"solve: kappa has {n} coefficients per axis, need 1 <= n <= degree + 1 = {degree + 1}")
    if f is None:
        f = np.ones((batch, 1, 1))
    f = np.asarray(f, dtype=np.float64)
    if f.ndim != 3 or f.shape[1] != f.shape[2] or f.shape[0] != batch:
        raise ValueError(f"solve: f must have shape ({batch}, m, m), got {f.shape}")
    g = derivative_matrix(n)
    values = np.zeros((batch, degree + 1, degree + 1))
    interior = values[:, 1:-1, 1:-1]  # a view: the boundary values stay zero
    chunk = _DENSE_CHUNK if dense else _CHUNK
    for start in range(0, batch, chunk):
        part = kappa[start : start + chunk]
        kx = _interior_values(g @ part, degree)  # kappa_x: axis 1 is x
        ky = _interior_values(part @ g.T, degree)
        rhs = _interior_values(f[start : start + chunk], degree) * np.exp(-_interior_values(part, degree))
        if dense:
            interior[start : start + chunk] = _dense(kx, ky, rhs, degree)
            continue
        for b in range(part.shape[0]):
            solution, converged = _gmres(kx[b], ky[b], rhs[b], degree)
            if not converged:
                solution = _dense(kx[b : b + 1], ky[b : b + 1], rhs[b : b + 1], degree)[0]
            interior[start + b] = solution
    v = lobatto_to_coefficients(degree + 1)
    coefficients: np.ndarray = v @ values @ v.T
    return coefficients


# The a-posteriori check


def _fields(name: str, kappa: np.ndarray, u: np.ndarray, degree: int) -> tuple[np.ndarray, np.ndarray]:
    kappa, u = np.asarray(kappa, dtype=np.float64), np.asarray(u, dtype=np.float64)
    if kappa.ndim != 3 or u.ndim != 3 or kappa.shape[1:] != u.shape[1:] or kappa.shape[1] != kappa.shape[2]:
        raise ValueError(f"{name}: need kappa and u of one shape (B, n, n), got {kappa.shape} and {u.shape}")
    if len(kappa) != len(u) or not 1 <= kappa.shape[1] <= degree + 1:
        raise ValueError(f"{name}: need as many kappa as u, n <= {degree + 1}; got {kappa.shape}, {u.shape}")
    return kappa, u


def _interior(c: np.ndarray, degree: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(values, x-derivative values, y-derivative values) of (B, n, n) coefficients at the interior nodes."""
    g = derivative_matrix(c.shape[1])
    return _interior_values(c, degree), _interior_values(g @ c, degree), _interior_values(c @ g.T, degree)


def residual(kappa: np.ndarray, u: np.ndarray, degree: int = SOLVER_DEGREE) -> np.ndarray:
    """The a-posteriori check of pressures u predicted for log-permeabilities kappa (``Problem.residual``):
    (B,) relative residuals ||e|| / ||u||, L2 norms on [-1, 1]^2 (``collocation.norm2d``), kappa and u
    (B, n, n) coefficients, n <= degree + 1.

    With r = -(u_xx + u_yy) - kappa_x u_x - kappa_y u_y - exp(-kappa), the residual of the equation
    divided by a = exp(kappa) as ``solve`` collocates it, e solves -(e_xx + e_yy) = -r inside and
    e = -u on the boundary, collocated at the (degree + 1)^2 Lobatto points: r mapped through the
    inverse Laplacian, GMRES's preconditioner in ``solve``. The error u* - u (u* the exact solution)
    solves the same with the full operator, -(e_xx + e_yy) - kappa_x e_x - kappa_y e_y = -r, so e is
    an estimate of it, closer the smaller kappa's gradient. It costs no solve: the series'
    derivatives at the nodes and a few products of (degree - 1) x (degree - 1) matrices per sample. Equivalently
    e = (-Laplacian)^-1 (exp(-kappa) + kappa_x u_x + kappa_y u_y) - u (zero boundary values for the
    inverse): the step that one preconditioned Richardson iteration of ``solve``'s system takes from u.
    Invariant under ``normalise`` (residual(kappa + c, exp(-c) u) = residual(kappa, u)); inf where u
    is zero (e then is not: the source is 1).
    """
    kappa, u = _fields("residual", kappa, u, degree)
    kappa_values, kx, ky = _interior(kappa, degree)
    _, ux, uy = _interior(u, degree)
    _, _, v, vi, inverse = _operator(degree)
    with np.errstate(over="ignore", invalid="ignore"):
        rhs = np.exp(-kappa_values) + kx * ux + ky * uy
        values = np.zeros((len(u), degree + 1, degree + 1))
        values[:, 1:-1, 1:-1] = -(v @ ((vi @ rhs @ vi.T) * inverse) @ v.T)  # (-Laplacian)^-1, zero on the boundary
        to_coefficients = lobatto_to_coefficients(degree + 1)
        e = to_coefficients @ values @ to_coefficients.T
        e[:, : u.shape[1], : u.shape[1]] -= u
        return relative(norm2d(e), norm2d(u))


def strong_residual(kappa: np.ndarray, u: np.ndarray, degree: int = SOLVER_DEGREE) -> np.ndarray:
    """The PDE's residual in L2, for comparison with ``residual``: (B,) ||r|| / ||exp(-kappa)||, r as in
    ``residual``, each norm that of the interpolant of its values at the (degree + 1)^2 Lobatto points
    (boundary included); kappa and u (B, n, n) coefficients. The boundary values of u are not part of it."""
    kappa, u = _fields("strong_residual", kappa, u, degree)
    x = lobatto_points(degree + 1)
    g = derivative_matrix(u.shape[1])

    def at_nodes(c: np.ndarray) -> np.ndarray:
        return evaluate_grid(c, x, x)

    laplacian = at_nodes(g @ g @ u) + at_nodes(u @ (g @ g).T)
    gradient = at_nodes(g @ kappa) * at_nodes(g @ u) + at_nodes(kappa @ g.T) * at_nodes(u @ g.T)
    to_coefficients = lobatto_to_coefficients(degree + 1)
    with np.errstate(over="ignore", invalid="ignore"):
        source = np.exp(-at_nodes(kappa))
        r = -laplacian - gradient - source
        return relative(
            norm2d(to_coefficients @ r @ to_coefficients.T),
            norm2d(to_coefficients @ source @ to_coefficients.T),
        )


# The task


MODEL = ModelConfig(channels=8, hidden_channels=16, layers=4, axes="xxyy", mixers="km", points=16)
"""The default model: a kernel integral along x, an MLP, a kernel integral along y, an MLP (8
channels, 16 in the MLPs), the MLPs' ReLU at 16 Chebyshev points; docs/darcy.md, "Choosing the
architecture", has the search that chose it."""

PROBLEM: Problem[DataConfig] = Problem(
    name="darcy",
    title="Darcy",
    input="log-permeability kappa",
    output="pressure u",
    data_config=DataConfig,
    model=MODEL,
    test_seed=TEST_SEED,
    normalise=normalise,
    draw=permeabilities,
    solve=solve,
    residual=residual,
    command="python -m funcformer.darcy",
    defaults={"steps": 8000},
)
"""The Darcy task for the training layer: ``RunConfig.of(PROBLEM, steps=...)`` is a run of it."""
