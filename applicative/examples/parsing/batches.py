"""The parser's data: fragments of the standard library in bands of sizes, trees laid out as the builder sees
them, and the teacher-forced minibatches that ``applicative.training.fit`` trains on.

    load_data(config, seed) -> Data        training fragments, and held-out ones band by band
    pools(data, config)                    the training fragments of each band that fit it
    with_vocabularies(config, fragments)   ``config`` with the fragments' token kinds and labels
    Minibatches(pools, shares, config)     ``Drawn``'s draw: step s's minibatch from (seed, s)
    held_out(data, config, seed)           fixed teacher-forced minibatches of the held-out fragments

Training is the decode's rounds teacher forced: Python's tree cut at a random depth k, the labels of every
node and the scores of the nodes at depth k, whose children are not in the tree yet. Every band of fragment
sizes (``Config.bands``) has its capacities of tokens and nodes, so every minibatch of a band has one shape
and one compiled step serves it.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Iterator, Sequence
from typing import Any, NamedTuple

import jax.numpy as jnp
import numpy as np

from applicative.examples import syntax
from applicative.examples.parsing.model import (
    BEGIN,
    CONTINUE,
    DEPTH_FEATURES,
    OWN,
    POSITION_FEATURES,
    Band,
    Batch,
    Config,
    Nodes,
    sinusoids,
)
from applicative.examples.syntax import Fragment, Node
from applicative.instances import dyadic

__all__ = [
    "Data",
    "Host",
    "Minibatches",
    "band_of",
    "fits",
    "held_out",
    "load_data",
    "make_batch",
    "nodes_of",
    "pools",
    "stack",
    "token_inputs",
    "walk",
    "with_vocabularies",
]


# Trees as the builder sees them


def walk(tree: Node, depth: int = 0) -> Iterator[tuple[Node, int]]:
    """The nodes of ``tree`` with their depths, in preorder."""
    yield tree, depth
    for child in tree.children:
        yield from walk(child, depth + 1)


def _cut(tree: Node, depth: int) -> Node:
    """``tree`` without its nodes below ``depth`` (the root at depth 0)."""
    children = tuple(_cut(c, depth - 1) for c in tree.children) if depth > 0 else ()
    return Node(tree.label, tree.span, children)


def _unary(tree: Node, parent: tuple[int, int] | None = None) -> Iterator[bool]:
    """Whether each of ``tree``'s nodes covers its parent's span, in preorder."""
    yield tree.span == parent
    for child in tree.children:
        yield from _unary(child, tree.span)


Host = tuple[dyadic.Layout, np.ndarray, np.ndarray, np.ndarray]  # one tree's ``Nodes``, on the host


def nodes_of(tree: Node, round_: int, capacity: int) -> Host:
    """The layout and host arrays of a tree in round ``round_`` (its nodes at that depth have no
    children yet)."""
    layout = dyadic.layout(dyadic.depths_of(syntax.binarised(tree)), capacity, "parsing")
    first, last, extras = (
        np.zeros(capacity, np.int32),
        np.zeros(capacity, np.int32),
        np.zeros((capacity, DEPTH_FEATURES + 2), np.float32),
    )
    depths = np.array([depth for _, depth in walk(tree)], np.int32)
    spans = np.array([n.span for n in syntax.nodes(tree)], np.int32)
    first[: len(spans)], last[: len(spans)] = spans[:, 0], spans[:, 1]
    extras[: len(spans), :DEPTH_FEATURES] = sinusoids(depths.astype(np.float64), DEPTH_FEATURES)
    extras[: len(spans), DEPTH_FEATURES] = depths < round_
    extras[: len(spans), DEPTH_FEATURES + 1] = np.fromiter(_unary(tree), bool)
    return layout, first, last, extras


def stack(items: Sequence[Host]) -> Nodes:
    """The ``Nodes`` of a batch of trees: the layouts stacked on the device (one move), the rest on the host."""
    layouts = jnp.stack([layout for layout, _, _, _ in items])
    first = np.stack([f for _, f, _, _ in items])
    last = np.stack([f for _, _, f, _ in items])
    extras = np.stack([e for _, _, _, e in items])
    return Nodes(layouts, first, last, extras)  # type: ignore[arg-type]  # host arrays, moved by the step


def token_inputs(fragments: Sequence[Fragment], kinds: dict[str, int], capacity: int) -> tuple[Any, Any]:
    """One-hot kinds and sinusoidal positions (fragments, capacity, TokenIn), and the lengths: host arrays."""
    inputs = np.zeros((len(fragments), capacity, len(kinds) + POSITION_FEATURES), np.float32)
    inputs[:, :, len(kinds) :] = sinusoids(np.arange(capacity, dtype=np.float64), POSITION_FEATURES)
    for i, fragment in enumerate(fragments):
        inputs[i, np.arange(len(fragment.tokens)), syntax.ids(fragment.tokens, kinds)] = 1.0
    return inputs, np.asarray([len(f.tokens) for f in fragments], np.int32)


def fits(tree: Node, band: Band) -> bool:
    """Whether a tree's layout fits the band's node capacity and a layout's depth."""
    depths = dyadic.depths_of(syntax.binarised(tree))
    return len(depths) <= band.nodes and max(depths) <= dyadic.MAX_DEPTH


