"""Train a transformer on the syntax trees of Python's standard library, up to 4,096 leaves, every
shape in one compile, to compare each leaf with the tree's integral.

A tree is a piecewise-constant function on [0, 1]: a leaf at depth d covers an
interval of length 2^-d. The task: every leaf holds a random value v, and its
target is whether v lies above the tree's dyadic mean, the integral
sum over leaves of 2^-depth v. On an unbalanced tree that differs from the
plain mean of the leaves, so the answer depends on the shape, not only on the
multiset of values; the plain-mean rule (``v > mean of the leaves``), computed
in numpy on the same test trees, is the baseline that ignores it.

The model is the generic ``applicative.nn`` encoder instantiated on
``DenseTree`` (sequence structure) and ``Vec`` (features): one layer, no
positional encodings (a tree has none), the leaf value as its single input
feature and two logits per leaf. It never sees a depth: the shape enters only
through ``counit``, which normalises attention, so the softmax is taken
against the dyadic measure and a uniform attention head computes exactly the
integral.

Shapes are data, real ones: the abstract syntax trees of the standard
library's function and class definitions (``syntax_trees``, binarised; deep
and unbalanced), split by file (``held_out``: a fixed quarter of the files is
never trained on, so a class and its methods never fall on both sides).
Training draws batches from a pool of the training files' trees of 64 to 4,096
leaves, laid out once at capacity 4,096; the leaf values are drawn inside the
jitted step, and attention runs in chunks of queries (memory linear in the
leaves). One compiled step serves every shape, and one compiled predictor every
test tree. Tested on the held-out files' trees, and on random shapes.

Run ``python -m applicative.examples.trees``; docs/trees.md gives its results.
"""

from __future__ import annotations

import argparse
import ast
import math
import random
import sysconfig
import time
import zlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, NamedTuple, TypeVar, cast

import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax import Array

from applicative import DenseTree, DenseTreeOf, Dim, Vec, VecOf, stacked, to_array
from applicative.instances import dyadic
from applicative.instances.tree import Shape
from applicative.nn import AttentionOptions, Encoder, Softmax, init_encoder
from applicative.training import warmup_cosine

__all__ = [
    "HELD_OUT_EVERY",
    "LIBRARY",
    "Config",
    "Result",
    "Score",
    "TreeModel",
    "balanced",
    "baseline",
    "binarised",
    "definitions",
    "held_out",
    "init_model",
    "library_files",
    "logits",
    "loss",
    "main",
    "optimiser",
    "predict",
    "random_shape",
    "random_shapes",
    "stack_shapes",
    "syntax_trees",
    "targets",
    "train",
    "with_values",
]

CLASSES = 2  # below or above the dyadic mean
STEPS = 150  # the default run's training steps
LIBRARY = Path(sysconfig.get_paths()["stdlib"])  # the installed standard library
HELD_OUT_EVERY = 4  # one file of the standard library in this many is kept for testing (``held_out``)


class Feature(Dim):
    """An input feature of a leaf (its value)."""


class Logit(Dim):
    """An output logit of a leaf: below, above."""


class Model(Dim):
    """A feature of the model's states."""


class Hidden(Dim):
    """A feature inside the MLP."""


class Head(Dim):
    """An attention head."""


class HeadFeature(Dim):
    """A query, key or value feature of one head."""


N = TypeVar("N", bound=Dim)

TreeModel = Encoder[DenseTreeOf, VecOf[Feature], VecOf[Model], VecOf[Logit]]


