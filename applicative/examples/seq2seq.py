"""The sequence-to-sequence baseline of the parsing example: the same transformer on ``Vec`` alone,
predicting the linearised tree.

A fragment's tree (``syntax.Node``) is written as a sequence of symbols, as Vinyals et al.'s
"Grammar as a foreign language" writes a parse (``linearise``): a node opens with its label as one
symbol (``"(Call"``), then come, in token order, the tokens it owns (each one ``"XX"``) and its
children, then ``")"``. The tokens themselves are not written: the source gives them, so every token
is one ``XX``, and ``delinearise`` reads the spans back from where the ``XX``s fall, or refuses a
malformed sequence (None).

The model is the library's ``EncoderDecoder`` on ``Vec`` sequences: the encoder reads the token
kinds (one-hot, sinusoidal positions, a padding mask), the decoder the symbols so far (the
linearised tree shifted right behind a start symbol; causal mask, cross attention masked to the
real tokens) and gives logits over the symbols: the open symbols of the training labels, ``")"``,
``"XX"`` and the end symbol. Its sizes are the tree parser's (``Config``). Position tables are not
parameters: they are laid on at each capacity (``with_positions``), so one trained model runs on
sources and targets of any length, and the weight decay never touches them.

``train`` draws batches of fragments of like lengths, padded to the fixed capacities of their length
bucket (a compiled step for each of a few buckets, where padding every batch to the longest
fragment's capacities cost several times the work); ``decode`` decodes greedily, batched, running
the encoder once per batch and the decoder, which has no cache of keys and values, on the smallest
power-of-two prefix of the target that holds the step (one compile per token capacity, target
capacity and prefix); ``parse`` delinearises what it decodes.

``python -m applicative.examples.parsing`` trains it beside the tree parser and scores both;
docs/parsing.md gives the results.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import NamedTuple, TypeVar

import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax import Array

from applicative import Dim, Vec, VecOf, to_array
from applicative.examples import syntax
from applicative.examples.syntax import Fragment, Node
from applicative.nn import (
    AttentionOptions,
    Decoder,
    Encoder,
    EncoderDecoder,
    causal_mask,
    init_decoder,
    init_encoder,
    one_hot,
    padding_mask,
    sinusoidal_positions,
)
from applicative.training import warmup_cosine

__all__ = [
    "CLOSE",
    "END",
    "START",
    "TOKEN",
    "Config",
    "Seq2Seq",
    "Seq2SeqModel",
    "decode",
    "decoding_compilations",
    "delinearise",
    "init_model",
    "linearise",
    "parse",
    "train",
    "with_positions",
]

TOKEN = "XX"  # a token, in the linearised tree
CLOSE = ")"  # the end of a node
END = "<end>"  # the end of the linearised tree: the decoder's last output
START = "<start>"  # the decoder's first input, never an output
# Symbols a fragment's linearised tree holds, at most, a token: 2 * nodes + tokens, Python's trees
# having at most 1.13 nodes a token (20,000 training fragments); a longer decoding is malformed.
ROW_SYMBOLS = 4
FIRST_PREFIX = 32  # the smallest prefix of the target the decoder runs on while decoding


class Token(Dim):
    """A position among a fragment's tokens: the encoder's sequence."""


class Kind(Dim):
    """A token kind: a one-hot input feature of the encoder."""


class Step(Dim):
    """A position in the linearised tree: the decoder's sequence."""


class Symbol(Dim):
    """A symbol of the linearised tree: a one-hot input of the decoder (the start symbol too) or an
    output logit (every symbol but the start)."""


class Model(Dim):
    """A feature of the model's states."""


class Hidden(Dim):
    """A feature inside the MLP."""


class Head(Dim):
    """An attention head."""


class HeadFeature(Dim):
    """A query, key or value feature of one head."""


N = TypeVar("N", bound=Dim)

Seq2SeqModel = EncoderDecoder[VecOf[Step], VecOf[Symbol], VecOf[Model], VecOf[Symbol]]


@dataclass(frozen=True)
class Config:
    """Model size and optimiser settings: the tree parser's."""

    width: int = 64
    hidden: int = 128
    heads: int = 4
    head_features: int = 16
    encoder_layers: int = 2
    decoder_layers: int = 2
    batch: int = 32
    learning_rate: float = 3e-3
    warmup: int = 50
    weight_decay: float = 1e-2
    clip: float = 1.0
    first_bucket: int = 64  # target positions of the shortest length bucket (``train``); 0: one bucket


