"""Hypothesis strategies for the library's instances: triples ``(x, y, z)`` for the law suite.

Each strategy draws three structures that can be paired (same brand, same
size for a Vec) holding float64 scalars; ``INSTANCES`` lists them with the
element maps their laws are checked with:

    for name, (triples, maps) in INSTANCES.items():
        check_laws(triples(), maps=maps)

A new structure brings its own strategy, as these do.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import hypothesis.extra.numpy as hnp
import hypothesis.strategies as st
import jax
import jax.numpy as jnp
import numpy as np

from applicative.instances import Cheb, Compose, DenseTree, Distribution, Graph, Leaf, Node, Quantum, Vec, dyadic
from applicative.instances.tree import Shape
from applicative.laws import Maps, Triple, leafwise
from applicative.protocols.algebra import ARITHMETIC, Pointwise
from applicative.protocols.kinds import Dim

__all__ = [
    "AFFINE",
    "INSTANCES",
    "TREE_SHAPES",
    "Law",
    "LawInner",
    "cheb2_triples",
    "cheb_triples",
    "cheb_vec_triples",
    "compose_triples",
    "dense_tree_triples",
    "distribution_triples",
    "graph_triples",
    "matrix_triples",
    "quantum_triples",
    "shapes",
    "tree_triples",
    "vec_cheb_triples",
    "vec_triples",
]


class Law(Dim):
    """The dimension tag of law-test structures."""


class LawInner(Dim):
    """The inner dimension tag of law-test structures of structures."""


def _arrays(shape: tuple[int, ...]) -> st.SearchStrategy[np.ndarray]:
    return hnp.arrays(np.float64, shape, elements=st.floats(-10, 10, allow_nan=False, width=64))


def _triples(
    shapes: st.SearchStrategy[tuple[int, ...]], build: Callable[[np.ndarray], Any]
) -> st.SearchStrategy[Triple]:
    def three(shape: tuple[int, ...]) -> st.SearchStrategy[Triple]:
        return st.tuples(*(_arrays(shape).map(build) for _ in range(3)))

    return shapes.flatmap(three)


# Vec and Compose


def vec_triples(max_size: int = 6) -> st.SearchStrategy[Triple]:
    """Triples of ``Vec[Law, Array]`` of one random size."""
    return _triples(st.tuples(st.integers(1, max_size)), lambda a: Vec.from_array(a, Law))


def matrix_triples(max_size: int = 5) -> st.SearchStrategy[Triple]:
    """Triples of ``Vec[Law, Vec[LawInner, Array]]``, seen as Vecs whose elements are Vecs."""
    sizes = st.tuples(st.integers(1, max_size), st.integers(1, max_size))
    return _triples(sizes, lambda a: Vec.from_array(a, Law, LawInner))


def compose_triples(max_size: int = 5) -> st.SearchStrategy[Triple]:
    """Triples of ``Compose[VecOf[Law], VecOf[LawInner], Array]``: a grid of scalars."""
    sizes = st.tuples(st.integers(1, max_size), st.integers(1, max_size))
    return _triples(sizes, lambda a: Compose(Vec.from_array(a, Law, LawInner)))


# Chebyshev functions. Every new resolution compiles its DCTs afresh: the
# strategies draw from a few resolutions, odd and even, one of them a constant.

CHEB_SIZES = st.sampled_from([(1,), (4,), (7,)])
CHEB2_SIZES = st.sampled_from([(1, 3), (4, 2), (3, 5)])


def cheb_triples() -> st.SearchStrategy[Triple]:
    """Triples of ``Cheb[Law, Array]`` of one random resolution."""
    return _triples(CHEB_SIZES, lambda a: Cheb.from_array(a, Law))


def cheb2_triples() -> st.SearchStrategy[Triple]:
    """Triples of ``Cheb[Law, Cheb[LawInner, Array]]``: functions of two variables."""
    return _triples(CHEB2_SIZES, lambda a: Cheb.from_array(a, Law, LawInner))


def vec_cheb_triples() -> st.SearchStrategy[Triple]:
    """Triples of ``Compose`` of a Vec of functions: C functions of one variable."""
    # Stacked storage: the Vec's elements are functions whose coefficients run along axis 1.
    return _triples(
        CHEB2_SIZES, lambda a: Compose(Vec.stack(Cheb(jnp.asarray(a), LawInner, a.shape[1], 2 * a.shape[1]), Law))
    )


def cheb_vec_triples() -> st.SearchStrategy[Triple]:
    """Triples of ``Compose`` of a function with Vec values: a function with C channels."""
    return _triples(CHEB2_SIZES, lambda a: Compose(Cheb.stack(Vec.from_array(a, Law, LawInner).data, Law)))


# Trees

TREE_SHAPES: tuple[Shape, ...] = (
    None,
    (None, None),
    ((None, None), None),
    (None, (None, None)),
    ((None, None), (None, None)),
    (((None, None), None), None),
    (None, (None, (None, None))),
    (((None, None), (None, None)), (None, (None, None))),
)
"""A few shapes of depth <= 3: every pairing case (leaf/leaf, leaf/node, node/node) occurs at
every level; few, since each new shape traces afresh under ``jit``."""


def tree_triples(shapes: tuple[Shape, ...] = TREE_SHAPES) -> st.SearchStrategy[Triple]:
    """Triples ``(x, y, z)`` of trees of independently drawn shapes with scalar float64 leaves."""

    def with_values(shape: Shape) -> st.SearchStrategy[Any]:
        if shape is None:
            return st.floats(-10, 10, allow_nan=False, width=64).map(lambda v: Leaf(jnp.asarray(np.float64(v))))
        return st.builds(Node, with_values(shape[0]), with_values(shape[1]))

    one = st.sampled_from(shapes).flatmap(with_values)
    return st.tuples(one, one, one)


def shapes(max_leaves: int = 64, max_depth: int = dyadic.MAX_DEPTH) -> st.SearchStrategy[Shape]:
    """Random tree shapes of 1 to ``max_leaves`` leaves, no leaf deeper than ``max_depth`` (by default
    what a layout holds): each node splits its leaves at a uniformly drawn point among those that leave
    each side no more leaves than its depth can hold, so shapes run from balanced to combs."""

    @st.composite
    def draw(draw: st.DrawFn) -> Shape:
        def split(n: int, room: int) -> Shape:  # n leaves below a node with `room` levels left
            if n == 1:
                return None
            most = 2 ** (room - 1)  # the most leaves either child can hold
            k = draw(st.integers(max(1, n - most), min(n - 1, most)))
            return (split(k, room - 1), split(n - k, room - 1))

        return split(draw(st.integers(1, min(max_leaves, 2**max_depth))), max_depth)

    return draw()


def dense_tree_triples(max_leaves: int = 8, capacities: tuple[int, ...] = (8,)) -> st.SearchStrategy[Triple]:
    """Triples of ``DenseTree`` of float64 scalars: independently drawn shapes of up to ``max_leaves``
    leaves, each padded to a capacity drawn from ``capacities`` (few: each is a new array shape)."""

    def one(shape: Shape) -> st.SearchStrategy[Any]:
        n = len(jax.tree_util.tree_leaves(Node.from_shape(shape, 0.0)))
        values = hnp.arrays(np.float64, (n,), elements=st.floats(-10, 10, allow_nan=False, width=64))
        fitting = [c for c in capacities if c >= n]
        return st.tuples(values, st.sampled_from(fitting)).map(lambda vc: DenseTree.stack(shape, vc[0], vc[1]))

    tree = shapes(max_leaves).flatmap(one)
    return st.tuples(tree, tree, tree)


def graph_triples(max_nodes: int = 6, capacity: int = 8, edge_capacity: int = 16) -> st.SearchStrategy[Triple]:
    """Triples of ``Graph`` of float64 scalars on one drawn graph (1 to ``max_nodes`` nodes, any edges
    among them up to ``edge_capacity``, a measure of 1 or a drawn weight per node), padded to the
    capacities: the three hold its one layout (``pair`` zips values of one graph)."""

    @st.composite
    def draw(draw: st.DrawFn) -> Triple:
        n = draw(st.integers(1, max_nodes))
        pairs = draw(st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, n - 1)), max_size=edge_capacity))
        weights = draw(st.none() | hnp.arrays(np.float64, (n,), elements=st.floats(0.25, 4.0, width=32)))
        edges = np.array(pairs, np.int64).reshape(-1, 2).T
        values = hnp.arrays(np.float64, (n,), elements=st.floats(-10, 10, allow_nan=False, width=64))
        g = Graph.from_edges(edges, draw(values), capacity=capacity, edge_capacity=edge_capacity, weights=weights)
        y, z = (g.with_elements(jnp.asarray(_laid(draw(values), capacity))) for _ in range(2))
        return g, y, z

    return draw()


def _laid(values: np.ndarray, capacity: int) -> np.ndarray:
    """Node values at the capacity's slots, padding a copy of node 0's (as ``Graph`` lays them out)."""
    return np.concatenate([values, np.full(capacity - len(values), values[0])])


# Finite distributions: 1 to 3 outcomes each.


def _outcome_values() -> st.SearchStrategy[float]:
    # Small integers make merges (coinciding sums, fst of a pair) frequent; other floats make them rare.
    # Floats exact in float32: distinct outcomes stay distinct with JAX's 64-bit types on or off.
    return st.one_of(st.integers(-3, 3).map(float), st.floats(-10, 10, allow_nan=False, width=32))


def _finite(build: Callable[[np.ndarray, np.ndarray], Any], complex_weights: bool) -> st.SearchStrategy[Any]:
    def one(n: int) -> st.SearchStrategy[Any]:
        # A state's norm is that of its merged amplitudes: distinct outcomes keep the drawn ones.
        outcomes = st.lists(_outcome_values(), min_size=n, max_size=n, unique=complex_weights).map(np.array)
        magnitudes = st.lists(st.floats(0.1, 1.0), min_size=n, max_size=n).map(np.array)
        phases = st.lists(st.floats(-np.pi, np.pi), min_size=n, max_size=n).map(np.array)
        if not complex_weights:
            return st.tuples(outcomes, magnitudes).map(lambda t: build(t[0], t[1] / t[1].sum()))
        return st.tuples(outcomes, magnitudes, phases).map(
            lambda t: build(t[0], t[1] * np.exp(1j * t[2]) / np.sqrt(np.sum(t[1] ** 2)))
        )

    return st.integers(1, 3).flatmap(one)


def distribution_triples() -> st.SearchStrategy[Triple]:
    """Triples of ``Distribution`` of scalars (float64 arrays of values exact in float32)."""
    d = _finite(lambda x, p: Distribution(x, p), complex_weights=False)
    return st.tuples(d, d, d)


def quantum_triples() -> st.SearchStrategy[Triple]:
    """Triples of normalised ``Quantum`` states of scalars (float64 arrays of values exact in float32,
    each state drawn on distinct outcomes)."""
    q = _finite(lambda x, a: Quantum(x, a), complex_weights=True)
    return st.tuples(q, q, q)


def _rowwise(f: Callable[[Any], Any]) -> Callable[[Any], Any]:
    return lambda row: row.fmap(f)


AFFINE = Maps(leafwise(lambda a: 2.0 * a - 1.0), leafwise(lambda a: 0.5 * a + 3.0))
"""fmap is exact on Chebyshev functions for affine maps; nonlinear ones are checked separately,
with their bounds (tests/applicative/test_chebyshev.py)."""

INSTANCES: dict[str, tuple[Callable[[], st.SearchStrategy[Triple]], Maps]] = {
    "Vec": (vec_triples, Maps()),
    "Vec of Vec": (matrix_triples, Maps(_rowwise(Maps.f), _rowwise(Maps.g), Pointwise(ARITHMETIC))),
    "Compose Vec Vec": (compose_triples, Maps()),
    "Cheb": (cheb_triples, AFFINE),
    "Cheb of Cheb": (cheb2_triples, Maps(_rowwise(AFFINE.f), _rowwise(AFFINE.g), Pointwise(ARITHMETIC))),
    "Compose Vec Cheb": (vec_cheb_triples, AFFINE),
    "Compose Cheb Vec": (cheb_vec_triples, AFFINE),
    "Tree": (tree_triples, Maps()),
    "DenseTree": (dense_tree_triples, Maps()),
    "Graph": (graph_triples, Maps()),
    "Distribution": (distribution_triples, Maps()),
    "Quantum": (quantum_triples, Maps()),
}
"""Law-test strategies of the library's instances, and the element maps to use, by name
(``check_laws`` checks the laws each claims: all of them but for ``Quantum``)."""