@dataclass(frozen=True)
class Config:
    """Model size, data and optimiser settings."""

    width: int = 32
    hidden: int = 64
    heads: int = 4
    head_features: int = 8
    layers: int = 1
    chunk: int | Literal["auto"] | None = "auto"  # rows of queries at a time (``Softmax``)
    batch: int = 32
    learning_rate: float = 1e-2
    warmup: int = 20
    weight_decay: float = 1e-2
    clip: float = 1.0
    capacity: int = 4096
    min_leaves: int = 64
    max_leaves: int = 4096
    train_trees: int = 4096  # syntax trees of the training files: the pool batches are drawn from
    test_bands: tuple[tuple[int, int], ...] = ((64, 1024), (1025, 4096))  # leaves of the held-out test sets
    test_trees: int = 256  # held-out syntax trees in each band (all of them if fewer)
    random_trees: int = 256  # random shapes of min_leaves to max_leaves
    test_batch: int = 32


class Score(NamedTuple):
    """Leaf accuracies over all leaves of one test set."""

    name: str
    trees: int
    leaves: tuple[int, int, int]  # the trees' leaf counts: min, median, max
    accuracy: float
    baseline: float  # the plain-mean rule
    disputed: float  # the model on the leaves where the plain-mean rule is wrong


class Result(NamedTuple):
    """What a training run achieved."""

    initial_loss: float
    final_loss: float
    train_leaves: tuple[int, int, int]  # the training pool's leaf counts: min, median, max
    tests: tuple[Score, ...]  # the held-out syntax trees by band, then the random shapes
    compilations: int  # of the training step, for every shape it met (one)
    seconds: float


def _template(size: int, tag: type[N]) -> Vec[N, Array]:
    # float32 templates give float32 parameters, also under jax_enable_x64.
    return Vec.from_array(np.zeros(size, np.float32), tag)


def init_model(key: Array, config: Config) -> TreeModel:
    """A one-layer encoder over trees, without positional encodings."""
    options = AttentionOptions(
        heads=_template(config.heads, Head),
        model=_template(config.width, Model),
        head_features=_template(config.head_features, HeadFeature),
        normalise=Softmax(config.chunk),
    )
    model: TreeModel = init_encoder(
        key,
        options,
        inputs=_template(1, Feature),
        hidden=_template(config.hidden, Hidden),
        layers=config.layers,
        outputs=_template(CLASSES, Logit),
    )
    return model


# Shapes: random ones, and the syntax trees of the standard library


def random_shape(rng: np.random.Generator, leaves: int) -> Shape:
    """A shape of ``leaves`` leaves, each node splitting its leaves at a uniformly drawn point."""
    if leaves == 1:
        return None
    k = int(rng.integers(1, leaves))
    return (random_shape(rng, k), random_shape(rng, leaves - k))


def random_shapes(seed: int, count: int, config: Config) -> list[Shape]:
    """``count`` random shapes with leaf counts uniform in [min_leaves, max_leaves] that a layout
    holds (deeper ones, rare, are drawn again)."""
    rng = np.random.default_rng(seed)
    shapes: list[Shape] = []
    while len(shapes) < count:
        shape = random_shape(rng, int(rng.integers(config.min_leaves, config.max_leaves + 1)))
        if max(dyadic.depths_of(shape)) <= dyadic.MAX_DEPTH:
            shapes.append(shape)
    return shapes


def binarised(node: ast.AST) -> Shape:
    """A syntax node as a binary shape: a leaf for the node itself, then its children's shapes,
    paired with their neighbours level by level (a balanced grouping of the node's children)."""
    return balanced([None, *(binarised(child) for child in ast.iter_child_nodes(node))])


def balanced(items: Sequence[Shape]) -> Shape:
    """Shapes paired with their neighbours level by level, into one (at least one shape)."""
    while len(items) > 1:
        items = [(items[i], items[i + 1]) if i + 1 < len(items) else items[i] for i in range(0, len(items), 2)]
    return items[0]


def held_out(file: str) -> bool:
    """Whether a file of the standard library (its path inside the library) is kept for testing:
    one in ``HELD_OUT_EVERY``, fixed by a checksum of the path, so that every run tests on the same
    files and a file's definitions (a class and its methods) all fall on one side."""
    return zlib.crc32(file.encode()) % HELD_OUT_EVERY == 0


