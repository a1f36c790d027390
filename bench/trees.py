"""Benchmark: training the trees example's encoder on trees of every shape, against the same encoder on
a Vec of as many positions, with the attention's scores materialised and in chunks; and the recursive Tree.

The model is ``applicative.examples.trees``'s encoder at width 64, 4 heads of 16 features, an MLP of
128, one layer. A training step is ``value_and_grad`` of the loss and an optax AdamW update, one
``jit``, on a batch of 32 inputs, never in micro-batches:

- DenseTree: 32 trees of mixed random shapes (leaf counts uniform in [n/2, n]) at capacity n, the
  example's loss (cross entropy over the leaves, padding excluded). The step is compiled once, ahead
  of time, then run on batches of new shapes: no shape compiles anything more.
- Vec: the same encoder on 32 sequences of n positions (same widths), cross entropy over every position.
- Tree (recursive): 32 trees of one shape of 4, 8 or 16 leaves, vmapped; every shape its own compile.

Each size runs with the attention materialised (``Softmax(chunk=None)``: n x n scores per sequence
and head) and in chunks of 128 queries (``Softmax(chunk=128)``: 128 x n), where XLA's own account of
the compiled step's temporary buffers fits in the device's memory (a GPU's, else this machine's); a
size whose steps are not timed (``--time-up-to``) shows its memory alone, and one whose compilation or
steps fail to allocate memory says ``does not fit`` and the size asked for, where XLA's message gives
it, and the table goes on (on an H100, XLA's autotuner asked for 128 GB compiling 16,384 leaves
materialised). Both dense steps are timed side by side: pairs of steps in alternating order; the table
gives each step's median and the median of the pairs' ratios, so that a slow spell of a shared machine
slows both halves of a ratio (on this 2-core machine single steps at 1,024 leaves vary by 30%: most of
a step is memory traffic).

    python bench/trees.py                 # every size, and the recursive Tree (about 20 minutes on 2 CPU cores)
    python bench/trees.py --sizes 64 256  # some sizes only, no recursive Tree
    python bench/trees.py --shapes        # the depths of real shapes, the standard library's syntax trees

The last line is ``ratio tree/vec train step at 1024 leaves: X.XX`` (the library's default attention).
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import functools
import math
import pathlib
import sys
import sysconfig
import time
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))  # the repository root

from _timing import DoesNotFit, device_memory, or_does_not_fit, paired, race  # bench/, the script's directory

from applicative import Dim, Tree, Vec, to_array
from applicative.examples import trees as example
from applicative.instances import dyadic
from applicative.nn import Softmax

BATCH = 32
CONFIG = example.Config(width=64, hidden=128, heads=4, head_features=16, layers=1)
REPEATS = collections.defaultdict(lambda: 1, {64: 15, 256: 15, 1024: 15, 4096: 3})  # timed pairs of steps
SPEC_LEAVES = (4, 8, 16)


MEMORY = device_memory()


class Position(Dim):
    """A position of a Vec sequence."""


Step = Callable[..., Any]


optimiser_state = jax.jit(lambda model: example.optimiser(CONFIG, 1000).init(model))
"""The AdamW state of a model, made under one ``jit`` (eagerly, each leaf shape would compile)."""


def make_step(loss: Callable[..., jax.Array]) -> Step:
    """A training step of ``loss(model, *batch)``: value_and_grad and an AdamW update."""
    tx = example.optimiser(CONFIG, 1000)

    def step(model: Any, state: optax.OptState, *batch: Any) -> tuple[Any, optax.OptState, jax.Array]:
        value, grads = jax.value_and_grad(loss)(model, *batch)
        updates, state = tx.update(grads, state, model)
        return optax.apply_updates(model, updates), state, value

    return step


def tree_batch(seed: int, n: int) -> tuple[Any, jax.Array]:
    """32 trees of random shapes with n/2 to n leaves at capacity n, their values and labels."""
    config = example.Config(min_leaves=max(1, n // 2), max_leaves=n, capacity=n)
    trees = example.stack_shapes(example.random_shapes(seed, BATCH, config), n)
    values = jax.random.normal(jax.random.PRNGKey(seed), (BATCH, n), jnp.float32)
    return example.with_values(trees, values), example.targets(trees, values)


def vec_loss(model: Any, xs: Any, labels: jax.Array) -> jax.Array:
    logits = jax.vmap(lambda x: to_array(model(x)))(xs)
    return optax.softmax_cross_entropy_with_integer_labels(logits, labels).mean()


def vec_batch(seed: int, n: int) -> tuple[Any, jax.Array]:
    values = np.random.default_rng(seed).normal(size=(BATCH, n, 1)).astype(np.float32)
    xs = jax.vmap(lambda v: Vec.from_array(v, Position, example.Feature))(jnp.asarray(values))
    labels = (values[..., 0] > values[..., 0].mean(-1, keepdims=True)).astype(np.int32)
    return xs, jnp.asarray(labels)


def compiled(step: Step, model: Any, *batch: Any) -> tuple[Any, float, float]:
    """The step compiled ahead of time, the seconds it took, and its temporary buffers in GB."""
    start = time.perf_counter()
    state = optimiser_state(model)
    executable = jax.jit(step).lower(model, state, *batch).compile()
    seconds = time.perf_counter() - start
    memory = executable.memory_analysis()
    temp = getattr(memory, "temp_size_in_bytes", math.nan) / 1e9 if memory is not None else math.nan
    return executable, seconds, temp


def dense_row(n: int, chunk: int | None, timed: bool) -> dict[str, Any]:
    """The tree and Vec steps at n leaves (positions) with the attention in chunks of ``chunk`` queries
    (None: materialised): compile time, temporary memory and, if ``timed`` and both fit, step times."""
    model = example.init_model(jax.random.PRNGKey(0), dataclasses.replace(CONFIG, chunk=chunk))
    trees, labels = tree_batch(0, n)
    tree_step, tree_compile, tree_memory = compiled(make_step(example.loss), model, trees, labels)
    xs, vec_labels = vec_batch(0, n)
    vec_step, _, vec_memory = compiled(make_step(vec_loss), model, xs, vec_labels)
    row = {"n": n, "chunk": chunk, "tree_compile": tree_compile, "tree_memory": tree_memory, "vec_memory": vec_memory}
    if not timed or not fits(row):
        return row
    state = optimiser_state(model)
    # New shapes for every timed batch: the one executable takes them all.
    batches = [tree_batch(seed, n) for seed in (1, 2, 3)]
    counter = iter(range(10**9))

    def tree() -> Any:
        return tree_step(model, state, *batches[next(counter) % len(batches)])

    tree_seconds, vec_seconds, ratio = paired(tree, lambda: vec_step(model, state, xs, vec_labels), 1, REPEATS[n])
    return row | {"tree_step": tree_seconds, "vec_step": vec_seconds, "ratio": ratio}


def fits(row: dict[str, Any]) -> bool:
    """Whether XLA's account of both steps' temporary buffers fits in 0.6 of the device's memory."""
    return bool(max(row["tree_memory"], row["vec_memory"]) <= 0.6 * MEMORY)


