"""Chebyshev collocation and 2-D series on grids, numpy float64 in and out: the kit of the reference solvers.

The tasks' exact solvers, residuals and metric (``funcformer.poisson``, ``funcformer.darcy``,
``funcformer.learning``) are numpy, in float64, outside any trace; these are their building blocks.
Collocation at the m Chebyshev-Gauss-Lobatto points (values at the points stand for the interpolant of
degree < m), and 2-D series in the ``chebval2d`` convention, C[i, j] multiplying T_i(x) T_j(y), batch
axis first:

    lobatto_points(m)              x_k = cos(pi k / (m - 1)), the m Lobatto points, decreasing from 1 to -1
    lobatto_derivative(m)          D: values at the points -> the interpolant's derivative there (collocation)
    lobatto_to_coefficients(m)     values at the points -> the interpolant's m coefficients (a DCT-I)
    dirichlet_derivatives(m)       (D1, D2): D and D^2 on the interior points, for u = 0 at +-1
    dirichlet_eigen(m)             (l, V, V^-1) with D2 = V diag(l) V^-1: the fast diagonalisation of the
                                   Dirichlet Laplacian, U = V ((V^-1 F V^-T) / (l_i + l_j)) V^T
    vandermonde(x, n)              V[p, j] = T_j(x_p) (``chebvander``)
    evaluate_grid(c, x, y)         1-D series at the points x, or 2-D series on the grid x times y
    norm2d(c)                      the L2 norm on [-1, 1]^2 of 2-D series, sqrt(sum((G C G) * C)), G = gram(n)

The JAX functions of a series, and its Gram matrix ``gram`` and the derivative as a matrix
``derivative_matrix`` (numpy float64 too), are the functional core's, ``applicative.instances.chebyshev``.
No function here calls JAX: numpy arrays in, numpy arrays out.

>>> x = lobatto_points(3)                            # 1, 0, -1
>>> lobatto_derivative(3) @ x**2, lobatto_to_coefficients(3) @ x**2   # 2x; x^2 = (T_0 + T_2) / 2
(array([ 2.,  0., -2.]), array([0.5, 0. , 0.5]))
"""

from __future__ import annotations

import functools

import numpy as np
import scipy.fft
from numpy.typing import ArrayLike

from applicative.instances.chebyshev import gram

__all__ = [
    "dirichlet_derivatives",
    "dirichlet_eigen",
    "evaluate_grid",
    "lobatto_derivative",
    "lobatto_points",
    "lobatto_to_coefficients",
    "norm2d",
    "vandermonde",
]


def _size(m: object, least: int, what: str) -> int:
    if not isinstance(m, int | np.integer) or isinstance(m, bool) or m < least:
        raise ValueError(f"{what}: need an integer size >= {least}, got {m!r}")
    return int(m)


def lobatto_points(m: int) -> np.ndarray:
    """The m Chebyshev-Gauss-Lobatto points x_k = cos(pi k / (m - 1)), decreasing from 1 to -1 (float64).

    k = 0 .. m - 1: the extrema of T_{m-1} and the endpoints, the nodes of ``lobatto_derivative`` and
    ``lobatto_to_coefficients``; ``numpy.polynomial.chebyshev.chebpts2(m)`` reversed, to rounding, with an
    exact 0 (m odd) and exact symmetry x_k = -x_{m-1-k}. m >= 2, else a ValueError."""
    m = _size(m, 2, "collocation.lobatto_points")
    # sin of symmetric angles gives exact zeros and exact symmetry, which cos(pi k / (m-1)) does not.
    return np.sin(np.pi * (m - 1 - 2 * np.arange(m)) / (2 * (m - 1)))


@functools.cache
def lobatto_derivative(m: int) -> np.ndarray:
    """The m x m collocation differentiation matrix D at the m Lobatto points (float64, read-only, cached).

    (D v)_k = p'(x_k) for p the interpolant of degree < m through the values v_k = p(x_k) (Trefethen, Spectral
    Methods in MATLAB, ch. 6): D_kj = (c_k / c_j) (-1)^(k+j) / (x_k - x_j) for k != j, c = 2 at the ends and
    1 inside; each diagonal entry is minus the rest of its row (the negative-sum trick), so D maps constants
    to zero up to the rounding of that sum. m >= 2, else a ValueError."""
    x = lobatto_points(_size(m, 2, "collocation.lobatto_derivative"))
    c = np.ones(m)
    c[0] = c[-1] = 2.0
    c *= (-1.0) ** np.arange(m)
    dx = np.subtract.outer(x, x) + np.eye(m)
    d: np.ndarray = np.outer(c, 1.0 / c) / dx
    # Diagonal by the negative row sum: derivatives of constants are then zero to rounding, which the
    # closed-form diagonal is not.
    d -= np.diag(d.sum(axis=1))
    d.flags.writeable = False
    return d


@functools.cache
def lobatto_to_coefficients(m: int) -> np.ndarray:
    """The m x m matrix A from values at the m Lobatto points to their interpolant's coefficients, a DCT-I
    (float64, read-only, cached).

    c_j = (2 w_j / (m - 1)) sum_k w_k v_k T_j(x_k), w = 1/2 at the ends and 1 inside (T_j(x_k) =
    cos(pi j k / (m - 1))): scipy's DCT-I of the identity, scaled. A V A^T for a 2-D grid of values V.
    m >= 2, else a ValueError."""
    m = _size(m, 2, "collocation.lobatto_to_coefficients")
    w = np.ones(m)
    w[0] = w[-1] = 0.5
    a: np.ndarray = scipy.fft.dct(np.eye(m), type=1, axis=0) * (w / (m - 1))[:, None]
    a.flags.writeable = False
    return a


