"""The search behind the default Darcy run: short runs of each choice, side by side.

Each trial trains from the same seed on the 8192 default training samples and reports the test
relative L2 error (mean, median, p95 over 256 held-out samples) and the wall time (compilation
included; timings from one run compare only with each other). The choices and the figures we
measured are in docs/darcy.md ("Choosing the architecture").

    python bench/darcy_search.py            # every trial, about 13 minutes on 2 cores
    python bench/darcy_search.py --only 0 3 # some of them
    python bench/darcy_search.py --smoke --only 7  # one trial at a tiny size: checks that the script runs
"""

from __future__ import annotations

import argparse
import dataclasses
import pathlib
import sys
from typing import Any

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))  # the repository root

from _report import SMOKE_MODEL, SMOKE_RUN, SMOKE_TEST_SIZE, trial  # bench/, the script's directory

from applicative.instances.collocation import evaluate_grid, vandermonde
from funcformer.darcy import PROBLEM, normalise
from funcformer.learning import Problem


def _identity(kappa: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """No normalisation: the model sees kappa, its output is u (up to the output scale)."""
    return kappa, np.zeros(len(kappa))


def _inverse_permeability(kappa: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The model sees exp(-(kappa - m)) = a(mean) / a, interpolated at 32 Chebyshev points per axis."""
    shifted, log2 = normalise(kappa)
    n, points = kappa.shape[-1], 32
    x = np.polynomial.chebyshev.chebpts1(points)
    values = np.exp(-evaluate_grid(shifted, x, x))
    fit = np.linalg.pinv(vandermonde(x, n))  # least squares on the tensor grid, one axis at a time
    return fit @ values @ fit.T, log2


VARIANTS: dict[str, Problem[Any]] = {
    "none": dataclasses.replace(PROBLEM, normalise=_identity),
    "1/a": dataclasses.replace(PROBLEM, normalise=_inverse_permeability),
}
"""Other normalisations, for the trials that ask whether ``darcy.normalise`` matters."""

KM: dict[str, Any] = {"mixers": "km", "axes": "xxyy", "layers": 4, "channels": 8, "hidden_channels": 16}
SHORT: dict[str, Any] = {"steps": 1000, "batch": 32, "learning_rate": 1e-2}
TRIALS: list[tuple[str, dict[str, Any], dict[str, Any], str]] = [
    ("kernel, MLP (x, x, y, y), 8 channels", KM, SHORT, "shift"),
    ("  lr 3e-3", KM, {**SHORT, "learning_rate": 3e-3}, "shift"),
    ("  no normalisation", KM, SHORT, "none"),
    ("  input exp(-(kappa - m)) = a(mean) / a", KM, SHORT, "1/a"),
    ("  kernel layers only (linear)", {**KM, "mixers": "k", "axes": "xy"}, SHORT, "shift"),
    ("  8 layers", {**KM, "layers": 8}, SHORT, "shift"),
    ("  16 channels, MLP 32", {**KM, "channels": 16, "hidden_channels": 32}, SHORT, "shift"),
    ("  nonlinear maps at 16 points (not 32)", {**KM, "points": 16}, SHORT, "shift"),
    ("4 attention layers (x, y, x, y)", {**KM, "mixers": "a", "axes": "xy"}, SHORT, "shift"),
    ("2 kernel, 2 attention layers", {**KM, "mixers": "kkaa", "axes": "xy"}, SHORT, "shift"),
    ("kernel, MLP, 4000 steps", KM, {**SHORT, "steps": 4000}, "shift"),
    ("  at 16 points", {**KM, "points": 16}, {**SHORT, "steps": 4000}, "shift"),
    ("  8 layers, batch 64", {**KM, "layers": 8}, {**SHORT, "steps": 4000, "batch": 64}, "shift"),
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", type=int, nargs="*", help="trial numbers to run (default: all)")
    parser.add_argument(
        "--smoke",
        action="store_true",
        help="each trial at a tiny size (one layer of 2 channels, 2 steps, 8 test samples): checks that it runs",
    )
    args = parser.parse_args()
    print(f"{'':4}{'trial (1000 steps, batch 32, lr 1e-2 unless noted)':52}  mean    median  p95      time")
    for i, (name, model, options, normalisation) in enumerate(TRIALS):
        if args.only is None or i in args.only:
            problem = VARIANTS.get(normalisation, PROBLEM)
            settings, test_size = options, 256
            if args.smoke:
                model, settings, test_size = {**model, **SMOKE_MODEL}, {**options, **SMOKE_RUN}, SMOKE_TEST_SIZE
            print(f"{i:<4}{name:52}  {trial(problem, model, settings, test_size)}", flush=True)


if __name__ == "__main__":
    main()
