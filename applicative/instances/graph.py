"""``Graph[A]``: a graph whose nodes hold values of type ``A``, its shape (nodes and edges) as data.

A graph of at most ``capacity`` nodes and ``edge_capacity`` edges stores its node values stacked along
``capacity`` slots, as a ``Vec`` stores its elements (nodes first, then padding, a copy of node 0's
value), and its shape as one ``graph_layout.Layout`` of node and edge slots, whose element type no
arithmetic accepts. Graphs of any sizes up to the capacities are one pytree structure: ``jit``
compiles once for all of them, and ``vmap`` maps over a batch of graphs of different sizes and edge
counts (``stacked.stack`` builds one). An edge runs from its sender to its receiver; an undirected graph
holds both directions. ``directed`` and ``dag`` are static: a DAG also holds each node's topological
rank, and was checked acyclic when it was built.

    fmap f    one ``vmap`` over the node slots
    pair      a zip of the values of one graph: both graphs of one shape, shown by identity (one layout
              object: ``with_elements``, ``fmap``, the linear algebra's results) or by value (concrete
              layouts); two graphs of different shapes are a ValueError naming them (there is no common
              refinement of two graphs): on the host at once, and inside a trace, where two arguments of a
              compiled function are two values, at run time (``_layout_pytree._checked``: an error, and NaN)
    pure b    b at every node
    counit    the sum over the nodes under the graph's measure: 1 a node by default, a user's weights
              (``weights=``) otherwise; 0 on padding
    Dense     one nodal axis whose Gram matrix is diag(measure), data: the dense formulas are the
              generic definitions exactly, and attention's dense formula applies (a weight per node)
    f + g     the pointwise Module through ``pair`` (``applicative.protocols.operators``)

What crosses JAX's transformations is what JAX moves with the values, as for trees
(``applicative.instances._layouts``); a map over every leaf reaches the layout, where JAX refuses any
computation, and a layout it rebuilds without reading one (a fill) or with its slots moved between its
node and edge parts is broken: its measure reads NaN, so that every result on it is NaN, never one of
another graph (``graph_layout``).

Attention on a graph (``applicative.nn``, docs/graphs.md) takes the graph's edges as values: ``mask(hops)``
(the pairs within ``hops`` edges, every node seeing itself; ``None``: reachability, which on a DAG is
"from sources to sinks", a node seeing its ancestors), ``edges()`` (the edge pairs as a sparse mask,
whose attention runs in memory linear in the edges), ``on_edges(values)`` (edge values as a score bias).

Built with ``Graph.from_edges(edge_index, values)`` (``edge_index`` of shape (2, E), sender row first, as
PyTorch Geometric writes it), ``Graph.from_adjacency(a, values)`` (a[i, j]: an edge from i to j) and
``Graph.from_networkx(g, values)``; read with ``num_nodes``, ``edge_index()``, ``adjacency_matrix()``,
``topological_order()`` and ``nodes()`` (on the host), ``senders()``, ``receivers()``, ``edge_valid()``,
``valid()`` and ``weights()`` (traceable). Rejected, naming what is wrong: no node, more nodes or edges
than the capacities, an edge naming a node that does not exist, a DAG with a cycle, node values of
another count than the nodes.

Laws (``applicative.laws`` on ``applicative.strategies.graph_triples()``): every functor, applicative and
counit law, and the Dense hook.

>>> from applicative import dot, to_array
>>> g = Graph.from_edges([[0, 1], [1, 2]], [1.0, 2.0, 4.0], capacity=4, edge_capacity=3)
>>> g.num_nodes, g.edge_index().tolist(), float(g.counit())
(3, [[0, 1], [1, 2]], 7.0)
>>> float(dot(g, g.fmap(lambda x: 2 * x)))                     # 2 (1 + 4 + 16)
42.0
>>> np.asarray(to_array(g.mask(hops=1)), int)[:3, :3].tolist()   # who each node sees: itself, its senders
[[1, 0, 0], [1, 1, 0], [0, 1, 1]]
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar, cast, overload

import jax
import jax.numpy as jnp
import numpy as np

from applicative.instances import graph_layout
from applicative.instances._layout_pytree import _check_layout, _checked, register
from applicative.instances._layouts import Layouts, _Shared, each
from applicative.instances.graph_layout import Layout
from applicative.protocols.algebra import Module, arithmetic
from applicative.protocols.applicative import Applicative
from applicative.protocols.dense import Axis, Dense
from applicative.protocols.integration import Counit
from applicative.protocols.kinds import A_co, B, Measured
from applicative.protocols.operators import VectorSpace
from applicative.protocols.sparse import SparseMask
from applicative.stacked import ProductPairing, check_stacked, element, numeric, stack, vmap, weighted_sum

__all__ = ["EdgeMask", "Graph", "GraphOf", "as_graph"]

T = TypeVar("T")


class GraphOf(Measured):
    """Brand of ``Graph``: ``Graph[A]`` is an ``Applicative[GraphOf, A]``."""


@register
@dataclass(frozen=True, eq=False)
class Graph(Layouts, Dense[GraphOf, A_co], Counit[GraphOf, A_co], ProductPairing, VectorSpace):
    """A graph of at most ``capacity`` nodes and ``edge_capacity`` edges whose nodes hold values of type ``A``.

    ``Graph(data, layout, capacity, edge_capacity, directed, dag)`` itself is unchecked but for its layout's
    type and slots (JAX rebuilds graphs through it); use the constructors."""

    data: A_co
    """The node values, stacked: the element pytree with a leading axis of ``capacity`` slots on every leaf."""
    layout: Layout
    """The shape: a ``graph_layout.Layout`` of ``capacity + edge_capacity`` slots."""
    capacity: int
    edge_capacity: int
    directed: bool = True
    dag: bool = False
    origin: Layout | None = None
    """The one layout of every graph of a stack, where the library built it knowing it (``_layouts``)."""

    NAME, ELEMENT, LAYOUT_NAME = "Graph", "graph", "graph_layout.LAYOUT"
    STATIC = ("capacity", "edge_capacity", "directed", "dag")

    def __post_init__(self) -> None:
        _check_layout(Graph, self.layout, self.capacity + self.edge_capacity, "Graph")

    @staticmethod
    def _is_layout(x: object) -> bool:
        return graph_layout.is_layout(x)

    @staticmethod
    def _canonical(layout: Layout) -> Layout:
        return graph_layout.canonical(layout)

    @staticmethod
    def _from_words(words: np.ndarray) -> Layout:
        return graph_layout.from_words(words)

    def _slots(self) -> int:
        return self.capacity + self.edge_capacity

    # Construction (on the host)

    @overload
    @staticmethod
    def from_edges(
        edge_index: Any,
        values: np.ndarray | jax.Array,
        *,
        capacity: int | None = ...,
        edge_capacity: int | None = ...,
        directed: bool = ...,
        dag: bool = ...,
        weights: Any = ...,
    ) -> Graph[jax.Array]: ...
    @overload
    @staticmethod
    def from_edges(
        edge_index: Any,
        values: Sequence[T],
        *,
        capacity: int | None = ...,
        edge_capacity: int | None = ...,
        directed: bool = ...,
        dag: bool = ...,
        weights: Any = ...,
    ) -> Graph[T]: ...
    @staticmethod
    def from_edges(
        edge_index: Any,
        values: Any,
        *,
        capacity: int | None = None,
        edge_capacity: int | None = None,
        directed: bool = True,
        dag: bool = False,
        weights: Any = None,
    ) -> Graph[Any]:
        """The graph of these edges (``edge_index``, shape (2, E): senders, then receivers, node indices) whose
        nodes hold ``values`` (a list of alike values, or values stacked along a leading axis: one a node).
        Undirected (``directed=False``): every edge both ways, once. A ``dag`` is checked acyclic and holds
        its topological ranks. ``weights``: each node's measure (default 1). Capacities default to the sizes."""
        what = "Graph.from_edges"
        edges = np.asarray(numeric(edge_index, what, host=True))
        if edges.size == 0:
            edges = edges.reshape(2, 0)
        if edges.ndim != 2 or edges.shape[0] != 2 or not np.issubdtype(edges.dtype, np.integer):
            got = f"{edges.dtype}{list(edges.shape)}"
            raise ValueError(f"{what}: edge_index must be integers of shape (2, E), got {got}")
        n = _count(values, what)
        s, r = edges[0].astype(np.int64), edges[1].astype(np.int64)
        if not directed:
            pairs = np.unique(np.concatenate([np.stack([s, r], 1), np.stack([r, s], 1)]), axis=0)
            s, r = pairs[:, 0], pairs[:, 1]
        ranks = None
        if dag:
            if not directed:
                raise ValueError(f"{what}: an undirected graph is no DAG (every edge runs both ways)")
            bad = np.flatnonzero((s < 0) | (s >= n) | (r < 0) | (r >= n))  # (named by layout below)
            if not bad.size:
                order = graph_layout.topological_order(n, s, r, what)
                ranks = np.empty(n, np.int64)
                ranks[order] = np.arange(n)
        lay = graph_layout.layout(
            n, s, r, n if capacity is None else capacity, s.size if edge_capacity is None else edge_capacity,
            weights, ranks, f"{what} (a graph of {_count_of(n, 'node')} and {_count_of(s.size, 'edge')})",
        )  # fmt: skip
        capacity = n if capacity is None else capacity
        data = _laid_out(values, n, capacity, what)
        return Graph(data, lay, capacity, lay.shape[0] - capacity, directed, dag)

    @staticmethod
    def from_adjacency(adjacency: Any, values: Any, **kwargs: Any) -> Graph[Any]:
        """The graph whose adjacency matrix is ``adjacency`` (a[i, j] nonzero: an edge from i to j, as
        networkx's ``to_numpy_array`` writes it), its nodes holding ``values``; ``from_edges``'s options."""
        a = np.asarray(numeric(adjacency, "Graph.from_adjacency", host=True))
        if a.ndim != 2 or a.shape[0] != a.shape[1]:
            raise ValueError(f"Graph.from_adjacency: an adjacency matrix is square, got shape {list(a.shape)}")
        return Graph.from_edges(np.stack(np.nonzero(a)), values, **kwargs)

    @staticmethod
    def from_networkx(graph: Any, values: Any, **kwargs: Any) -> Graph[Any]:
        """The graph of a networkx graph, its nodes in ``graph.nodes`` order, holding ``values`` (one a node, or
        the name of a node attribute); directed as ``graph`` is. ``from_edges``'s other options."""
        index = {node: i for i, node in enumerate(graph.nodes)}
        pairs = np.array([(index[u], index[v]) for u, v in graph.edges], np.int64).reshape(-1, 2).T
        if isinstance(values, str):
            values = [graph.nodes[node][values] for node in graph.nodes]
        return Graph.from_edges(pairs, values, directed=bool(graph.is_directed()), **kwargs)

    # Functor, Applicative, Counit

    def fmap(self, f: Callable[[A_co], B]) -> Graph[B]:
        """Map every node's value: one ``vmap`` (on a stack of graphs, every graph's)."""
        if self._stacked():
            return cast(Graph[B], each(lambda g: g.fmap(f), self))
        self._single("fmap")
        return cast(Graph[B], self._new(vmap(f, self.data, size=self.capacity), self.layout))

    def pair(self, other: Applicative[GraphOf, B]) -> Graph[tuple[A_co, B]]:
        """The values of two graphs of one shape, zipped; a ValueError naming them for any other two."""
        if not isinstance(other, Graph):
            raise TypeError(f"pair: Graph paired with {type(other).__name__}")
        if self._stacked() or other._stacked():
            if jnp.shape(self.layout) != jnp.shape(other.layout):
                raise ValueError(
                    f"Graph.pair: a stack of graphs of layout {jnp.shape(self.layout)} paired with one of "
                    f"{jnp.shape(other.layout)}; stacks pair graph by graph, so they need as many graphs"
                )
            return each(lambda a, b: a.pair(b), self, other)
        self._single("pair")
        other._single("pair")
        mine, theirs = self._shape("pair"), other._shape("pair")
        data = (self.data, other.data)
        if self._static() != other._static() or (mine is not theirs and not _traced(mine, theirs)):
            raise ValueError(f"Graph.pair: {_DIFFERENT}")
        if mine is not theirs:  # (traced: one shape checked at run time, where the values are)
            data = _checked(data, jnp.stack([mine, theirs]), 1, "Graph.pair", "graph", _DIFFERENT)
        return cast(Graph[tuple[A_co, B]], self._new(data, self.layout))

    def pure(self, b: B) -> Graph[B]:
        """``b`` at every node of this graph's shape."""

        def broadcast(leaf: Any) -> jax.Array:
            return jnp.broadcast_to(leaf, (self.capacity, *jnp.shape(leaf)))

        return cast(Graph[B], self._new(jax.tree_util.tree_map(broadcast, b), self._shape("pure")))

    def counit(self, module: Module[A_co] | None = None) -> A_co:
        """The sum over the nodes under the graph's measure (``module``'s add and scale)."""
        self._single("counit")
        m = module if module is not None else arithmetic()
        return weighted_sum(m, self.weights(), self.data, self.capacity)

    # Dense: one nodal axis, the nodes; its Gram matrix diag(measure) is data.

    def axes(self) -> tuple[Axis] | None:
        if (shape := self._shape(None)) is None:
            return None  # a stack of graphs of different shapes (or not known to be one): no one axis
        w = graph_layout.weights(shape, self.capacity)
        return (Axis("Graph", None, self.capacity, w, _Shared(shape), nodal=True),)

    def elements(self) -> A_co:
        return self.data

    def with_elements(self, elements: B) -> Graph[B]:
        return cast(Graph[B], self._new(elements, self._shape("with_elements")))

    # Access

    def valid(self) -> jax.Array:
        """Which node slots hold nodes (bool, ``capacity``; a stack's, every graph's)."""
        return graph_layout.node_valid(self._own("valid"), self.capacity)

    def weights(self) -> jax.Array:
        """Each node's measure (0 on padding; NaN for a broken layout): the Gram matrix's diagonal."""
        return graph_layout.weights(self._own("weights"), self.capacity)

    def senders(self) -> jax.Array:
        """Each edge slot's sender (int32, 0 on padding)."""
        return graph_layout.edges(self._own("senders"), self.capacity)[0]

    def receivers(self) -> jax.Array:
        """Each edge slot's receiver (int32, 0 on padding)."""
        return graph_layout.edges(self._own("receivers"), self.capacity)[1]

    def edge_valid(self) -> jax.Array:
        """Whether each edge slot holds an edge (bool, ``edge_capacity``)."""
        return graph_layout.edges(self._own("edge_valid"), self.capacity)[2]

    def ranks(self) -> jax.Array:
        """Each node's topological rank (a DAG's; 0 otherwise)."""
        return graph_layout.ranks(self._own("ranks"), self.capacity)

    @property
    def num_nodes(self) -> int:
        """The number of nodes (host-side)."""
        return graph_layout.read(self._concrete("num_nodes"), self.capacity)[0]

    def edge_index(self) -> np.ndarray:
        """The edges as an array of shape (2, E): senders, then receivers (host-side)."""
        _, s, r, _, _ = graph_layout.read(self._concrete("edge_index"), self.capacity)
        return np.stack([s, r])

    def adjacency_matrix(self) -> np.ndarray:
        """a[i, j] = 1 where an edge runs from i to j (``from_adjacency``'s convention; host-side)."""
        n, s, r, _, _ = graph_layout.read(self._concrete("adjacency_matrix"), self.capacity)
        a = np.zeros((n, n), np.int64)
        a[s, r] = 1
        return a

    def topological_order(self) -> np.ndarray:
        """The nodes in an order where every edge runs forward (a DAG's ranks; host-side)."""
        n, s, r, _, ranks = graph_layout.read(self._concrete("topological_order"), self.capacity)
        return np.argsort(ranks, kind="stable") if self.dag else graph_layout.topological_order(n, s, r)

    def nodes(self) -> list[A_co]:
        """The node values, in order (host-side)."""
        return [element(self.data, i) for i in range(self.num_nodes)]

    # The edges as values attention takes

    def mask(self, hops: int | None = 1) -> Graph[Graph[jax.Array]]:
        """Who each node sees: ``mask[i][j]`` is True where node j reaches node i along at most ``hops`` edges
        (``None``: any number; on a DAG, i's ancestors: from sources to sinks), every node itself, as a graph
        (the queries) of graphs (the keys) of bools: attention's ``mask``."""
        shape = self._shape("mask")
        return self.pairs(graph_layout.reach(shape, self.capacity, hops))

    def on_edges(self, values: Any, fill: float = 0.0) -> Graph[Graph[jax.Array]]:
        """Values on the edges (one an edge slot, leading axis ``edge_capacity``; padding's ignored) as a graph
        of graphs, ``fill`` where no edge runs: a score bias for attention (``nn.Biased``)."""
        shape = self._shape("on_edges")
        s, r, valid = graph_layout.edges(shape, self.capacity)
        v = jnp.asarray(values)
        if v.shape[:1] != (self.edge_capacity,):
            slots = self.edge_capacity
            raise ValueError(f"Graph.on_edges: values of leading axis {v.shape[:1]}, the graph has {slots} edge slots")
        grid = jnp.full((self.capacity, self.capacity, *v.shape[1:]), fill, v.dtype)
        keep = valid.reshape(valid.shape + (1,) * (v.ndim - 1))
        return self.pairs(grid.at[r, s].set(jnp.where(keep, v, grid[r, s])))

    def edges(self, self_loops: bool = True) -> EdgeMask:
        """The edge pairs (and each node with itself) as a sparse mask: attention over them runs in memory
        linear in the edges (``applicative.nn``); as a value it is ``mask(hops=1)``."""
        return EdgeMask(self, self_loops)

    def pairs(self, grid: Any) -> Graph[Graph[Any]]:
        """Values on every pair of node slots, ``grid[i, j]`` for query i and key j (leading axes (capacity,
        capacity) on every leaf: an array, or stacked elements), as a graph of graphs of this shape: the pair
        vectors of ``nn.RelationalAttention``, a score bias."""
        shape = self._shape("pairs")
        rows = vmap(lambda row: self._new(row, shape), grid)
        return cast(Graph[Graph[jax.Array]], self._new(rows, shape))

    def __repr__(self) -> str:
        return f"Graph(capacity={self.capacity}, edge_capacity={self.edge_capacity}, data={self.data!r})"


