"""The metric both tasks share (docs/poisson.md, docs/darcy.md), and the baselines beside it, in float64 numpy.

Functions are 2-D Chebyshev series in the ``numpy.polynomial.chebyshev.chebval2d`` convention:
C[i, j] multiplies T_i(x) T_j(y), axis 1 of a batch is x, axis 2 is y.

    values      ``values_relative_l2``: per sample ||p - u||_2 / ||u||_2 over the values given, no quadrature
                weights (the FNO benchmark's metric; its JAX twin, ``steps.values_relative_l2``, the loss)
    metric      ``relative_l2``: ||u_pred - u||_2 / ||u||_2 over the uniform 64 x 64 grid x_k = -1 + 2k/63, boundary
                included, against the exact (fine) solution u
    floor       the metric of the exact solution truncated to n x n: what a perfect n x n model scores
    norm        ``series_norm``, the L2 norm on [-1, 1]^2 (``applicative.instances.collocation.norm2d``)
    baselines   the mean of the training targets, and the least-squares linear map from inputs to targets

>>> exact = np.zeros((1, 3, 3)); exact[0, 0, 0] = 1.0  # u = 1
>>> relative_l2(2.0 * exact, exact).tolist()
[1.0]
"""

from __future__ import annotations

import numpy as np

from applicative.instances.collocation import evaluate_grid
from applicative.instances.collocation import norm2d as series_norm

__all__ = [
    "GRID",
    "apply_linear",
    "fit_least_squares",
    "grid_values",
    "mean_values_relative_l2",
    "real_array",
    "relative_l2",
    "resized",
    "series_norm",
    "summary",
    "truncate",
    "truncation_floor",
    "values_relative_l2",
]

GRID = 64
"""The metric's uniform grid, x_k = -1 + 2k / (GRID - 1)."""
_CHUNK = 1024
"""Samples per batch in the metric: bounds the temporaries to a few tens of MB."""


def real_array(x: object, what: str) -> np.ndarray:
    """``x`` (an array, or a list of arrays of one shape) as a numpy array of real numbers: floating point
    as given, integers as float64. A list of arrays of different shapes raises a ValueError naming
    ``what`` and two of the shapes; bools, complex numbers, objects or text a TypeError naming the dtype."""
    try:
        array = np.asarray(x)
    except ValueError as error:  # numpy refuses a ragged list
        raise ValueError(f"{what}: {_ragged(x, error)}") from None
    if array.dtype.kind not in "fiu":  # floating point, signed or unsigned integers (not bools: "b")
        raise TypeError(f"{what} must be real floating-point numbers or integers, got dtype {array.dtype}")
    return array if array.dtype.kind == "f" else array.astype(np.float64)


def _ragged(x: object, error: ValueError) -> str:
    """Why a nested list is no array: the first element whose shape differs from element 0's."""
    shapes: list[tuple[int, ...]] = []
    for i, element in enumerate(x if isinstance(x, list | tuple) else ()):
        try:
            shapes.append(np.shape(element))
        except ValueError as inner:
            return f"element {i}: {_ragged(element, inner)}"
    differ = next((i for i, shape in enumerate(shapes) if shape != shapes[0]), None)
    if differ is None:
        return f"not an array of numbers ({error})"
    return f"a list of arrays of different shapes: element 0 has shape {shapes[0]}, element {differ} {shapes[differ]}"


def resized(c: np.ndarray, p: int, q: int) -> np.ndarray:
    """A (B, m1, m2) batch of coefficients at p x q: cut to degree < p in x and < q in y, or padded with
    zeros (the same series); ``c`` itself where it is already (B, p, q)."""
    if c.shape[1:] == (p, q):
        return c
    out = np.zeros((c.shape[0], p, q), c.dtype)
    a, b = min(p, c.shape[1]), min(q, c.shape[2])
    out[:, :a, :b] = c[:, :a, :b]
    return out


def truncate(u: np.ndarray, n: int) -> np.ndarray:
    """The first n x n coefficients of a (B, m, m) batch (m >= n): the series truncated to degree < n per axis."""
    if u.ndim != 3 or min(u.shape[1:]) < n:
        raise ValueError(f"truncate: need (B, m, m) with m >= {n}, got {u.shape}")
    return np.ascontiguousarray(u[:, :n, :n])


def grid_values(c: np.ndarray, points: int = GRID) -> np.ndarray:
    """(B, m, m) coefficients -> (B, points, points) values on the uniform grid incl. boundary
    (chebval2d convention: axis 1 is x, axis 2 is y; ``collocation.evaluate_grid``)."""
    c = np.asarray(c, dtype=np.float64)
    if c.ndim != 3 or c.shape[1] != c.shape[2]:
        raise ValueError(f"grid_values: need (B, m, m) coefficients, got {c.shape}")
    x = np.linspace(-1.0, 1.0, points)
    return evaluate_grid(c, x, x)


