"""Graph layouts: a graph's shape as one array of slots, its nodes' and its edges', and what is read off it.

The functional core of ``Graph`` (``applicative.instances.graph``), as ``dyadic`` is ``DenseTree``'s. A
graph of at most ``capacity`` nodes and ``edge_capacity`` edges has a layout of ``capacity +
edge_capacity`` slots, nodes first: node slot i is node i (a padding slot past the graph's nodes), edge
slot k the k-th edge (a padding slot past its edges). Every array may carry leading axes (a stack of
layouts, a batch of graphs).

A layout's element type is ``LAYOUT``, a JAX extended dtype (the kind PRNG keys are, as ``dyadic.LAYOUT``
is a tree's): no arithmetic, comparison, cast or numpy conversion accepts it, so a function mapped over
every leaf of a structure holding graphs is refused by JAX with the dtype's name, which states the rule.
Each slot is three 32-bit words:

    node slot   (NODE or PADDING_NODE, the node's measure as float32 bits, its topological rank)
    edge slot   (EDGE or PADDING_EDGE, sender, receiver)

The first word of every slot is one of four marks. An array JAX builds without reading a layout (a fill,
``zeros_like``), or one whose slots were moved between the node and the edge part, holds other words
there: such a layout is **broken**, and its every node's measure reads NaN (``weights``), so that
everything computed on it is NaN rather than a graph of another shape. An edge points from its sender
to its receiver; an undirected graph stores both directions.

    layout(n, senders, receivers, capacity, edge_capacity, weights, ranks)   on the host, checked
    weights(layout, capacity), node_valid(layout, capacity)   each node slot's measure (0 on padding, NaN
                                           if broken), and whether it holds a node
    edges(layout, capacity)                (senders, receivers, valid) of every edge slot (0 on padding)
    adjacency(layout, capacity, dtype)     a[i, j] = 1 where an edge runs from j to i (receiver i)
    reach(layout, capacity, hops)          a[i, j]: j reaches i in at most ``hops`` edges (None: any
                                           number), i reaches itself
    ranks(layout, capacity)                each node's topological rank (a DAG's; 0 otherwise)
    read(layout, capacity)                 (nodes, senders, receivers, measures, ranks) of a concrete
                                           layout, on the host
    topological_order(n, senders, receivers)   Kahn's order, or a ValueError naming a cycle

>>> lay = layout(3, [0, 1], [1, 2], capacity=4, edge_capacity=3)   # 0 -> 1 -> 2, one padding node
>>> np.asarray(weights(lay, 4)).tolist(), np.asarray(adjacency(lay, 4, jnp.int32))[:3, :3].tolist()
([1.0, 1.0, 1.0, 0.0], [[0, 0, 0], [1, 0, 0], [0, 1, 0]])
>>> np.asarray(reach(lay, 4, None), int)[:3, :3].tolist()              # 0 reaches 1 and 2
[[1, 0, 0], [1, 1, 0], [1, 1, 1]]
"""

from __future__ import annotations

import functools
import heapq
from collections.abc import Sequence
from typing import Any, TypeAlias

import jax
import jax.numpy as jnp
import numpy as np
from jax.extend import random as jax_random

__all__ = [
    "LAYOUT",
    "Layout",
    "adjacency",
    "canonical",
    "edges",
    "from_words",
    "is_layout",
    "layout",
    "node_valid",
    "ranks",
    "reach",
    "read",
    "topological_order",
    "weights",
]

Layout: TypeAlias = jax.Array
"""An array of ``LAYOUT`` elements, one a slot: shape (..., capacity + edge_capacity)."""

NODE, PADDING_NODE, EDGE, PADDING_EDGE = 0x6E6F6465, 0x70616E64, 0x65646765, 0x70616564
"""The marks of a slot's first word: a node, a padding node slot, an edge, a padding edge slot."""


def _not_a_key(*_: object) -> jax.Array:
    raise TypeError("a graph's layout is not a PRNG key: it cannot seed, split or draw random numbers")


_IMPL = jax_random.define_prng_impl(
    key_shape=(3,),
    seed=_not_a_key,
    split=_not_a_key,
    random_bits=_not_a_key,
    fold_in=_not_a_key,
    name="applicative.graph_layout.layout",
    tag="Graph layout: a graph's shape is never an element; map its values with fmap or applicative.stacked.along",
)
LAYOUT = jax.eval_shape(lambda: jax.random.wrap_key_data(jnp.zeros(3, jnp.uint32), impl=_IMPL)).dtype
"""The element type of a graph's layout: one node's or one edge's slot (an extended dtype)."""


def is_layout(x: object) -> bool:
    """Whether ``x`` is an array (or tracer) of ``LAYOUT`` elements."""
    return isinstance(x, jax.Array) and x.dtype == LAYOUT