@dataclass(frozen=True)
class EdgeMask(SparseMask):
    """A graph's edge pairs, each node with itself where ``self_loops``: query i sees key j where an edge runs
    from j to i (``SparseMask``: attention over the pairs alone; its dense form is ``graph.mask(hops=1)``)."""

    graph: Graph[Any]
    self_loops: bool = True

    def pairs(self) -> tuple[jax.Array, jax.Array, jax.Array]:
        g = self.graph
        s, r, valid = graph_layout.edges(g._shape("edges"), g.capacity)
        if self.self_loops:
            nodes = jnp.arange(g.capacity, dtype=jnp.int32)
            s, r = jnp.concatenate([s, nodes]), jnp.concatenate([r, nodes])
            valid = jnp.concatenate([valid, g.valid()])
        return r, s, valid

    def levels(self) -> tuple[tuple[Axis, ...], tuple[Axis, ...]]:
        axes = self.graph.axes()
        assert axes is not None, "Graph.edges: a graph of one known shape"
        return axes, axes

    def dense(self) -> Any:
        g = self.graph
        a = graph_layout.adjacency(g._shape("edges"), g.capacity)
        if self.self_loops:
            a = a | (jnp.eye(g.capacity, dtype=bool) & g.valid()[:, None])
        return g.pairs(a)