def dense_line(row: dict[str, Any]) -> str:
    attention = "materialised" if row["chunk"] is None else f"chunks of {row['chunk']}"
    if "failed" in row:
        return f"| {row['n']} | {attention} | | {row['failed']} | | | |"
    memory = f"{row['tree_memory']:.2f} / {row['vec_memory']:.2f} GB"
    if "ratio" not in row:
        why = "not timed" if fits(row) else f"does not fit in {MEMORY:.0f} GB"
        return f"| {row['n']} | {attention} | {row['tree_compile']:.1f} s | {why} | | | {memory} |"
    return (
        f"| {row['n']} | {attention} | {row['tree_compile']:.1f} s | {row['tree_step'] * 1e3:.0f} ms | "
        f"{row['vec_step'] * 1e3:.0f} ms | {row['ratio']:.2f} | {memory} |"
    )


def spec_row(leaves: int, model: Any) -> dict[str, Any]:
    """The recursive Tree: compile and first step, then a step, for one shape of ``leaves`` leaves."""
    shape = example.random_shape(np.random.default_rng(leaves), leaves)
    values = jax.random.normal(jax.random.PRNGKey(0), (BATCH, leaves), jnp.float32)
    weights = jnp.asarray([2.0**-d for d in dyadic.depths_of(shape)], jnp.float32)
    labels = (values > values @ weights[:, None]).astype(jnp.int32)

    def one(model: Any, v: jax.Array, y: jax.Array) -> jax.Array:
        slots = iter(range(leaves))  # fmap visits the leaves left to right
        tree = Tree.from_shape(shape, 0).fmap(lambda _: Vec.from_array(v[next(slots)][None], example.Feature))
        out = model(tree)
        logits = jnp.stack([to_array(leaf) for leaf in out.leaves()])
        return optax.softmax_cross_entropy_with_integer_labels(logits, y).mean()

    def loss(model: Any, v: jax.Array, y: jax.Array) -> jax.Array:
        return jax.vmap(one, (None, 0, 0))(model, v, y).mean()

    step = jax.jit(make_step(loss))
    state = optimiser_state(model)
    start = time.perf_counter()
    jax.block_until_ready(step(model, state, values, labels))
    first = time.perf_counter() - start
    again = race({"tree": lambda: step(model, state, values, labels)}, warmup=0, repeats=3)["tree"]
    return {"leaves": leaves, "depth": max(dyadic.depths_of(shape)), "first": first, "step": again}