def _wrap(words: np.ndarray) -> Layout:
    with jax.ensure_compile_time_eval():  # a concrete array, even when first asked for inside a trace
        keys: Layout = jax.random.wrap_key_data(jnp.asarray(words, jnp.uint32), impl=_IMPL)
    return keys


@functools.lru_cache(maxsize=4096)
def _interned(words: bytes, shape: tuple[int, ...]) -> Layout:
    return _wrap(np.frombuffer(words, np.uint32).reshape(shape))


def from_words(words: np.ndarray) -> Layout:
    """The layout of these stored words (uint32, shape (..., slots, 3)), the one object of its value."""
    words = np.ascontiguousarray(words, np.uint32)
    return _interned(words.tobytes(), words.shape)


def canonical(lay: Layout) -> Layout:
    """One layout object for every concrete layout of these words (a traced one is itself)."""
    if isinstance(lay, jax.core.Tracer):
        return lay
    with jax.ensure_compile_time_eval():
        words = np.asarray(jax.random.key_data(lay), np.uint32)
    return from_words(words)


def layout(
    n: int,
    senders: Sequence[int] | np.ndarray,
    receivers: Sequence[int] | np.ndarray,
    capacity: int,
    edge_capacity: int,
    weights: Sequence[float] | np.ndarray | None = None,
    ranks: Sequence[int] | np.ndarray | None = None,
    what: str = "layout",
) -> Layout:
    """The layout of a graph of ``n`` nodes and these edges (sender -> receiver, node indices), in ``capacity``
    node slots and ``edge_capacity`` edge slots, with each node's measure (default 1) and topological rank
    (default 0); the one object of its value. A ValueError naming ``what`` for a graph of no node, more nodes
    or edges than the capacities, an edge naming a node that does not exist, a measure that is negative or
    not finite."""
    s, r = np.asarray(senders, np.int64).reshape(-1), np.asarray(receivers, np.int64).reshape(-1)
    for name, value in (("capacity", capacity), ("edge_capacity", edge_capacity), ("n", n)):
        if isinstance(value, bool) or not isinstance(value, int | np.integer):
            raise TypeError(f"{what}: {name} must be an int, got {value!r} of type {type(value).__name__}")
    if n < 1:
        raise ValueError(f"{what}: a graph needs at least one node, got {n}")
    if n > capacity:
        raise ValueError(f"{what}: a graph of {n} nodes does not fit in capacity {capacity}")
    if s.shape != r.shape:
        raise ValueError(f"{what}: {s.size} senders and {r.size} receivers; an edge has one of each")
    if s.size > edge_capacity:
        raise ValueError(f"{what}: a graph of {s.size} edges does not fit in edge_capacity {edge_capacity}")
    bad = np.flatnonzero((s < 0) | (s >= n) | (r < 0) | (r >= n))
    if bad.size:
        k = int(bad[0])
        raise ValueError(
            f"{what}: edge {k} ({int(s[k])} -> {int(r[k])}) names a node that does not exist (nodes 0 to {n - 1})"
        )
    w = np.ones(n, np.float32) if weights is None else np.asarray(weights, np.float32).reshape(-1)
    if w.shape != (n,) or not np.all(np.isfinite(w)) or np.any(w < 0):
        given = np.asarray(weights).tolist()
        raise ValueError(f"{what}: node measures must be {n} finite numbers >= 0, got {given!r}")
    rank = np.zeros(n, np.int64) if ranks is None else np.asarray(ranks, np.int64).reshape(-1)
    words = np.zeros((capacity + edge_capacity, 3), np.uint32)
    words[:n, 0], words[n:capacity, 0] = NODE, PADDING_NODE
    words[:n, 1] = w.view(np.uint32)
    words[:n, 2] = rank
    e = s.size
    words[capacity : capacity + e] = np.stack([np.full(e, EDGE), s, r], axis=1)
    words[capacity + e :, 0] = PADDING_EDGE
    return from_words(words)


def _words(lay: Layout) -> jax.Array:
    return jax.random.key_data(lay)


def _split(lay: Layout, capacity: int) -> tuple[jax.Array, jax.Array, jax.Array]:
    """The node slots' words, the edge slots' words, and whether the layout is whole (every mark one of its
    part's)."""
    words = _words(lay)
    node, edge = words[..., :capacity, :], words[..., capacity:, :]
    whole = jnp.all((node[..., 0] == NODE) | (node[..., 0] == PADDING_NODE), axis=-1) & jnp.all(
        (edge[..., 0] == EDGE) | (edge[..., 0] == PADDING_EDGE), axis=-1
    )
    return node, edge, whole


