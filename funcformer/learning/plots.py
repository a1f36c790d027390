"""Figures of a trained run: one sample's prediction (input, target, prediction, error); its training loss is
every model's figure (``applicative.training.plots``).

Figures are built as ``matplotlib.figure.Figure`` objects on their own Agg canvas and written with
``Figure.savefig``; pyplot is never imported, so the user's backend and pyplot's figure registry are untouched.

The data behind the prediction figure comes from ``prediction_panels`` (values on the uniform grid, the
``metric.grid_values`` convention: axis 0 is x, axis 1 is y) and its title's error from ``sample_error``
(``metric.relative_l2``, on the metric's own GRID x GRID grid whatever the plotting resolution), so both can be
checked without reading pixels. ``prediction_figure`` returns the figure unsaved.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from mpl_toolkits.mplot3d import Axes3D  # type: ignore[import-untyped]  # mplot3d ships no type information

from applicative.training.plots import _new_figure, _png_path, _save
from funcformer.learning import metric
from funcformer.learning.problem import Problem

__all__ = [
    "plot_prediction",
    "plot_values",
    "prediction_figure",
    "prediction_panels",
    "sample_error",
    "values_figure",
]

PANELS = ("input", "exact", "predicted", "error")
"""The keys of ``prediction_panels``, in the figure's reading order."""
_TICKS = (-1.0, -0.5, 0.0, 0.5, 1.0)


# Validation


def _square(name: str, value: object) -> np.ndarray:
    """``value`` as a float64 (k, k) array with k >= 1 and finite entries, else a ValueError naming ``name``."""
    array = np.asarray(value, dtype=np.float64)
    if array.ndim != 2 or array.shape[0] != array.shape[1] or array.shape[0] == 0:
        raise ValueError(f"{name} must be a 2-D square (k, k) array of Chebyshev coefficients, got shape {array.shape}")
    if not np.isfinite(array).all():
        index = tuple(int(i) for i in np.argwhere(~np.isfinite(array))[0])
        raise ValueError(f"{name} must be finite, {name}[{index[0]}, {index[1]}] = {array[index]}")
    return array


def _points(points: object) -> int:
    if isinstance(points, bool) or not isinstance(points, int | np.integer) or points < 2:
        raise ValueError(f"points must be an int >= 2, got {points!r}")
    return int(points)


# Data


def prediction_panels(
    x: np.ndarray, exact: np.ndarray, predicted: np.ndarray, points: int = metric.GRID
) -> dict[str, np.ndarray]:
    """The four panels of the prediction figure as (points, points) values on the uniform grid
    x_k = -1 + 2k / (points - 1), boundary included, axis 0 is x and axis 1 is y (``metric.grid_values``):
    the "input", the "exact" solution u, the "predicted" one, and "error" = predicted - exact.

    x: (n, n), exact: (m, m), predicted: (p, p) Chebyshev coefficients (chebval2d convention), any sizes.
    """
    arrays = {"x": _square("x", x), "exact": _square("exact", exact), "predicted": _square("predicted", predicted)}
    points = _points(points)
    given, u, prediction = (metric.grid_values(a[None], points)[0] for a in arrays.values())
    return {"input": given, "exact": u, "predicted": prediction, "error": prediction - u}


def sample_error(exact: np.ndarray, predicted: np.ndarray) -> float:
    """The sample's relative L2 error, ``metric.relative_l2`` on the metric's GRID x GRID grid
    (inf or nan if ``exact`` is zero on that grid)."""
    exact, predicted = _square("exact", exact), _square("predicted", predicted)
    with np.errstate(divide="ignore", invalid="ignore"):
        return float(metric.relative_l2(predicted[None], exact[None])[0])


# Figures


def _limits(values: np.ndarray) -> tuple[float, float]:
    """(min, max) of ``values``, widened to a non-empty interval if they are all equal."""
    low, high = float(values.min()), float(values.max())
    if low == high:
        return low - 1.0, high + 1.0
    return low, high


def _surface(
    figure: Figure, position: int, x: np.ndarray, values: np.ndarray, title: str, limits: tuple[float, float]
) -> None:
    axes = figure.add_subplot(2, 2, position, projection="3d")
    assert isinstance(axes, Axes3D)
    grid_x, grid_y = np.meshgrid(x, x, indexing="ij")  # values[i, j] = u(x_i, y_j)
    axes.plot_surface(grid_x, grid_y, values, cmap="viridis", linewidth=0, antialiased=False)
    axes.set_zlim(*limits)
    axes.set_xticks(_TICKS)
    axes.set_yticks(_TICKS)
    axes.set_xlabel("x")
    axes.set_ylabel("y")
    axes.set_title(title)


def _titles(problem: Problem[Any] | None) -> dict[str, str]:
    given, output = (problem.input, problem.output) if problem is not None else ("input", "solution u")
    return {
        "input": given,
        "exact": f"target {output} (exact)",
        "predicted": f"predicted {output}",
        "error": "error: predicted - exact",
    }