Side = Literal["all", "train", "test"]


def library_files(side: Side = "all", seed: int | None = None) -> list[str]:
    """The installed standard library's Python files (paths inside it, under ``LIBRARY``): all of
    them, the training files or the held-out ones (``held_out``), sorted or, given a ``seed``, in a
    seeded random order."""
    files = sorted(p.relative_to(LIBRARY).as_posix() for p in LIBRARY.rglob("*.py") if "site-packages" not in p.parts)
    files = files if side == "all" else [name for name in files if held_out(name) == (side == "test")]
    if seed is not None:
        random.Random(seed).shuffle(files)
    return files


def definitions(seed: int | None = None, side: Side = "all") -> Iterator[tuple[str, ast.AST]]:
    """Every function and class definition of the files ``library_files(side)``, named
    ``file:line``, its files in sorted order or, given a ``seed``, in a seeded random order. Files
    that do not parse (test data with deliberate errors) are skipped."""
    for name in library_files(side, seed):
        try:
            module = ast.parse((LIBRARY / name).read_bytes())
        except (SyntaxError, ValueError):
            continue
        for node in ast.walk(module):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                yield f"{name}:{node.lineno}", node


def syntax_trees(
    count: int, min_leaves: int, max_leaves: int, seed: int = 0, side: Side = "all"
) -> list[tuple[str, Shape]]:
    """``count`` binarised syntax trees of the standard library's definitions
    (``definitions(seed, side)``) with ``min_leaves`` to ``max_leaves`` syntax nodes, named
    ``file:line`` (fewer if the library has fewer). Trees deeper than a layout holds are skipped
    (``python bench/trees.py --shapes``: none of 1,024 nodes or fewer, one of the library's 71,870
    definitions in all)."""
    found: list[tuple[str, Shape]] = []
    for name, node in definitions(seed, side):
        shape = binarised(node)
        depths = dyadic.depths_of(shape)
        if min_leaves <= len(depths) <= max_leaves and max(depths) <= dyadic.MAX_DEPTH:
            found.append((name, shape))
            if len(found) == count:
                break
    return found


def stack_shapes(shapes: Sequence[Shape], capacity: int) -> DenseTree[Array]:
    """The shapes as one stack of trees (leaves zero): a pool to draw batches from."""
    zero = np.float32(0.0)  # on the host: the trees are laid out there, and moved to the device once
    trees = [DenseTree.from_shape(shape, zero, capacity) for shape in shapes]
    return cast(DenseTree[Array], stacked.stack(trees, "stack_shapes"))


# Data, model, loss


def with_values(trees: DenseTree[Array], values: Array) -> DenseTree[Vec[Feature, Array]]:
    """A batch of trees (a stack) holding ``values`` (batch, capacity) as one-feature leaves."""

    def one(tree: DenseTree[Array], v: Array) -> DenseTree[Vec[Feature, Array]]:
        return tree.with_elements(jax.vmap(lambda x: Vec.from_array(x[None], Feature))(v))

    batch: DenseTree[Vec[Feature, Array]] = jax.vmap(one)(trees, values)
    return batch


def targets(trees: DenseTree[Array], values: Array) -> Array:
    """Whether each slot's value lies above its tree's dyadic mean (batch, capacity)."""
    weights = jax.vmap(lambda t: t.weights())(trees).astype(values.dtype)
    mean = jnp.sum(weights * values, axis=-1, keepdims=True)
    return (values > mean).astype(jnp.int32)


def logits(model: TreeModel, tree: DenseTree[Vec[Feature, Array]]) -> Array:
    """The (capacity, CLASSES) logits of one tree (padding slots included)."""
    out = model(tree)
    if not isinstance(out, DenseTree):
        raise TypeError(f"logits: the model of a tree returned a {type(out).__name__}")
    return to_array(out)


