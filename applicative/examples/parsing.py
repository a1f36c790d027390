"""Text to trees: a transformer that reads the tokens of a Python statement (a ``Vec``) and builds
its syntax tree (a ``DenseTree``), trained on the standard library and tested on held-out files.

The reference text's cross-modal model with ``f`` a tree and ``i`` a sequence: the tree's nodes are
queries that attend to the tokens. The data (``syntax``): a statement's tokens, and its tree,
every node a label and the span of tokens it covers, children in source order, binarised as the
trees example binarises syntax trees (a leaf per node, in preorder).

The parser (``Parser``):

- a reader, the generic encoder on the ``Vec`` of tokens (one-hot kinds and sinusoidal
  positions as input features), gives every token a state: the memory;
- a builder, the generic decoder on the ``DenseTree`` of nodes built so far: a node's input is the
  memory at its first and last token, its depth, whether its children are in the tree and
  whether it covers its parent's span; its
  layers attend over the tree's nodes (no mask: a tree has no order to respect) and across to the
  memory; its output is the node's label;
- a pointer: for every node and every token, three scores (``mul_mmt`` of the nodes' and the
  tokens' projections, a tree of sequences): whether the token is the node's own, begins one of
  its children or continues one.

The tree grows top down, a level a round: the root covers every token; in round k every node at
depth k reads its children's spans from its scores over its own span (the best sequence of own,
begin, continue that begins no child with a continuation: a three-state Viterbi), and those
children join the tree. It stops when a round adds no node; the labels are the last round's.
Python's trees hold no chain of three nodes over one span, so a node over its parent's span gets
no child over it too (without this rule and the feature above, chains grew round after round). A
decode that needs more rounds than ``Config.rounds``, more nodes than the band's capacity or a
deeper binarised tree than a layout holds is malformed. Training is the same rounds teacher
forced: Python's tree cut at a random depth k, the labels of every node and the scores of the
nodes at depth k, whose children are not in the tree yet.

Every band of fragment sizes (``Config.bands``) has its capacities of tokens and nodes, so one
compiled step and one compiled round serve every pair of shapes in it. The baselines: the
right-branching tree, and the same transformer on ``Vec`` alone predicting the linearised tree
(``seq2seq``). Run ``python -m applicative.examples.parsing``; docs/parsing.md gives its results.
"""

from __future__ import annotations

import argparse
import itertools
import json
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, NamedTuple, TypeVar

import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax import Array
from tqdm.auto import tqdm

from applicative import DenseTree, DenseTreeOf, Dim, Vec, VecOf, as_vec, lift_a2, mul_mmt, record, to_array
from applicative.examples import seq2seq, syntax
from applicative.examples.syntax import Fragment, Node
from applicative.instances import dyadic
from applicative.nn import (
    AttentionOptions,
    Decoder,
    Encoder,
    Linear,
    each_of,
    init_decoder,
    init_each,
    init_encoder,
    padding_mask,
)
from applicative.training import warmup_cosine

__all__ = [
    "STEPS",
    "Band",
    "BandResult",
    "Batch",
    "Config",
    "Data",
    "Nodes",
    "Parser",
    "Result",
    "build",
    "init_parser",
    "load",
    "load_data",
    "loss",
    "main",
    "parse",
    "plot",
    "read",
    "save",
    "train",
]

OWN, BEGIN, CONTINUE = 0, 1, 2  # what a token is to a node: its own, the first of a child's, a later one of a child's
STEPS = 1400  # the default run's training steps
DEPTH_FEATURES = 16  # sinusoidal features of a node's depth
POSITION_FEATURES = 32  # sinusoidal features of a token's position


class Token(Dim):
    """A token of a fragment: a position in the reader's sequence."""


class TokenIn(Dim):
    """An input feature of a token: its kind (one-hot), its position (sinusoidal)."""


class NodeIn(Dim):
    """An input feature of a node: the memory at its first and last token, its depth, whether its
    children are in the tree."""


class Model(Dim):
    """A feature of the model's states."""


class Hidden(Dim):
    """A feature inside the MLP."""


class Head(Dim):
    """An attention head."""


class HeadFeature(Dim):
    """A query, key or value feature of one head."""


class Label(Dim):
    """A node's label logit."""