class Seq2Seq(NamedTuple):
    """A trained model (without position tables: ``with_positions``) with what it reads and writes:
    ``kinds`` the token kinds' ids (``syntax.vocabulary`` of the training tokens, ``UNKNOWN`` for any
    other kind), ``symbols`` the output symbols by id (the open symbols of the training labels,
    ``CLOSE``, ``TOKEN``, ``END`` last; ``START``'s input id is ``len(symbols)``), the largest
    capacities it trained at (tokens; target positions, the start or end symbol included), each
    step's loss, taken before its update, and the seconds training took."""

    model: Seq2SeqModel
    kinds: dict[str, int]
    symbols: tuple[str, ...]
    token_capacity: int
    target_capacity: int
    losses: tuple[float, ...]
    seconds: float


# The linearised tree


def linearise(tree: Node, tokens: int) -> list[str]:
    """The symbols of ``tree`` over ``tokens`` tokens: node X is ``"(" + X.label`` (one symbol), then,
    in token order over its span, ``TOKEN`` for each token no child covers and each child's symbols,
    then ``CLOSE``. Every token is one ``TOKEN``: 2 * nodes + ``tokens`` symbols in all.

    A ValueError if the root does not span tokens 0 to ``tokens - 1``, or a child's span is empty,
    leaves its parent's or does not follow its elder sibling's."""
    if tree.span != (0, tokens - 1):
        raise ValueError(f"linearise: the root spans {tree.span}, not the {tokens} tokens (0, {tokens - 1})")
    symbols: list[str] = []

    def walk(node: Node) -> None:
        first, last = node.span
        symbols.append("(" + node.label)
        position = first  # the next token of the node not yet written
        for child in node.children:
            if not position <= child.span[0] <= child.span[1] <= last:
                raise ValueError(
                    f"linearise: {node.label} {node.span} has a child {child.label} {child.span} out of place"
                )
            symbols.extend([TOKEN] * (child.span[0] - position))
            walk(child)
            position = child.span[1] + 1
        symbols.extend([TOKEN] * (last + 1 - position))
        symbols.append(CLOSE)

    walk(tree)
    return symbols


def delinearise(symbols: Sequence[str], tokens: int) -> Node | None:
    """The tree whose linearisation (``linearise``) is ``symbols``, over ``tokens`` tokens; None (a
    malformed sequence) if its brackets do not balance, it is not exactly one root node, it holds
    other than ``tokens`` ``TOKEN``s, a node covers no token, or a symbol is none of an open symbol
    (``"("`` and a label), ``CLOSE`` and ``TOKEN``."""
    open_nodes: list[tuple[str, int, list[Node]]] = []  # label, first token, children so far
    position = 0  # the tokens read so far
    root: Node | None = None
    for symbol in symbols:
        if root is not None:
            return None  # a symbol after the root closed: a second root, or a stray one
        if symbol == TOKEN:
            if not open_nodes:
                return None  # a token outside every node
            position += 1
        elif symbol == CLOSE:
            if not open_nodes:
                return None
            label, first, children = open_nodes.pop()
            if position == first:
                return None  # a node that covers no token
            node = Node(label, (first, position - 1), tuple(children))
            if open_nodes:
                open_nodes[-1][2].append(node)
            else:
                root = node
        elif symbol.startswith("(") and len(symbol) > 1:
            open_nodes.append((symbol[1:], position, []))
        else:
            return None
    return root if root is not None and position == tokens else None


# The model


def _template(size: int, tag: type[N]) -> Vec[N, Array]:
    # float32 templates give float32 parameters, also under jax_enable_x64.
    return Vec.from_array(np.zeros(size, np.float32), tag)


def init_model(key: Array, config: Config, kinds: int, symbols: int) -> Seq2SeqModel:
    """An encoder-decoder over ``kinds`` token kinds and ``symbols`` output symbols (the decoder reads
    one more: the start symbol), without position tables (``with_positions`` lays them on)."""
    options = AttentionOptions(
        heads=_template(config.heads, Head),
        model=_template(config.width, Model),
        head_features=_template(config.head_features, HeadFeature),
    )
    encoder_key, decoder_key = jax.random.split(key)
    hidden = _template(config.hidden, Hidden)
    encoder = init_encoder(
        encoder_key, options, inputs=_template(kinds, Kind), hidden=hidden, layers=config.encoder_layers, outputs=None
    )
    decoder = init_decoder(
        decoder_key, options, inputs=_template(symbols + 1, Symbol), hidden=hidden, layers=config.decoder_layers,
        outputs=_template(symbols, Symbol), source=options.model,
    )  # fmt: skip
    model: Seq2SeqModel = EncoderDecoder(encoder, decoder)
    return model


