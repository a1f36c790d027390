"""Benchmark: mixed precision (``applicative.training.bfloat16``) against float32, side by side.

The digit reverser (``applicative.examples.digits``: a Vec transformer, its default sizes) trained through
``fit`` for ``--steps`` steps twice from the same seed, once in float32 and once computing in bfloat16 with
float32 parameters, alternately ``--repeats`` times (the fastest of each kept): the training seconds a step
(``State.seconds``, compilation excluded: the first epoch is not counted), and each model's test token
accuracy on the digits' 2,048 held-out sequences, read in float32. Prints a Markdown table and a last line
``ratio bfloat16/float32 seconds a step: X.XX``.

    python bench/precision.py                # 600 steps, the default model
    python bench/precision.py --smoke        # 4 steps of a tiny model: checks that it runs
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the repository root

import jax

from applicative.examples.digits.data import source, test_set
from applicative.examples.digits.model import Config, accuracy
from applicative.examples.digits.training import description, learner, optimiser
from applicative.training import bfloat16, fit


def run(config: Config, steps: int, low: bool) -> tuple[float, float]:
    """(seconds a step past the first epoch, test token accuracy) of one run."""
    model = bfloat16(learner(config)) if low else learner(config)
    data, run_of = source(config.batch, steps, config.per_epoch), description(config, steps, 0)
    with tempfile.TemporaryDirectory() as directory:  # the first epoch (compiling), then the rest, resumed
        first = fit(model, optimiser(config, steps), data, directory, description=run_of, steps=config.per_epoch,
                    progress=False, log=False)  # fmt: skip
        state = fit(model, optimiser(config, steps), data, directory, description=run_of, steps=steps, progress=False,
                    log=False, resume=True)  # fmt: skip
    tokens, targets = test_set(0, config.test_size)
    return (state.seconds - first.seconds) / (steps - config.per_epoch), float(accuracy(state.model, tokens, targets))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=600)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--smoke", action="store_true", help="4 steps of a tiny model, once")
    args = parser.parse_args()
    config, steps, repeats = Config(), args.steps, args.repeats
    if args.smoke:
        config = dataclasses.replace(config, width=8, hidden=8, heads=1, head_features=4, batch=4, test_size=8,
                                     per_epoch=2)  # fmt: skip
        steps, repeats = 4, 1
    print(f"digits, width {config.width}, batch {config.batch}, {steps} steps; {jax.devices()[0].device_kind}")
    seconds: dict[bool, float] = {}
    accuracies: dict[bool, float] = {}
    for _ in range(repeats):
        for low in (False, True):
            step, correct = run(config, steps, low)
            seconds[low] = min(seconds.get(low, step), step)
            accuracies[low] = correct
    print("| compute | seconds a step | test token accuracy |\n|---|---|---|")
    for low, name in ((False, "float32"), (True, "bfloat16, float32 parameters")):
        print(f"| {name} | {seconds[low]:.2e} | {accuracies[low]:.4f} |")
    print(f"ratio bfloat16/float32 seconds a step: {seconds[True] / seconds[False]:.2f}")


if __name__ == "__main__":
    main()