def prediction_figure(
    x: np.ndarray,
    exact: np.ndarray,
    predicted: np.ndarray,
    points: int = metric.GRID,
    problem: Problem[Any] | None = None,
) -> Figure:
    """The prediction figure, unsaved: surfaces of the input, target and prediction, and the error
    as an image (rows are y, ``origin="lower"``) on a colormap centred on 0, with a colorbar. The target and
    prediction surfaces share their vertical limits; ``problem`` names the panels.
    The figure's title and the error panel's title give ``sample_error(exact, predicted)``."""
    panels = prediction_panels(x, exact, predicted, points)
    error = sample_error(exact, predicted)
    titles = _titles(problem)
    grid = np.linspace(-1.0, 1.0, panels["error"].shape[0])
    figure = _new_figure(11.0, 9.5)
    figure.suptitle(f"{problem.title + ' sample' if problem is not None else 'Sample'}: relative L2 error {error:.4e}")
    # The target and the prediction share one vertical scale, so that their surfaces compare at a glance.
    potentials = np.concatenate([panels["exact"].ravel(), panels["predicted"].ravel()])
    limits = {
        "input": _limits(panels["input"]),
        "exact": _limits(potentials),
        "predicted": _limits(potentials),
    }
    for position, name in enumerate(PANELS[:3], start=1):
        _surface(figure, position, grid, panels[name], titles[name], limits[name])
    axes: Axes = figure.add_subplot(2, 2, 4)
    limit = float(np.abs(panels["error"]).max()) or 1.0
    image = axes.imshow(
        panels["error"].T,
        origin="lower",
        extent=(-1.0, 1.0, -1.0, 1.0),
        cmap="RdBu_r",
        vmin=-limit,
        vmax=limit,
        interpolation="nearest",
    )
    figure.colorbar(image, ax=axes, shrink=0.85)
    axes.set_xticks(_TICKS)
    axes.set_yticks(_TICKS)
    axes.set_xlabel("x")
    axes.set_ylabel("y")
    axes.set_title(f"{titles['error']} (relative L2 {error:.3e})")
    return figure


def plot_prediction(
    x: np.ndarray,
    exact: np.ndarray,
    predicted: np.ndarray,
    path: str | Path,
    points: int = metric.GRID,
    problem: Problem[Any] | None = None,
) -> Path:
    """One figure, like the reference's Poisson figure: the input (the source f), the target (the
    potential u, exact), the prediction, and the error map (predicted - exact) on the uniform points x
    points grid, titled with the sample's relative L2 error (``sample_error``); ``problem`` names them.
    x: (n, n) coefficients, exact: (m, m) coefficients (the fine solution), predicted: (n, n)
    coefficients. Writes a PNG (creating the parent directories of ``path``, which must end in .png);
    returns the path."""
    path = _png_path(path)
    return _save(prediction_figure(x, exact, predicted, points, problem), path)


def values_figure(a: np.ndarray, exact: np.ndarray, predicted: np.ndarray) -> Figure:
    """One sample on its grid, unsaved: the input ``a``, the solution ``exact``, the prediction and the error
    (predicted - exact), each (s, s) values (axis 0 x, axis 1 y) shown as an image over [0, 1]^2, the
    error titled with the sample's relative L2 error over the points (``metric.values_relative_l2``)."""
    a, exact, predicted = (np.asarray(x, dtype=np.float64) for x in (a, exact, predicted))
    if not a.shape == exact.shape == predicted.shape or a.ndim != 2:
        raise ValueError(f"values_figure: a, exact and predicted must be one (s, s) shape, got "
                         f"{a.shape}, {exact.shape}, {predicted.shape}")  # fmt: skip
    error = float(metric.values_relative_l2(predicted[None], exact[None])[0])
    figure = _new_figure(16.0, 4.0)
    low, high = _limits(np.stack([exact, predicted]))
    panels = (("input a", a, None), ("solution u", exact, (low, high)), ("predicted", predicted, (low, high)),
              (f"error (relative L2 {error:.3e})", predicted - exact, None))  # fmt: skip
    for k, (title, values, limits) in enumerate(panels):
        axes: Axes = figure.add_subplot(1, 4, k + 1)
        vmin, vmax = limits if limits is not None else (None, None)
        image = axes.imshow(values.T, origin="lower", extent=(0, 1, 0, 1), vmin=vmin, vmax=vmax, cmap="viridis")
        figure.colorbar(image, ax=axes, shrink=0.8)
        axes.set(title=title, xlabel="x", ylabel="y")
    return figure


def plot_values(a: np.ndarray, exact: np.ndarray, predicted: np.ndarray, path: str | Path) -> Path:
    """``values_figure`` written as a PNG at ``path`` (which must end in .png); returns the path."""
    return _save(values_figure(a, exact, predicted), _png_path(path))
