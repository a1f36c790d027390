"""The trees example's data: shapes, real and random, laid out as stacks of trees, and the minibatches drawn
from them.

Shapes are real: the abstract syntax trees of the standard library's function and class definitions
(``syntax_trees``, binarised; deep and unbalanced), split by file (``held_out``: a fixed quarter of the files is
never trained on, so a class and its methods never fall on both sides). Random shapes (``random_shapes``) test
beyond them.

    pool(config, seed)           the training files' syntax trees of min_leaves to max_leaves, laid out once
    draws(pool, config, per_epoch)   a ``Drawn`` source: step s takes ``batch`` trees of the pool and fresh values
    test_sets(config, seed)      the held-out files' syntax trees band by band, then random shapes

Every minibatch is made on the host from (seed, step) alone, the same ``jax.random`` calls on
``fold_in(data key, step)`` (the data key the second of the seed's three) that the example's step once made
inside its ``jit``: the same trees and values at every step.
"""

from __future__ import annotations

import ast
import functools
import random
import sysconfig
import zlib
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Literal, cast

import jax
import jax.numpy as jnp
import numpy as np
from jax import Array

from applicative import DenseTree, Vec, stacked
from applicative.examples.trees.model import Config, Feature, targets, with_values
from applicative.instances import dyadic
from applicative.instances.tree import Shape
from applicative.training import Drawn

__all__ = [
    "HELD_OUT_EVERY",
    "LIBRARY",
    "Side",
    "balanced",
    "binarised",
    "definitions",
    "draws",
    "held_out",
    "library_files",
    "pool",
    "random_shape",
    "random_shapes",
    "stack_shapes",
    "syntax_trees",
    "test_sets",
]

LIBRARY = Path(sysconfig.get_paths()["stdlib"])  # the installed standard library
HELD_OUT_EVERY = 4  # one file of the standard library in this many is kept for testing (``held_out``)


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


@functools.lru_cache(maxsize=1)
def _python_files() -> tuple[str, ...]:
    """Every Python file of the standard library outside site-packages, sorted (read once: a walk of the
    library takes most of a second)."""
    return tuple(
        sorted(p.relative_to(LIBRARY).as_posix() for p in LIBRARY.rglob("*.py") if "site-packages" not in p.parts)
    )


def library_files(side: Side = "all", seed: int | None = None) -> list[str]:
    """The installed standard library's Python files (paths inside it, under ``LIBRARY``): all of
    them, the training files or the held-out ones (``held_out``), sorted or, given a ``seed``, in a
    seeded random order."""
    files = [name for name in _python_files() if side == "all" or held_out(name) == (side == "test")]
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
    definitions in all). Parsed once for each set of arguments (a run and its resumption, its evaluation,
    in one process)."""
    return list(_syntax_trees(count, min_leaves, max_leaves, seed, side))


@functools.lru_cache(maxsize=8)
def _syntax_trees(count: int, min_leaves: int, max_leaves: int, seed: int, side: Side) -> tuple[tuple[str, Shape], ...]:
    found: list[tuple[str, Shape]] = []
    for name, node in definitions(seed, side):
        shape = binarised(node)
        depths = dyadic.depths_of(shape)
        if min_leaves <= len(depths) <= max_leaves and max(depths) <= dyadic.MAX_DEPTH:
            found.append((name, shape))
            if len(found) == count:
                break
    return tuple(found)


def stack_shapes(shapes: Sequence[Shape], capacity: int) -> DenseTree[Array]:
    """The shapes as one stack of trees (leaves zero): a pool to draw batches from."""
    zero = np.float32(0.0)  # on the host: the trees are laid out there, and moved to the device once
    trees = [DenseTree.from_shape(shape, zero, capacity) for shape in shapes]
    return cast(DenseTree[Array], stacked.stack(trees, "stack_shapes"))


def _check(config: Config) -> None:
    """ValueError naming the first of the training and test leaf counts that a layout of ``config.capacity``
    cannot hold."""
    for what, leaves in (("max_leaves", config.max_leaves), *((f"test band {b}", b[1]) for b in config.test_bands)):
        if leaves > config.capacity:
            raise ValueError(f"trees example: {what} reaches {leaves} leaves, above the capacity {config.capacity}")


def pool(config: Config, seed: int) -> DenseTree[Array]:
    """The training files' first ``config.train_trees`` syntax trees (in the seed's order of files) of
    ``min_leaves`` to ``max_leaves`` leaves, as one stack at ``config.capacity``. ValueError: leaf counts above
    the capacity (``config``'s, its test bands' too), or no such tree."""
    _check(config)
    named = syntax_trees(config.train_trees, config.min_leaves, config.max_leaves, seed, side="train")
    if not named:
        raise ValueError(f"trees example: no syntax tree of {config.min_leaves} to {config.max_leaves} leaves")
    return stack_shapes([shape for _, shape in named], config.capacity)


def test_sets(config: Config, seed: int) -> dict[str, DenseTree[Array]]:
    """The test trees by name: the held-out files' syntax trees of each band of ``config.test_bands`` (at most
    ``config.test_trees`` each), then ``config.random_trees`` random shapes of ``min_leaves`` to ``max_leaves``
    leaves, each a stack at ``config.capacity``. ValueError: a band with no tree, or above the capacity."""
    _check(config)
    tests = {}
    for low, high in config.test_bands:
        band = [shape for _, shape in syntax_trees(config.test_trees, low, high, seed, side="test")]
        if not band:
            raise ValueError(f"trees example: the held-out files have no syntax tree of {low} to {high} leaves")
        tests[f"held-out syntax trees of {low} to {high} leaves"] = stack_shapes(band, config.capacity)
    tests[f"random shapes of {config.min_leaves} to {config.max_leaves} leaves"] = stack_shapes(
        random_shapes(seed, config.random_trees, config), config.capacity
    )
    return tests


def draws(trees: DenseTree[Array], config: Config, per_epoch: int) -> Drawn[DenseTree[Vec[Feature, Array]], Array]:
    """Minibatches from the stack ``trees`` (``pool``): step s of seed ``seed`` takes ``config.batch`` of them,
    chosen with replacement, holding standard normal values (``with_values``), against their ``targets``; the
    choice and the values drawn from two keys split from ``fold_in(key, s)``, ``key`` the second of the
    three split from ``PRNGKey(seed)`` (the first is the model's, the third the tests'). Every minibatch is one
    shape (``config.batch`` trees at ``config.capacity``), so the training step compiles once."""
    count = len(jax.tree_util.tree_leaves(trees)[0])

    def draw(seed: int, step: int) -> tuple[DenseTree[Vec[Feature, Array]], Array]:
        data_key = jax.random.split(jax.random.PRNGKey(seed), 3)[1]
        pick, values_key = jax.random.split(jax.random.fold_in(data_key, step))
        chosen = jax.random.choice(pick, count, (config.batch,))
        batch = jax.tree_util.tree_map(lambda leaf: leaf[chosen], trees)
        values = jax.random.normal(values_key, (config.batch, config.capacity), jnp.float32)
        return with_values(batch, values), targets(batch, values)

    return Drawn(draw, per_epoch)
