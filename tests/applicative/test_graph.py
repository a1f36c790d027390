"""``Graph`` (issue 63): built from what users hold (an edge list as PyTorch Geometric writes it, a dense
adjacency, a networkx graph), directed, undirected and acyclic; its operations against float64 numpy on
the same nodes and edges; a batch of graphs of every size in one compilation; what it refuses, by name;
and the edges as values attention takes (masks of k hops and reachability, a sparse mask whose attention
runs on the pairs alone, a score bias), each against its generic definition and numpy."""

from __future__ import annotations

import pickle
from typing import Any

import jax
import jax.numpy as jnp
import networkx as nx
import numpy as np
import pytest

from applicative import (
    Cheb,
    DenseTree,
    Dim,
    Graph,
    Vec,
    as_graph,
    dot,
    generic_only,
    mul_mv,
    nn,
    record_fast_paths,
    to_array,
)
from applicative.stacked import stack


class S(Dim):
    """A batch's positions."""


class K(Dim):
    """Node features."""


class X(Dim):
    """A function's variable."""


rng = np.random.default_rng(63)
EDGES = np.array([[0, 0, 1, 2, 3, 4, 4], [1, 2, 2, 3, 4, 0, 2]])  # seven edges on five nodes, a cycle 0-2-3-4
N = 5


def graph(values: Any = None, capacity: int = 8, edge_capacity: int = 12, **kwargs: Any) -> Graph[Any]:
    values = rng.normal(size=N) if values is None else values
    return Graph.from_edges(EDGES, values, capacity=capacity, edge_capacity=edge_capacity, **kwargs)


def adjacency(edges: np.ndarray, n: int) -> np.ndarray:
    """a[i, j] = 1 where an edge runs from i to j (numpy)."""
    a = np.zeros((n, n), np.int64)
    a[edges[0], edges[1]] = 1
    return a


def closure(a: np.ndarray, hops: int | None) -> np.ndarray:
    """r[i, j]: j reaches i along at most ``hops`` edges, or any number (breadth-first search, from each j)."""
    n = len(a)
    r = np.eye(n, dtype=bool)
    for j in range(n):
        frontier, depth = {j}, 0
        while frontier and (hops is None or depth < hops):
            seen = {int(k) for k in np.flatnonzero(r[:, j])}
            frontier = {int(k) for i in frontier for k in np.flatnonzero(a[i])} - seen
            for k in frontier:
                r[k, j] = True
            depth += 1
    return r


def test_a_graph_from_an_edge_list_an_adjacency_and_networkx_is_one_graph() -> None:
    values = rng.normal(size=N)
    g = graph(values)
    assert g.num_nodes == N
    np.testing.assert_array_equal(g.edge_index(), EDGES)
    np.testing.assert_array_equal(g.adjacency_matrix(), adjacency(EDGES, N))
    from_matrix = Graph.from_adjacency(adjacency(EDGES, N), values, capacity=8, edge_capacity=12)
    np.testing.assert_array_equal(from_matrix.adjacency_matrix(), adjacency(EDGES, N))
    nxg: nx.DiGraph[int] = nx.DiGraph()
    nxg.add_nodes_from((i, {"x": float(v)}) for i, v in enumerate(values))
    nxg.add_edges_from(EDGES.T.tolist())
    from_nx = Graph.from_networkx(nxg, "x", capacity=8, edge_capacity=12)
    np.testing.assert_array_equal(from_nx.adjacency_matrix(), adjacency(EDGES, N))
    np.testing.assert_allclose(np.asarray(from_nx.nodes()), values)
    assert from_nx.directed
    undirected = Graph.from_networkx(nx.Graph(nxg), "x", capacity=8, edge_capacity=16)
    a = adjacency(EDGES, N)
    np.testing.assert_array_equal(undirected.adjacency_matrix(), a | a.T)
    assert not undirected.directed
    np.testing.assert_array_equal(to_array(g)[:N], values)
    np.testing.assert_array_equal(to_array(g)[N:], values[0])  # padding: copies of node 0's value


