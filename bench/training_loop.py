"""Benchmark: what the training loop costs beyond its jitted steps.

For the default Poisson and Darcy models (their default runs, shortened to ``--steps`` steps, at each
``--batches`` size), three ways through the same minibatches, timed side by side (alternating, the
fastest of ``--repeats``):

- step: the jitted step alone (``steps.make_step``), called back to back on the training set and the
  epochs' orders already on the device; the host waits once, at the end. The floor a loop can reach.
- loop: ``train`` itself (a fresh run directory each time; its own clock, ``State.seconds``: placing the
  training set, the steps, reading the losses for the progress bar and writing the checkpoints every
  200 steps), with the progress bar on (drawn to /dev/null).
- host loop: the design before this one, for comparison: each step draws its minibatch on the host
  (``steps.batch_indices``), copies it to the devices and waits for its loss.

Each case keeps the fastest of its ``--repeats`` runs, as ``timeit`` advises: on a shared machine the
slower runs measure the other processes (the median of three moved a ratio by 8% between two runs).

Prints a Markdown table per task and a last line ``ratio loop/step: X.XX`` (the largest over tasks and
sizes). The target is at most 1.05.

    python bench/training_loop.py
    python bench/training_loop.py --steps 400 --batches 16 32 64 --repeats 3
    python bench/training_loop.py --smoke  # tiny models, 2 steps of 2 samples, once: checks that it runs
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the repository root, before bench/funcformer.py

import jax
import jax.numpy as jnp
import numpy as np
import optax
from _report import SMOKE_RUN, smoke_model  # bench/, the script's directory

from applicative.training.steps import data_parallel, epoch_order, make_step, place
from funcformer import darcy, poisson
from funcformer.learning import Problem, RunConfig, train
from funcformer.learning.data import output_scale, training_arrays
from funcformer.learning.steps import batch_indices, funcformer_learner, loss, optimiser
from funcformer.model import init


def step_alone(run: RunConfig, x: np.ndarray, t: np.ndarray) -> Callable[[], float]:
    """The jitted steps of ``run`` back to back, everything already on the device."""
    per_epoch = run.train_size // run.batch
    step = make_step(funcformer_learner(run.model), optimiser(run), run.batch, per_epoch)
    _, replicated = data_parallel(run.batch)
    inputs, targets = place(x, replicated), place(t, replicated)
    orders = [
        place(epoch_order(run.seed, epoch, run.train_size).astype(np.int32), replicated)
        for epoch in range(-(-run.steps // per_epoch))
    ]
    model = jax.device_put(init(run.seed, run.model), replicated)
    opt_state = jax.device_put(jax.jit(optimiser(run).init)(model), replicated)  # one compile, not one a leaf

    def go() -> float:
        m, o, value = model, opt_state, jnp.zeros(())
        start = time.perf_counter()
        for s in range(run.steps):
            m, o, value = step(m, o, inputs, targets, orders[s // per_epoch], np.int32(s))
        jax.block_until_ready((m, value))
        return time.perf_counter() - start

    return go


def loop(run: RunConfig) -> Callable[[], float]:
    """``train`` into a fresh directory, progress bar on; its own clock of the loop."""

    def go() -> float:
        with (
            tempfile.TemporaryDirectory() as directory,
            open(os.devnull, "w") as null,
            contextlib.redirect_stderr(null),
        ):
            return train(run, directory, progress=True).seconds

    return go


def host_loop(run: RunConfig, x: np.ndarray, t: np.ndarray) -> Callable[[], float]:
    """The previous loop: the minibatch drawn and copied in by the host, the loss waited for each step."""
    opt = optimiser(run)
    split, replicated = data_parallel(run.batch)

    def update(model: Any, opt_state: Any, xb: jax.Array, tb: jax.Array) -> Any:
        value, grads = jax.value_and_grad(loss)(model, xb, tb)
        updates, opt_state = opt.update(grads, opt_state, model)
        return optax.apply_updates(model, updates), opt_state, value

    step = jax.jit(update, in_shardings=(replicated, replicated, split, split), out_shardings=replicated)
    model = jax.device_put(init(run.seed, run.model), replicated)
    opt_state = jax.device_put(jax.jit(opt.init)(model), replicated)

    def go() -> float:
        m, o = model, opt_state
        start = time.perf_counter()
        for s in range(run.steps):
            idx = batch_indices(run, s)
            m, o, value = step(m, o, place(x[idx], split), place(t[idx], split))
            float(value)
        return time.perf_counter() - start

    return go


def measure(problem: Problem[Any], steps: int, batch: int, repeats: int, smoke: bool = False) -> dict[str, float]:
    run = RunConfig.of(problem, steps=steps, batch=batch)
    if smoke:
        run = RunConfig.of(problem, model=smoke_model(problem.model), **SMOKE_RUN)
    x, t = training_arrays(run, output_scale(problem, run.data_config))
    cases = {"step": step_alone(run, x, t), "loop": loop(run), "host loop": host_loop(run, x, t)}
    for go in cases.values():  # compile, warm the caches
        go()
    samples: dict[str, list[float]] = {name: [] for name in cases}
    for r in range(repeats):
        names = list(cases) if r % 2 == 0 else list(reversed(cases))
        for name in names:
            samples[name].append(cases[name]())
    return {name: min(s) for name, s in samples.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=400, help="steps per run (default 400: two checkpoints)")
    parser.add_argument("--batches", type=int, nargs="+", default=[16, 32, 64], help="minibatch sizes")
    parser.add_argument("--repeats", type=int, default=3, help="timed runs of each case (the fastest counts)")
    parser.add_argument(
        "--smoke",
        action="store_true",
        help="one layer of 2 channels, 2 steps of 2 samples from 4, timed once: checks that the script runs",
    )
    args = parser.parse_args()
    if args.smoke:
        args.steps, args.batches, args.repeats = SMOKE_RUN["steps"], [SMOKE_RUN["batch"]], 1
    print(f"{jax.devices()[0].platform}, {jax.device_count()} device(s); {args.steps} steps a run\n")
    worst = 0.0
    for problem in (poisson.PROBLEM, darcy.PROBLEM):
        print(f"{problem.title} (default model)\n")
        print("| batch | step alone, ms/step | loop, ms/step | host loop, ms/step | loop / step | host loop / step |")
        print("|---|---|---|---|---|---|")
        for batch in args.batches:
            s = measure(problem, args.steps, batch, args.repeats, args.smoke)
            per = {name: 1e3 * seconds / args.steps for name, seconds in s.items()}
            ratio, host = s["loop"] / s["step"], s["host loop"] / s["step"]
            worst = max(worst, ratio)
            print(
                f"| {batch} | {per['step']:.2f} | {per['loop']:.2f} | {per['host loop']:.2f} | "
                f"{ratio:.3f} | {host:.3f} |"
            )
        print()
    print(f"ratio loop/step: {worst:.2f}")


if __name__ == "__main__":
    main()