class Tag(Dim):
    """What a token is to a node: own, begins a child, continues a child."""


class Pointer(Dim):
    """A feature of a node's or a token's projection for one tag's scores."""


N = TypeVar("N", bound=Dim)

Reader = Encoder[VecOf[Token], VecOf[TokenIn], VecOf[Model], Any]
Builder = Decoder[DenseTreeOf, VecOf[NodeIn], VecOf[Model], VecOf[Model], VecOf[Label]]
Memory = Vec[Token, Vec[Model, Array]]


@record
class Parser:
    """The reader, the builder, and the pointer's projections of nodes and tokens, one map a tag."""

    reader: Reader
    builder: Builder
    node_pointers: Vec[Tag, Linear[VecOf[Model], VecOf[Pointer]]]
    token_pointers: Vec[Tag, Linear[VecOf[Model], VecOf[Pointer]]]


class Band(NamedTuple):
    """Fragments of ``low`` to ``high`` tokens, their trees of at most ``nodes`` nodes, trained
    ``batch`` fragments a step."""

    low: int
    high: int
    nodes: int
    batch: int = 32


@dataclass(frozen=True)
class Config:
    """Model size, data and optimiser settings."""

    width: int = 64
    hidden: int = 128
    heads: int = 4
    head_features: int = 16
    reader_layers: int = 2
    builder_layers: int = 2
    pointer: int = 32
    batch: int = 32
    learning_rate: float = 3e-3
    warmup: int = 50
    weight_decay: float = 1e-2
    clip: float = 1.0
    # Nodes a token, at most (20,000 training fragments): 1.13 from 8 tokens, 0.96 from 33, 0.78 from 129.
    bands: tuple[Band, ...] = (Band(8, 32, 40), Band(33, 128, 128), Band(129, 512, 416, 8))
    train_share: tuple[float, ...] = (0.5, 0.4, 0.1)  # of the training steps, in each band
    train_fragments: int = 20_000  # of the training files, all bands together
    test_fragments: int = 120  # of the held-out files, in each band
    seq2seq_tokens: int = 128  # the seq2seq baseline trains on fragments of at most this many tokens
    rounds: int = 40  # the most rounds of a decode: a tree of more levels is malformed
    kinds: tuple[str, ...] = ()  # token kinds, then labels: the vocabularies, set by ``train``
    labels: tuple[str, ...] = field(default=())


# The model


def _template(size: int, tag: type[N]) -> Vec[N, Array]:
    # float32 templates give float32 parameters, also under jax_enable_x64.
    return Vec.from_array(np.zeros(size, np.float32), tag)


def init_parser(key: Array, config: Config) -> Parser:
    """A parser for ``config``'s vocabularies of token kinds and labels."""
    options = AttentionOptions(
        heads=_template(config.heads, Head),
        model=_template(config.width, Model),
        head_features=_template(config.head_features, HeadFeature),
    )
    model, hidden = options.model, _template(config.hidden, Hidden)
    keys = jax.random.split(key, 4)
    reader: Reader = init_encoder(
        keys[0],
        options,
        inputs=_template(len(config.kinds) + POSITION_FEATURES, TokenIn),
        hidden=hidden,
        layers=config.reader_layers,
        outputs=None,
    )
    builder: Builder = init_decoder(
        keys[1],
        options,
        inputs=_template(2 * config.width + DEPTH_FEATURES + 2, NodeIn),
        hidden=hidden,
        layers=config.builder_layers,
        outputs=_template(len(config.labels), Label),
        source=model,
    )
    tags, pointer = _template(3, Tag), _template(config.pointer, Pointer)
    node_pointers, token_pointers = (
        as_vec(init_each(k, tags, lambda k: Linear.init(k, model, pointer))) for k in keys[2:]
    )
    return Parser(reader, builder, node_pointers, token_pointers)


