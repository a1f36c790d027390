"""When not to trust a prediction: its a-posteriori residual and its input's distance from the training inputs.

Every task knows its exact problem, so every prediction u of an input x carries a check that needs no
solve, ``Problem.residual(x, u, solver)``: the task's PDE residual mapped through the inverse Laplacian
and divided by ||u|| (an estimate of the relative error; see each task's ``residual``). Beside it, how
far the model's input x' (``Problem.normalise``) lies from the training set's, a z-score:

    z(x')      = sqrt(mean_ij ((x'_ij - mean_ij) / spread_ij)^2)
    distance   = z(x') / median of z over the training inputs        (1: a typical training input)

with mean_ij and std_ij the training inputs' coefficient means and standard deviations, and
spread_ij = max(std_ij, FLOOR * max std): a coefficient the training inputs never used counts as if
its spread were a thousandth of the largest one.

``evaluate`` calibrates a run (``calibrate``): the mean and spread from its training set, and the
thresholds from its test set, the ``QUANTILE`` quantile of the test residuals and distances (so about
1 - QUANTILE of in-distribution predictions are flagged). It stores the ``Calibration`` in the run's
metrics.json under ``"trust"``; ``load_solver(DIR, check=True)`` reads it back
(``read_calibration``) and warns (``UntrustedPrediction``) for each batch with samples above a
threshold.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

__all__ = [
    "FLOOR",
    "QUANTILE",
    "Calibration",
    "Checked",
    "UncalibratedRun",
    "UntrustedPrediction",
    "calibrate",
    "read_calibration",
    "relative",
]

FLOOR = 1e-3
"""The smallest spread of a coefficient, relative to the largest one (see the module)."""
QUANTILE = 0.99
"""The thresholds are this quantile of the run's test residuals and distances."""
_VERSION = 1
"""The layout of the ``"trust"`` entry of metrics.json."""


class Checked(NamedTuple):
    """A batch of predictions with their checks (``load_solver(DIR, check=True)``'s result)."""

    u: np.ndarray
    """(B, n, n) the predictions, as ``load_solver(DIR)`` returns them."""
    residual: np.ndarray
    """(B,) float64 ``Problem.residual`` of each prediction: an estimate of its relative error."""
    distance: np.ndarray
    """(B,) float64 each input's distance from the training inputs (1: typical); NaN for a run
    without a calibration."""


class UntrustedPrediction(UserWarning):
    """Some predictions of a batch have a residual or a distance above the run's thresholds."""


class UncalibratedRun(UserWarning):
    """A run without a calibration: no distances, no thresholds, nothing flagged."""