@functools.cache
def dirichlet_derivatives(m: int) -> tuple[np.ndarray, np.ndarray]:
    """(D1, D2): first and second derivatives at the interior Lobatto points, for u = 0 at x = +-1 (float64,
    read-only, cached).

    Each (m - 2) x (m - 2), from u's values at the m - 2 interior points of m: D1 = D[1:-1, 1:-1],
    D2 = (D D)[1:-1, 1:-1] with D = ``lobatto_derivative(m)`` (the boundary values are zero, so their columns
    drop out, and their rows are not equations). m >= 3, else a ValueError."""
    d = lobatto_derivative(_size(m, 3, "collocation.dirichlet_derivatives"))
    d2 = (d @ d)[1:-1, 1:-1]
    d2.flags.writeable = False
    return d[1:-1, 1:-1], d2


@functools.cache
def dirichlet_eigen(m: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(l, V, V^-1): the eigendecomposition D2 = V diag(l) V^-1 of the Dirichlet second derivative D2 of
    ``dirichlet_derivatives(m)`` (shapes (m - 2,), (m - 2, m - 2), (m - 2, m - 2)). It diagonalises the
    Dirichlet Laplacian on the interior tensor grid: u_xx + u_yy = f there is D2 U + U D2^T = F, so
    U = V ((V^-1 F V^-T) / (l_i + l_j)) V^T (fast diagonalisation).

    The spectrum is real and negative (Gottlieb & Lustman): the eigenvalue nearest zero tends to -pi^2 / 4 (that
    of d^2/dx^2 on [-1, 1] with u(+-1) = 0), the largest in size grows like -(m - 1)^4 / 21; rounding-level
    imaginary parts of ``numpy.linalg.eig``'s result would be dropped. The eigenpairs are by ascending l
    (eig's own order is not specified). Float64, read-only (cached).
    m >= 3, else a ValueError."""
    _, d2 = dirichlet_derivatives(m)
    eigenvalues, vectors = np.linalg.eig(d2)
    order = np.argsort(eigenvalues.real)
    lam, v = eigenvalues.real[order], vectors.real[:, order]
    arrays = (lam, v, np.linalg.inv(v))
    for a in arrays:
        a.flags.writeable = False
    return arrays


def vandermonde(x: ArrayLike, n: int) -> np.ndarray:
    """The len(x) x n matrix V[p, j] = T_j(x_p), which evaluates n coefficients at the points x (float64).

    ``numpy.polynomial.chebyshev.chebvander(x, n - 1)``; ``chebyshev.basis`` is the JAX counterpart. x 1-D and
    n >= 1, else a ValueError."""
    x = np.asarray(x)
    if x.ndim != 1:
        raise ValueError(f"collocation.vandermonde: x must be a 1-D array of points, got shape {x.shape}")
    t: np.ndarray = np.polynomial.chebyshev.chebvander(x, _size(n, 1, "collocation.vandermonde") - 1)
    return t


def evaluate_grid(c: ArrayLike, x: ArrayLike, y: ArrayLike | None = None) -> np.ndarray:
    """Series evaluated on a grid, batch first (numpy, float64).

    1-D (``y`` None): c (..., n), the coefficients along the last axis, -> (..., len(x)) values
    sum_j c_j T_j(x_p), i.e. C V_x^T (``chebval(x, c)`` for one series).
    2-D: c (..., n, m) in the ``chebval2d`` convention (C[i, j] multiplies T_i(x) T_j(y)) -> (..., len(x),
    len(y)) values at the points (x_p, y_q), V_x C V_y^T (``chebgrid2d(x, y, C)`` for one series).

    V = ``vandermonde``; leading axes of c are a batch (numpy orders them last). x, y 1-D, c with at least
    one (1-D) or two (2-D) axes, else a ValueError."""
    c = np.asarray(c)
    axes = 1 if y is None else 2
    if c.ndim < axes or 0 in c.shape[-axes:]:
        kind = "(..., n)" if y is None else "(..., n, m)"
        raise ValueError(f"collocation.evaluate_grid: need coefficients of shape {kind}, n, m >= 1, got {c.shape}")
    tx = vandermonde(x, c.shape[-1] if y is None else c.shape[-2])
    if y is None:
        values: np.ndarray = c @ tx.T
        return values
    values = tx @ c @ vandermonde(y, c.shape[-1]).T
    return values


def norm2d(c: ArrayLike) -> np.ndarray:
    """The L2 norm on [-1, 1]^2 of each 2-D series of a batch, exact through the Gram matrices (float64).

    c (..., n, m) in the ``chebval2d`` convention -> (...,) ||f||_2 = sqrt(sum_ijkl C_ij C_kl G_ik G'_jl) =
    sqrt(sum((G C G') * C)), G = ``gram(n)``, G' = ``gram(m)``. Fewer than two axes: a ValueError."""
    c = np.asarray(c, dtype=np.float64)
    if c.ndim < 2:
        raise ValueError(f"collocation.norm2d: need coefficients of shape (..., n, m), got {c.shape}")
    norms: np.ndarray = np.sqrt(np.sum((gram(c.shape[-2]) @ c @ gram(c.shape[-1])) * c, axis=(-2, -1)))
    return norms
