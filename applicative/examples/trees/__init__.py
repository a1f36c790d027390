"""Train a transformer on the syntax trees of Python's standard library, up to 4,096 leaves, every
shape in one compile, to compare each leaf with the tree's integral.

A tree is a piecewise-constant function on [0, 1]: a leaf at depth d covers an
interval of length 2^-d. The task: every leaf holds a random value v, and its
target is whether v lies above the tree's dyadic mean, the integral
sum over leaves of 2^-depth v. On an unbalanced tree that differs from the
plain mean of the leaves, so the answer depends on the shape, not only on the
multiset of values; the plain-mean rule (``v > mean of the leaves``), computed
in numpy on the same test trees, is the baseline that ignores it.

The model (``model``) is the generic ``applicative.nn`` encoder instantiated on
``DenseTree`` (sequence structure) and ``Vec`` (features): one layer, no
positional encodings (a tree has none), the leaf value as its single input
feature and two logits per leaf. It never sees a depth: the shape enters only
through ``counit``, which normalises attention, so the softmax is taken
against the dyadic measure and a uniform attention head computes exactly the
integral.

Shapes are data, real ones (``data``): the abstract syntax trees of the standard
library's function and class definitions (``syntax_trees``, binarised; deep
and unbalanced), split by file (``held_out``: a fixed quarter of the files is
never trained on, so a class and its methods never fall on both sides).
Training (``training``, through ``applicative.training.fit``) draws batches from
a pool of the training files' trees of 64 to 4,096 leaves, laid out once at
capacity 4,096, with fresh values at every step, made on the host from (seed,
step); attention runs in chunks of queries (memory linear in the leaves). One
compiled step serves every shape, and one compiled predictor every test tree.
Tested on the held-out files' trees, and on random shapes.

    python -m applicative.examples.trees train --out DIR [--resume] [--seconds S] [--quiet] [--steps N] [--seed S]
    python -m applicative.examples.trees evaluate DIR
    python -m applicative.examples.trees plot DIR

(``cli``); docs/trees.md gives its results.
"""

from applicative.examples.trees.cli import main
from applicative.examples.trees.data import (
    HELD_OUT_EVERY,
    LIBRARY,
    Side,
    balanced,
    binarised,
    definitions,
    draws,
    held_out,
    library_files,
    pool,
    random_shape,
    random_shapes,
    stack_shapes,
    syntax_trees,
    test_sets,
)
from applicative.examples.trees.model import (
    CLASSES,
    Config,
    Feature,
    Logit,
    TreeModel,
    baseline,
    init_model,
    learner,
    logits,
    loss,
    optimiser,
    predict,
    targets,
    with_values,
)
from applicative.examples.trees.training import (
    PER_EPOCH,
    STEPS,
    Report,
    Result,
    Score,
    describe,
    evaluate,
    restored,
    train,
)

__all__ = [
    "CLASSES",
    "HELD_OUT_EVERY",
    "LIBRARY",
    "PER_EPOCH",
    "STEPS",
    "Config",
    "Feature",
    "Logit",
    "Report",
    "Result",
    "Score",
    "Side",
    "TreeModel",
    "balanced",
    "baseline",
    "binarised",
    "definitions",
    "describe",
    "draws",
    "evaluate",
    "held_out",
    "init_model",
    "learner",
    "library_files",
    "logits",
    "loss",
    "main",
    "optimiser",
    "pool",
    "predict",
    "random_shape",
    "random_shapes",
    "restored",
    "stack_shapes",
    "syntax_trees",
    "targets",
    "test_sets",
    "train",
    "with_values",
]
