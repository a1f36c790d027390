"""Benchmark: a Funcformer training step, the library's (the generic encoder) against a hand-written one.

The library's Funcformer is ``applicative.nn``'s encoder on
``Cheb[X, Compose[ChebOf[Y], VecOf[Channel], _]]``; the reference is a
hand-written jax.numpy Funcformer on coefficient arrays
(bench/funcformer_handwritten.py) with the same weights. Both run the attention
Funcformer (``ATTENTION``: the default Poisson model's sizes, 8 channels, with
encoder layers, attention and an MLP, where the default run has kernel integrals)
and the same model with 16 channels (32 in the MLP, the "attention, 16 channels"
row of docs/poisson.md's results), at batch 16 (``--batch``), in float32, with every weight perturbed so
that biases and norms are exercised.

A train step is the loss (mean relative L2, in the exact L2 norm of the
Chebyshev series, of the vmapped predictions against the targets),
``jax.value_and_grad`` and the optax update of ``optimiser(RunConfig.of(PROBLEM))``, under one
``jax.jit``. Before timing, the two losses and gradients are checked to agree;
the steps are then timed interleaved (medians).

    python bench/funcformer.py          # about a minute on 2 CPU cores
    python bench/funcformer.py --quick  # fewer steps
    python bench/funcformer.py --smoke  # a tiny model (1 layer of 2 channels, layer norm on), 1 step: seconds

The last line is ``ratio generic/hand-written train step: X.XX``, the larger of the two sizes' ratios.
"""

from __future__ import annotations

import argparse
import dataclasses
import pathlib
import sys
import time
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))  # the repository root

import funcformer_handwritten as handwritten  # bench/, the script's directory
from _timing import race

from funcformer import Funcformer, ModelConfig, init, parameter_count, weights
from funcformer.learning import RunConfig
from funcformer.learning.steps import l2_norm, optimiser, series_relative_l2
from funcformer.poisson import PROBLEM, DataConfig, solve, sources, truncate

SEED = 1
ATTENTION = dataclasses.replace(PROBLEM.model, mixers="a")
"""The model timed: the default Poisson model with encoder layers (``mixers="a"``); the hand-written
Funcformer has no kernel-integral or MLP-only layers."""
BATCH = 16
SMOKE = ModelConfig(channels=2, heads=1, head_channels=2, hidden_channels=4, layers=1, axes="y", layer_norm=True)
"""``--smoke``'s model: one attention layer, along y, with its norms and the last one: every kind of weight, tiny."""


def perturbed(model: Funcformer, seed: int) -> Funcformer:
    """Every leaf plus a little noise (a tenth of its own size, or 0.01 for the biases, which start at 0):
    the comparison exercises every weight, and the model's outputs stay of the targets' size."""
    leaves, treedef = jax.tree_util.tree_flatten(model)
    rng = np.random.default_rng(seed)
    noisy = []
    for leaf in map(np.asarray, leaves):  # in numpy: eager jax ops would compile once per leaf shape
        noise = max(0.1 * float(np.std(leaf)), 0.01) * rng.standard_normal(leaf.shape)
        noisy.append(jnp.asarray(leaf + noise.astype(leaf.dtype)))
    return jax.tree_util.tree_unflatten(treedef, noisy)  # type: ignore[no-any-return]


def make_step(forward: Callable[[Any, jax.Array], jax.Array], opt: optax.GradientTransformation) -> Any:
    """The jitted (params, opt_state, f, u) -> (params, opt_state, loss, grads)."""

    def loss_fn(params: Any, f: jax.Array, u: jax.Array) -> jax.Array:
        return jnp.mean(series_relative_l2(jax.vmap(lambda x: forward(params, x))(f), u))

    @jax.jit
    def step(params: Any, opt_state: Any, f: jax.Array, u: jax.Array) -> Any:
        loss, grads = jax.value_and_grad(loss_fn)(params, f, u)
        updates, opt_state = opt.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, loss, grads

    return step


def data(task: DataConfig, batch: int) -> tuple[jax.Array, jax.Array]:
    """Sources scaled to unit norm, as training feeds them to the model, and their targets."""
    f = sources(task, SEED, batch)
    f = f / np.asarray(l2_norm(jnp.asarray(f)))[:, None, None]
    u = truncate(solve(f, task.solver_points), task.n)
    return jnp.asarray(f, jnp.float32), jnp.asarray(u, jnp.float32)


