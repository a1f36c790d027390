"""Attention's dense formula: softmax attention on coordinates, where the keys' measure is a weight per
position, the scores materialised or in chunks of queries (memory linear in the keys).

Keys and values on a structure F whose every axis is ``nodal`` (a Vec, a DenseTree, a Compose of them:
the coordinates are values at positions, position j weighing w_j, its Gram matrix's diagonal; 1 for a
Vec, 2^-depth for a tree's leaf, 0 for its padding) turn the generic definition, a softmax whose sum
is the counit and a ``mul_mm`` contracted through the Gram matrix,

    attention(q, k, v)_i = sum_j w_j e_ij v_j / sum_j w_j e_ij,     e_ij = exp(q_i . k_j / sqrt(d_k)),

into an ordinary softmax with the log-weight as a bias on each key:

    attention(q, k, v)_i = sum_j softmax_j(q_i . k_j / sqrt(d_k) + log w_j) v_j,

with masked keys and padding (w_j = 0) at -inf, and a row with no key left 0, as the generic definition
gives. The queries' structure must be nodal too (the softmax runs row by row through its ``fmap``,
which there is per coordinate); the features of queries and keys (H) and of values (G) are any
``Dense`` levels of scalars (q . k contracts through H's Gram matrix). Anything else, or
``generic_only()``, and ``attention`` takes the generic definition; a ``Cheb`` of keys, whose softmax
samples the function, is never nodal.

``chunk`` rows of queries at a time (``jax.lax.map``), each under ``jax.checkpoint``: a chunk's softmax
is over every key (no running maximum needed), and the backward pass recomputes a chunk's scores
instead of storing them, so the temporaries are chunk x keys, never queries x keys, forward and
backward, with JAX's own gradients.

Where the backend has a fused attention kernel for the operands' type (cuDNN's flash attention on an
NVIDIA GPU, for bfloat16 and float16: ``FUSED``), ``jax.nn.dot_product_attention`` computes the same
(``fused_attention``), in memory linear in the keys and without materialising the scores, whatever the
chunk asked for. The log-weights ride in one more feature, so that the kernel needs no bias of queries
x keys (q'_i = (q_i / sqrt(d_k), 1), k'_j = (k_j, log w_j), padding's -inf a large negative), features
are zero-padded to a multiple of 8 (values too: the kernel takes values of the keys' width), a mask is
the kernel's mask, and a row with no key left is set to 0 after. Operands or a device the kernel refuses
as it is traced (its sizes, a GPU older than it supports) keep the formula above, and so does float32 (a
GPU's default too): no fused kernel takes it.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp

from applicative.fast_paths import USE_FAST_PATHS, Level, coordinates, fold_gram, log_taken, shaped

__all__ = ["FUSED", "dense_attention", "fused_attention", "fused_implementation"]

FUSED: dict[str, tuple[str, tuple[str, ...]]] = {"gpu": ("cudnn", ("bfloat16", "float16"))}
"""The backends (``jax.default_backend()``) whose ``jax.nn.dot_product_attention`` has a fused kernel:
its ``implementation``, and the operand types it takes."""


def dense_attention(
    queries: object,
    keys: object,
    values: object,
    mask: object | None,
    d_k: jax.Array,
    chunk: Callable[[int, int], int | None],
) -> Any | None:
    """``softmax(score(queries, keys) / sqrt(d_k)) values`` by the dense formula above, ``chunk(queries,
    keys)`` rows of queries at a time (None: all at once); None where it does not apply."""
    if not USE_FAST_PATHS.get():
        return None
    query_view, key_view, value_view = (coordinates("attention", x, 2) for x in (queries, keys, values))
    if query_view is None or key_view is None or value_view is None:
        return None
    (q, (i, h), q_shells), (k, (f, h_keys), _), (v, (f_values, _), v_shells) = query_view, key_view, value_view
    if not (_nodal(i) and _nodal(f)) or h != h_keys or f != f_values:
        return None  # not a weight per position, or levels that the generic definition refines or names
    keep = None
    if mask is not None:
        if (mask_view := coordinates("attention", mask, 2)) is None or mask_view[1] != [i, f]:
            return None
        keep = jnp.reshape(mask_view[0], (_size(i), _size(f))).astype(bool)
    q = jnp.reshape(fold_gram(q, h, len(i)), (_size(i), _size(h)))
    k = jnp.reshape(k, (_size(f), _size(h)))
    v_features = v.shape[len(f) :]
    rows = chunk(_size(i), _size(f))
    out = softmax_attention(q, k, jnp.reshape(v, (_size(f), -1)), _log_weights(f, q.dtype), keep, d_k, rows)
    log_taken("attention")
    return shaped(jnp.reshape(out, (*(axis.size for axis in i), *v_features)), [q_shells[0], v_shells[1]])


def softmax_attention(
    q: jax.Array,
    k: jax.Array,
    v: jax.Array,
    bias: jax.Array | None,
    keep: jax.Array | None,
    d_k: jax.Array,
    chunk: int | None,
) -> jax.Array:
    """softmax(q k^T / sqrt(d_k) + bias, masked where not ``keep``) v on arrays: queries (n, h), keys
    (m, h), values (m, g), a bias (m,) or None, a mask (n, m) or None; (n, g), ``chunk`` rows of
    queries at a time (None: all at once)."""
    factor = (1.0 / jnp.sqrt(d_k)).astype(q.dtype)
    if (implementation := fused_implementation(q.dtype)) is not None:
        try:
            return fused_attention(q, k, v, bias, keep, factor, implementation)
        except (NotImplementedError, ValueError, RuntimeError):
            pass  # the kernel refuses these operands or this device (its checks, as it is traced): the formula

    def rows(q: jax.Array, keep: jax.Array | None) -> jax.Array:
        s = jnp.einsum("nh,mh->nm", q, k) * factor
        if bias is None and keep is None:
            # Every key weighs 1 and is seen: the standard softmax, jax.nn.softmax's form, which XLA's
            # fusions match (jaxlib 0.12's CPU backend computes scores to output in one kernel, where
            # the guarded form below takes seven; a guard between a row's reduction and its use, or
            # the division after the product with the values, is not a softmax to XLA's GPU fusion).
            return jnp.einsum("nm,mg->ng", jax.nn.softmax(s, axis=-1), v)
        if bias is not None:
            s = s + bias
        if keep is not None:
            s = jnp.where(keep, s, -jnp.inf)
        # Any shift gives the same softmax; the row's largest keeps exp bounded (no key left: none).
        top = jax.lax.stop_gradient(jnp.max(s, axis=-1, keepdims=True))
        e = jnp.exp(s - jnp.where(jnp.isfinite(top), top, 0.0))
        total = jnp.sum(e, axis=-1, keepdims=True)
        return jnp.einsum("nm,mg->ng", e, v) / jnp.where(total > 0, total, 1.0)

    n = q.shape[0]
    if chunk is None or n <= chunk:
        return rows(q, keep)
    pad = -n % chunk

    def chunks(a: jax.Array) -> jax.Array:
        # Padded by concatenation: jaxlib 0.9.0's eager float64 pad of 8 rows by 1 corrupts the heap.
        padded = jnp.concatenate([a, jnp.zeros((pad, a.shape[1]), a.dtype)]) if pad else a
        return padded.reshape(-1, chunk, a.shape[1])

    out: jax.Array = jax.lax.map(
        jax.checkpoint(lambda xs: rows(*xs)), (chunks(q), None if keep is None else chunks(keep))
    )
    return out.reshape(-1, v.shape[1])[:n]


def fused_implementation(dtype: Any) -> str | None:
    """The ``implementation`` of ``jax.nn.dot_product_attention`` that is a fused kernel for operands of
    ``dtype`` on the default backend (``FUSED``), else None."""
    implementation, dtypes = FUSED.get(jax.default_backend(), ("", ()))
    return implementation if jnp.dtype(dtype).name in dtypes else None


def fused_attention(
    q: jax.Array,
    k: jax.Array,
    v: jax.Array,
    bias: jax.Array | None,
    keep: jax.Array | None,
    factor: jax.Array,
    implementation: str | None,
) -> jax.Array:
    """``softmax_attention``'s result (``factor`` = 1 / sqrt(d_k)) by ``jax.nn.dot_product_attention``
    of this ``implementation`` ("cudnn", "xla" or None: the module's docstring): the bias as one more
    feature, features zero-padded to a multiple of 8, a row with no key left 0."""
    n, g = q.shape[0], v.shape[1]
    q = q * factor
    seen = None if keep is None else jnp.any(keep, axis=-1)
    if bias is not None:
        finite = jnp.isfinite(bias)
        lowest = jnp.finfo(q.dtype).min  # type: ignore[no-untyped-call]
        floor = jnp.asarray(lowest / 4, q.dtype)  # exp(floor + a score) is 0, and no overflow
        q = jnp.concatenate([q, jnp.ones((n, 1), q.dtype)], axis=1)
        k = jnp.concatenate([k, jnp.where(finite, bias, floor).astype(k.dtype)[:, None]], axis=1)
        any_finite = jnp.any(finite) if keep is None else jnp.any(keep & finite, axis=-1)
        seen = any_finite if seen is None else seen & any_finite
    width = -(-max(q.shape[1], g) // 8) * 8

    def padded(a: jax.Array) -> jax.Array:
        return jnp.pad(a, ((0, 0), (0, width - a.shape[1])))[None, :, None, :]  # (batch, length, head, features)

    mask = None if keep is None else keep[None, None]
    out = jax.nn.dot_product_attention(
        padded(q), padded(k), padded(v), mask=mask, scale=1.0, implementation=implementation  # type: ignore[arg-type]
    )[0, :, 0, :g]
    return out if seen is None else jnp.where(jnp.reshape(seen, (-1, 1)), out, jnp.zeros((), out.dtype))


def _nodal(level: Level) -> bool:
    return all(axis.nodal for axis in level)


def _size(level: Level) -> int:
    return math.prod(axis.size for axis in level)


def _log_weights(level: Level, dtype: Any) -> jax.Array | None:
    """log w_j over the positions of a nodal level (flattened), -inf where w_j = 0; None for weights 1."""
    w = None
    for position, axis in enumerate(level):
        if axis.gram is not None:  # a diagonal: the weights along this axis, broadcast over the later ones
            along = jnp.reshape(jnp.asarray(axis.gram, dtype), (-1,) + (1,) * (len(level) - position - 1))
            w = along if w is None else w * along
    if w is None:
        return None
    w = jnp.reshape(jnp.broadcast_to(w, [axis.size for axis in level]), -1)
    return jnp.where(w > 0, jnp.log(jnp.where(w > 0, w, 1.0)), -jnp.inf)