def loss(model: TreeModel, trees: DenseTree[Vec[Feature, Array]], labels: Array) -> Array:
    """Mean cross entropy over the leaves of a batch of trees (padding excluded)."""
    per_slot = optax.softmax_cross_entropy_with_integer_labels(jax.vmap(logits, (None, 0))(model, trees), labels)
    valid = jax.vmap(lambda t: t.valid())(trees)
    return jnp.sum(jnp.where(valid, per_slot, 0.0)) / jnp.sum(valid)


def predict(model: TreeModel, trees: DenseTree[Vec[Feature, Array]]) -> Array:
    """The predicted class of every slot of a batch of trees (batch, capacity)."""
    return jax.vmap(logits, (None, 0))(model, trees).argmax(-1)


def baseline(values: np.ndarray, valid: np.ndarray) -> np.ndarray:
    """The shape-blind prediction: value above the plain mean of its tree's leaves."""
    mean = np.sum(np.where(valid, values, 0.0), axis=-1, keepdims=True) / valid.sum(-1, keepdims=True)
    above: np.ndarray = values > mean
    return above.astype(np.int32)


def optimiser(config: Config, steps: int) -> optax.GradientTransformation:
    """AdamW on a warmup + cosine schedule, with gradient clipping."""
    return warmup_cosine(
        steps, config.learning_rate, warmup=config.warmup, clip=config.clip, weight_decay=config.weight_decay
    )


# Training and testing


def _valid(trees: DenseTree[Array]) -> np.ndarray:
    """Which slots of a stack of trees hold leaves (trees, capacity)."""
    return np.asarray(jax.vmap(lambda t: t.valid())(trees))


def _leaf_counts(valid: np.ndarray) -> tuple[int, int, int]:
    """The least, median and largest leaf count of a stack of trees, from ``_valid``."""
    leaves = valid.sum(-1)
    return int(leaves.min()), int(np.median(leaves)), int(leaves.max())


