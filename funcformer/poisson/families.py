"""Source families for out-of-distribution tests of a Poisson solver, and the least-squares baseline.

Every family is a function ``(n, seed, count) -> (count, n, n)``: float64 Chebyshev coefficients of
sources f in the ``chebval2d`` convention of ``funcformer.poisson`` (C[i, j] multiplies
T_i(x) T_j(y)), drawn from ``numpy.random.default_rng(seed)``. With phi_i = T_{i+2} - T_i (so that f
vanishes on the boundary) and g_ij independent standard normal:

    in_distribution  the task's own sources: f = sum_{i,j < K-2} a_ij phi_i(x) phi_j(y),
                     a_ij = g_ij / ((1+i)(1+j)), K = 12 (``task.sources``; needs n >= 12)
    slow_decay       the same basis, a_ij = g_ij / sqrt((1+i)(1+j)): the square root of the task's
                     decay, so the high-degree terms carry more of f (same 100-dimensional span)
    high_degree      the task's decay law extended to degree 15: i, j < 14, a_ij = g_ij / ((1+i)(1+j)),
                     i.e. ``task.sources`` with k = 16 (196 terms; degree 15 per variable; needs n >= 16).
    gaussian_bumps   f = sum_{m < 3} c_m exp(-((x - x_m)^2 + (y - y_m)^2) / (2 s_m^2)), c_m standard
                     normal, centre (x_m, y_m) uniform in [-1/2, 1/2]^2, width s_m uniform in
                     [1/4, 2/5] (``bump_parameters``); projected to n x n coefficients by interpolation
                     on the n x n tensor grid of Chebyshev points of the first kind (``chebpts1(n)``),
                     whose coefficients follow from the discrete orthogonality of T_j there, as
                     ``numpy.polynomial.chebyshev.chebinterpolate`` computes them in one variable.
                     At n = 16 the interpolant is within 1.2e-3 sum_m |c_m| of f everywhere (a single
                     bump of width 1/4 is the worst case, 1.1e-3 at worst, on a 101 x 101 grid; over
                     1024 sources, 9e-5 of max |f| median, 5e-4 at p95). f does not vanish on the
                     boundary (up to 0.2 of max |f| at a corner, 1e-2 median); the reference solver still
                     resolves u to 4e-10 (fine 64 against fine 128, relative L2, worst of 1024 sources).

For gaussian_bumps the source given to a solver is the interpolant itself (its reference u is
``task.solve`` of those coefficients), so the interpolation error affects no metric; it only says how
close the family is to true Gaussians.

Truncation floors at n = 16 (the exact u cut to 16 x 16; mean over 1024 sources of the test seed):
in_distribution 1.7e-6, slow_decay 1.1e-5, high_degree 6.9e-4, gaussian_bumps 4.7e-6.

``fit_least_squares`` (``funcformer.learning.metric``'s) is the linear baseline: the operator is
linear and the in-distribution sources span a 100-dimensional space, so a least-squares map fitted on
>= 100 samples reaches the truncation floor in distribution (and knows nothing outside that span).

>>> {name: family(16, 0, 2).shape for name, family in FAMILIES.items()}  # doctest: +NORMALIZE_WHITESPACE
{'in_distribution': (2, 16, 16), 'slow_decay': (2, 16, 16), 'high_degree': (2, 16, 16),
 'gaussian_bumps': (2, 16, 16)}
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import numpy.polynomial.chebyshev as chebyshev

from applicative.instances.collocation import vandermonde
from funcformer.learning.metric import apply_linear, fit_least_squares
from funcformer.poisson import SOLVER_POINTS, DataConfig, K, phi_basis, sources

__all__ = [
    "BUMPS",
    "CENTRE",
    "FAMILIES",
    "HIGH_K",
    "WIDTHS",
    "Bumps",
    "Family",
    "apply_linear",
    "bump_parameters",
    "fit_least_squares",
    "gaussian_bumps",
    "high_degree",
    "in_distribution",
    "slow_decay",
]

Family = Callable[[int, int, int], np.ndarray]
"""(n, seed, count) -> (count, n, n) source coefficients."""

HIGH_K = 16
"""``high_degree``'s degree bound: every coefficient of degree >= 16 is zero (degree 15 per variable)."""
BUMPS = 3
"""Gaussian bumps per source in ``gaussian_bumps``."""
CENTRE = 0.5
"""Bump centres are uniform in [-CENTRE, CENTRE]^2."""
WIDTHS = (0.25, 0.4)
"""Bump widths s (standard deviations) are uniform in this interval."""