def _sizes(model: Seq2SeqModel) -> tuple[int, int, int]:
    """The model's width, its token kinds and its decoder's input symbols (the start included), from
    its weights' shapes (static under ``jit``)."""
    width, kinds = to_array(model.encoder.embed.linear.weight).shape
    return width, kinds, to_array(model.decoder.embed.linear.weight).shape[1]


def with_positions(model: Seq2SeqModel, tokens: int, steps: int) -> Seq2SeqModel:
    """``model`` with fixed sinusoidal position tables of ``tokens`` source positions and ``steps``
    target positions (any it held replaced): the model that runs at those capacities."""
    return EncoderDecoder(_encoder_at(model, tokens), _decoder_at(model, steps))


def _encoder_at(model: Seq2SeqModel, tokens: int) -> Encoder[VecOf[Token], VecOf[Kind], VecOf[Model], None]:
    """The model's encoder with a sinusoidal table of ``tokens`` positions."""
    width, _, _ = _sizes(model)
    table = sinusoidal_positions(tokens, Token, width, Model, jnp.float32)
    encoder = model.encoder
    return dataclasses.replace(encoder, embed=dataclasses.replace(encoder.embed, positions=table, learned=False))


def _decoder_at(
    model: Seq2SeqModel, steps: int
) -> Decoder[VecOf[Step], VecOf[Symbol], VecOf[Model], VecOf[Model], VecOf[Symbol]]:
    """The model's decoder with a sinusoidal table of ``steps`` positions."""
    width, _, _ = _sizes(model)
    table = sinusoidal_positions(steps, Step, width, Model, jnp.float32)
    decoder = model.decoder
    return dataclasses.replace(decoder, embed=dataclasses.replace(decoder.embed, positions=table, learned=False))


def _logits(model: Seq2SeqModel, sources: Array, lengths: Array, inputs: Array) -> Array:
    """The (batch, steps, symbols) logits of a batch: token ids ``sources`` (batch, tokens) of which the
    first ``lengths`` (batch,) are real, and the decoder's input ids ``inputs`` (batch, steps)."""
    tokens, steps = sources.shape[1], inputs.shape[1]
    _, kinds, symbols = _sizes(model)
    positioned = with_positions(model, tokens, steps)

    def one(source: Array, length: Array, target: Array) -> Array:
        return to_array(
            positioned(
                one_hot(source, Token, kinds, Kind, jnp.float32),
                one_hot(target, Step, symbols, Symbol, jnp.float32),
                causal_mask(steps, Step),  # a real query sees real keys only: no padding mask needed
                padding_mask(length, tokens, Token),
                padding_mask(length, tokens, Token, steps, Step),
            )
        )

    return jax.vmap(one)(sources, lengths, inputs)


def _loss(
    model: Seq2SeqModel, sources: Array, lengths: Array, inputs: Array, outputs: Array, target_lengths: Array
) -> Array:
    """Mean cross entropy over the real target positions (the first ``target_lengths`` of each row)."""
    per_step = optax.softmax_cross_entropy_with_integer_labels(_logits(model, sources, lengths, inputs), outputs)
    real = jnp.arange(inputs.shape[1]) < target_lengths[:, None]
    return jnp.sum(jnp.where(real, per_step, 0.0)) / jnp.sum(real)


# Data


