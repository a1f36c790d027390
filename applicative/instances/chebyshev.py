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

``gram`` corrects the reference text's Gram matrix, which pairs f_i with g_i
where it means g_j and is 0/0 when |i - j| = 1 (see docs/design.md).

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

__all__ = ["basis", "evaluate", "float_dtype", "gram", "integral_weights", "points", "to_coefficients", "to_values"]


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
