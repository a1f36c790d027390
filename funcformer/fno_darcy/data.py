"""The recipe of the Darcy data of the Fourier Neural Operator paper (Li et al. 2021; docs/fno_darcy.md): the
authors' MATLAB ``GRF.m``, ``demo.m`` and ``solve_gwf.m`` ported to float64 numpy and scipy.

    PDE           -div(a grad u) = f on (0, 1)^2, u = 0 on the boundary; f = 1 for the data
    field         g on the s x s cell-centred grid x_n = (2n + 1) / (2s): the orthonormal inverse 2-D DCT-II of
                  L[k1, k2] = s tau^(alpha - 1) (pi^2 (k1^2 + k2^2) + tau^2)^(-alpha / 2) xi[k1, k2], L[0, 0] = 0,
                  xi i.i.d. N(0, 1), alpha = 2, tau = 3 (``gaussian_field``; GRF.m). That is
                  g = sum_k sqrt(lambda_k) xi_k phi_k at the grid points, phi_k the L2((0, 1)^2)-orthonormal Neumann
                  eigenfunctions of the Laplacian, lambda_k = tau^(2 alpha - 2) (pi^2 |k|^2 + tau^2)^(-alpha):
                  the centred Gaussian field of covariance tau^(2 alpha - 2) (-Laplacian + tau^2)^(-alpha), its
                  constant mode removed, truncated to k1, k2 < s: the same field at every s but for those modes
    coefficient   a = high = 12 where g >= 0, low where g < 0: low = 3 as in the paper's text (demo.m writes 4)
                  (``coefficients``)
    solver        a (and f), given on the s x s cell-centred grid, interpolated to the n x n nodes x_i = i / (n - 1)
                  by a not-a-knot bicubic spline, extrapolated to the boundary nodes (MATLAB's
                  interp2(..., 'spline'); ``to_nodes``); the five-point scheme on the interior nodes with
                  face values a_{i+1/2, j} = (a_{i, j} + a_{i+1, j}) / 2, h = 1 / (n - 1), solved by SuperLU
                  (solve_gwf.m; ``solve``): the solution on all n x n nodes, zero on the boundary; then, as
                  solve_gwf.m's last line does, interpolated back to the s x s cell centres by the same spline
                  (``to_cells``): the benchmark's u, on the grid of its a (``solution``). n = s = 421.
    resolutions   a 421-point grid subsampled every r-th point, s = (421 - 1) / r + 1: the paper's
                  s = 85, 141, 211, 421 are r = 5, 3, 2, 1 (``subsample``; the coefficient the same way, so
                  that its points stay the cell centres of the 421 grid)
    baseline      the same solver run on what a model is given, the coefficient at the benchmark's s x s points
                  (``grid_points``), interpolated to any number of nodes and the solution back to any of the
                  benchmark's grids (``coarse_solution``)
    metric        per sample, ||u_pred - u||_2 / ||u||_2 over the grid points (no quadrature weights); the
                  benchmark's figure is its mean over the test set
                  (``funcformer.learning.metric.values_relative_l2``, ``mean_values_relative_l2``)

Sample i of a seed is drawn from its own generator, ``numpy.random.default_rng((seed, i))``, so any sample
can be drawn alone. Axis 0 of a grid is x, axis 1 is y; the recipe is symmetric in x and y.

>>> a = coefficients(seed=0, count=1, s=43)[0]
>>> sorted(set(a.ravel().tolist()))
[3.0, 12.0]
>>> u = solve(a, nodes=43)
>>> u.shape, subsample(u, 22).shape, bool(u.min() == 0.0 < u.max())
((43, 43), (22, 22), True)
"""

from __future__ import annotations

import functools
import operator

import numpy as np
import scipy.sparse as sparse
from scipy.fft import idctn
from scipy.interpolate import CubicSpline
from scipy.sparse.linalg import splu

from funcformer.learning.metric import real_array

__all__ = [
    "ALPHA",
    "HIGH",
    "LOW",
    "NODES",
    "RESOLUTIONS",
    "TAU",
    "cell_centres",
    "coarse_solution",
    "coefficients",
    "gaussian_field",
    "grid_points",
    "node_points",
    "solution",
    "solve",
    "subsample",
    "to_cells",
    "to_nodes",
]