def test_a_dag_holds_its_topological_order_and_a_cycle_is_refused() -> None:
    dag_edges = np.array([[0, 0, 1, 3, 2], [1, 2, 3, 4, 4]])
    g = Graph.from_edges(dag_edges, rng.normal(size=5), dag=True, capacity=6, edge_capacity=6)
    order = g.topological_order()
    position = np.argsort(order)
    assert all(position[s] < position[r] for s, r in dag_edges.T)  # every edge runs forward
    ranks = np.asarray(g.ranks())[:5]
    assert all(ranks[s] < ranks[r] for s, r in dag_edges.T)
    with pytest.raises(ValueError, match=r"Graph.from_edges: the graph is not acyclic \(a cycle runs through nodes"):
        graph(dag=True)
    with pytest.raises(ValueError, match="an undirected graph is no DAG"):
        graph(dag=True, directed=False)


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda: Graph.from_edges(np.zeros((2, 0), int), []), r"a graph needs at least one node"),
        (lambda: graph(capacity=4), r"a graph of 5 nodes does not fit in capacity 4"),
        (lambda: graph(edge_capacity=6), r"a graph of 7 edges does not fit in edge_capacity 6"),
        (lambda: Graph.from_edges([[0, 7], [1, 2]], [1.0, 2.0, 3.0]), r"edge 1 \(7 -> 2\) names a node that does not"),
        (lambda: Graph.from_edges([[0, 1, 2]], [1.0, 2.0, 3.0]), r"edge_index must be integers of shape \(2, E\), got"),
        (lambda: Graph.from_edges([[0.5], [1.0]], [1.0, 2.0]), r"edge_index must be integers"),
        (lambda: graph(weights=[1.0, -1.0, 1.0, 1.0, 1.0]), r"node measures must be 5 finite numbers >= 0"),
        (lambda: Graph.from_adjacency(np.ones((2, 3)), [1.0, 2.0]), r"an adjacency matrix is square"),
    ],
    ids=[
        "empty",
        "over capacity",
        "over edge capacity",
        "a missing node",
        "edge_index shape",
        "float edges",
        "negative measure",
        "non-square adjacency",
    ],
)
def test_bad_input_is_refused_naming_it(build: Any, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        build()


def test_the_operations_agree_with_numpy_on_the_graphs_measure() -> None:
    weights = np.array([1.0, 0.5, 2.0, 1.0, 0.25])
    x, y = rng.normal(size=N), rng.normal(size=N)
    g = graph(x, weights=weights)
    h = g.with_elements(jnp.asarray(np.concatenate([y, np.full(3, y[0])])))
    assert float(g.counit()) == pytest.approx(weights @ x, rel=1e-12)
    assert float(dot(g, h)) == pytest.approx(np.sum(weights * x * y), rel=1e-12)
    rows = rng.normal(size=(3, N))
    m = Vec.of([g.with_elements(jnp.asarray(np.concatenate([r, np.full(3, r[0])]))) for r in rows], S)
    np.testing.assert_allclose(to_array(mul_mv(m, h)), rows @ (weights * y), rtol=1e-12)
    # Under jit, two graph arguments are two values: give the vector on the matrix's graph.
    on_rows = jax.jit(lambda m, y: to_array(mul_mv(m, m[0].with_elements(y))))
    np.testing.assert_allclose(on_rows(m, h.data), rows @ (weights * y), rtol=1e-12)
    with generic_only():
        np.testing.assert_allclose(to_array(mul_mv(m, h)), rows @ (weights * y), rtol=1e-12)


def test_a_batch_of_graphs_of_every_size_runs_in_one_compilation() -> None:
    """Graphs of 1 to 8 nodes and 0 to 12 edges: one pytree structure, one compiled function for them all."""

    def random_graph() -> Graph[Any]:
        n = int(rng.integers(1, 9))
        e = int(rng.integers(0, 13))
        edges = rng.integers(0, n, size=(2, e))
        return Graph.from_edges(edges, rng.normal(size=n), capacity=8, edge_capacity=12)

    energy = jax.jit(jax.vmap(lambda g: dot(g, g.fmap(jnp.sin))))
    for _ in range(3):
        batch = [random_graph() for _ in range(4)]
        expected = [float(np.sum(np.asarray(b.nodes()) * np.sin(np.asarray(b.nodes())))) for b in batch]
        np.testing.assert_allclose(energy(stack(batch)), expected, rtol=1e-12)
    assert energy._cache_size() == 1  # type: ignore[attr-defined]


def test_two_graphs_of_different_shapes_are_refused_by_name() -> None:
    g = graph()
    other = Graph.from_edges(EDGES[:, :3], rng.normal(size=N), capacity=8, edge_capacity=12)
    with pytest.raises(ValueError, match=r"Graph.pair: two graphs of different shapes"):
        dot(g, other)
    same = graph()  # another graph of the same edges, built apart: one shape, read on the host
    expected = float(np.sum(np.asarray(g.nodes()) * np.asarray(same.nodes())))
    assert float(dot(g, same)) == pytest.approx(expected)
    # Two arguments of a compiled function are two values: their one shape is checked at run time.
    product = jax.jit(lambda a, b: dot(a, b))
    assert float(product(g, same)) == pytest.approx(expected)
    with pytest.raises(Exception, match=r"Graph.pair: two graphs of different shapes"):
        np.asarray(product(g, other))


def test_a_map_over_every_leaf_is_refused_or_reads_nan() -> None:
    g = graph()
    with pytest.raises(TypeError, match=r"key<Graph layout: a graph's shape is never an element"):
        jax.tree_util.tree_map(lambda leaf: 2 * leaf, g)
    filled = jax.tree_util.tree_map(jnp.zeros_like, g)  # a fill: no graph's words
    assert np.isnan(float(filled.counit()))
    reversed_slots = jax.tree_util.tree_map(lambda leaf: leaf[::-1], g)  # edge words moved into node slots
    assert np.isnan(float(reversed_slots.counit()))
    with pytest.raises(ValueError, match="a broken graph layout"):
        _ = reversed_slots.num_nodes
    assert float(jax.tree_util.tree_map(lambda leaf: leaf, g).counit()) == pytest.approx(float(g.counit()))


def test_a_graph_leaves_a_process_whole() -> None:
    g = graph()
    for moved in (pickle.loads(pickle.dumps(g)), jax.device_get(g)):
        np.testing.assert_array_equal(moved.edge_index(), g.edge_index())
        assert float(dot(moved, g)) == pytest.approx(float(dot(g, g)))  # (one shape, read on the host)


@pytest.mark.parametrize("hops", [1, 2, None])
def test_masks_are_the_pairs_within_hops_against_breadth_first_search(hops: int | None) -> None:
    g = graph()
    expected = closure(adjacency(EDGES, N), hops)  # [i, j]: j reaches i (rows: what a node sees)
    got = np.asarray(to_array(g.mask(hops)), bool)
    np.testing.assert_array_equal(got[:N, :N], expected)
    assert not got[N:].any()  # padding sees nothing
    assert not got[:, N:].any()  # and is seen by none


def test_a_dags_reachability_mask_is_its_ancestors() -> None:
    dag_edges = np.array([[0, 0, 1, 3, 2], [1, 2, 3, 4, 4]])
    g = Graph.from_edges(dag_edges, rng.normal(size=5), dag=True, capacity=6, edge_capacity=6)
    sees = np.asarray(to_array(g.mask(None)), bool)[:5, :5]
    ancestors: nx.DiGraph[int] = nx.DiGraph(dag_edges.T.tolist())
    for i in range(5):
        assert set(np.flatnonzero(sees[i])) == nx.ancestors(ancestors, i) | {i}


def features(g: Graph[Any], width: int = 3) -> Graph[Vec[K, jax.Array]]:
    """Node features: a Vec of ``width`` per node, from the node's value."""
    return g.fmap(lambda x: Vec.from_array(jnp.stack([jnp.sin(x * (k + 1)) for k in range(width)]), K))


def attention_reference(
    x: np.ndarray, sees: np.ndarray, weights: np.ndarray, bias: np.ndarray | None = None
) -> np.ndarray:
    """softmax over what each node sees, weighted by the keys' measure, of (q.k + bias) / sqrt(d), times v."""
    s = (x @ x.T + (0.0 if bias is None else bias)) / np.sqrt(x.shape[1])
    s = np.where(sees & (weights[None, :] > 0), s + np.log(np.where(weights > 0, weights, 1.0))[None, :], -np.inf)
    e = np.exp(s - np.max(np.where(np.isfinite(s), s, -1e300), axis=1, keepdims=True))
    total = e.sum(axis=1, keepdims=True)
    return np.asarray((e / np.where(total > 0, total, 1.0)) @ x)


@pytest.mark.parametrize("jitted", [False, True], ids=["eager", "jit"])
def test_attention_over_the_edges_runs_on_the_pairs_and_equals_the_generic_definition(jitted: bool) -> None:
    weights = np.array([1.0, 0.5, 2.0, 1.0, 0.25])
    g = features(graph(weights=weights))
    x = np.asarray(to_array(g), np.float64)
    run = jax.jit if jitted else (lambda f: f)
    sees = np.asarray(to_array(g.mask(1)), bool)
    expected = attention_reference(x, sees, np.concatenate([weights, np.zeros(3)]))
    with record_fast_paths() as taken:
        sparse = run(lambda g: to_array(nn.attention(g, g, g, mask=g.edges())))(g)
    assert taken == ["attention"]
    np.testing.assert_allclose(sparse, expected, rtol=1e-10, atol=1e-12)
    with generic_only():
        generic = run(lambda g: to_array(nn.attention(g, g, g, mask=g.edges())))(g)
    np.testing.assert_allclose(generic, expected, rtol=1e-10, atol=1e-12)
    dense = run(lambda g: to_array(nn.attention(g, g, g, mask=g.mask(1))))(g)
    np.testing.assert_allclose(dense, expected, rtol=1e-10, atol=1e-12)

    # Gradients agree too: of the sparse path and of the generic definition.
    def loss(g: Graph[Any]) -> jax.Array:
        return jnp.sum(to_array(nn.attention(g, g, g, mask=g.edges())) ** 2)

    sparse_grad = jax.grad(lambda v: loss(g.with_elements(v)))(g.data)
    with generic_only():
        generic_grad = jax.grad(lambda v: loss(g.with_elements(v)))(g.data)
    np.testing.assert_allclose(to_array(sparse_grad)[:N], to_array(generic_grad)[:N], rtol=1e-9, atol=1e-12)


def test_a_node_that_receives_no_edge_sees_only_itself_or_nothing() -> None:
    g = features(Graph.from_edges([[0], [1]], rng.normal(size=3), capacity=4, edge_capacity=2))
    alone = np.asarray(to_array(nn.attention(g, g, g, mask=g.edges(self_loops=False))))
    np.testing.assert_array_equal(alone[0], 0.0)  # node 0 receives nothing: its row is 0
    np.testing.assert_array_equal(alone[2], 0.0)
    itself = np.asarray(to_array(nn.attention(g, g, g, mask=g.edges())))
    np.testing.assert_allclose(itself[2], np.asarray(to_array(g))[2], rtol=1e-12)


def test_edge_values_are_a_score_bias() -> None:
    g = features(graph())
    edge_values = jnp.asarray(rng.normal(size=12))
    bias = g.on_edges(edge_values)
    b = np.zeros((8, 8))
    b[EDGES[1], EDGES[0]] = np.asarray(edge_values)[:7]
    x = np.asarray(to_array(g), np.float64)
    expected = attention_reference(x, np.asarray(to_array(g.mask(1)), bool), np.r_[np.ones(N), np.zeros(3)], b)
    got = to_array(nn.attention(g, g, g, score=nn.Biased(bias), mask=g.mask(1)))
    np.testing.assert_allclose(got, expected, rtol=1e-10, atol=1e-12)


def test_graphs_compose_with_other_structures() -> None:
    """A Vec of graphs, a graph of Cheb functions, a graph of trees: their products against numpy."""
    g = graph()
    rows = rng.normal(size=(2, N))
    v = Vec.of([g.with_elements(jnp.asarray(np.r_[r, [r[0]] * 3])) for r in rows], S)
    np.testing.assert_allclose(to_array(mul_mv(v, g)), rows @ np.asarray(g.nodes()), rtol=1e-12)
    coefficients = rng.normal(size=(N, 4))
    functions = Graph.from_edges(EDGES, [Cheb.from_array(c, X) for c in coefficients], capacity=8, edge_capacity=12)
    value = as_graph(functions.fmap(lambda f: f.counit()))  # each node's integral over [-1, 1]
    integral = np.array([np.polynomial.chebyshev.chebint(c) for c in coefficients])
    expected = [np.polynomial.chebyshev.chebval(1.0, c) - np.polynomial.chebyshev.chebval(-1.0, c) for c in integral]
    np.testing.assert_allclose(np.asarray(value.nodes()), expected, rtol=1e-12)
    trees = [DenseTree.from_nested((float(a), (float(b), 1.0)), 4) for a, b in rng.normal(size=(N, 2))]
    of_trees = Graph.from_edges(EDGES, trees, capacity=8, edge_capacity=12)
    integrals = as_graph(of_trees.fmap(lambda t: t.counit()))
    np.testing.assert_allclose(np.asarray(integrals.nodes()), [float(t.counit()) for t in trees], rtol=1e-12)
    assert float(integrals.counit()) == pytest.approx(sum(float(t.counit()) for t in trees), rel=1e-12)
