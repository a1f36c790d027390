"""Helpers for ``Vec`` sequences: causal masks, sinusoidal positions, one-hot tokens.

These know the order of a sequence, so they live beside ``Vec``; the
transformer itself sees only structures.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jax.typing import ArrayLike, DTypeLike

from applicative.instances.vector import Vec
from applicative.protocols.kinds import M, N

__all__ = ["causal_mask", "one_hot", "sinusoidal_positions"]


def causal_mask(length: int, seq: type[N]) -> Vec[N, Vec[N, jax.Array]]:
    """mask[i][j] = (j <= i): query i sees keys up to itself (Vaswani et al.'s decoder mask)."""
    return Vec.from_array(jnp.tril(jnp.ones((length, length), bool)), seq, seq)


def sinusoidal_positions(
    length: int, seq: type[N], width: int, model: type[M], dtype: DTypeLike | None = None
) -> Vec[N, Vec[M, jax.Array]]:
    """PE[p, 2i] = sin(p / 10000^(2i/d)), PE[p, 2i+1] = cos(p / 10000^(2i/d)) (Vaswani et al.)."""
    position = np.arange(length)[:, None]
    frequency = 10000.0 ** (-(np.arange(width) // 2 * 2) / width)
    angle = position * frequency[None, :]
    table = np.where(np.arange(width) % 2 == 0, np.sin(angle), np.cos(angle))
    return Vec.from_array(jnp.asarray(table, dtype or jnp.result_type(float)), seq, model)


def one_hot(
    tokens: ArrayLike, seq: type[N], vocabulary: int, vocab: type[M], dtype: DTypeLike | None = None
) -> Vec[N, Vec[M, jax.Array]]:
    """The sequence of one-hot vectors of integer ``tokens``; out-of-range tokens raise."""
    tokens = jnp.asarray(tokens)
    if tokens.ndim != 1 or not jnp.issubdtype(tokens.dtype, jnp.integer):
        raise ValueError(f"one_hot: needs a 1-D integer array of tokens, got {tokens.dtype} {tokens.shape}")
    if not isinstance(tokens, jax.core.Tracer) and (tokens.size and (tokens.min() < 0 or tokens.max() >= vocabulary)):
        raise ValueError(f"one_hot: tokens must lie in [0, {vocabulary}), got [{tokens.min()}, {tokens.max()}]")
    return Vec.from_array(jax.nn.one_hot(tokens, vocabulary, dtype=dtype or jnp.result_type(float)), seq, vocab)
