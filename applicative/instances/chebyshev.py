"""Chebyshev series on [-1, 1], the functional core: coefficient arrays in, arrays out.

A series f = sum_n c_n T_n is its coefficient array (``numpy.polynomial.chebyshev``
order; along any axis of a larger array). The class ``Cheb`` binds these
functions to an axis tag; they are also usable on their own:

    gram(n)                    G_ij = integral of T_i T_j: 1/(1-(i+j)^2) + 1/(1-(i-j)^2) for i + j even, else 0
    integral_weights(n)        w_k  = integral of T_k:     2/(1-k^2) for k even, else 0
    points(p)                  x_k  = cos(pi (k + 1/2) / p), the p Chebyshev points of the first kind
    to_values(c, p, axis)      the series at the p points (a DCT-III)
    to_coefficients(v, n, axis)  the first n coefficients of the interpolant of values at the points (a DCT-II)
    evaluate(c, x)             the series at arbitrary points x (three-term recurrence)
    derivative(c, order, axis)       d^m f / dx^m, the same number of coefficients (``chebder`` padded with zeros)
    antiderivative(c, order, axis)   the m-fold antiderivative vanishing at -1, m more coefficients
                                     (``chebint(c, m, lbnd=-1)``)
    fit(x, y, n, weights)      the least-squares series of n coefficients through samples (``chebfit``, deg n - 1)
    derivative_matrix(n, order)      G with G @ c = ``derivative(c, order)``: the derivative as a numpy matrix

Derivative and antiderivative are exact linear maps (integer and rational matrices, float64, applied
along ``axis`` like the transforms), so they run under ``jit``, ``grad`` and ``vmap``; ``fit`` is
``jnp.linalg.lstsq`` on the column-scaled Chebyshev Vandermonde matrix, as ``chebfit`` solves it. The
functions take and return JAX arrays, but for the tables, which are numpy float64: ``gram``,
``integral_weights``, ``points`` and ``derivative_matrix``.

``gram`` corrects the reference text's Gram matrix, which pairs f_i with g_i
where it means g_j and is 0/0 when |i - j| = 1 (see docs/design.md).

The numpy float64 kit of the tasks' reference solvers (collocation at the Chebyshev-Gauss-Lobatto
points, 2-D series on grids and their norm) is ``applicative.instances.collocation``.

>>> import numpy as np
>>> gram(3)
array([[ 2.        ,  0.        , -0.66666667],
       [ 0.        ,  0.66666667,  0.        ],
       [-0.66666667,  0.        ,  0.93333333]])
>>> c = np.array([0.5, 0.0, 1.0])                  # 0.5 + T_2 = 2 x^2 - 0.5
>>> bool(np.allclose(to_coefficients(to_values(c, 6), 3), c))
True
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import scipy.fft
from jax.typing import ArrayLike

__all__ = [
    "antiderivative",
    "basis",
    "derivative",
    "derivative_matrix",
    "evaluate",
    "fit",
    "float_dtype",
    "gram",
    "integral_weights",
    "points",
    "to_coefficients",
    "to_values",
]


@functools.cache
def gram(n: int) -> np.ndarray:
    """G[i, j] = integral over [-1, 1] of T_i T_j (float64)."""
    i, j = np.meshgrid(np.arange(n), np.arange(n), indexing="ij")
    with np.errstate(divide="ignore"):
        w = 1.0 / (1.0 - (i + j) ** 2) + 1.0 / (1.0 - (i - j) ** 2)
    return np.where((i + j) % 2 == 0, w, 0.0)


@functools.cache
def integral_weights(n: int) -> np.ndarray:
    """w[k] = integral over [-1, 1] of T_k: 2 / (1 - k^2) for even k, 0 for odd k (float64)."""
    k = np.arange(n)
    return np.where(k % 2 == 0, 2.0 / np.where(k == 1, 1.0, 1.0 - k**2), 0.0)


def points(p: int) -> np.ndarray:
    """The P Chebyshev points of the first kind, x_k = cos(pi (k + 1/2) / P), decreasing."""
    return np.cos(np.pi * (np.arange(p) + 0.5) / p)


@functools.cache
def _transforms(n: int, p: int) -> tuple[np.ndarray, np.ndarray]:
    """The two transforms as matrices: (P x N) coefficients -> values at the P points (a DCT-III),
    (N x P) values -> the first N coefficients (a DCT-II); scipy's DCTs applied to the identity.
    At these sizes one matmul is faster than an FFT (3x on a Funcformer training step)."""
    y = np.eye(n)
    y[0] *= 2.0
    values = scipy.fft.idct(np.pad(y * p, [(0, p - n), (0, 0)]), type=2, axis=0)
    coefficients = scipy.fft.dct(np.eye(p), type=2, axis=0)[:n] / p
    coefficients[0] /= 2.0
    return values, coefficients


def float_dtype(x: ArrayLike) -> jnp.dtype:
    """The dtype in which to combine ``x`` with float64 tables: x's own if inexact (float32 stays
    float32), the default float otherwise (integer or bool coefficients are promoted, never truncated)."""
    dtype = jnp.result_type(x)
    return dtype if jnp.issubdtype(dtype, jnp.inexact) else jnp.result_type(float)


def _apply(matrix: np.ndarray, x: ArrayLike, axis: int) -> jax.Array:
    x = jnp.asarray(x)
    return jnp.moveaxis(jnp.tensordot(jnp.asarray(matrix, float_dtype(x)), x, axes=[[1], [axis]]), 0, axis)


def to_values(c: ArrayLike, p: int, axis: int = 0) -> jax.Array:
    """Values at the P Chebyshev points of the series with coefficients along ``axis`` (a DCT-III)."""
    return _apply(_transforms(jnp.shape(c)[axis], p)[0], c, axis)


def to_coefficients(values: ArrayLike, n: int, axis: int = 0) -> jax.Array:
    """The first N Chebyshev coefficients of the interpolant of values at P points along ``axis`` (a DCT-II)."""
    return _apply(_transforms(n, jnp.shape(values)[axis])[1], values, axis)


def basis(x: jax.Array, n: int) -> jax.Array:
    """T_0(x) .. T_{n-1}(x) along a new last axis, by the three-term recurrence."""
    x = jnp.asarray(x, float_dtype(x))
    t = [jnp.ones_like(x), x][:n]
    while len(t) < n:
        t.append(2.0 * x * t[-1] - t[-2])
    return jnp.stack(t, axis=-1)


def evaluate(c: ArrayLike, x: ArrayLike) -> jax.Array:
    """sum_n c_n T_n(x) for coefficients along the first axis of ``c``, at points of any shape."""
    c = jnp.asarray(c)
    t = basis(jnp.asarray(x), c.shape[0])
    return jnp.tensordot(t.astype(jnp.promote_types(t.dtype, c.dtype)), c, 1)


# Calculus: derivative, antiderivative, least-squares fit.


@functools.cache
def _derivative_matrix(n: int, order: int) -> np.ndarray:
    """(n x n) coefficients -> those of the order-th derivative: T_j' = 2 j sum_{i < j, i + j odd} T_i,
    halved at i = 0 (float64, exact integers)."""
    i, j = np.meshgrid(np.arange(n), np.arange(n), indexing="ij")
    d = np.where((j > i) & ((i + j) % 2 == 1), 2.0 * j, 0.0)
    d[0] /= 2.0
    return np.linalg.matrix_power(d, order)


@functools.cache
def _antiderivative_matrix(n: int, order: int) -> np.ndarray:
    """((n + order) x n) coefficients -> those of the order-fold antiderivative vanishing at -1:
    integral of T_0 = T_1, of T_1 = T_2 / 4, of T_j = T_{j+1} / (2 (j + 1)) - T_{j-1} / (2 (j - 1)),
    then the constant that makes it 0 at -1 (T_k(-1) = (-1)^k)."""
    out = np.eye(n)
    for m in range(n, n + order):
        step = np.zeros((m + 1, m))
        for j in range(m):
            if j == 0:
                step[1, 0] = 1.0
            elif j == 1:
                step[2, 1] = 0.25
            else:
                step[j + 1, j] = 1.0 / (2 * (j + 1))
                step[j - 1, j] -= 1.0 / (2 * (j - 1))
        sign = (-1.0) ** np.arange(m + 1)
        step[0] = -(sign[1:] @ step[1:])
        out = step @ out
    return out


def _order(order: object, what: str) -> int:
    if not isinstance(order, int | np.integer) or isinstance(order, bool) or order < 0:
        raise ValueError(f"{what}: order must be a non-negative integer, got {order!r}")
    return int(order)


def _axis(c: jax.Array, axis: int, what: str) -> int:
    if not isinstance(axis, int | np.integer) or isinstance(axis, bool) or not -c.ndim <= axis < c.ndim:
        raise ValueError(f"{what}: axis {axis!r} is out of range for coefficients of shape {c.shape}")
    return int(axis) % c.ndim


def derivative(c: ArrayLike, order: int = 1, axis: int = 0) -> jax.Array:
    """The coefficients of d^order f / dx^order for f with coefficients along ``axis``: as many as f has,
    the top ``order`` zero (``numpy.polynomial.chebyshev.chebder(c, order, axis=axis)`` padded with zeros,
    so the derivative is a series of the same size: f + f' is defined)."""
    c = jnp.asarray(c)
    what = "chebyshev.derivative"
    n = c.shape[_axis(c, axis, what)]
    return _apply(_derivative_matrix(n, _order(order, what)), c, axis)


def antiderivative(c: ArrayLike, order: int = 1, axis: int = 0) -> jax.Array:
    """The coefficients of the order-fold antiderivative F of f (coefficients along ``axis``) that
    vanishes at -1 (each of the ``order`` integrations does): ``order`` more coefficients, so F is
    exact (``numpy.polynomial.chebyshev.chebint(c, order, lbnd=-1, axis=axis)``). F(1) is the
    integral over [-1, 1] for order 1."""
    c = jnp.asarray(c)
    what = "chebyshev.antiderivative"
    n = c.shape[_axis(c, axis, what)]
    return _apply(_antiderivative_matrix(n, _order(order, what)), c, axis)


@functools.cache
def derivative_matrix(n: int, order: int = 1) -> np.ndarray:
    """The n x n matrix G with G @ c = ``derivative(c, order)`` (float64, read-only, cached).

    G @ c holds the coefficients of d^order f / dx^order for f = sum_j c_j T_j, ``chebder`` padded with
    zeros (T_j' = 2 j sum_{i < j, i + j odd} T_i, halved at i = 0; exact integers). G @ C differentiates a
    2-D series in x (axis 0), C @ G^T in y.

    Its entries are the exact integers, where ``numpy.polynomial.chebyshev.chebder``'s recurrence divides
    (c_{j-2} += j c_j / (j - 2)) and rounds (3.6e-15 at n = 16, 8.5e-14 at n = 64). n >= 1 and order >= 0,
    else a ValueError."""
    what = "chebyshev.derivative_matrix"
    if not isinstance(n, int | np.integer) or isinstance(n, bool) or n < 1:
        raise ValueError(f"{what}: need an integer size >= 1, got {n!r}")
    n, order = int(n), _order(order, what)
    g = _derivative_matrix(n, order).copy()
    g.flags.writeable = False
    return g


def fit(
    x: ArrayLike, y: ArrayLike, n: int, weights: ArrayLike | None = None, *, what: str = "chebyshev.fit"
) -> jax.Array:
    """The n coefficients c (shape (n, *y.shape[1:])) of the least-squares fit through samples y_k at
    points x_k in [-1, 1]: c minimises sum_k (w_k (sum_j c_j T_j(x_k) - y_k))^2, each trailing axis of
    y fitted on its own (``numpy.polynomial.chebyshev.chebfit(x, y, n - 1, w=weights)``: weights apply
    to the unsquared residuals, 1 / sigma for noise of deviation sigma).

    Solved by ``jnp.linalg.lstsq`` on the Chebyshev Vandermonde matrix with unit-norm columns, as
    ``chebfit`` does; differentiable in y, x and the weights. Rejected, naming ``what``: x not 1-D, y
    whose first axis is not x's length, fewer samples than coefficients (the fit would not be unique),
    x outside [-1, 1] (checked when x is concrete: under ``jit`` keep it in range), weights that are
    not one per sample."""
    if not isinstance(n, int | np.integer) or isinstance(n, bool) or n < 1:
        raise ValueError(f"{what}: a series needs at least one coefficient, got size {n!r}")
    x, y = jnp.asarray(x), jnp.asarray(y)
    if x.ndim != 1:
        raise ValueError(f"{what}: x must be a 1-D array of sample points, got shape {x.shape}")
    m = x.shape[0]
    if y.ndim == 0 or y.shape[0] != m:
        raise ValueError(f"{what}: y needs one sample per point along its first axis ({m}), got shape {y.shape}")
    if m < n:
        raise ValueError(f"{what}: {m} samples cannot determine {n} coefficients (need at least {n})")
    if not isinstance(x, jax.core.Tracer) and (top := float(np.max(np.abs(np.asarray(x))))) > 1.0:
        raise ValueError(f"{what}: sample points outside [-1, 1] (max |x| {top})")
    w = None if weights is None else jnp.asarray(weights)
    if w is not None and w.shape != (m,):
        raise ValueError(f"{what}: weights must be one per sample, shape ({m},), got {w.shape}")
    dtype = jnp.result_type(x, y) if w is None else jnp.result_type(x, y, w)
    dtype = dtype if jnp.issubdtype(dtype, jnp.inexact) else jnp.result_type(float)
    w = jnp.ones(m, dtype) if w is None else w.astype(dtype)
    c: jax.Array = _least_squares(x, y.reshape(m, -1).astype(dtype), w, n)
    return c.reshape((n, *y.shape[1:]))


@functools.partial(jax.jit, static_argnums=3)
def _least_squares(x: jax.Array, y: jax.Array, w: jax.Array, n: int) -> jax.Array:
    """The (n, K) solution of min |diag(w) (V c - y)| for y (M, K), V the Chebyshev Vandermonde
    matrix, its columns scaled to unit norm (as chebfit does, for conditioning). Compiled once per
    shape: eagerly, each of these small operations would compile on its own."""
    v = basis(x, n).astype(y.dtype) * w[:, None]
    norms = jnp.sqrt(jnp.sum(jnp.abs(v) ** 2, axis=0))
    norms = jnp.where(norms == 0, 1, norms)
    solution: jax.Array = jnp.linalg.lstsq(v / norms, y * w[:, None])[0]
    return solution / norms[:, None]