_DIFFERENT = (
    "two graphs of different shapes (a graph's values pair with values of the same nodes and edges only); build "
    "the second on the first, graph.with_elements(values)"
)


def _traced(*layouts: Layout) -> bool:
    return any(isinstance(x, jax.core.Tracer) for x in layouts)


def as_graph(x: Applicative[GraphOf, B]) -> Graph[B]:
    """The Graph behind a generic result whose brand says it is one (checked)."""
    if not isinstance(x, Graph):
        raise TypeError(f"as_graph: expected a Graph, got {type(x).__name__}")
    return x


def _count(values: Any, what: str) -> int:
    """The number of node values: a list's length, or the leading axis of stacked values."""
    if isinstance(values, list | tuple):
        if not values:
            raise ValueError(f"{what}: a graph needs at least one node, got no values")
        return len(values)
    leaves = jax.tree_util.tree_leaves(values)
    sizes = {jnp.shape(leaf)[0] for leaf in leaves if jnp.ndim(leaf)}
    if len(sizes) != 1 or len(leaves) == 0:
        raise ValueError(f"{what}: node values are a list, or arrays with one leading axis of nodes; got {values!r}")
    return sizes.pop()


def _laid_out(values: Any, n: int, capacity: int, what: str) -> Any:
    """The node values at ``capacity`` slots: the n nodes', then copies of node 0's (padding)."""
    slots = np.concatenate([np.arange(n), np.zeros(capacity - n, int)])
    if isinstance(values, list | tuple):
        return stack([values[i] for i in slots], what)

    def one(leaf: Any) -> Any:
        x = numeric(leaf, what, host=True)
        return jnp.asarray(np.take(np.asarray(x), slots, 0)) if isinstance(x, np.ndarray) else jnp.take(x, slots, 0)

    data = jax.tree_util.tree_map(one, values)
    check_stacked(data, capacity, what)
    return data


def _count_of(n: int, noun: str) -> str:
    """'1 node', '3 nodes'."""
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"
