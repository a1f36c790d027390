"""Figures of any run: the training loss per step and the held-out curve (``State.losses``, ``State.held_out``).

Figures are built as ``matplotlib.figure.Figure`` objects on their own Agg canvas and written with
``Figure.savefig``; pyplot is never imported, so the user's backend and pyplot's figure registry are untouched.
``loss_figure`` returns the figure unsaved, ``plot_loss`` writes it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

__all__ = ["loss_figure", "moving_average", "plot_loss", "smoothing_window"]

_DPI = 100
_MAX_SMOOTHING_WINDOW = 200
"""Upper bound on the moving-average window of ``loss_figure`` (the window is about 2% of the steps)."""


def _png_path(path: str | Path) -> Path:
    path = Path(path)
    if path.suffix.lower() != ".png":
        raise ValueError(f"path must end in .png (the figure is written as a PNG), got {str(path)!r}")
    return path


def _losses(losses: Sequence[float]) -> np.ndarray:
    array = np.asarray(losses, dtype=np.float64)
    if array.ndim != 1:
        raise ValueError(f"losses must be a 1-D sequence of floats, got shape {array.shape}")
    if array.size == 0:
        raise ValueError("losses must be non-empty, got 0 values")
    bad = np.flatnonzero(~np.isfinite(array))
    if bad.size:
        raise ValueError(f"losses must be finite, losses[{bad[0]}] = {array[bad[0]]} ({bad.size} non-finite in all)")
    bad = np.flatnonzero(array <= 0)
    if bad.size:
        raise ValueError(f"losses must be > 0 for the log scale, losses[{bad[0]}] = {array[bad[0]]}")
    return array


def moving_average(values: np.ndarray, window: int) -> np.ndarray:
    """Trailing mean over ``window`` consecutive values: entry i averages values[i : i + window]
    (len(values) - window + 1 entries)."""
    if not 1 <= window <= len(values):
        raise ValueError(f"window must be in [1, {len(values)}], got {window}")
    sums = np.cumsum(np.concatenate([[0.0], np.asarray(values, dtype=np.float64)]))
    averages: np.ndarray = (sums[window:] - sums[:-window]) / window
    return averages


def smoothing_window(steps: int) -> int:
    """The moving-average window of ``loss_figure``: about 2% of the steps, between 1 and 200."""
    return max(1, min(_MAX_SMOOTHING_WINDOW, round(steps / 50)))


def _new_figure(width: float, height: float) -> Figure:
    figure = Figure(figsize=(width, height), dpi=_DPI, layout="constrained")
    FigureCanvasAgg(figure)  # attaches itself to the figure; no backend or pyplot state involved
    return figure


def loss_figure(
    losses: Sequence[float], test_error: float | None = None, held_out: Sequence[tuple[int, float]] = ()
) -> Figure:
    """The loss figure, unsaved: the loss per step on a log scale, its moving average
    (window ``smoothing_window(len(losses))``, of log10 of the losses: a geometric mean, which spikes do not
    dominate) plotted at the window's last step, ``test_error`` as a horizontal line if given, and the
    ``held_out`` errors, (step, error) pairs (``State.held_out`` in steps), as markers (an error of 0, which a
    log scale cannot show, as a triangle along the bottom)."""
    values = _losses(losses)
    if test_error is not None and not (math.isfinite(test_error) and test_error > 0):
        raise ValueError(f"test_error must be a finite float > 0 for the log scale, got {test_error!r}")
    steps = np.arange(values.size)
    window = smoothing_window(values.size)
    figure = _new_figure(8.0, 5.0)
    axes: Axes = figure.add_subplot(1, 1, 1)
    axes.plot(steps, values, color="tab:blue", alpha=0.35, linewidth=0.8, label="loss")
    smooth = 10.0 ** moving_average(np.log10(values), window)
    axes.plot(steps[window - 1 :], smooth, color="tab:blue", linewidth=2.0, label=f"moving average ({window} steps)")
    if test_error is not None:
        axes.axhline(test_error, color="tab:red", linestyle="--", label=f"final test error {test_error:.3e}")
    positive = [(step, error) for step, error in held_out if error > 0]
    if positive:
        at, errors = zip(*positive, strict=True)
        axes.plot(at, errors, color="tab:orange", marker="o", markersize=3, label="held-out error")
    zero = [step for step, error in held_out if error <= 0]
    if zero:  # no place on a log scale: marked along the bottom
        axes.plot(zero, [values.min()] * len(zero), color="tab:orange", marker="v", linestyle="none",
                  label="held-out error 0")  # fmt: skip
    axes.set_yscale("log")
    axes.set_xlabel("step")
    axes.set_ylabel("loss")
    axes.set_title(f"training loss ({values.size} steps, last {values[-1]:.3e})")
    axes.grid(True, which="both", alpha=0.3)
    axes.legend()
    return figure


def _save(figure: Figure, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, format="png", dpi=_DPI)
    return path


def plot_loss(
    losses: Sequence[float],
    path: str | Path,
    test_error: float | None = None,
    held_out: Sequence[tuple[int, float]] = (),
) -> Path:
    """The training loss per step (log scale), with a smoothed curve (moving average) and, if given,
    the final test error as a horizontal line and the held-out errors (``loss_figure``). Writes a PNG
    (creating the parent directories of ``path``, which must end in .png); returns the path."""
    path = _png_path(path)
    return _save(loss_figure(losses, test_error, held_out), path)
