"""Helpers for ``Vec`` sequences: causal and padding masks, sinusoidal positions, one-hot tokens.

They know the order of a ``Vec`` sequence, where the rest of ``nn`` sees only structures: the one
module of ``nn`` that imports a structure.

Masks hold one row per query, over the keys, and ``True`` means *may attend*
(as in ``jax.nn.dot_product_attention`` and ``torch.nn.functional.scaled_dot_product_attention``).
``torch.nn.MultiheadAttention``'s boolean ``attn_mask`` and ``key_padding_mask``
mean the opposite (True = may *not* attend): negate them when porting. Masks
combine with ``&`` on their arrays, ``Vec.from_array(to_array(a) & to_array(b), Seq, Seq)``.

Lengths, sizes and widths must be non-negative Python (or numpy) integers and tags proper subclasses
of ``Dim``; anything else raises an error naming the helper.
"""

from __future__ import annotations

from typing import Any, overload

import jax
import jax.numpy as jnp
import numpy as np
from jax.typing import ArrayLike, DTypeLike

from applicative.instances.vector import Vec
from applicative.protocols.kinds import M, N
from applicative.stacked import numeric

__all__ = ["causal_mask", "one_hot", "padding_mask", "sinusoidal_positions"]


def causal_mask(length: int, seq: type[N]) -> Vec[N, Vec[N, jax.Array]]:
    """mask[i][j] = (j <= i): query i sees keys up to itself (Vaswani et al.'s decoder mask)."""
    _count("causal_mask", "length", length)
    return Vec.from_array(jnp.tril(jnp.ones((length, length), bool)), seq, seq)


@overload
def padding_mask(length: ArrayLike, size: int, seq: type[N], /) -> Vec[N, Vec[N, jax.Array]]: ...
@overload
def padding_mask(
    length: ArrayLike, size: int, seq: type[N], query_size: int, query_seq: type[M], /
) -> Vec[M, Vec[N, jax.Array]]: ...
def padding_mask(
    length: ArrayLike, size: int, seq: type[N], query_size: int | None = None, query_seq: type[M] | None = None, /
) -> Vec[Any, Vec[N, jax.Array]]:
    """mask[i][j] = (j < length): every query sees the first ``length`` keys of a sequence of ``size``
    padded at its end, and no padding. The queries are the same sequence (self-attention), or
    ``query_size`` positions along ``query_seq`` (cross attention to a padded memory). ``length``
    may be traced (a batch of lengths under ``vmap``); a concrete one must lie in [0, size]."""
    _count("padding_mask", "size", size)
    if (query_size is None) != (query_seq is None):
        raise TypeError("padding_mask: query_size and query_seq come together (cross attention) or not at all")
    length = numeric(length, "padding_mask")
    if length.ndim != 0 or not jnp.issubdtype(length.dtype, jnp.integer):
        raise ValueError(f"padding_mask: length must be an integer scalar, got {length.dtype} {length.shape}")
    if not isinstance(length, jax.core.Tracer) and not 0 <= int(length) <= size:
        raise ValueError(f"padding_mask: length {int(length)} is outside [0, {size}] for {seq.__name__}")
    keep = jnp.arange(size) < length
    if query_size is None or query_seq is None:
        return Vec.from_array(jnp.broadcast_to(keep, (size, size)), seq, seq)
    _count("padding_mask", "query_size", query_size)
    return Vec.from_array(jnp.broadcast_to(keep, (query_size, size)), query_seq, seq)


def sinusoidal_positions(
    length: int, seq: type[N], width: int, model: type[M], dtype: DTypeLike | None = None
) -> Vec[N, Vec[M, jax.Array]]:
    """PE[p, 2i] = sin(p / 10000^(2i/d)), PE[p, 2i+1] = cos(p / 10000^(2i/d)) (Vaswani et al.), in a
    floating ``dtype`` (the default float if None; an integer dtype would truncate them)."""
    _count("sinusoidal_positions", "length", length)
    _count("sinusoidal_positions", "width", width)
    if dtype is not None and not jnp.issubdtype(dtype, jnp.floating):
        raise TypeError(f"sinusoidal_positions: dtype must be a floating type, got {jnp.dtype(dtype)}")
    position = np.arange(length)[:, None]
    frequency = 10000.0 ** (-(np.arange(width) // 2 * 2) / width)
    angle = position * frequency[None, :]
    table = np.where(np.arange(width) % 2 == 0, np.sin(angle), np.cos(angle))
    return Vec.from_array(jnp.asarray(table, dtype or jnp.result_type(float)), seq, model)


def one_hot(
    tokens: ArrayLike, seq: type[N], vocabulary: int, vocab: type[M], dtype: DTypeLike | None = None
) -> Vec[N, Vec[M, jax.Array]]:
    """The sequence of one-hot vectors of integer ``tokens``; out-of-range tokens raise."""
    _count("one_hot", "vocabulary", vocabulary)
    tokens = numeric(tokens, "one_hot")
    if tokens.ndim != 1 or not jnp.issubdtype(tokens.dtype, jnp.integer):
        raise ValueError(f"one_hot: needs a 1-D integer array of tokens, got {tokens.dtype} {tokens.shape}")
    if not isinstance(tokens, jax.core.Tracer) and (tokens.size and (tokens.min() < 0 or tokens.max() >= vocabulary)):
        raise ValueError(f"one_hot: tokens must lie in [0, {vocabulary}), got [{tokens.min()}, {tokens.max()}]")
    return Vec.from_array(jax.nn.one_hot(tokens, vocabulary, dtype=dtype or jnp.result_type(float)), seq, vocab)


def _count(what: str, name: str, value: object) -> None:
    """Raise unless ``value`` is a non-negative integer (a length, a size)."""
    if not isinstance(value, int | np.integer) or isinstance(value, bool):
        raise TypeError(f"{what}: {name} must be an integer, got {value!r}")
    if value < 0:
        raise ValueError(f"{what}: {name} must be non-negative, got {value}")
