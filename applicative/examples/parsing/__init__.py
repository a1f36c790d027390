"""Text to trees: a transformer that reads the tokens of a Python statement (a ``Vec``) and builds
its syntax tree (a ``DenseTree``), trained on the standard library and tested on held-out files.

The reference text's cross-modal model with ``f`` a tree and ``i`` a sequence: the tree's nodes are
queries that attend to the tokens. The data (``syntax``): a statement's tokens, and its tree,
every node a label and the span of tokens it covers, children in source order, binarised as the
trees example binarises syntax trees (a leaf per node, in preorder).

    model      the parser (``Parser``: a reader, a builder, a pointer), its settings (``Config``, ``Band``), its loss
    batches    the fragments in bands (``load_data``), trees as the builder sees them, the teacher-forced
               minibatches (``Minibatches``, drawn from (seed, step))
    decoding   ``parse``: the tree grown top down, a level a round, each node's children by dynamic programming
    source     ``parse_source``: a user's own code, a predicted tree a statement, beside Python's
    testing    the test: a random sample of every held-out file's fragments, figures with intervals
    runs       ``train`` through ``applicative.training.fit`` into a run directory, ``evaluate``, ``load``
    figure     ``plot``: a fragment under its predicted tree and Python's
    cli        ``main``: ``python -m applicative.examples.parsing train | evaluate | parse | plot``

Every band of fragment sizes (``Config.bands``) has its capacities of tokens and nodes, so one
compiled step and one compiled round serve every pair of shapes in it. The baselines: the
right-branching tree, and the same transformer on ``Vec`` alone predicting the linearised tree
(``seq2seq``). docs/parsing.md gives the results.
"""

from applicative.examples.parsing.batches import Data, Minibatches, load_data
from applicative.examples.parsing.cli import main
from applicative.examples.parsing.decoding import parse
from applicative.examples.parsing.figure import plot
from applicative.examples.parsing.model import (
    BEGIN,
    CONTINUE,
    NESTING_FEATURES,
    OWN,
    POSITION_FEATURES,
    Band,
    Batch,
    Config,
    Nodes,
    Parser,
    build,
    init_parser,
    loss,
    read,
    sinusoids,
)
from applicative.examples.parsing.runs import (
    PER_EPOCH,
    STEPS,
    VALIDATE_EVERY,
    BandResult,
    Result,
    Run,
    evaluate,
    load,
    train,
)
from applicative.examples.parsing.source import Parsed, compared, parse_source, render, unread

__all__ = [
    "BEGIN",
    "CONTINUE",
    "NESTING_FEATURES",
    "OWN",
    "PER_EPOCH",
    "POSITION_FEATURES",
    "STEPS",
    "VALIDATE_EVERY",
    "Band",
    "BandResult",
    "Batch",
    "Config",
    "Data",
    "Minibatches",
    "Nodes",
    "Parsed",
    "Parser",
    "Result",
    "Run",
    "build",
    "compared",
    "evaluate",
    "init_parser",
    "load",
    "load_data",
    "loss",
    "main",
    "parse",
    "parse_source",
    "plot",
    "read",
    "render",
    "sinusoids",
    "train",
    "unread",
]