def _round_up(n: int, multiple: int) -> int:
    return -(-n // multiple) * multiple


def _sources(fragments: Sequence[Fragment], kinds: dict[str, int], capacity: int) -> tuple[np.ndarray, np.ndarray]:
    """The fragments' token ids (fragments, ``capacity``), padded with 0, and their lengths."""
    ids = np.zeros((len(fragments), capacity), np.int32)
    for i, fragment in enumerate(fragments):
        ids[i, : len(fragment.tokens)] = syntax.ids(fragment.tokens, kinds)
    return ids, np.array([len(f.tokens) for f in fragments], np.int32)


def _targets(
    fragments: Sequence[Fragment], symbols: Sequence[str], capacity: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The decoder's inputs (``START``, then the linearised tree) and outputs (the linearised tree,
    then ``END``), both (fragments, ``capacity``) padded with 0, and their lengths. A KeyError for a
    label outside ``symbols``."""
    index = {symbol: i for i, symbol in enumerate(symbols)}
    inputs = np.zeros((len(fragments), capacity), np.int32)
    outputs = np.zeros((len(fragments), capacity), np.int32)
    lengths = np.zeros(len(fragments), np.int32)
    for i, fragment in enumerate(fragments):
        written = [index[s] for s in linearise(fragment.tree, len(fragment.tokens))]
        inputs[i, : len(written) + 1] = [len(symbols), *written]
        outputs[i, : len(written) + 1] = [*written, index[END]]
        lengths[i] = len(written) + 1
    return inputs, outputs, lengths


# Training


def _bucket_bounds(capacity: int, first: int) -> list[int]:
    """The target capacities of the length buckets: ``first``, twice that, ... while under two thirds
    of ``capacity``, then ``capacity`` (one bucket if ``first`` is 0)."""
    bounds, bound = [], first
    while bound > 0 and 3 * bound < 2 * capacity:
        bounds.append(bound)
        bound *= 2
    return [*bounds, capacity]


def train(
    fragments: Sequence[Fragment],
    steps: int,
    *,
    config: Config = Config(),
    seed: int = 0,
    log: Callable[[str], None] = print,
    log_every: int = 50,
) -> Seq2Seq:
    """Train on ``steps`` batches of ``config.batch`` fragments drawn from ``fragments``, and log the
    loss every ``log_every`` steps. The vocabularies are the fragments' token kinds and labels.

    The fragments fall into length buckets by their targets (the linearised tree and the end symbol:
    ``_bucket_bounds`` of the longest rounded up to a multiple of 8, from ``config.first_bucket``
    positions), each padded to fixed capacities: its bound, and its longest fragment's tokens rounded
    up to a multiple of 8. A step draws a bucket with the probability of its share of the fragments,
    then a batch uniformly (with replacement) from it, so every fragment is as likely to be drawn,
    and the step compiles once per bucket. A ValueError for no fragments or no steps."""
    if not fragments or steps < 1:
        raise ValueError(f"seq2seq: needs fragments and steps, got {len(fragments)} fragments and {steps} steps")
    start = time.perf_counter()
    kinds = syntax.vocabulary(k for f in fragments for k in f.tokens)
    labels = list(syntax.vocabulary(n.label for f in fragments for n in syntax.nodes(f.tree)))
    symbols = (*("(" + label for label in labels if label != syntax.UNKNOWN), CLOSE, TOKEN, END)
    sizes = [2 * sum(1 for _ in syntax.nodes(f.tree)) + len(f.tokens) + 1 for f in fragments]
    buckets: list[tuple[np.ndarray, ...]] = []  # sources, lengths, inputs, outputs, target lengths
    low = 0
    for bound in _bucket_bounds(_round_up(max(sizes), 8), config.first_bucket):
        members = [f for f, size in zip(fragments, sizes, strict=True) if low < size <= bound]
        low = bound
        if members:
            tokens = _round_up(max(len(f.tokens) for f in members), 8)
            buckets.append((*_sources(members, kinds, tokens), *_targets(members, symbols, bound)))
    shares = np.array([len(bucket[1]) for bucket in buckets]) / len(fragments)
    described = ", ".join(f"{len(b[1])} of {b[0].shape[1]} tokens x {b[2].shape[1]}" for b in buckets)
    log(f"{len(fragments)} fragments, {len(kinds)} token kinds, {len(symbols)} symbols; buckets {described}")

    model = init_model(jax.random.key(seed), config, len(kinds), len(symbols))
    tx = warmup_cosine(
        steps, config.learning_rate, warmup=config.warmup, clip=config.clip, weight_decay=config.weight_decay
    )
    state = tx.init(model)

    @jax.jit
    def step(
        model: Seq2SeqModel, state: optax.OptState, batch: tuple[Array, ...]
    ) -> tuple[Seq2SeqModel, optax.OptState, Array]:
        value, grads = jax.value_and_grad(_loss)(model, *batch)
        updates, state = tx.update(grads, state, model)
        return optax.apply_updates(model, updates), state, value

    rng = np.random.default_rng(seed)
    losses, compiled = [], set()
    began = time.perf_counter()
    for i in range(1, steps + 1):
        bucket = buckets[rng.choice(len(buckets), p=shares)]
        chosen = rng.integers(0, len(bucket[1]), config.batch)
        took = time.perf_counter()
        model, state, value = step(model, state, tuple(jnp.asarray(a[chosen]) for a in bucket))
        losses.append(value)
        if bucket[2].shape[1] not in compiled:
            compiled.add(bucket[2].shape[1])
            value.block_until_ready()
            log(f"compiled the step for {bucket[2].shape[1]} target positions in {time.perf_counter() - took:.1f} s")
        if i % log_every == 0 or i == steps:
            log(f"step {i:5d}  loss {float(value):.4f}  ({time.perf_counter() - began:.0f} s)")
    history = tuple(float(v) for v in losses)
    capacities = max(b[0].shape[1] for b in buckets), buckets[-1][2].shape[1]
    return Seq2Seq(model, kinds, symbols, *capacities, history, time.perf_counter() - start)


# Greedy decoding


@jax.jit
def _encode(model: Seq2SeqModel, sources: Array, lengths: Array) -> Array:
    """The encoder's states (batch, tokens, width) of token ids ``sources`` (batch, tokens), the first
    ``lengths`` (batch,) of each row real."""
    tokens = sources.shape[1]
    _, kinds, _ = _sizes(model)
    encoder = _encoder_at(model, tokens)

    def one(source: Array, length: Array) -> Array:
        x = one_hot(source, Token, kinds, Kind, jnp.float32)
        return to_array(encoder.encode(x, padding_mask(length, tokens, Token)))

    return jax.vmap(one)(sources, lengths)


class _Decoding(NamedTuple):
    """Where a batch's greedy decoding stands: ``sequence`` (batch, capacity) the decoder's inputs (the
    start symbol at 0, output t at t + 1), whether each row is ``done``, how many symbols it has
    ``written`` (its result: up to its end symbol, or through the symbol that made it malformed),
    the ``depth`` of open nodes and the ``tokens`` (``TOKEN``s) it wrote, and the next step ``t``."""

    sequence: Array
    done: Array
    written: Array
    depth: Array
    tokens: Array
    t: Array


@partial(jax.jit, static_argnames="prefix")
def _extend(
    model: Seq2SeqModel, memory: Array, lengths: Array, state: _Decoding, stop: Array, check: Array, *, prefix: int
) -> _Decoding:
    """Greedy steps from ``state.t`` until ``stop`` or until every row is done: step t runs the
    decoder on the first ``prefix`` (> t) positions of the sequence and writes its argmax into
    position t + 1. A row is done once it writes the end symbol or, if ``check``, a symbol that makes
    it malformed whatever follows: a token outside every node (none open, or more ``TOKEN``s than its
    ``lengths``), a close with no node open, anything after its root closed, or more than
    ``ROW_SYMBOLS`` symbols a token."""
    tokens = memory.shape[1]
    _, _, symbols = _sizes(model)
    decoder = _decoder_at(model, prefix)
    end, token, close = symbols - 2, symbols - 3, symbols - 4  # the last outputs; the start is an input only

    def logits(states: Array, length: Array, row: Array, t: Array) -> Array:
        out = decoder(
            one_hot(row[:prefix], Step, symbols, Symbol, jnp.float32),
            causal_mask(prefix, Step),
            Vec.from_array(states, Token, Model),
            padding_mask(length, tokens, Token, prefix, Step),
        )
        return to_array(out)[t]

    def going(s: _Decoding) -> Array:
        return (s.t < stop) & ~jnp.all(s.done)

    def advance(s: _Decoding) -> _Decoding:
        pick = jax.vmap(logits, (0, 0, 0, None))(memory, lengths, s.sequence, s.t).argmax(-1)
        pick = pick.astype(s.sequence.dtype)
        depth = s.depth + (pick < close) - (pick == close)
        counted = s.tokens + (pick == token)
        after_root = (s.depth == 0) & (s.t > 0)
        malformed = after_root | (depth < 0) | (counted > lengths) | ((pick == token) & (s.depth == 0))
        malformed |= s.t + 2 > ROW_SYMBOLS * lengths + 2  # longer than a tree of its tokens (``ROW_SYMBOLS``)
        malformed &= check
        stops = ~s.done & ((pick == end) | malformed)
        return _Decoding(
            s.sequence.at[:, s.t + 1].set(pick),
            s.done | stops,
            jnp.where(stops, s.t + (pick != end), s.written),
            depth,
            counted,
            s.t + 1,
        )

    return jax.lax.while_loop(going, advance, state)


def decoding_compilations() -> int:
    """How many decoding functions have compiled so far in this process: an encoder per batch size
    and token capacity, and a decoder per batch size, token capacity, target capacity and prefix."""
    return int(_encode._cache_size() + _extend._cache_size())  # type: ignore[attr-defined]


def decode(
    model: Seq2Seq,
    fragments: Sequence[Fragment],
    *,
    batch: int = 32,
    max_symbols: int | None = None,
    stop_malformed: bool = True,
) -> list[list[str]]:
    """The greedy decoding of each fragment's linearised tree, in the fragments' order: its symbols
    before the first ``END``; or, with ``stop_malformed``, where a symbol made it malformed whatever
    would follow (see ``_extend``), through that symbol; or all ``max_symbols`` symbols it decoded.
    (What ``stop_malformed`` cuts short delinearises to None either way.) ``max_symbols``
    defaults to 3 * the token capacity + 2 (a tree holds 2 * nodes + tokens symbols), the token
    capacity being the longest fragment's tokens rounded up to a multiple of 16.

    Fragments run in batches of ``batch``, sorted by length (the last batch filled with rows that
    start done); a batch stops at the step where each of its rows is done, or at ``max_symbols``.
    The encoder runs once per batch; the decoder on the prefix of the target, a power of two from
    ``FIRST_PREFIX``, that holds the step. A ValueError for ``batch`` or ``max_symbols`` below 1."""
    if batch < 1 or (max_symbols is not None and max_symbols < 1):
        raise ValueError(f"seq2seq.decode: batch and max_symbols must be positive, got {batch} and {max_symbols}")
    if not fragments:
        return []
    tokens = _round_up(max(len(f.tokens) for f in fragments), 16)
    cap = max_symbols if max_symbols is not None else 3 * tokens + 2
    capacity = FIRST_PREFIX
    while capacity < cap + 1:
        capacity *= 2
    prefixes = [FIRST_PREFIX * 2**k for k in range(int(math.log2(capacity // FIRST_PREFIX)) + 1)]
    order = sorted(range(len(fragments)), key=lambda i: len(fragments[i].tokens))
    sources, lengths = _sources(fragments, model.kinds, tokens)
    decoded: dict[int, list[str]] = {}
    for chunk in (order[i : i + batch] for i in range(0, len(order), batch)):
        rows = np.array([*chunk, *[chunk[0]] * (batch - len(chunk))])
        memory = _encode(model.model, jnp.asarray(sources[rows]), jnp.asarray(lengths[rows]))
        zeros = jnp.zeros(batch, jnp.int32)
        state = _Decoding(
            jnp.zeros((batch, capacity), jnp.int32).at[:, 0].set(len(model.symbols)),
            jnp.asarray(np.arange(batch) >= len(chunk)),
            jnp.full(batch, cap, jnp.int32),
            zeros,
            zeros,
            jnp.asarray(0, jnp.int32),
        )
        for prefix in prefixes:
            if int(state.t) >= cap or bool(state.done.all()):
                break
            stop = jnp.asarray(min(prefix, cap), jnp.int32)
            check = jnp.asarray(stop_malformed)
            state = _extend(model.model, memory, jnp.asarray(lengths[rows]), state, stop, check, prefix=prefix)
        sequence, written = np.asarray(state.sequence), np.asarray(state.written)
        for row, i in enumerate(chunk):
            decoded[i] = [model.symbols[s] for s in sequence[row, 1 : 1 + written[row]]]
    return [decoded[i] for i in range(len(fragments))]


def parse(
    model: Seq2Seq, fragments: Sequence[Fragment], *, batch: int = 32, max_symbols: int | None = None
) -> list[Node | None]:
    """Each fragment's tree as the model decodes it (``decode``) and ``delinearise`` reads it, in the
    fragments' order; None where what it decoded is malformed. One entry per fragment, always."""
    decoded = decode(model, fragments, batch=batch, max_symbols=max_symbols)
    return [delinearise(symbols, len(f.tokens)) for symbols, f in zip(decoded, fragments, strict=True)]