def _tags(row: np.ndarray, node: Node) -> None:
    """Write into ``row`` (a node's row over the tokens) what each token of its span is to it."""
    first, last = node.span
    row[first : last + 1] = OWN
    for child in node.children:
        row[child.span[0]] = BEGIN
        row[child.span[0] + 1 : child.span[1] + 1] = CONTINUE


def ids(items: Sequence[str]) -> dict[str, int]:
    """A vocabulary's ids: its items' places."""
    return {item: i for i, item in enumerate(items)}


def make_batch(fragments: Sequence[Fragment], cuts: Sequence[int], config: Config, band: Band) -> Batch:
    """The teacher-forced round of each fragment's tree cut at the depth of its ``cuts`` (below its own),
    with its targets, padded to the band's capacities: host arrays but the layouts."""
    vocab = ids(config.labels)
    labels = np.full((len(fragments), band.nodes), -1, np.int32)
    tags = np.full((len(fragments), band.nodes, band.high), -1, np.int8)
    items = []
    for i, (fragment, round_) in enumerate(zip(fragments, cuts, strict=True)):
        items.append(nodes_of(_cut(fragment.tree, round_), round_, band.nodes))
        kept = [(node, depth) for node, depth in walk(fragment.tree) if depth <= round_]  # the cut's, in order
        labels[i, : len(kept)] = syntax.ids((node.label for node, _ in kept), vocab)
        for j, (node, depth) in enumerate(kept):
            if depth == round_:
                _tags(tags[i, j], node)
    inputs, lengths = token_inputs(fragments, ids(config.kinds), band.high)
    return Batch(inputs, lengths, stack(items), labels, tags)  # type: ignore[arg-type]  # host arrays


# The fragments


class Data(NamedTuple):
    """Fragments of the training files and, band by band, of the held-out files."""

    train: tuple[Fragment, ...]
    test: tuple[tuple[Fragment, ...], ...]


def load_data(config: Config, seed: int = 0) -> Data:
    """``config.train_fragments`` fragments of the training files in the bands, and up to
    ``config.test_fragments`` of the held-out files in each band (file orders drawn from ``seed``)."""
    low, high = min(b.low for b in config.bands), max(b.high for b in config.bands)
    train = list(itertools.islice(syntax.fragments(low, high, "train", seed), config.train_fragments))
    test: list[list[Fragment]] = [[] for _ in config.bands]
    for fragment in syntax.fragments(low, high, "test", seed):
        for band, found in zip(config.bands, test, strict=True):
            if band.low <= len(fragment.tokens) <= band.high and len(found) < config.test_fragments:
                found.append(fragment)
        if all(len(found) == config.test_fragments for found in test):
            break
    return Data(tuple(train), tuple(tuple(found) for found in test))


