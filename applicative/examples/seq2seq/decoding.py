"""Greedy decoding of the seq2seq baseline, batched: the linearised tree a trained model writes for each
fragment, and the tree it reads back to.

    decode(model, fragments)   each fragment's decoded symbols, stopped at ``END`` or where they became malformed
    parse(model, fragments)    each fragment's tree (``delinearise``), or None where what it decoded is malformed
    decoding_compilations()    how many decoding functions this process has compiled

A batch runs the encoder once and the decoder, which has no cache of keys and values, on the smallest
power-of-two prefix of the target that holds the step (from ``FIRST_PREFIX``): one compile per batch size,
token capacity, target capacity and prefix.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import Array

from applicative import Vec, to_array
from applicative.examples.common import Model
from applicative.examples.seq2seq.batches import round_up, sources_of
from applicative.examples.seq2seq.linearise import delinearise
from applicative.examples.seq2seq.model import (
    Kind,
    Seq2Seq,
    Seq2SeqModel,
    Step,
    Symbol,
    Token,
    decoder_at,
    encoder_at,
    sizes,
)
from applicative.examples.syntax import Fragment, Node
from applicative.nn import causal_mask, one_hot, padding_mask

__all__ = ["FIRST_PREFIX", "ROW_SYMBOLS", "decode", "decoding_compilations", "parse"]

# Symbols a fragment's linearised tree holds, at most, a token: 2 * nodes + tokens, Python's trees
# having at most 1.13 nodes a token (20,000 training fragments); a longer decoding is malformed.
ROW_SYMBOLS = 4
FIRST_PREFIX = 32  # the smallest prefix of the target the decoder runs on while decoding


@jax.jit
def _encode(model: Seq2SeqModel, sources: Array, lengths: Array) -> Array:
    """The encoder's states (batch, tokens, width) of token ids ``sources`` (batch, tokens), the first
    ``lengths`` (batch,) of each row real."""
    tokens = sources.shape[1]
    _, kinds, _ = sizes(model)
    encoder = encoder_at(model, tokens)

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
    _, _, symbols = sizes(model)
    decoder = decoder_at(model, prefix)
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
    tokens = round_up(max(len(f.tokens) for f in fragments), 16)
    cap = max_symbols if max_symbols is not None else 3 * tokens + 2
    capacity = FIRST_PREFIX
    while capacity < cap + 1:
        capacity *= 2
    prefixes = [FIRST_PREFIX * 2**k for k in range(int(math.log2(capacity // FIRST_PREFIX)) + 1)]
    order = sorted(range(len(fragments)), key=lambda i: len(fragments[i].tokens))
    sources, lengths = sources_of(fragments, model.kinds, tokens)
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