@dataclass(frozen=True, eq=False)
class Calibration:
    """A run's trust calibration (see the module): what distances are measured against, and the thresholds."""

    mean: np.ndarray
    """(n, n) the training inputs' mean x'."""
    spread: np.ndarray
    """(n, n) positive: each coefficient's spread."""
    reference: float
    """The median z of the training inputs."""
    residual_threshold: float
    """Residuals above this are flagged."""
    distance_threshold: float
    """Distances above this are flagged."""
    quantile: float
    """The quantile of the test residuals and distances that the thresholds are."""
    samples: int
    """Test samples the thresholds were taken from."""

    def distance(self, inputs: np.ndarray) -> np.ndarray:
        """(B,) distances of (B, n, n) model inputs x' (``Problem.normalise``'s) from the training inputs."""
        with np.errstate(over="ignore", invalid="ignore"):
            z = np.sqrt(np.mean(((np.asarray(inputs, np.float64) - self.mean) / self.spread) ** 2, axis=(1, 2)))
        distances: np.ndarray = z / self.reference
        return distances

    def to_json(self) -> dict[str, Any]:
        """As plain data, for metrics.json."""
        return {
            "version": _VERSION,
            "quantile": self.quantile,
            "samples": self.samples,
            "residual_threshold": self.residual_threshold,
            "distance_threshold": self.distance_threshold,
            "reference": self.reference,
            "mean": self.mean.tolist(),
            "spread": self.spread.tolist(),
        }

    @staticmethod
    def from_json(data: Any, n: int, source: str) -> Calibration:
        """The calibration ``to_json`` wrote, checked (shapes (n, n), positive finite spreads and
        thresholds); a ValueError naming ``source`` otherwise."""
        try:
            if data["version"] != _VERSION:
                raise ValueError(f"version {data['version']}, this code reads version {_VERSION}")
            mean, spread = np.asarray(data["mean"], np.float64), np.asarray(data["spread"], np.float64)
            if mean.shape != (n, n) or spread.shape != (n, n):
                raise ValueError(f"mean and spread of shapes {mean.shape}, {spread.shape}, not ({n}, {n})")
            calibration = Calibration(
                mean,
                spread,
                float(data["reference"]),
                float(data["residual_threshold"]),
                float(data["distance_threshold"]),
                float(data["quantile"]),
                int(data["samples"]),
            )
        except (KeyError, TypeError, ValueError) as error:
            raise ValueError(f"{source}: not a valid trust calibration ({type(error).__name__}: {error})") from error
        positive = [calibration.reference, calibration.residual_threshold, calibration.distance_threshold]
        if not (np.all(np.isfinite(mean)) and np.all(np.isfinite(spread)) and np.all(spread > 0)):
            raise ValueError(f"{source}: not a valid trust calibration (a mean or spread is not finite, or not > 0)")
        if not all(np.isfinite(v) and v > 0 for v in positive):
            raise ValueError(f"{source}: not a valid trust calibration (a threshold is not positive and finite)")
        return calibration


def relative(norms: np.ndarray, of: np.ndarray) -> np.ndarray:
    """norms / of elementwise, in float64, with 0 / 0 = 0 (a zero prediction of a zero input is exact)
    and x / 0 = inf for x > 0: the tasks' residuals relative to a norm."""
    norms, of = np.asarray(norms, np.float64), np.asarray(of, np.float64)
    nonzero = of > 0
    ratios: np.ndarray = np.where(nonzero, norms / np.where(nonzero, of, 1.0), np.where(norms > 0, np.inf, 0.0))
    return ratios


def calibrate(
    train_inputs: np.ndarray, test_inputs: np.ndarray, test_residuals: np.ndarray, quantile: float = QUANTILE
) -> Calibration:
    """The calibration of a run from its training set's model inputs (B, n, n), and its test set's
    model inputs (T, n, n) and residuals (T,): mean and spread from the first, thresholds (the
    ``quantile`` of the residuals and of the distances) from the second."""
    train = np.asarray(train_inputs, np.float64)
    std = train.std(axis=0)
    if not (np.all(np.isfinite(std)) and np.max(std) > 0):
        raise ValueError("calibrate: the training inputs do not vary (or are not finite): nothing to measure against")
    spread = np.maximum(std, FLOOR * np.max(std))
    draft = Calibration(train.mean(axis=0), spread, 1.0, 1.0, 1.0, quantile, len(test_inputs))
    reference = float(np.median(draft.distance(train)))
    distances = draft.distance(test_inputs) / reference
    return Calibration(
        draft.mean,
        spread,
        reference,
        float(np.quantile(test_residuals, quantile)),
        float(np.quantile(distances, quantile)),
        quantile,
        len(test_inputs),
    )


def read_calibration(metrics: Path, n: int) -> Calibration | None:
    """The calibration stored in a run's metrics.json, or None if it holds none (or does not exist)."""
    if not metrics.exists():
        return None
    try:
        data = json.loads(metrics.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ValueError(f"{metrics} is not a metrics file ({error})") from error
    if not isinstance(data, dict) or "trust" not in data:
        return None
    return Calibration.from_json(data["trust"], n, f'{metrics} (its "trust" entry)')