def _check(name: str, n: int, count: int, least_n: int) -> None:
    if count < 0:
        raise ValueError(f"{name}: count = {count} must be >= 0")
    if not least_n <= n <= SOLVER_POINTS // 2:
        raise ValueError(f"{name}: n = {n} must be between {least_n} and {SOLVER_POINTS // 2}")


def in_distribution(n: int, seed: int, count: int) -> np.ndarray:
    """The task's sources (``task.sources(DataConfig(n), seed, count)``): a_ij = g_ij / ((1+i)(1+j)), i, j < K-2."""
    _check("in_distribution", n, count, K)
    return sources(DataConfig(n=n), seed, count)


def slow_decay(n: int, seed: int, count: int) -> np.ndarray:
    """f = sum_{i,j < K-2} a_ij phi_i(x) phi_j(y) with a_ij = g_ij / sqrt((1+i)(1+j)), g =
    default_rng(seed).standard_normal((count, K-2, K-2)): the task's basis with a slower decay."""
    _check("slow_decay", n, count, K)
    g = np.random.default_rng(seed).standard_normal((count, K - 2, K - 2))
    scale = np.sqrt(1.0 + np.arange(K - 2))
    p = phi_basis(n, K)
    f: np.ndarray = p @ (g / np.multiply.outer(scale, scale)) @ p.T
    return f


def high_degree(n: int, seed: int, count: int) -> np.ndarray:
    """The task's sources with degree bound HIGH_K = 16 instead of K = 12: f = sum_{i,j < 14} a_ij
    phi_i(x) phi_j(y), a_ij = g_ij / ((1+i)(1+j)) (``task.sources(DataConfig(n, k=16), seed, count)``)."""
    _check("high_degree", n, count, HIGH_K)
    return sources(DataConfig(n=n, k=HIGH_K), seed, count)


@dataclass(frozen=True)
class Bumps:
    """The parameters of ``count`` sources of ``BUMPS`` Gaussian bumps each."""

    amplitudes: np.ndarray
    """(count, BUMPS) c_m, standard normal."""
    centres: np.ndarray
    """(count, BUMPS, 2) (x_m, y_m), uniform in [-CENTRE, CENTRE]^2."""
    widths: np.ndarray
    """(count, BUMPS) s_m, uniform in WIDTHS."""


def bump_parameters(seed: int, count: int) -> Bumps:
    """Drawn from default_rng(seed) in this order: amplitudes, centres, widths (one call each)."""
    if count < 0:
        raise ValueError(f"bump_parameters: count = {count} must be >= 0")
    rng = np.random.default_rng(seed)
    amplitudes = rng.standard_normal((count, BUMPS))
    centres = rng.uniform(-CENTRE, CENTRE, (count, BUMPS, 2))
    widths = rng.uniform(*WIDTHS, (count, BUMPS))
    return Bumps(amplitudes, centres, widths)


def gaussian_bumps(n: int, seed: int, count: int) -> np.ndarray:
    """The n x n Chebyshev interpolant of f = sum_m c_m exp(-((x - x_m)^2 + (y - y_m)^2) / (2 s_m^2))
    (parameters from ``bump_parameters(seed, count)``) at the tensor grid of first-kind points
    t_k = chebpts1(n)[k]: C = W V^T F V W with V[k, j] = T_j(t_k), F[k, l] = f(t_k, t_l),
    W = diag(1/n, 2/n, ..., 2/n) (V^-1 = W V^T by the discrete orthogonality of T_j at these points)."""
    _check("gaussian_bumps", n, count, 1)
    bumps = bump_parameters(seed, count)
    t = chebyshev.chebpts1(n)
    v = vandermonde(t, n)
    w = np.full(n, 2.0 / n)
    w[0] = 1.0 / n
    inverse = w[:, None] * v.T  # V^-1
    # Each bump is a product of Gaussians in x and in y: (count, BUMPS, n) factors on the grid.
    variance = 2.0 * bumps.widths[..., None] ** 2
    gx = np.exp(-((t - bumps.centres[..., 0, None]) ** 2) / variance)
    gy = np.exp(-((t - bumps.centres[..., 1, None]) ** 2) / variance)
    values = np.einsum("sm,smk,sml->skl", bumps.amplitudes, gx, gy)
    coefficients: np.ndarray = inverse @ values @ inverse.T
    return coefficients


FAMILIES: dict[str, Family] = {
    "in_distribution": in_distribution,
    "slow_decay": slow_decay,
    "high_degree": high_degree,
    "gaussian_bumps": gaussian_bumps,
}
"""Name -> family, in-distribution first."""
