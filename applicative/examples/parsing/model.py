"""The parser: a transformer that reads the tokens of a fragment (a ``Vec``) and builds its syntax tree (a
``DenseTree``), one level a round; its settings (``Config``, its bands of fragment sizes ``Band``) and its
teacher-forced loss.

    init_parser(key, config) -> Parser         the reader, the builder and the pointer's projections
    read(parser, inputs, length) -> Memory     a fragment's tokens to their states
    build(parser, memory, length, nodes)       one round on one tree: label logits and the pointer's scores
    rounds(parser, inputs, lengths, nodes)     ``read`` then ``build`` on a batch of fragments
    loss(parser, batch) -> scalar              cross entropy of the labels and the tags of a teacher-forced round

The parser (``Parser``):

- a reader, the generic encoder on the ``Vec`` of tokens (one-hot kinds, and sinusoidal features of
  their positions and of the bracket and block depths the tokenizer knows: ``batches.nesting``), gives
  every token a state: the memory;
- a builder, the generic decoder on the ``DenseTree`` of nodes built so far: a node's input is the
  memory at its first and last token, its depth and whether it covers its parent's span; its layers
  attend over the tree's nodes no deeper than itself (the mask ``depth[key] <= depth[query]``: depth is
  the builder's time, as position is a language model's) and across to the memory; its output is the
  node's label;
- a pointer: for every node and every token, three scores (``mul_mmt`` of the nodes' and the
  tokens' projections, a tree of sequences): whether the token is the node's own (``OWN``), begins one
  of its children (``BEGIN``) or continues one (``CONTINUE``).

Since no node sees a deeper one, a node's states are the same in every round of a decode from the
round that adds it on: the rounds of a decode are one teacher-forced pass over Python's whole tree,
every node's label and children trained at once (``loss``), as a language model trains every
position of a sequence at once.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax import Array

from applicative import DenseTree, DenseTreeOf, Dim, Vec, VecOf, as_vec, lift_a2, mul_mmt, record, to_array
from applicative.examples.common import Head, HeadFeature, Hidden, Model, Optimisation, template
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

__all__ = [
    "BEGIN",
    "CONTINUE",
    "DEPTH_FEATURES",
    "NESTING_FEATURES",
    "OWN",
    "POSITION_FEATURES",
    "Band",
    "Batch",
    "Config",
    "Nodes",
    "Parser",
    "build",
    "init_parser",
    "loss",
    "read",
    "rounds",
    "sinusoids",
]

OWN, BEGIN, CONTINUE = 0, 1, 2  # what a token is to a node: its own, the first of a child's, a later one of a child's
DEPTH_FEATURES = 16  # sinusoidal features of a node's depth
POSITION_FEATURES = 32  # sinusoidal features of a token's position
NESTING_FEATURES = 8  # sinusoidal features of a token's bracket depth, and as many of its block depth


class Token(Dim):
    """A token of a fragment: a position in the reader's sequence."""


class TokenIn(Dim):
    """An input feature of a token: its kind (one-hot), its position and its bracket and block depths
    (sinusoidal)."""


class NodeIn(Dim):
    """An input feature of a node: the memory at its first and last token, its depth, whether it
    covers its parent's span."""


class Label(Dim):
    """A node's label logit."""


class Tag(Dim):
    """What a token is to a node: own, begins a child, continues a child."""


class Pointer(Dim):
    """A feature of a node's or a token's projection for one tag's scores."""


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
    optimisation: Optimisation = field(default_factory=lambda: Optimisation(learning_rate=3e-3, warmup=50))
    # Nodes a token, at most (20,000 training fragments): 1.13 from 8 tokens, 0.96 from 33, 0.78 from 129.
    bands: tuple[Band, ...] = (Band(1, 32, 40), Band(33, 128, 128), Band(129, 512, 416, 8))
    train_share: tuple[float, ...] = (0.5, 0.4, 0.1)  # of the training steps, in each band
    train_fragments: int = 32_000  # of the training files, all bands (as many of 33-512 tokens as 20,000 from 8)
    per_file: int = 0  # training fragments of one file at most, drawn at random from its own; 0: all of them
    # Installed packages whose files train beside the standard library's: dependencies of the project (or of its
    # dependencies) whose code is annotated as code outside the standard library is (it annotates 0.8% of its
    # parameters, jax 43%, PIL and packaging 99%), none among the tests' (docs/parsing.md, "The data").
    train_packages: tuple[str, ...] = ("PIL", "absl", "contourpy", "hypothesis", "opt_einsum", "packaging", "pyparsing")
    test_fragments: int = 200  # drawn at random from every held-out file's, in each band
    seq2seq_tokens: int = 128  # the seq2seq baseline trains on fragments of at most this many tokens
    rounds: int = 40  # the most rounds of a decode: a tree of more levels is malformed
    kinds: tuple[str, ...] = ()  # token kinds, then labels: the vocabularies, set by ``train``
    labels: tuple[str, ...] = field(default=())

    def optimiser(self, steps: int) -> optax.GradientTransformation:
        """AdamW on a warm-up and a cosine decay over ``steps`` updates, after clipping: ``common.Optimisation``
        of these settings."""
        return self.optimisation.optimiser(steps)