def _sinusoids(positions: np.ndarray, features: int) -> np.ndarray:
    """sin and cos of ``positions`` at ``features // 2`` geometric frequencies (Vaswani et al.'s), on
    the host, the sines first (``nn.sinusoidal_positions`` interleaves them, on the device)."""
    rates = 1.0 / 10_000 ** (np.arange(features // 2) / (features // 2))
    angles = positions[..., None] * rates
    return np.concatenate([np.sin(angles), np.cos(angles)], -1).astype(np.float32)


def read(parser: Parser, inputs: Array, length: Array) -> Memory:
    """The memory of one fragment: ``inputs`` (tokens, TokenIn) of which the first ``length`` are real."""
    tokens = Vec.from_array(inputs, Token, TokenIn)
    return as_vec(parser.reader.encode(tokens, padding_mask(length, inputs.shape[0], Token))).fmap(as_vec)


def build(parser: Parser, memory: Memory, length: Array, nodes: Nodes) -> tuple[Array, Array]:
    """One round on one tree: label logits (nodes, labels) and the pointer's scores (tags, nodes,
    tokens) of every node slot of ``nodes``."""
    states = to_array(memory)
    features = jnp.concatenate([states[nodes.first], states[nodes.last], nodes.extras], -1)
    # The layout was checked where it was made (``dyadic.layout``, on the host).
    tree = DenseTree(jax.vmap(lambda f: Vec.from_array(f, NodeIn))(features), nodes.layout, features.shape[0])
    keep = jnp.arange(states.shape[0]) < length
    sees = tree.with_elements(jax.vmap(lambda _: Vec.from_array(keep, Token))(features))
    builder = parser.builder
    h = builder.embed(tree)
    for i in range(len(builder.layers)):
        h = builder.layer(i)(h, None, memory, sees)  # the tree attends to itself and to the tokens
    if builder.norm is not None:
        h = h.fmap(builder.norm)
    labels = builder.unembed.each(h)  # DenseTree[Vec[Label]]
    scores = lift_a2(  # Vec[Tag, DenseTree[Vec[Token]]]: for each tag, node and token
        lambda node, token: mul_mmt(token, node),
        each_of(parser.node_pointers, h),
        each_of(parser.token_pointers, memory),
    )
    return to_array(labels), to_array(scores)


# Trees as the builder sees them


class Nodes(NamedTuple):
    """A tree being built, as arrays over its node slots (preorder, then padding): its layout, each
    node's first and last token, and its depth, expansion and span-of-its-parent features."""

    layout: dyadic.Layout
    first: Array
    last: Array
    extras: Array


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


def _nodes(tree: Node, round_: int, capacity: int) -> Host:
    """The layout and host arrays of a tree in round ``round_`` (its nodes at that depth have no
    children yet)."""
    layout = dyadic.layout(dyadic.depths_of(syntax.binarised(tree)), capacity, "parsing")
    first, last, extras = (
        np.zeros(capacity, np.int32),
        np.zeros(capacity, np.int32),
        np.zeros((capacity, DEPTH_FEATURES + 2), np.float32),
    )
    depths = np.array([depth for _, depth in _walk(tree)], np.int32)
    spans = np.array([n.span for n in syntax.nodes(tree)], np.int32)
    first[: len(spans)], last[: len(spans)] = spans[:, 0], spans[:, 1]
    extras[: len(spans), :DEPTH_FEATURES] = _sinusoids(depths.astype(np.float64), DEPTH_FEATURES)
    extras[: len(spans), DEPTH_FEATURES] = depths < round_
    extras[: len(spans), DEPTH_FEATURES + 1] = np.fromiter(_unary(tree), bool)
    return layout, first, last, extras


def _stack(items: Sequence[Host]) -> Nodes:
    stacked_layout = jnp.stack([layout for layout, _, _, _ in items])
    first = np.stack([f for _, f, _, _ in items])
    last = np.stack([f for _, _, f, _ in items])
    extras = np.stack([e for _, _, _, e in items])
    return Nodes(stacked_layout, jnp.asarray(first), jnp.asarray(last), jnp.asarray(extras))


def _token_inputs(fragments: Sequence[Fragment], kinds: dict[str, int], capacity: int) -> tuple[Array, Array]:
    """One-hot kinds and sinusoidal positions (fragments, capacity, TokenIn), and the lengths."""
    inputs = np.zeros((len(fragments), capacity, len(kinds) + POSITION_FEATURES), np.float32)
    inputs[:, :, len(kinds) :] = _sinusoids(np.arange(capacity, dtype=np.float64), POSITION_FEATURES)
    for i, fragment in enumerate(fragments):
        inputs[i, np.arange(len(fragment.tokens)), syntax.ids(fragment.tokens, kinds)] = 1.0
    return jnp.asarray(inputs), jnp.asarray([len(f.tokens) for f in fragments], jnp.int32)


def _fits(tree: Node, band: Band) -> bool:
    """Whether a tree's layout fits the band's node capacity and a layout's depth."""
    shape = syntax.binarised(tree)
    depths = dyadic.depths_of(shape)
    return len(depths) <= band.nodes and max(depths) <= dyadic.MAX_DEPTH


# Training


class Batch(NamedTuple):
    """A teacher-forced round for a batch of fragments: tokens, nodes, and targets: every node's
    label (-1 in padding) and what every token is to each node of the round's depth (-1 elsewhere)."""

    inputs: Array
    lengths: Array
    nodes: Nodes
    labels: Array
    tags: Array


def _walk(tree: Node, depth: int = 0) -> Iterator[tuple[Node, int]]:
    """The nodes of ``tree`` with their depths, in preorder."""
    yield tree, depth
    for child in tree.children:
        yield from _walk(child, depth + 1)


def _tags(row: np.ndarray, node: Node) -> None:
    """Write into ``row`` (a node's row over the tokens) what each token of its span is to it."""
    first, last = node.span
    row[first : last + 1] = OWN
    for child in node.children:
        row[child.span[0]] = BEGIN
        row[child.span[0] + 1 : child.span[1] + 1] = CONTINUE


def _batch(fragments: Sequence[Fragment], rng: np.random.Generator, config: Config, band: Band) -> Batch:
    """Every fragment's tree cut at a depth drawn uniformly below its own, with its targets."""
    vocab = _ids(config.labels)
    labels = np.full((len(fragments), band.nodes), -1, np.int32)
    tags = np.full((len(fragments), band.nodes, band.high), -1, np.int8)
    items = []
    for i, fragment in enumerate(fragments):
        round_ = int(rng.integers(syntax.depth(fragment.tree)))
        items.append(_nodes(_cut(fragment.tree, round_), round_, band.nodes))
        kept = [(node, depth) for node, depth in _walk(fragment.tree) if depth <= round_]  # the cut's, in order
        labels[i, : len(kept)] = syntax.ids((node.label for node, _ in kept), vocab)
        for j, (node, depth) in enumerate(kept):
            if depth == round_:
                _tags(tags[i, j], node)
    inputs, lengths = _token_inputs(fragments, _ids(config.kinds), band.high)
    return Batch(inputs, lengths, _stack(items), jnp.asarray(labels), jnp.asarray(tags))


def _ids(items: Sequence[str]) -> dict[str, int]:
    return {item: i for i, item in enumerate(items)}


def loss(parser: Parser, batch: Batch) -> Array:
    """Cross entropy of the labels over every node, plus that of the tags over the round's nodes and
    their spans' tokens, each a mean."""

    def one(inputs: Array, length: Array, nodes: Nodes) -> tuple[Array, Array]:
        return build(parser, read(parser, inputs, length), length, nodes)

    labels, scores = jax.vmap(one)(batch.inputs, batch.lengths, batch.nodes)
    label_loss = optax.softmax_cross_entropy_with_integer_labels(labels, jnp.maximum(batch.labels, 0))
    tagged = jnp.moveaxis(scores, 1, -1)  # (batch, nodes, tokens, tags)
    tag_loss = optax.softmax_cross_entropy_with_integer_labels(tagged, jnp.maximum(batch.tags, 0).astype(jnp.int32))
    return _mean(label_loss, batch.labels >= 0) + _mean(tag_loss, batch.tags >= 0)


def _mean(values: Array, where: Array) -> Array:
    return jnp.sum(jnp.where(where, values, 0.0)) / jnp.maximum(jnp.sum(where), 1)


# Decoding


def _children(scores: np.ndarray, span: tuple[int, int]) -> list[tuple[int, int]]:
    """The children's spans a node's scores (tags, tokens) give over its ``span``: the most likely
    sequence of tags in which no child begins with a continuation (Viterbi over three states)."""
    first, last = span
    logp = scores[:, first : last + 1].T - np.logaddexp.reduce(scores[:, first : last + 1].T, axis=1, keepdims=True)
    allowed = np.array([[1, 1, 0], [1, 1, 1], [1, 1, 1]], bool)  # allowed[from, to]: no OWN -> CONTINUE
    best = logp[0] + np.array([0.0, 0.0, -np.inf])
    back = np.zeros((len(logp), 3), np.int64)
    for t in range(1, len(logp)):
        options = np.where(allowed, best[:, None], -np.inf)
        back[t] = options.argmax(0)
        best = options.max(0) + logp[t]
    tags = [int(best.argmax())]
    for t in range(len(logp) - 1, 0, -1):
        tags.append(int(back[t, tags[-1]]))
    tags.reverse()
    spans: list[tuple[int, int]] = []
    for offset, tag in enumerate(tags):
        if tag == BEGIN:
            spans.append((first + offset, first + offset))
        elif tag == CONTINUE:
            spans[-1] = (spans[-1][0], first + offset)
    return spans


def _grown(tree: Node, scores: np.ndarray, round_: int) -> Node:
    """``tree`` with children for its nodes at depth ``round_``, read from their scores (tags, node
    slots, tokens)."""
    slots = itertools.count()

    def grow(node: Node, depth: int, parent: tuple[int, int] | None) -> Node:
        slot = next(slots)
        if depth < round_:
            return Node(node.label, node.span, tuple(grow(c, depth + 1, node.span) for c in node.children))
        spans = _children(scores[:, slot], node.span)
        if node.span == parent and spans == [node.span]:  # a third node over one span: Python's trees have none
            spans = []
        return Node(node.label, node.span, tuple(Node("", s) for s in spans))

    return grow(tree, 0, None)


def _labelled(tree: Node, labels: np.ndarray, names: Sequence[str]) -> Node:
    """``tree`` with every node's label the most likely of its row of ``labels`` (node slots, labels)."""
    slots = itertools.count()

    def label(node: Node) -> Node:
        name = names[int(labels[next(slots)].argmax())]
        return Node(name, node.span, tuple(label(c) for c in node.children))

    return label(tree)


_read_batch = jax.jit(jax.vmap(read, in_axes=(None, 0, 0)))
_build_batch = jax.jit(jax.vmap(build, in_axes=(None, 0, 0, 0)))


def parse(parser: Parser, config: Config, fragments: Sequence[Fragment], band: Band) -> list[Node | None]:
    """The trees the parser builds for ``fragments`` of the band ``band``, None where a decode is
    malformed: more rounds than ``config.rounds``, more nodes than the band holds or a binarised
    tree deeper than a layout holds. In batches of ``config.batch`` (the last one filled with
    repeats): one compiled reading and one compiled round serve the band."""
    found: list[Node | None] = []
    for start in range(0, len(fragments), config.batch):
        chunk = [fragments[(start + i) % len(fragments)] for i in range(config.batch)]
        inputs, lengths = _token_inputs(chunk, _ids(config.kinds), band.high)
        memory = _read_batch(parser, inputs, lengths)
        trees = [Node("", (0, len(f.tokens) - 1)) for f in chunk]
        built: list[Node | None] = [None] * len(chunk)
        growing = set(range(len(chunk)))
        for round_ in range(config.rounds + 1):
            if not growing:
                break
            nodes = _stack([_nodes(tree, round_, band.nodes) for tree in trees])
            labels, scores = (np.asarray(a) for a in _build_batch(parser, memory, lengths, nodes))
            for i in sorted(growing):
                grown = _grown(trees[i], scores[i], round_)
                if grown == trees[i]:  # no node grew: the tree is built
                    built[i] = _labelled(grown, labels[i], config.labels)
                    growing.discard(i)
                elif round_ == config.rounds or not _fits(grown, band):
                    growing.discard(i)  # malformed: built[i] stays None
                else:
                    trees[i] = grown
        found += built
    return found[: len(fragments)]


# Training and testing


class BandResult(NamedTuple):
    """The scores of the parser and of its baselines on one band's held-out fragments."""

    band: Band
    tokens: tuple[int, int, int]  # the fragments' token counts: min, median, max
    parser: syntax.Scores
    right_branching: syntax.Scores
    seq2seq: syntax.Scores | None
    seconds: float  # the parser's decoding, all fragments of the band
    seq2seq_seconds: float  # the baseline's


class Result(NamedTuple):
    """What a training run achieved."""

    initial_loss: float
    final_loss: float
    train_fragments: tuple[int, ...]  # in each band
    bands: tuple[BandResult, ...]
    compilations: int  # of the training step: one a band
    seconds: float  # training the parser
    seq2seq_seconds: float  # training the baseline


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


def _band_of(fragment: Fragment, bands: Sequence[Band]) -> int | None:
    return next((i for i, b in enumerate(bands) if b.low <= len(fragment.tokens) <= b.high), None)


def train(
    steps: int,
    seed: int = 0,
    config: Config = Config(),
    data: Data | None = None,
    seq2seq_steps: int | None = None,
    log: Callable[[str], None] = print,
    progress: bool = True,
) -> tuple[Parser, Config, Result]:
    """Train the parser ``steps`` batches (and the seq2seq baseline ``seq2seq_steps``, the same by
    default; 0: no baseline) on the training files' fragments, then test both and the
    right-branching tree on the held-out files' fragments, band by band. Returns the parser, the
    config with its vocabularies, and the result."""
    if steps < 1:
        raise ValueError(f"parsing: training needs at least one step, got {steps}")
    if len(config.train_share) != len(config.bands):
        raise ValueError(f"parsing: {len(config.train_share)} training shares for {len(config.bands)} bands")
    data = load_data(config, seed) if data is None else data
    pools: list[list[Fragment]] = [[] for _ in config.bands]
    for fragment in data.train:
        index = _band_of(fragment, config.bands)
        if index is not None and _fits(fragment.tree, config.bands[index]):
            pools[index].append(fragment)
    shares = np.array([share if pool else 0.0 for share, pool in zip(config.train_share, pools, strict=True)])
    if not shares.sum():
        raise ValueError("parsing: no training fragment in the bands")
    config = _with_vocabularies(config, data.train)
    log(
        f"{len(data.train)} training fragments ("
        + ", ".join(f"{len(p)} of {b.low}-{b.high} tokens" for p, b in zip(pools, config.bands, strict=True))
        + f"); {len(config.kinds)} token kinds, {len(config.labels)} labels"
    )

    start = time.perf_counter()
    parser = init_parser(jax.random.PRNGKey(seed), config)
    tx = warmup_cosine(
        steps, config.learning_rate, warmup=config.warmup, clip=config.clip, weight_decay=config.weight_decay
    )
    state = tx.init(parser)

    @jax.jit
    def step(parser: Parser, state: optax.OptState, batch: Batch) -> tuple[Parser, optax.OptState, Array]:
        value, grads = jax.value_and_grad(loss)(parser, batch)
        updates, state = tx.update(grads, state, parser)
        return optax.apply_updates(parser, updates), state, value

    rng = np.random.default_rng(seed)
    losses = []
    bar = tqdm(range(steps), desc="parser", unit="step", disable=not progress, mininterval=1.0)
    for _ in bar:
        b = int(rng.choice(len(config.bands), p=shares / shares.sum()))
        chosen = rng.choice(len(pools[b]), config.bands[b].batch)
        batch = _batch([pools[b][i] for i in chosen], rng, config, config.bands[b])
        parser, state, value = step(parser, state, batch)
        losses.append(value)
        if len(losses) % 50 == 0:
            bar.set_postfix(loss=f"{float(value):.3f}")
    seconds = time.perf_counter() - start

    seq2seq_steps = steps if seq2seq_steps is None else seq2seq_steps
    baseline, seq2seq_seconds = None, 0.0
    if seq2seq_steps:
        began = time.perf_counter()
        trainable = [f for pool in pools for f in pool if len(f.tokens) <= config.seq2seq_tokens]
        alike = seq2seq.Config(
            width=config.width,
            hidden=config.hidden,
            heads=config.heads,
            head_features=config.head_features,
            encoder_layers=config.reader_layers,
            decoder_layers=config.builder_layers,
            batch=config.batch,
            learning_rate=config.learning_rate,
            warmup=config.warmup,
            weight_decay=config.weight_decay,
            clip=config.clip,
        )  # the tree parser's sizes and optimiser
        baseline = seq2seq.train(trainable, seq2seq_steps, config=alike, seed=seed, log=log)
        seq2seq_seconds = time.perf_counter() - began

    common = Counter(n.label for f in data.train for n in syntax.nodes(f.tree)).most_common(1)[0][0]
    root = Counter(f.tree.label for f in data.train).most_common(1)[0][0]
    results = []
    for band, fragments in zip(config.bands, data.test, strict=True):
        if not fragments:
            continue
        gold = [f.tree for f in fragments]
        began = time.perf_counter()
        parsed = parse(parser, config, fragments, band)
        decoding = time.perf_counter() - began
        began = time.perf_counter()
        baseline_trees = None if baseline is None else seq2seq.parse(baseline, fragments)
        baseline_decoding = time.perf_counter() - began
        sizes = np.array([len(f.tokens) for f in fragments])
        results.append(
            BandResult(
                band,
                (int(sizes.min()), int(np.median(sizes)), int(sizes.max())),
                syntax.score(parsed, gold),
                syntax.score([syntax.right_branching(len(f.tokens), root, common) for f in fragments], gold),
                None if baseline_trees is None else syntax.score(baseline_trees, gold),
                decoding,
                baseline_decoding,
            )
        )
    result = Result(
        float(losses[0]),
        float(losses[-1]),
        tuple(len(p) for p in pools),
        tuple(results),
        step._cache_size(),  # type: ignore[attr-defined]
        seconds,
        seq2seq_seconds,
    )
    return parser, config, result


def _with_vocabularies(config: Config, fragments: Sequence[Fragment]) -> Config:
    """``config`` with the token kinds and labels of the training fragments (an unknown one last)."""
    kinds = syntax.vocabulary(k for f in fragments for k in f.tokens)
    labels = syntax.vocabulary(n.label for f in fragments for n in syntax.nodes(f.tree))
    return Config(**{**asdict(config), "bands": config.bands, "kinds": tuple(kinds), "labels": tuple(labels)})


# Saving


def save(path: Path, parser: Parser, config: Config) -> None:
    """Write the parser's weights and its config (vocabularies included) to one ``.npz`` file."""
    arrays = {f"leaf_{i}": np.asarray(leaf) for i, leaf in enumerate(jax.tree_util.tree_leaves(parser))}
    description = json.dumps(asdict(config))
    np.savez(path, allow_pickle=False, config=np.asarray(description), **arrays)


def load(path: Path) -> tuple[Parser, Config]:
    """The parser and config ``save`` wrote to ``path``; a ValueError naming the file if it does not
    hold one."""
    try:
        with np.load(path, allow_pickle=False) as stored:
            raw = json.loads(str(stored["config"]))
            config = Config(
                **{**raw, "bands": tuple(Band(*b) for b in raw["bands"])}
                | {key: tuple(raw[key]) for key in ("train_share", "kinds", "labels")}
            )
            leaves = [stored[f"leaf_{i}"] for i in range(len(stored.files) - 1)]
    except (OSError, KeyError, ValueError, TypeError) as error:
        raise ValueError(f"parsing.load: {path} does not hold a saved parser ({error})") from error
    shapes = jax.eval_shape(lambda: init_parser(jax.random.PRNGKey(0), config))
    expected = jax.tree_util.tree_leaves(shapes)
    if [leaf.shape for leaf in leaves] != [s.shape for s in expected]:
        raise ValueError(f"parsing.load: the weights in {path} do not fit the parser its config describes")
    parser: Parser = jax.tree_util.tree_unflatten(
        jax.tree_util.tree_structure(shapes), [jnp.asarray(a) for a in leaves]
    )
    return parser, config


# The figure


def plot(fragment: Fragment, predicted: Node | None, path: Path) -> None:
    """Draw the kinds of the fragment's tokens under the predicted tree and Python's, side by side: a node is a
    bar over the tokens it covers, at its depth, with its label; a node of one tree that the other
    lacks (the same label over the same tokens) is drawn in orange. Saved to ``path``."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.patches import Rectangle

    trees = [("predicted" if predicted is not None else "predicted: malformed", predicted), ("Python's", fragment.tree)]
    spans = [syntax.labelled_spans(t) if t is not None else Counter() for _, t in trees]
    height = max(syntax.depth(t) for _, t in trees if t is not None)
    width = max(6.0, 0.42 * len(fragment.tokens))
    figure = Figure(figsize=(2 * width, 0.5 * height + 1.6))  # its own canvas: pyplot is never imported
    FigureCanvasAgg(figure)
    axes = [figure.add_subplot(1, 2, 1), figure.add_subplot(1, 2, 2)]
    for (title, tree), own, other, ax in zip(trees, spans, spans[::-1], axes, strict=True):
        for node, depth in _walk(tree) if tree is not None else ():
            first, last = node.span
            missing = other[(node.label, first, last)] < own[(node.label, first, last)]
            ax.add_patch(
                Rectangle(
                    (first - 0.45, -depth - 0.4), last - first + 0.9, 0.8,
                    color="tab:orange" if missing else "tab:blue", alpha=0.25,
                )
            )  # fmt: skip
            ax.text((first + last) / 2, -depth, node.label, ha="center", va="center", fontsize=7)
        ax.set_xticks(range(len(fragment.tokens)), fragment.tokens, rotation=90, fontsize=7)
        ax.set_xlim(-0.6, len(fragment.tokens) - 0.4)
        ax.set_ylim(-height + 0.4, 0.6)
        ax.set_yticks([])
        ax.set_title(f"{title}: {fragment.name}", fontsize=9)
    figure.tight_layout()
    figure.savefig(path, dpi=110)


# The table


def _lines(result: Result) -> Iterator[str]:
    yield f"loss {result.initial_loss:.3f} -> {result.final_loss:.3f}; trained on " + ", ".join(
        f"{n} fragments of {b.band.low}-{b.band.high} tokens"
        for n, b in zip(result.train_fragments, result.bands, strict=False)
    )
    yield (
        "| tokens (median) | fragments | parser: exact | F1 | malformed | s | right-branching: exact | F1 "
        "| seq2seq: exact | F1 | malformed | s |"
    )
    yield "|---|---|---|---|---|---|---|---|---|---|---|---|"
    for b in result.bands:
        s2s = b.seq2seq
        tail = (
            "| | | |"
            if s2s is None
            else f"{s2s.exact:.3f} | {s2s.f1:.3f} | {s2s.malformed} | {b.seq2seq_seconds:.0f} |"
        )
        yield (
            f"| {b.band.low}-{b.band.high} ({b.tokens[1]}) | {b.parser.trees} | {b.parser.exact:.3f} | "
            f"{b.parser.f1:.3f} | {b.parser.malformed} | {b.seconds:.0f} | {b.right_branching.exact:.3f} | "
            f"{b.right_branching.f1:.3f} | {tail}"
        )
    yield (
        f"parser trained in {result.seconds:.0f} s (the step compiled {result.compilations} times, once a band), "
        f"seq2seq in {result.seq2seq_seconds:.0f} s"
    )


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Train a transformer to parse Python: tokens to syntax trees.")
    parser.add_argument("--steps", type=int, default=STEPS, help="training steps (default: %(default)s)")
    parser.add_argument("--seq2seq-steps", type=int, help="the seq2seq baseline's steps (default: --steps; 0: none)")
    parser.add_argument("--train-fragments", type=int, default=Config.train_fragments, help="(default: %(default)s)")
    parser.add_argument(
        "--test-fragments", type=int, default=Config.test_fragments, help="a band (default: %(default)s)"
    )
    parser.add_argument("--seed", type=int, default=0, help="random seed (default: %(default)s)")
    parser.add_argument("--out", type=Path, default=Path("parser.npz"), help="the saved parser (default: %(default)s)")
    parser.add_argument("--figure", type=Path, help="draw a held-out fragment's trees to this file")
    args = parser.parse_args(argv)
    start = time.perf_counter()
    config = Config(train_fragments=args.train_fragments, test_fragments=args.test_fragments)
    data = load_data(config, args.seed)
    trained, config, result = train(args.steps, args.seed, config, data, args.seq2seq_steps)
    for line in _lines(result):
        print(line)
    save(args.out, trained, config)
    print(f"saved the parser to {args.out}")
    if args.figure is not None:
        fragment = next((f for f in data.test[0] if len(f.tokens) >= 20), data.test[0][0])
        plot(fragment, parse(trained, config, [fragment], config.bands[0])[0], args.figure)
        print(f"drew {fragment.name} to {args.figure}")
    print(f"in {time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main()