def shapes_table() -> None:
    """The leaf counts and depths of every function and class definition of the standard library,
    binarised as the example binarises them."""
    sizes = []
    for _, node in example.definitions():
        depths = dyadic.depths_of(example.binarised(node))
        sizes.append((len(depths), max(depths)))
    table = np.array(sizes)
    print(f"{len(table)} definitions in {sysconfig.get_paths()['stdlib']}\n")
    print("| syntax nodes (leaves) | definitions | depth: median | 99th percentile | largest |")
    print("|---|---|---|---|---|")
    for low, high in ((1, 63), (64, 255), (256, 1024), (1025, 4096), (4097, 10**9)):
        depth = table[(table[:, 0] >= low) & (table[:, 0] <= high), 1]
        if depth.size:
            band = f"{low} to {high}" if high < 10**9 else f"over {low - 1}"
            p50, p99 = np.percentile(depth, [50, 99])
            print(f"| {band} | {depth.size} | {p50:.0f} | {p99:.0f} | {depth.max()} |")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1024, 4096, 16384, 65536])
    parser.add_argument("--time-up-to", type=int, default=4096, help="time steps up to this size, then memory only")
    parser.add_argument("--chunk", type=int, default=128, help="queries per chunk (default: %(default)s)")
    parser.add_argument("--shapes", action="store_true", help="only the depths of the syntax trees")
    args = parser.parse_args(argv)
    if args.shapes:
        shapes_table()
        return
    device = jax.devices()[0]
    print(f"# {device.platform} ({device.device_kind}), JAX {jax.__version__}; batch {BATCH}, width 64, 4 heads\n")
    print("| leaves | attention | tree: compile (once, every shape) | tree step | Vec step | tree / Vec | "
          "temp memory, tree / Vec |")  # fmt: skip
    print("|---|---|---|---|---|---|---|")
    ratio_at_1024 = None
    for n in args.sizes:
        for chunk in (None, args.chunk):
            measured = or_does_not_fit(functools.partial(dense_row, n, chunk, n <= args.time_up_to))
            row = {"n": n, "chunk": chunk, "failed": measured} if isinstance(measured, DoesNotFit) else measured
            print(dense_line(row), flush=True)
            if n == 1024 and Softmax().rows_per_chunk(n, n) == chunk and "ratio" in row:
                ratio_at_1024 = row["ratio"]
    if args.sizes == parser.get_default("sizes"):
        model = example.init_model(jax.random.PRNGKey(0), CONFIG)
        print("\n| recursive Tree: leaves (depth) | compile + first step | step |")
        print("|---|---|---|")
        for leaves in SPEC_LEAVES:
            row = spec_row(leaves, model)
            print(f"| {leaves} ({row['depth']}) | {row['first']:.1f} s | {row['step'] * 1e3:.1f} ms |", flush=True)
    if ratio_at_1024 is not None:
        print(f"\nratio tree/vec train step at 1024 leaves: {ratio_at_1024:.2f}")


if __name__ == "__main__":
    main()