def weights(lay: Layout, capacity: int, dtype: Any = None) -> jax.Array:
    """Each node slot's measure (0 on padding), NaN in every slot of a broken layout."""
    node, _, whole = _split(lay, capacity)
    kind = jnp.dtype(jnp.result_type(float) if dtype is None else dtype)
    w = jax.lax.bitcast_convert_type(node[..., 1], jnp.float32).astype(kind)
    w = jnp.where(node[..., 0] == NODE, w, jnp.zeros((), kind))
    return jnp.where(whole[..., None], w, jnp.asarray(jnp.nan, kind))


def node_valid(lay: Layout, capacity: int) -> jax.Array:
    """Whether each node slot holds a node (bool, (..., capacity))."""
    return _split(lay, capacity)[0][..., 0] == NODE


def ranks(lay: Layout, capacity: int) -> jax.Array:
    """Each node slot's topological rank (int32; a DAG's, 0 otherwise and on padding)."""
    node = _split(lay, capacity)[0]
    return jnp.where(node[..., 0] == NODE, node[..., 2], 0).astype(jnp.int32)


def edges(lay: Layout, capacity: int) -> tuple[jax.Array, jax.Array, jax.Array]:
    """Every edge slot's sender and receiver (int32, 0 on padding) and whether it holds an edge."""
    edge = _split(lay, capacity)[1]
    valid = edge[..., 0] == EDGE
    senders, receivers = (jnp.where(valid, edge[..., w], 0).astype(jnp.int32) for w in (1, 2))
    return senders, receivers, valid


def adjacency(lay: Layout, capacity: int, dtype: Any = jnp.bool_) -> jax.Array:
    """The (capacity, capacity) matrix a[i, j] = 1 where an edge runs from j to i, of one layout: a message
    from sender j reaches receiver i, so a row lists what a node receives."""
    s, r, valid = edges(lay, capacity)
    return jnp.zeros((capacity, capacity), dtype).at[r, s].max(valid.astype(dtype))


def reach(lay: Layout, capacity: int, hops: int | None) -> jax.Array:
    """a[i, j]: node j reaches node i along at most ``hops`` edges (``None``: along any number), and every
    node reaches itself (bool, (capacity, capacity), of one layout). By repeated squaring of the adjacency
    with the identity: log2(hops) products, or log2(capacity) for any number."""
    a = adjacency(lay, capacity, jnp.int32) | jnp.eye(capacity, dtype=jnp.int32)
    steps = max(capacity - 1, 1) if hops is None else hops
    out, power, k = jnp.eye(capacity, dtype=jnp.int32), a, steps
    while k:  # (a Python loop over the bits of hops: a static count of products)
        if k & 1:
            out = jnp.minimum(out @ power, 1)
        power, k = jnp.minimum(power @ power, 1), k >> 1
    return out.astype(bool) & node_valid(lay, capacity)[:, None] & node_valid(lay, capacity)[None, :]


def read(lay: Layout, capacity: int) -> tuple[int, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(nodes, senders, receivers, measures, ranks) of a concrete layout of one graph, on the host; a
    ValueError for a broken one."""
    with jax.ensure_compile_time_eval():
        words = np.asarray(_words(lay), np.uint32)
    node, edge = words[:capacity], words[capacity:]
    if not (np.isin(node[:, 0], (NODE, PADDING_NODE)).all() and np.isin(edge[:, 0], (EDGE, PADDING_EDGE)).all()):
        raise ValueError(
            "a broken graph layout: its slots do not hold a graph's words (a fill, or a move between its node "
            "and edge slots, made by a map over every leaf); map a graph's values with fmap"
        )
    nodes, valid = np.flatnonzero(node[:, 0] == NODE), edge[:, 0] == EDGE
    return (
        int(nodes.size),
        edge[valid, 1].astype(np.int64),
        edge[valid, 2].astype(np.int64),
        node[nodes, 1].view(np.float32).astype(np.float64),
        node[nodes, 2].astype(np.int64),
    )


def topological_order(
    n: int, senders: np.ndarray, receivers: np.ndarray, what: str = "topological_order"
) -> np.ndarray:
    """The nodes in an order where every edge runs forward (Kahn's, the smallest ready node first), or a
    ValueError naming ``what`` and a cycle's nodes if the graph has one."""
    indegree = np.bincount(receivers, minlength=n)
    out_edges: list[list[int]] = [[] for _ in range(n)]
    for s, r in zip(senders.tolist(), receivers.tolist(), strict=True):
        out_edges[s].append(r)
    ready = sorted(int(i) for i in np.flatnonzero(indegree == 0))
    order: list[int] = []
    heapq.heapify(ready)
    while ready:
        node = heapq.heappop(ready)
        order.append(node)
        for r in out_edges[node]:
            indegree[r] -= 1
            if indegree[r] == 0:
                heapq.heappush(ready, r)
    if len(order) < n:
        left = sorted(set(range(n)) - set(order))
        raise ValueError(f"{what}: the graph is not acyclic (a cycle runs through nodes among {left[:8]})")
    return np.asarray(order, np.int64)