def train(
    steps: int,
    seed: int = 0,
    config: Config = Config(),
    log_every: int = 20,
    log: Callable[[str], None] = print,
) -> Result:
    """Train on ``steps`` batches drawn from a pool of the training files' syntax trees, then test on
    the held-out files' syntax trees, band by band (``config.test_bands``), and on random shapes."""
    for what, leaves in (("max_leaves", config.max_leaves), *((f"test band {b}", b[1]) for b in config.test_bands)):
        if leaves > config.capacity:
            raise ValueError(f"trees example: {what} reaches {leaves} leaves, above the capacity {config.capacity}")
    start = time.perf_counter()
    named = syntax_trees(config.train_trees, config.min_leaves, config.max_leaves, seed, side="train")
    if not named:
        raise ValueError(f"trees example: no syntax tree of {config.min_leaves} to {config.max_leaves} leaves")
    pool = stack_shapes([shape for _, shape in named], config.capacity)
    tests = {}
    for low, high in config.test_bands:
        band = [shape for _, shape in syntax_trees(config.test_trees, low, high, seed, side="test")]
        if not band:
            raise ValueError(f"trees example: the held-out files have no syntax tree of {low} to {high} leaves")
        tests[f"held-out syntax trees of {low} to {high} leaves"] = stack_shapes(band, config.capacity)
    tests[f"random shapes of {config.min_leaves} to {config.max_leaves} leaves"] = stack_shapes(
        random_shapes(seed, config.random_trees, config), config.capacity
    )
    log(
        f"{len(named)} training syntax trees; tests: "
        + ", ".join(f"{len(jax.tree_util.tree_leaves(t)[0])} {name}" for name, t in tests.items())
        + f" (parsed and laid out in {time.perf_counter() - start:.1f} s)"
    )

    model_key, data_key, test_key = jax.random.split(jax.random.PRNGKey(seed), 3)
    model = init_model(model_key, config)
    tx = optimiser(config, steps)
    state = tx.init(model)

    @jax.jit
    def step(model: TreeModel, state: optax.OptState, step: Array) -> tuple[TreeModel, optax.OptState, Array]:
        # A batch of shapes from the pool and fresh values, drawn inside the step.
        pick, draw = jax.random.split(jax.random.fold_in(data_key, step))
        chosen = jax.random.choice(pick, len(named), (config.batch,))
        trees = jax.tree_util.tree_map(lambda leaf: leaf[chosen], pool)
        values = jax.random.normal(draw, (config.batch, config.capacity), jnp.float32)
        value, grads = jax.value_and_grad(loss)(model, with_values(trees, values), targets(trees, values))
        updates, state = tx.update(grads, state, model)
        return optax.apply_updates(model, updates), state, value

    evaluate = jax.jit(predict)

    def test(name: str, trained: TreeModel, trees: DenseTree[Array], key: Array) -> Score:
        """Leaf accuracies of the model and of the baseline over every valid leaf of ``trees``."""
        n = jax.tree_util.tree_leaves(trees)[0].shape[0]
        values = jax.random.normal(key, (n, config.capacity), jnp.float32)
        labels, valid = np.asarray(targets(trees, values)), _valid(trees)
        predicted = []
        for i in range(0, n, config.test_batch):  # batches of one size: one compilation
            chunk = jnp.arange(i, i + config.test_batch) % n
            batch = jax.tree_util.tree_map(lambda leaf, c=chunk: leaf[c], trees)
            predicted.append(np.asarray(evaluate(trained, with_values(batch, values[chunk]))))
        right = (np.concatenate(predicted)[:n] == labels)[valid]
        base = (baseline(np.asarray(values), valid) == labels)[valid]
        disputed = float(right[~base].mean()) if not base.all() else math.nan
        return Score(name, n, _leaf_counts(valid), float(right.mean()), float(base.mean()), disputed)

    losses = []  # each step's loss is taken before its update: the first is the untrained model's
    drawn = time.perf_counter()
    for i in range(steps):
        model, state, value = step(model, state, jnp.asarray(i))
        losses.append(value)
        if i == 0:
            value.block_until_ready()
            log(f"compiled the training step and took it in {time.perf_counter() - drawn:.1f} s")
        if (i + 1) % log_every == 0:
            log(f"step {i + 1:5d}  loss {float(value):.4f}  ({time.perf_counter() - drawn:.0f} s)")
    keys = jax.random.split(test_key, len(tests))
    scores = tuple(test(name, model, trees, key) for (name, trees), key in zip(tests.items(), keys, strict=True))
    return Result(
        float(losses[0]),
        float(losses[-1]),
        _leaf_counts(_valid(pool)),
        scores,
        step._cache_size(),  # type: ignore[attr-defined]
        time.perf_counter() - start,
    )


def _lines(result: Result) -> Iterator[str]:
    yield f"loss {result.initial_loss:.3f} -> {result.final_loss:.4f} (chance ln 2 = {math.log(CLASSES):.3f})"
    low, median, high = result.train_leaves
    yield f"trained on syntax trees of {low} to {high} leaves (median {median})"
    for score in result.tests:
        low, median, high = score.leaves
        yield (
            f"{score.trees} {score.name} (median {median}): leaf accuracy {score.accuracy:.3f} "
            f"(plain-mean baseline {score.baseline:.3f}; where it is wrong: {score.disputed:.3f})"
        )
    yield f"in {result.seconds:.1f} s, the training step compiled {result.compilations} time(s) for every shape"


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Train a transformer on trees to compare leaves with the integral.")
    parser.add_argument("--steps", type=int, default=STEPS, help="training steps (default: %(default)s)")
    parser.add_argument("--seed", type=int, default=0, help="random seed (default: %(default)s)")
    args = parser.parse_args(argv)
    for line in _lines(train(args.steps, args.seed)):
        print(line)


if __name__ == "__main__":
    main()