ALPHA = 2.0
"""The covariance's exponent alpha (GRF.m)."""
TAU = 3.0
"""The covariance's inverse length scale tau (GRF.m)."""
HIGH = 12.0
"""The coefficient where g >= 0."""
LOW = 3.0
"""The coefficient where g < 0: the paper's text; the released demo.m writes 4."""
NODES = 421
"""Nodes per axis of the solver's grid, and the size s of the stored coefficients."""
RESOLUTIONS = (85, 141, 211, 421)
"""The paper's resolutions: every 5th, 3rd, 2nd and every point of the 421 grid."""


def cell_centres(s: int) -> np.ndarray:
    """The s cell centres x_n = (2n + 1) / (2s), n = 0, ..., s - 1, of (0, 1): the field's grid."""
    return (2.0 * np.arange(s) + 1.0) / (2.0 * s)


def grid_points(s: int) -> np.ndarray:
    """The benchmark's s points per axis in (0, 1), float64: every ((NODES - 1) / (s - 1))-th cell centre of the
    NODES grid, the points of ``subsample``'s values (s = 421: ``cell_centres(421)``). ValueError for an s the
    NODES grid has not."""
    if not isinstance(s, int) or s < 2 or (NODES - 1) % (s - 1):
        raise ValueError(f"grid_points: s = {s!r} is not one of the benchmark's grids (s - 1 must divide {NODES - 1})")
    return cell_centres(NODES)[:: (NODES - 1) // (s - 1)]


def node_points(n: int) -> np.ndarray:
    """The n nodes x_i = i / (n - 1), i = 0, ..., n - 1, of [0, 1]: the solver's grid."""
    return np.arange(n) / (n - 1.0)


def _count(value: int, what: str, least: int) -> int:
    """``value`` as an int, or a ValueError (a TypeError if it is no integer) naming ``what``."""
    try:
        number = operator.index(value)
    except TypeError:
        raise TypeError(f"{what} must be an integer, got {value!r}") from None
    if number < least:
        raise ValueError(f"{what} must be >= {least}, got {number}")
    return number


def gaussian_field(
    seed: int, count: int, s: int = NODES, *, start: int = 0, alpha: float = ALPHA, tau: float = TAU
) -> np.ndarray:
    """(count, s, s) float64: the fields g of samples start, ..., start + count - 1 of ``seed`` on the s x s
    cell-centred grid (the module's docstring; GRF.m). Sample i's xi[k1, k2] is
    ``default_rng((seed, i)).standard_normal((s, s))``. ValueError for a negative seed, count or start, or s < 2."""
    seed, count, start = _count(seed, "seed", 0), _count(count, "count", 0), _count(start, "start", 0)
    s = _count(s, "s", 2)
    k2 = np.arange(s, dtype=np.float64) ** 2
    amplitude = s * tau ** (alpha - 1.0) * (np.pi**2 * np.add.outer(k2, k2) + tau**2) ** (-alpha / 2.0)
    amplitude[0, 0] = 0.0
    fields = np.empty((count, s, s))
    for i in range(count):
        xi = np.random.default_rng((seed, start + i)).standard_normal((s, s))
        fields[i] = idctn(amplitude * xi, type=2, norm="ortho")
    return fields


def coefficients(
    seed: int, count: int, s: int = NODES, low: float = LOW, high: float = HIGH, *, start: int = 0
) -> np.ndarray:
    """(count, s, s) float64 coefficients a = ``high`` where g >= 0, ``low`` where g < 0, g the fields of
    ``gaussian_field(seed, count, s, start=start)``. ValueError if ``low`` or ``high`` is not positive and finite."""
    for name, value in (("low", low), ("high", high)):
        if not (np.isfinite(value) and value > 0):
            raise ValueError(f"coefficients: {name} = {value} must be positive and finite (a > 0: the PDE is elliptic)")
    g = gaussian_field(seed, count, s, start=start)
    return np.where(g >= 0.0, float(high), float(low))


@functools.cache
def _spline(s: int, n: int, back: bool = False, subsampled: bool = False) -> np.ndarray:
    """The (n, s) matrix taking values at the s cell centres (``subsampled``: at the benchmark's s points,
    ``grid_points``) to the not-a-knot cubic spline's values at the n nodes, extrapolated beyond the outer
    points; ``back``: the (s, n) matrix from the n nodes to those s points (read-only)."""
    points = grid_points(s) if subsampled else cell_centres(s)
    source, target = (node_points(n), points) if back else (points, node_points(n))
    matrix: np.ndarray = CubicSpline(source, np.eye(len(source)), bc_type="not-a-knot", extrapolate=True)(target)
    matrix.flags.writeable = False
    return matrix


def _grid(x: object, what: str) -> np.ndarray:
    """``x`` as a finite (s, s) float64 array, s >= 4 (a not-a-knot spline's least), or an error naming ``what``."""
    array = np.asarray(real_array(x, what), dtype=np.float64)
    if array.ndim != 2 or array.shape[0] != array.shape[1] or array.shape[0] < 4:
        raise ValueError(f"{what} must have shape (s, s) with s >= 4 (the cell-centred grid), got {array.shape}")
    if not np.all(np.isfinite(array)):
        raise ValueError(f"{what} holds NaN or infinite values")
    return array


def to_nodes(values: np.ndarray, n: int = NODES) -> np.ndarray:
    """(n, n) values at the nodes of the tensor-product not-a-knot cubic spline through (s, s) ``values`` at the
    cell centres, extrapolated to the nodes outside them (MATLAB's interp2(..., 'spline')): exact for bicubic
    polynomials. ValueError for a shape other than (s, s) with s >= 4, non-finite values or n < 2."""
    values = _grid(values, "to_nodes: values")
    matrix = _spline(values.shape[0], _count(n, "to_nodes: n", 2))
    result: np.ndarray = matrix @ values @ matrix.T
    return result


def to_cells(values: np.ndarray, s: int) -> np.ndarray:
    """(s, s) values at the s x s cell centres of the tensor-product not-a-knot cubic spline through (n, n)
    ``values`` at the nodes (the last line of solve_gwf.m): exact for bicubic polynomials. ValueError for a
    shape other than (n, n) with n >= 4, non-finite values or s < 1."""
    values = _grid(values, "to_cells: values")
    matrix = _spline(_count(s, "to_cells: s", 1), values.shape[0], back=True)
    result: np.ndarray = matrix @ values @ matrix.T
    return result


def solution(a: np.ndarray) -> np.ndarray:
    """(s, s) float64: the benchmark's solution for the (s, s) coefficient ``a`` at the cell centres, as
    solve_gwf.m computes it: ``solve(a, nodes=s)``, interpolated back to the cell centres (``to_cells``).
    Errors as ``solve``."""
    size = _grid(a, "solution: a").shape[0]
    return to_cells(solve(a, nodes=size), size)


def coarse_solution(a: np.ndarray, nodes: int | None = None, s: int | None = None) -> np.ndarray:
    """(s, s) float64: the recipe's solver run on the benchmark's input itself, the baseline a numerical analyst
    tries first. ``a`` (r, r) is the coefficient at the benchmark's r x r points (``grid_points``, e.g.
    ``subsample(a, 85)``); it is interpolated by the not-a-knot bicubic spline to ``nodes`` x ``nodes`` nodes
    (default r), solved there as ``solve`` does, and the solution interpolated by the same spline to the
    benchmark's s x s points (default r): an approximation of the benchmark's u from what a model is given. At
    r = s = 421 and 421 nodes it is ``solution``. ValueError as ``solve``, or for an r or s that is not one of
    the benchmark's grids."""
    a = _grid(a, "coarse_solution: a")
    if np.any(a <= 0.0):
        raise ValueError(f"coarse_solution: a must be positive: {np.count_nonzero(a <= 0)} values are <= 0")
    r = a.shape[0]
    grid_points(r)  # refuses a grid the benchmark has not
    n = r if nodes is None else _count(nodes, "coarse_solution: nodes", 4)
    out = r if s is None else s
    grid_points(out)
    spline, back = _spline(r, n, subsampled=True), _spline(out, n, back=True, subsampled=True)
    u = _solve_at_nodes(spline @ a @ spline.T, np.ones((n - 2, n - 2)))  # the spline through ones is one
    result: np.ndarray = back @ u @ back.T
    return result


def solve(a: np.ndarray, f: np.ndarray | None = None, nodes: int = NODES) -> np.ndarray:
    """(nodes, nodes) float64: the finite-difference solution u of -div(a grad u) = f, u = 0 on the boundary,
    at the nodes i / (nodes - 1) (solve_gwf.m). ``a`` and ``f`` (default 1) are (s, s) values at the cell
    centres, interpolated to the nodes by ``to_nodes``; then, with h = 1 / (nodes - 1) and face values
    a_{i+1/2, j} = (a_{i, j} + a_{i+1, j}) / 2 (likewise in j), at each interior node

        (a_{i-1/2,j} (u_{i,j} - u_{i-1,j}) + a_{i+1/2,j} (u_{i,j} - u_{i+1,j}) + a_{i,j-1/2} (u_{i,j} - u_{i,j-1})
         + a_{i,j+1/2} (u_{i,j} - u_{i,j+1})) / h^2 = f_{i,j},

    a symmetric system solved by SuperLU (partial pivoting, minimum-degree ordering of A^T + A). Second-order
    accurate for smooth a, f and u. As in solve_gwf.m, nothing keeps the interpolant positive: across the
    jumps of a thresholded coefficient the spline overshoots, and extrapolated to the boundary nodes it can
    be far below ``low`` (docs/fno_darcy.md); the system is solved as it is.

    ValueError: ``a`` or ``f`` not (s, s) with s >= 4 or not finite, of different shapes, a <= 0 anywhere,
    or ``nodes`` < 3."""
    a = _grid(a, "solve: a")
    if np.any(a <= 0.0):
        raise ValueError(f"solve: the coefficient a must be positive: {np.count_nonzero(a <= 0)} values are <= 0")
    n = _count(nodes, "solve: nodes", 3)
    at_nodes = to_nodes(a, n)
    if f is None:
        rhs = np.ones((n - 2, n - 2))  # the spline through ones is one
    else:
        f = _grid(f, "solve: f")
        if f.shape != a.shape:
            raise ValueError(f"solve: f must have a's shape {a.shape}, got {f.shape}")
        rhs = to_nodes(f, n)[1:-1, 1:-1]
    return _solve_at_nodes(at_nodes, rhs)


def _solve_at_nodes(a: np.ndarray, rhs: np.ndarray) -> np.ndarray:
    """(n, n): the five-point solution for a at the (n, n) nodes and f at the (n - 2, n - 2) interior nodes,
    zero on the boundary (``_matrix``; SuperLU, minimum-degree ordering of A^T + A)."""
    n = a.shape[0]
    u = np.zeros((n, n))
    u[1:-1, 1:-1] = splu(_matrix(a), permc_spec="MMD_AT_PLUS_A").solve(rhs.ravel()).reshape(n - 2, n - 2)
    return u


def _matrix(a: np.ndarray) -> sparse.csc_array:
    """The five-point matrix of ``solve`` for a at the (n, n) nodes: ((n - 2)^2)^2, interior nodes in row-major
    order (node (i, j), 1 <= i, j <= n - 2, is unknown (i - 1)(n - 2) + j - 1)."""
    n = a.shape[0]
    m = n - 2
    x_faces = (a[:-1, :] + a[1:, :]) / 2.0  # [i, j]: between nodes (i, j) and (i + 1, j)
    y_faces = (a[:, :-1] + a[:, 1:]) / 2.0  # [i, j]: between nodes (i, j) and (i, j + 1)
    diagonal = x_faces[:-1, 1:-1] + x_faces[1:, 1:-1] + y_faces[1:-1, :-1] + y_faces[1:-1, 1:]
    along_x = -x_faces[1:-1, 1:-1]  # (m - 1, m): unknowns p and p + m
    along_y = np.zeros((m, m))
    along_y[:, :-1] = -y_faces[1:-1, 1:-1]  # unknowns p and p + 1 within a row; zero across rows
    bands = [diagonal.ravel(), along_y.ravel()[:-1], along_y.ravel()[:-1], along_x.ravel(), along_x.ravel()]
    matrix = sparse.diags_array(bands, offsets=[0, 1, -1, m, -m], shape=(m * m, m * m), format="csc")
    scaled: sparse.csc_array = matrix * float((n - 1) ** 2)
    return scaled


def subsample(field: np.ndarray, s: int) -> np.ndarray:
    """``field[..., ::r, ::r]`` for a field (..., S, S) on an S-point grid, r = (S - 1) / (s - 1): the s-point
    grid of every r-th point, both ends included (S = 421: s = 85, 141, 211, 421 are r = 5, 3, 2, 1). A view.
    ValueError if ``field`` is not (..., S, S) with S >= 2 or (S - 1) / (s - 1) is not a whole number."""
    field = np.asarray(field)
    if field.ndim < 2 or field.shape[-1] != field.shape[-2] or field.shape[-1] < 2:
        raise ValueError(f"subsample: the field must have shape (..., S, S) with S >= 2, got {field.shape}")
    size = field.shape[-1]
    s = _count(s, "subsample: s", 2)
    if s > size or (size - 1) % (s - 1):
        admissible = [(size - 1) // r + 1 for r in range(size - 1, 0, -1) if (size - 1) % r == 0]
        raise ValueError(
            f"subsample: s = {s} is not a resolution of the {size}-point grid: (s - 1) must divide {size - 1}; "
            f"admissible: {', '.join(map(str, admissible))}"
        )
    r = (size - 1) // (s - 1)
    return field[..., ::r, ::r]
