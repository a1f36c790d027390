"""Attention over the pairs of a sparse mask: memory linear in the pairs, not in queries x keys.

Where the mask is a ``SparseMask`` (``applicative.protocols.sparse``: a graph's edges) and queries, keys
and values are structures whose every axis is nodal (a weight per position: a graph's nodes, a Vec), the
generic definition with the mask's dense form,

    attention(q, k, v)_i = sum_j w_j m_ij e_ij v_j / sum_j w_j m_ij e_ij,     e_ij = exp(q_i . k_j / sqrt(d_k)),

is computed on the pairs (i, j) the mask lets through alone: one score a pair, a softmax per query over
its pairs (``jax.ops.segment_max`` and ``segment_sum`` over the query of each pair), and the values
gathered a pair at a time. The temporaries are pairs x features, forward and backward (JAX's own
gradients of gathers and segment sums), so a graph of 16,384 nodes and 100,000 edges needs megabytes
where the dense formula needs queries x keys scores (bench/graphs.py). A query with no pair left is 0,
as in the generic definition. Anything else, or ``generic_only()``, and attention takes the generic
definition on ``mask.dense()``.
"""

from __future__ import annotations

import math
from typing import Any

import jax
import jax.numpy as jnp

from applicative.fast_paths import USE_FAST_PATHS, Level, coordinates, fold_gram, log_taken, shaped
from applicative.protocols.sparse import SparseMask

__all__ = ["sparse_attention"]


def sparse_attention(queries: object, keys: object, values: object, mask: SparseMask, d_k: jax.Array) -> Any | None:
    """``softmax(q k^T / sqrt(d_k), masked) v`` over ``mask``'s pairs alone; None where it does not apply
    (levels that are not nodal, or that are not the mask's)."""
    if not USE_FAST_PATHS.get():
        return None
    views = [coordinates("attention", x, 2) for x in (queries, keys, values)]
    if any(view is None for view in views):
        return None
    (q, (i, h), q_shells), (k, (f, h_keys), _), (v, (f_values, _), v_shells) = views  # type: ignore[misc]
    rows, columns = mask.levels()
    if not (_nodal(i) and _nodal(f)) or h != h_keys or f != f_values or tuple(i) != rows or tuple(f) != columns:
        return None
    n, m = _size(i), _size(f)
    q = jnp.reshape(fold_gram(q, h, len(i)), (n, _size(h)))
    k = jnp.reshape(k, (m, _size(h)))
    v_features = v.shape[len(f) :]
    v = jnp.reshape(v, (m, -1))
    query, key, valid = mask.pairs()
    s = jnp.einsum("ph,ph->p", q[query], k[key]) / jnp.sqrt(d_k).astype(q.dtype)
    if (w := _weights(f, q.dtype)) is not None:
        valid = valid & (w[key] > 0)
        s = s + jnp.log(jnp.where(w[key] > 0, w[key], 1.0))
    s = jnp.where(valid, s, -jnp.inf)
    top = jax.lax.stop_gradient(jax.ops.segment_max(s, query, num_segments=n))  # any shift: the same softmax
    e = jnp.where(valid, jnp.exp(s - jnp.where(jnp.isfinite(top), top, 0.0)[query]), 0.0)
    total = jax.ops.segment_sum(e, query, num_segments=n)
    out = jax.ops.segment_sum(e[:, None] * v[key], query, num_segments=n) / jnp.where(total > 0, total, 1.0)[:, None]
    log_taken("attention")
    return shaped(jnp.reshape(out, (*(axis.size for axis in i), *v_features)), [q_shells[0], v_shells[1]])


def _nodal(level: Level) -> bool:
    return all(axis.nodal for axis in level)


def _size(level: Level) -> int:
    return math.prod(axis.size for axis in level)


def _weights(level: Level, dtype: Any) -> jax.Array | None:
    """w_j over the positions of a nodal level (flattened); None for weights 1."""
    w = None
    for position, axis in enumerate(level):
        if axis.gram is not None:
            along = jnp.reshape(jnp.asarray(axis.gram, dtype), (-1,) + (1,) * (len(level) - position - 1))
            w = along if w is None else w * along
    return None if w is None else jnp.reshape(jnp.broadcast_to(w, [axis.size for axis in level]), -1)
