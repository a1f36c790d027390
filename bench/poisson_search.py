"""The architecture search behind the default Poisson run: short runs of each choice, side by side.

Each trial trains for a fixed number of steps from the same seed and reports the
test relative L2 error (mean, median, p95 over 256 held-out sources) and the
wall time (compilation included; timings from one run are comparable only to
each other). The choices and the figures we measured are in
docs/poisson.md ("Choosing the architecture").

    python bench/poisson_search.py            # every trial, about 10 minutes on 2 cores
    python bench/poisson_search.py --only 0 3 # some of them
    python bench/poisson_search.py --smoke --only 12  # one trial at a tiny size: checks that the script runs
"""

from __future__ import annotations

import argparse
import pathlib
import sys
from typing import Any

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))  # the repository root

from _report import SMOKE_MODEL, SMOKE_RUN, SMOKE_TEST_SIZE, trial  # bench/, the script's directory

from funcformer.poisson import PROBLEM

SMALL: dict[str, Any] = {"channels": 8, "hidden_channels": 16}
TRIALS: list[tuple[str, dict[str, Any], dict[str, Any]]] = [
    ("layer norm, lr 1e-3, batch 32", {**SMALL, "layer_norm": True}, {"learning_rate": 1e-3, "batch": 32}),
    ("no layer norm", {**SMALL, "layer_norm": False}, {"learning_rate": 1e-3, "batch": 32}),
    ("layer norm, lr 3e-3", {**SMALL, "layer_norm": True}, {"learning_rate": 3e-3, "batch": 32}),
    (
        "layer norm, attention along x only",
        {**SMALL, "layer_norm": True, "axes": "x"},
        {"learning_rate": 1e-3, "batch": 32},
    ),
    (
        "layer norm, softmax over coefficients",
        {**SMALL, "layer_norm": True, "normalise": "coefficients"},
        {"learning_rate": 1e-3, "batch": 32},
    ),
    ("no layer norm, lr 3e-3", {**SMALL, "layer_norm": False}, {"learning_rate": 3e-3, "batch": 32}),
    (
        "no layer norm, lr 3e-3, 2 layers",
        {**SMALL, "layer_norm": False, "layers": 2},
        {"learning_rate": 3e-3, "batch": 32},
    ),
    ("no layer norm, lr 1e-2", {**SMALL, "layer_norm": False}, {"learning_rate": 1e-2, "batch": 32}),
    (
        "no layer norm, lr 3e-3, batch 16 (2x steps)",
        {**SMALL, "layer_norm": False},
        {"learning_rate": 3e-3, "batch": 16, "steps": 600},
    ),
    (
        "no layer norm, lr 1e-2, batch 16 (2x steps)",
        {**SMALL, "layer_norm": False},
        {"learning_rate": 1e-2, "batch": 16, "steps": 600},
    ),
    (
        "16 channels, no layer norm, lr 3e-3",
        {"channels": 16, "hidden_channels": 32, "layer_norm": False},
        {"learning_rate": 3e-3, "batch": 32},
    ),
    # Kernel integrals (nn.KernelIntegral: learned linear mixing along the layer's axis).
    ("2 kernel layers, then 2 attention layers", {**SMALL, "mixers": "kkaa"}, {"learning_rate": 3e-3, "batch": 32}),
    ("4 kernel layers, no attention", {**SMALL, "mixers": "k"}, {"learning_rate": 3e-3, "batch": 32}),
    ("4 kernel layers, lr 1e-2", {**SMALL, "mixers": "k"}, {"learning_rate": 1e-2, "batch": 32}),
    (
        "4 kernel layers, lr 1e-2, 3000 steps",
        {**SMALL, "mixers": "k"},
        {"learning_rate": 1e-2, "batch": 32, "steps": 3000},
    ),
    (
        "2 kernel, 2 attention layers, lr 3e-3, 3000 steps",
        {**SMALL, "mixers": "kkaa"},
        {"learning_rate": 3e-3, "batch": 32, "steps": 3000},
    ),
    ("4 attention layers, lr 3e-3, 3000 steps", SMALL, {"learning_rate": 3e-3, "batch": 32, "steps": 3000}),
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", type=int, nargs="*", help="trial numbers to run (default: all)")
    parser.add_argument(
        "--smoke",
        action="store_true",
        help="each trial at a tiny size (one layer of 2 channels, 2 steps, 8 test sources): checks that it runs",
    )
    args = parser.parse_args()
    print(f"{'':4}{'trial (300 steps unless noted)':52}  mean    median  p95      time")
    for i, (name, model, options) in enumerate(TRIALS):
        if args.only is None or i in args.only:
            settings, test_size = {"steps": 300, "train_size": 4096, **options}, 256
            if args.smoke:
                model, settings, test_size = {**model, **SMOKE_MODEL}, {**settings, **SMOKE_RUN}, SMOKE_TEST_SIZE
            print(f"{i:<4}{name:52}  {trial(PROBLEM, model, settings, test_size)}", flush=True)


if __name__ == "__main__":
    main()
