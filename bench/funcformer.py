"""Benchmark: a Funcformer training step, the fast backend against the generic Cheb∘Cheb transformer.

The fast backend (``funcformer.model``, coefficient arrays) and the generic
``applicative.nn`` encoder on ``Cheb[X, Cheb[Y, _]]`` (``funcformer.generic``)
run the same model with the same weights. The generic instantiation has ONE
channel, so the comparison uses the default training run's model
(``funcformer.poisson.training.Run().model``) with channels, head_channels and
hidden_channels set to 1, keeping n, heads, layers, axes, normalise and
layer_norm, at the default batch size ``Run().batch``, in float32.

A train step is the loss (mean relative L2, in the exact L2 norm of the
Chebyshev series, of the vmapped predictions against the targets),
``jax.value_and_grad`` and the optax update of ``optimiser(Run())``, all under
one ``jax.jit``. Sources are ``funcformer.poisson.task.sources``, targets their
``solve`` + ``truncate``. Before timing, the two losses and gradients are
checked to agree; the steps are then timed interleaved (medians). For context,
the fast backend's step at the full default size (its channels) is timed too.

    python bench/funcformer.py          # about 75 s on 2 CPU cores (most of it compiling)
    python bench/funcformer.py --quick  # fewer steps

The last line is ``ratio generic/fast train step: X.XX`` (one channel, generic time over fast time).
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

from _timing import race  # bench/, the script's directory

from funcformer.generic import generic
from funcformer.model import Config, Funcformer, init, parameter_count
from funcformer.poisson.task import Task, solve, sources, truncate
from funcformer.poisson.training import Run, l2_norm, optimiser, series_relative_l2

SEED = 1

Forward = Callable[[Funcformer, jax.Array], jax.Array]
"""(model, one source (n, n)) -> one prediction (n, n)."""


def fast_forward(model: Funcformer, f: jax.Array) -> jax.Array:
    return model(f)


def generic_forward(model: Funcformer, f: jax.Array) -> jax.Array:
    return generic(model)(f)


def perturbed(model: Funcformer, seed: int) -> Funcformer:
    """Every leaf plus a little noise: the biases start at 0 and the norms at the identity, and the
    comparison should exercise all of them."""
    leaves, treedef = jax.tree_util.tree_flatten(model)
    rng = np.random.default_rng(seed)
    noisy = [leaf + jnp.asarray(0.05 * rng.standard_normal(leaf.shape), leaf.dtype) for leaf in leaves]
    return jax.tree_util.tree_unflatten(treedef, noisy)  # type: ignore[no-any-return]


def make_loss(forward: Forward) -> Callable[[Funcformer, jax.Array, jax.Array], jax.Array]:
    def loss(model: Funcformer, f: jax.Array, u: jax.Array) -> jax.Array:
        return jnp.mean(series_relative_l2(jax.vmap(lambda x: forward(model, x))(f), u))

    return loss


def make_step(forward: Forward, opt: optax.GradientTransformation) -> Callable[..., Any]:
    """The jitted (model, opt_state, f, u) -> (model, opt_state, loss, grads)."""
    loss_fn = make_loss(forward)

    @jax.jit
    def step(model: Funcformer, opt_state: Any, f: jax.Array, u: jax.Array) -> Any:
        loss, grads = jax.value_and_grad(loss_fn)(model, f, u)
        updates, opt_state = opt.update(grads, opt_state, model)
        return optax.apply_updates(model, updates), opt_state, loss, grads

    return step


def data(task: Task, batch: int) -> tuple[jax.Array, jax.Array]:
    """Sources scaled to unit norm, as training feeds them to the model, and their targets."""
    f = sources(task, SEED, batch)
    f = f / np.asarray(l2_norm(jnp.asarray(f)))[:, None, None]
    u = truncate(solve(f, task.fine), task.n)
    return jnp.asarray(f, jnp.float32), jnp.asarray(u, jnp.float32)


def describe(config: Config) -> str:
    return (
        f"n {config.n}, channels {config.channels}, heads {config.heads} x {config.head_channels} channels, "
        f"hidden {config.hidden_channels} channels, {config.layers} layers, axes {config.axes!r}, "
        f"normalise {config.normalise!r}, layer_norm {config.layer_norm}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=20, help="timed steps of each (interleaved)")
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="5 timed steps after 1 warm-up")
    args = parser.parse_args()
    steps, warmup = (5, 1) if args.quick else (args.steps, args.warmup)

    run = Run()
    full = run.model
    one = dataclasses.replace(full, channels=1, head_channels=1, hidden_channels=1)
    opt = optimiser(run)
    f, u = data(run.task, run.batch)

    print(f"jax {jax.__version__} on {jax.devices()[0].platform} ({jax.devices()[0].device_kind})")
    print(f"train step (loss, value_and_grad, optax update, one jit), batch {run.batch}, float32")
    print(f"one channel (the generic Cheb∘Cheb instantiation has one): {describe(one)}")
    model = perturbed(init(run.seed, one, np.float32), SEED)
    print(f"  {parameter_count(model)} parameters")

    fast_step, generic_step = make_step(fast_forward, opt), make_step(generic_forward, opt)
    opt_state = opt.init(model)
    compile_times, compiled, results = {}, {}, {}
    for name, step in (("fast", fast_step), ("generic", generic_step)):
        start = time.perf_counter()  # trace, lower and compile
        compiled[name] = step.lower(model, opt_state, f, u).compile()
        compile_times[name] = time.perf_counter() - start
        results[name] = jax.block_until_ready(compiled[name](model, opt_state, f, u))
    print(f"compile: fast {compile_times['fast']:.2f} s, generic {compile_times['generic']:.2f} s")

    # The two agree: loss and gradients (the first update is 0: the schedule warms up from 0).
    (_, _, loss_fast, grad_fast), (_, _, loss_generic, grad_generic) = results["fast"], results["generic"]
    loss_diff = abs(float(loss_generic) - float(loss_fast)) / abs(float(loss_fast))
    flat_fast, flat_generic = jax.tree_util.tree_leaves(grad_fast), jax.tree_util.tree_leaves(grad_generic)
    gscale = max(float(jnp.max(jnp.abs(g))) for g in flat_fast)
    gdiff = max(float(jnp.max(jnp.abs(a - b))) for a, b in zip(flat_fast, flat_generic, strict=True)) / gscale
    print(f"loss: fast {float(loss_fast):.7f}, generic {float(loss_generic):.7f}, relative difference {loss_diff:.2e}")
    print(f"gradients: max |generic - fast| / max |gradient| = {gdiff:.2e}")
    assert loss_diff < 1e-4, "the fast and generic losses disagree"
    assert gdiff < 1e-3, "the fast and generic gradients disagree"

    # Context: the fast backend at the full default size.
    full_model = init(run.seed, full, np.float32)
    full_state = opt.init(full_model)
    start = time.perf_counter()
    full_compiled = make_step(fast_forward, opt).lower(full_model, full_state, f, u).compile()
    compile_full = time.perf_counter() - start

    cases: dict[str, Callable[[], Any]] = {
        "fast": lambda: compiled["fast"](model, opt_state, f, u),
        "generic": lambda: compiled["generic"](model, opt_state, f, u),
        "fast full": lambda: full_compiled(full_model, full_state, f, u),
    }
    times = race(cases, warmup, steps)
    print()
    print(f"per step, median of {steps} interleaved steps after {warmup} warm-up (ms)")
    print(f"  fast,    one channel         {times['fast'] * 1e3:9.2f}")
    print(f"  generic, one channel         {times['generic'] * 1e3:9.2f}")
    print(
        f"  fast, full default size      {times['fast full'] * 1e3:9.2f}   "
        f"({describe(full)}; {parameter_count(full_model)} parameters; compile {compile_full:.2f} s)"
    )
    print(f"ratio generic/fast train step: {times['generic'] / times['fast']:.2f}")


if __name__ == "__main__":
    main()