def describe(config: ModelConfig) -> str:
    return (
        f"n {config.n}, channels {config.channels}, heads {config.heads} x {config.head_channels} channels, "
        f"hidden {config.hidden_channels} channels, {config.layers} layers, axes {config.axes!r}, "
        f"normalise {config.normalise!r}, layer_norm {config.layer_norm}"
    )


def prepare(config: ModelConfig, run: RunConfig, f: jax.Array, u: jax.Array) -> dict[str, Callable[[], Any]]:
    """The two compiled steps of one model size, after checking that they agree."""
    opt = optimiser(run)
    model = perturbed(init(run.seed, config, np.float32), SEED)
    params = handwritten.params(weights(model))
    print(f"{describe(config)}: {parameter_count(model)} parameters")
    sides = {
        "generic": (make_step(lambda m, x: m(x), opt), model),
        "hand-written": (make_step(lambda p, x: handwritten.forward(p, config, x), opt), params),
    }
    calls, results = {}, {}
    for name, (step, p) in sides.items():
        state = jax.jit(opt.init)(p)  # one compile, not one per leaf shape
        start = time.perf_counter()
        compiled = step.lower(p, state, f, u).compile()
        results[name] = jax.block_until_ready(compiled(p, state, f, u))
        print(f"  {name}: compiled in {time.perf_counter() - start:.2f} s")
        calls[name] = lambda compiled=compiled, p=p, state=state: compiled(p, state, f, u)

    (_, _, loss_g, grad_g), (_, _, loss_h, grad_h) = results["generic"], results["hand-written"]
    loss_diff = abs(float(loss_g) - float(loss_h)) / abs(float(loss_h))
    # compared in numpy: eager jax ops would compile once per leaf shape
    flat_g = [np.asarray(g) for g in jax.tree_util.tree_leaves(handwritten.params(weights(grad_g)))]
    flat_h = [np.asarray(g) for g in jax.tree_util.tree_leaves(grad_h)]
    scale = max(float(np.max(np.abs(g))) for g in flat_h)
    grad_diff = max(float(np.max(np.abs(a - b))) for a, b in zip(flat_g, flat_h, strict=True)) / scale
    print(
        f"  loss {float(loss_g):.6f} vs {float(loss_h):.6f} (relative difference {loss_diff:.1e}); "
        f"gradients differ by {grad_diff:.1e} of the largest"
    )
    assert loss_diff < 1e-4, "the generic and hand-written losses disagree"
    assert grad_diff < 1e-3, "the generic and hand-written gradients disagree"
    return calls


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=20, help="timed steps of each (interleaved)")
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="5 timed steps after 1 warm-up")
    parser.add_argument("--batch", type=int, default=BATCH, help=f"sources per step (default {BATCH})")
    parser.add_argument(
        "--smoke", action="store_true", help="a tiny model at batch 2, 1 step: checks that the script runs, in seconds"
    )
    args = parser.parse_args()
    steps, warmup = (5, 1) if args.quick else (args.steps, args.warmup)
    if args.smoke:
        steps, warmup = 1, 0
        run = RunConfig.of(PROBLEM, model=SMOKE, batch=2)
        sizes = {"2 channels": SMOKE}
    else:
        run = RunConfig.of(PROBLEM, model=ATTENTION, batch=args.batch)
        wide = dataclasses.replace(ATTENTION, channels=16, hidden_channels=32)
        sizes = {"8 channels": ATTENTION, "16 channels": wide}
    f, u = data(run.data_config, run.batch)
    print(
        f"jax {jax.__version__} on {jax.devices()[0].platform}; train step (loss, value_and_grad, optax update, "
        f"one jit), batch {run.batch}, float32"
    )
    cases: dict[str, Callable[[], Any]] = {}
    for size, config in sizes.items():
        for side, call in prepare(config, run, f, u).items():
            cases[f"{side}, {size}"] = call

    times = race(cases, warmup, steps)
    print(f"\nper step, median of {steps} interleaved steps after {warmup} warm-up (ms)")
    print(f"  {'':14}{'generic':>10}{'hand-written':>14}{'ratio':>8}")
    ratios = []
    for size in sizes:
        generic, hand = times[f"generic, {size}"], times[f"hand-written, {size}"]
        ratios.append(generic / hand)
        print(f"  {size:14}{generic * 1e3:10.2f}{hand * 1e3:14.2f}{ratios[-1]:8.2f}")
    print(f"ratio generic/hand-written train step: {max(ratios):.2f}")


if __name__ == "__main__":
    main()