def relative_l2(predicted: np.ndarray, exact: np.ndarray) -> np.ndarray:
    """Per-sample ||u_pred - u||_2 / ||u||_2 on the uniform GRID x GRID grid; predicted (B, n, n),
    exact (B, m, m) coefficients (any sizes)."""
    predicted, exact = np.asarray(predicted, dtype=np.float64), np.asarray(exact, dtype=np.float64)
    if predicted.ndim != 3 or exact.ndim != 3 or predicted.shape[0] != exact.shape[0]:
        raise ValueError(f"relative_l2: need (B, n, n) and (B, m, m) batches, got {predicted.shape}, {exact.shape}")
    errors = np.empty(exact.shape[0])
    for start in range(0, exact.shape[0], _CHUNK):
        u = grid_values(exact[start : start + _CHUNK])
        difference = grid_values(predicted[start : start + _CHUNK]) - u
        errors[start : start + _CHUNK] = np.sqrt((difference**2).sum(axis=(1, 2)) / (u**2).sum(axis=(1, 2)))
    return errors


def values_relative_l2(predicted: np.ndarray, exact: np.ndarray) -> np.ndarray:
    """(B,) float64: ||predicted[b] - exact[b]||_2 / ||exact[b]||_2, sums over all grid points of each sample
    (no quadrature weights), for two batches (B, ...) of one shape. ValueError for different shapes, an empty
    batch, non-finite values, or an exact sample that is zero; TypeError for non-real numbers.
    The FNO benchmark's metric (its mean over a test set: ``mean_values_relative_l2``); ``relative_l2`` is this
    of two series' values on the metric's GRID x GRID grid, and ``steps.values_relative_l2`` its JAX twin, the
    training loss."""
    predicted = np.asarray(real_array(predicted, "values_relative_l2: predicted"), dtype=np.float64)
    exact = np.asarray(real_array(exact, "values_relative_l2: exact"), dtype=np.float64)
    if predicted.shape != exact.shape or exact.ndim < 2 or exact.shape[0] == 0:
        raise ValueError(
            "values_relative_l2: need two non-empty batches (B, ...) of one shape, "
            f"got {predicted.shape}, {exact.shape}"
        )
    if not (np.all(np.isfinite(predicted)) and np.all(np.isfinite(exact))):
        raise ValueError("values_relative_l2: the batches hold NaN or infinite values")
    b = exact.shape[0]
    norms = np.linalg.norm(exact.reshape(b, -1), axis=1)
    if np.any(norms == 0):
        raise ValueError(
            f"values_relative_l2: exact sample {int(np.argmin(norms))} is zero: its relative error is undefined"
        )
    errors: np.ndarray = np.linalg.norm((predicted - exact).reshape(b, -1), axis=1) / norms
    return errors


def mean_values_relative_l2(predicted: np.ndarray, exact: np.ndarray) -> float:
    """The benchmark's figure: the mean over the batch of ``values_relative_l2`` (errors as it)."""
    return float(np.mean(values_relative_l2(predicted, exact)))


def summary(errors: np.ndarray) -> dict[str, float]:
    """{"mean", "median", "p95"} of per-sample errors (p95: numpy's default linear percentile)."""
    errors = np.asarray(errors, dtype=np.float64)
    if errors.ndim != 1 or errors.size == 0:
        raise ValueError(f"summary: need a non-empty 1-D array of errors, got shape {errors.shape}")
    return {
        "mean": float(np.mean(errors)),
        "median": float(np.median(errors)),
        "p95": float(np.percentile(errors, 95)),
    }


def truncation_floor(exact: np.ndarray, n: int) -> dict[str, float]:
    """The error of the exact solutions (B, m, m) truncated to n x n: what a perfect n x n model scores."""
    return summary(relative_l2(truncate(exact, n), exact))


def fit_least_squares(x: np.ndarray, u: np.ndarray) -> np.ndarray:
    """The least-squares linear map from inputs to outputs: the (n^2, n^2) matrix M minimising
    ||X M - U||_F with X, U the (B, n^2) flattened coefficients (``numpy.linalg.lstsq``, default rcond:
    with fewer than full-rank samples, the minimum-norm solution, which is zero on the complement of
    the samples' span). Predict with ``apply_linear``."""
    if x.ndim != 3 or x.shape != u.shape or x.shape[1] != x.shape[2]:
        raise ValueError(f"fit_least_squares: need inputs and outputs of one shape (B, n, n), got {x.shape}, {u.shape}")
    b = x.shape[0]
    m: np.ndarray = np.linalg.lstsq(x.reshape(b, -1), u.reshape(b, -1), rcond=None)[0]
    return m


def apply_linear(m: np.ndarray, x: np.ndarray) -> np.ndarray:
    """Predictions (B, n, n) of the map ``m`` from ``fit_least_squares`` for inputs (B, n, n)."""
    b, n = x.shape[0], x.shape[1]
    u: np.ndarray = (x.reshape(b, n * n) @ m).reshape(b, n, n)
    return u