def band_of(fragment: Fragment, bands: Sequence[Band]) -> int | None:
    """The index of the first band that holds the fragment's size, None if none does."""
    return next((i for i, b in enumerate(bands) if b.low <= len(fragment.tokens) <= b.high), None)


def pools(data: Data, config: Config) -> list[list[Fragment]]:
    """The training fragments of each band whose trees fit it, in the data's order."""
    found: list[list[Fragment]] = [[] for _ in config.bands]
    for fragment in data.train:
        index = band_of(fragment, config.bands)
        if index is not None and fits(fragment.tree, config.bands[index]):
            found[index].append(fragment)
    return found


def with_vocabularies(config: Config, fragments: Sequence[Fragment]) -> Config:
    """``config`` with the token kinds and labels of the training fragments (an unknown one last)."""
    kinds = syntax.vocabulary(k for f in fragments for k in f.tokens)
    labels = syntax.vocabulary(n.label for f in fragments for n in syntax.nodes(f.tree))
    return dataclasses.replace(config, kinds=tuple(kinds), labels=tuple(labels))


# Minibatches


class Minibatches:
    """The draw of a ``Drawn`` source, ``draw(seed, step) -> (inputs, targets)``: inputs (token inputs,
    lengths, ``Nodes``) and targets (labels, tags) of a ``Batch``, host arrays but the layouts.

    Step s's minibatch is the s-th that one generator ``default_rng(seed)``, drawn step after step, gives:
    a band (with the probability of its ``shares``), ``band.batch`` fragments of its pool (with
    replacement), and for each a depth, uniform below its tree's, to cut it at. The generator is
    sequential, so a step that does not follow the one before (the first, or the first of a resumed run)
    replays the draws of the steps before it (a few numpy calls a step, no batch made): a function of
    (seed, step) alone, and the minibatches of the parser's first training loop, step for step."""

    def __init__(self, pools: Sequence[Sequence[Fragment]], shares: np.ndarray, config: Config) -> None:
        self.pools, self.config = pools, config
        self.p = shares / shares.sum()
        self._rng: np.random.Generator | None = None
        self._seed, self._next = 0, 0  # the generator's seed, and the step it draws next

    def choice(self, seed: int, step: int) -> tuple[int, list[Fragment], list[int]]:
        """Step ``step``'s band, fragments and cuts."""
        if self._rng is None or seed != self._seed or step < self._next:
            self._rng, self._seed, self._next = np.random.default_rng(seed), seed, 0
        bands = self.config.bands
        while True:
            b = int(self._rng.choice(len(bands), p=self.p))
            chosen = self._rng.choice(len(self.pools[b]), bands[b].batch)
            fragments = [self.pools[b][i] for i in chosen]
            cuts = [int(self._rng.integers(syntax.depth(f.tree))) for f in fragments]
            self._next += 1
            if self._next > step:
                return b, fragments, cuts

    def __call__(self, seed: int, step: int) -> tuple[Any, Any]:
        b, fragments, cuts = self.choice(seed, step)
        batch = make_batch(fragments, cuts, self.config, self.config.bands[b])
        return (batch.inputs, batch.lengths, batch.nodes), (batch.labels, batch.tags)


def held_out(data: Data, config: Config, seed: int) -> list[list[Batch]]:
    """Band by band, the held-out fragments whose trees fit the band in minibatches of ``band.batch`` (the
    last filled with repeats), each cut at a depth drawn once from ``default_rng([seed, 1])``: the same
    minibatches at every epoch, so their loss is a curve (``runs.held_out_loss``). Bands without held-out
    fragments have no minibatch."""
    rng = np.random.default_rng([seed, 1])
    found = []
    for band, fragments in zip(config.bands, data.test, strict=True):
        usable = [f for f in fragments if fits(f.tree, band)]
        batches = []
        for start in range(0, len(usable), band.batch):
            chunk = [usable[(start + i) % len(usable)] for i in range(band.batch)]
            cuts = [int(rng.integers(syntax.depth(f.tree))) for f in chunk]
            batches.append(make_batch(chunk, cuts, config, band))
        found.append(batches)
    return found