def init_parser(key: Array, config: Config) -> Parser:
    """A parser for ``config``'s vocabularies of token kinds and labels."""
    options = AttentionOptions(
        heads=template(config.heads, Head),
        model=template(config.width, Model),
        head_features=template(config.head_features, HeadFeature),
    )
    model, hidden = options.model, template(config.hidden, Hidden)
    keys = jax.random.split(key, 4)
    reader: Reader = init_encoder(
        keys[0],
        options,
        inputs=template(len(config.kinds) + POSITION_FEATURES + 2 * NESTING_FEATURES, TokenIn),
        hidden=hidden,
        layers=config.reader_layers,
        outputs=None,
    )
    builder: Builder = init_decoder(
        keys[1],
        options,
        inputs=template(2 * config.width + DEPTH_FEATURES + 1, NodeIn),
        hidden=hidden,
        layers=config.builder_layers,
        outputs=template(len(config.labels), Label),
        source=model,
    )
    tags, pointer = template(3, Tag), template(config.pointer, Pointer)
    node_pointers, token_pointers = (
        as_vec(init_each(k, tags, lambda k: Linear.init(k, model, pointer))) for k in keys[2:]
    )
    return Parser(reader, builder, node_pointers, token_pointers)


def sinusoids(positions: np.ndarray, features: int) -> np.ndarray:
    """sin and cos of ``positions`` at ``features // 2`` geometric frequencies (Vaswani et al.'s), on
    the host, the sines first (``nn.sinusoidal_positions`` interleaves them, on the device)."""
    rates = 1.0 / 10_000 ** (np.arange(features // 2) / (features // 2))
    angles = positions[..., None] * rates
    return np.concatenate([np.sin(angles), np.cos(angles)], -1).astype(np.float32)


class Nodes(NamedTuple):
    """A tree being built, as arrays over its node slots (preorder, then padding): its layout, each
    node's first and last token, its depth, and its depth's and span-of-its-parent features."""

    layout: dyadic.Layout
    first: Array
    last: Array
    depth: Array
    extras: Array


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
    depths = tree.with_elements(nodes.depth)
    shallower = depths.fmap(lambda query: depths.fmap(lambda key: key <= query))  # DenseTree[DenseTree[bool]]
    builder = parser.builder
    h = builder.embed(tree)
    for i in range(len(builder.layers)):
        h = builder.layer(i)(h, shallower, memory, sees)  # the tree attends to its shallower nodes and the tokens
    if builder.norm is not None:
        h = h.fmap(builder.norm)
    labels = builder.unembed.each(h)  # DenseTree[Vec[Label]]
    scores = lift_a2(  # Vec[Tag, DenseTree[Vec[Token]]]: for each tag, node and token
        lambda node, token: mul_mmt(token, node),
        each_of(parser.node_pointers, h),
        each_of(parser.token_pointers, memory),
    )
    return to_array(labels), to_array(scores)


def rounds(parser: Parser, inputs: Array, lengths: Array, nodes: Nodes) -> tuple[Array, Array]:
    """``read`` then ``build`` on each fragment of a batch: label logits (batch, nodes, labels) and scores
    (batch, tags, nodes, tokens)."""

    def one(inputs: Array, length: Array, nodes: Nodes) -> tuple[Array, Array]:
        return build(parser, read(parser, inputs, length), length, nodes)

    labels, scores = jax.vmap(one)(inputs, lengths, nodes)
    return labels, scores


class Batch(NamedTuple):
    """Every round of a decode, teacher forced, for a batch of fragments: tokens, Python's trees, and
    targets: every node's label (-1 in padding) and what every token of its span is to it (-1 outside
    its span)."""

    inputs: Array
    lengths: Array
    nodes: Nodes
    labels: Array
    tags: Array


def loss(parser: Parser, batch: Batch) -> Array:
    """Cross entropy of the labels over every node, plus that of the tags over every node and its
    span's tokens, each a mean."""
    labels, scores = rounds(parser, batch.inputs, batch.lengths, batch.nodes)
    label_loss = optax.softmax_cross_entropy_with_integer_labels(labels, jnp.maximum(batch.labels, 0))
    tagged = jnp.moveaxis(scores, 1, -1)  # (batch, nodes, tokens, tags)
    tag_loss = optax.softmax_cross_entropy_with_integer_labels(tagged, jnp.maximum(batch.tags, 0).astype(jnp.int32))
    return _mean(label_loss, batch.labels >= 0) + _mean(tag_loss, batch.tags >= 0)


def _mean(values: Array, where: Array) -> Array:
    return jnp.sum(jnp.where(where, values, 0.0)) / jnp.maximum(jnp.sum(where), 1)
