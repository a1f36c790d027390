"""Bad input never gives a silently wrong answer.

Every public constructor and entry point of ``applicative`` is fed the same classes of bad input:
wrong rank, size or tag; integer, bool, complex and object dtypes; empty input; NaN and inf;
Python lists where arrays are expected. Each case either raises a ValueError or TypeError whose
message names the entry point and the input, raised inside the ``applicative`` package (not deep
in JAX or numpy), or returns the value an independent float64 numpy computation gives.
"""

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import numpy.polynomial.chebyshev as C
import pytest

import applicative
from applicative import (
    Cheb,
    Compose,
    DenseTree,
    Dim,
    Distribution,
    Graph,
    Leaf,
    Node,
    Quantum,
    Tree,
    Vec,
    add,
    causal_mask,
    dot,
    each_mul_mmt,
    generic_only,
    linear,
    mixture,
    mul_mm,
    mul_mmt,
    mul_mv,
    mul_vm,
    nn,
    one_hot,
    outer,
    padding_mask,
    scale,
    sinusoidal_positions,
    sum_mul_mmt,
    to_array,
)
from tests.applicative.dims import Hidden, Model, Seq


class X(Dim):
    """A function's variable."""


PACKAGE = Path(applicative.__file__).parent


@dataclass(frozen=True)
class Raises:
    """The call raises ``error`` with a message matching ``match`` (which names the entry point)."""

    error: type[Exception]
    match: str


@dataclass(frozen=True)
class Equals:
    """The call returns what the float64 numpy ``reference`` returns (NaN matching NaN), in ``dtype``
    if one is given."""

    reference: Callable[[], Any]
    dtype: Any = None


Expected = Raises | Equals

DIM: Any = Dim  # the base class as a tag, typed so that mypy lets it through


def _comb(depth: int) -> Any:
    """The shape of a comb: a leaf and a subtree, ``depth`` times."""
    shape: Any = None
    for _ in range(depth):
        shape = (shape, None)
    return shape


def bad(x: object) -> Any:
    """A wrong argument, typed so that mypy lets it through (the run-time check is under test)."""
    return x


V = Vec.from_array
v3, m23, m33 = V(np.arange(3.0), Seq), V(np.arange(6.0).reshape(2, 3), Model, Seq), V(np.ones((3, 3)), Seq, Seq)
ints = np.array([3, 1, 2])
z = np.array([1 + 2j, 3 - 1j, 0.5j])
series = np.array([1.0, 2.0, 0.5])


def chebval_at_half(c: Any) -> Callable[[], Any]:
    return lambda: C.chebval(0.5, np.asarray(c, np.float64 if not np.iscomplexobj(c) else np.complex128))


def components() -> Vec[Seq, Distribution[float]]:
    return Vec.of([Distribution([0.0], [1.0]), Distribution([1.0], [1.0])], Seq)


def template(n: int, tag: type[Dim], dtype: Any = np.float64) -> Vec[Any, jax.Array]:
    return V(np.zeros(n, dtype), tag)


def options(**change: Any) -> nn.AttentionOptions[Any, Any, Any]:
    templates = {"heads": template(2, Seq), "model": template(4, Model), "head_features": template(2, Hidden)}
    return nn.AttentionOptions(**{**templates, **change})


def encoder(**change: Any) -> object:
    arguments = {"inputs": template(3, Model), "hidden": template(5, Hidden), "layers": 1, "outputs": None}
    return nn.init_encoder(jax.random.key(0), options(), **{**arguments, **change})


NOT_A_TAG = r"dimension tag must be a subclass of Dim, not Dim itself"
NOT_NUMBERS = r"expected an array of numbers"

CASES: dict[str, tuple[Callable[[], Any], Expected]] = {
    # Vec.from_array, Vec.of, Vec.stack, Vec(...)
    "Vec.from_array: rank 2 with one tag": (
        lambda: V(np.ones((2, 2)), Seq),
        Raises(ValueError, r"Vec.from_array\(Seq\): a 2-D array needs 2 tags"),
    ),
    "Vec.from_array: rank 0": (lambda: V(np.float64(1.0), Seq), Raises(ValueError, r"Vec.from_array\(Seq\): a 0-D")),
    "Vec.from_array: tag int": (lambda: V(np.ones(2), bad(int)), Raises(TypeError, r"Vec.from_array: dimension tag")),
    "Vec.from_array: tag Dim": (lambda: V(np.ones(2), DIM), Raises(TypeError, r"Vec.from_array: " + NOT_A_TAG)),
    "Vec.from_array: tag instance": (
        lambda: V(np.ones(2), bad(Seq())),
        Raises(TypeError, r"Vec.from_array: dimension"),
    ),
    "Vec.from_array: int": (lambda: dot(V(ints, Seq), V(ints, Seq)), Equals(lambda: np.dot(ints, ints))),
    "Vec.from_array: int keeps its dtype": (lambda: to_array(V(ints, Seq)), Equals(lambda: ints, jnp.result_type(int))),
    "Vec.from_array: bool": (lambda: V(np.array([True, False, True]), Seq).counit(), Equals(lambda: 2)),
    "Vec.from_array: complex": (lambda: dot(V(z, Seq), V(z, Seq)), Equals(lambda: np.dot(z, z))),
    "Vec.from_array: object": (
        lambda: V(np.array([1.0, None]), Seq),
        Raises(TypeError, r"Vec.from_array: expected an array of numbers .* got dtype object"),
    ),
    "Vec.from_array: string": (lambda: V(np.array(["a"]), Seq), Raises(TypeError, r"Vec.from_array: " + NOT_NUMBERS)),
    "Vec.from_array: empty": (lambda: V(np.zeros(0), Seq).counit(), Equals(lambda: 0.0)),
    "Vec.from_array: NaN": (lambda: V(np.array([np.nan, 1.0]), Seq).counit(), Equals(lambda: np.nan)),
    "Vec.from_array: inf": (lambda: V(np.array([np.inf, 1.0]), Seq).counit(), Equals(lambda: np.inf)),
    "Vec.from_array: list": (lambda: to_array(V(bad([[1.0, 2.0]]), Seq, Model)), Equals(lambda: [[1.0, 2.0]])),
    "Vec.from_array: ragged list": (
        lambda: V(bad([[1.0, 2.0], [3.0]]), Seq, Model),
        Raises(TypeError, r"Vec.from_array: expected an array of numbers, got list"),
    ),
    "Vec.of: empty list": (lambda: Vec.of([], Seq), Raises(ValueError, r"Vec.of\[Seq\]: needs at least one element")),
    "Vec.of: an array": (lambda: Vec.of(bad(np.ones(2)), Seq), Raises(ValueError, r"Vec.of\[Seq\]: needs a list")),
    "Vec.of: unequal shapes": (
        lambda: Vec.of([np.ones(2), np.ones(3)], Seq),
        Raises(ValueError, r"Vec.of\[Seq\]: element 1 has leaf shapes"),
    ),
    "Vec.of: objects": (
        lambda: Vec.of([np.array([None])] * 2, Seq),
        Raises(TypeError, r"Vec.of\[Seq\]: " + NOT_NUMBERS),
    ),
    "Vec.of: tag Dim": (lambda: Vec.of([1.0], DIM), Raises(TypeError, r"Vec.of: " + NOT_A_TAG)),
    "Vec.of: ints": (lambda: to_array(Vec.of([1, 2], Seq)), Equals(lambda: [1, 2], jnp.result_type(int))),
    "Vec.stack: a list of numbers": (
        lambda: Vec.stack([1.0, 2.0], Seq),
        Raises(ValueError, r"Vec.stack\[Seq\]: leaves need one common leading axis"),
    ),
    "Vec.stack: a scalar": (lambda: Vec.stack(1.0, Seq), Raises(ValueError, r"Vec.stack\[Seq\]: leaves need one")),
    "Vec.stack: unequal leading axes": (
        lambda: Vec.stack((np.ones(2), np.ones(3)), Seq),
        Raises(ValueError, r"Vec.stack\[Seq\]: leaves need one common leading axis, got lengths \{2, 3\}"),
    ),
    "Vec.stack: object": (lambda: Vec.stack(np.array([None]), Seq), Raises(TypeError, r"Vec.stack\[Seq\]: expected")),
    "Vec.stack: tag Dim": (lambda: Vec.stack(np.ones(2), DIM), Raises(TypeError, r"Vec.stack: " + NOT_A_TAG)),
    "Vec.stack: ints": (lambda: Vec.stack(ints, Seq).counit(), Equals(lambda: 6)),
    "Vec: size disagrees with the data": (
        lambda: Vec(jnp.ones(3), Seq, 5).counit(),
        Raises(ValueError, r"Vec\[Seq\]\.counit: 5 elements, but a leaf of the data has shape \(3,\)"),
    ),
    "Vec: a batch from vmap used as one Vec": (
        lambda: jax.vmap(lambda x: V(x, Seq))(jnp.ones((4, 3))).fmap(jnp.sin),
        Raises(ValueError, r"Vec\[Seq\]\.fmap: 3 elements, but a leaf of the data has shape \(4, 3\)"),
    ),
    "Vec: index out of range": (lambda: v3[3], Raises(IndexError, r"Vec\[Seq\]: index 3 is out of range for size 3")),
    # Cheb.from_array, Cheb.of, Cheb.stack, Cheb.from_function, Cheb(...), evaluation
    "Cheb.from_array: rank 2 with one tag": (
        lambda: Cheb.from_array(np.ones((2, 2)), X),
        Raises(ValueError, r"Cheb.from_array\(X\): a 2-D array needs 2 tags"),
    ),
    "Cheb.from_array: tag Dim": (
        lambda: Cheb.from_array(series, DIM),
        Raises(TypeError, r"Cheb.from_array: " + NOT_A_TAG),
    ),
    "Cheb.from_array: int": (lambda: Cheb.from_array(ints, X)(0.5), Equals(chebval_at_half(ints))),
    "Cheb.from_array: int is promoted": (
        lambda: to_array(Cheb.from_array(np.array([1, 2]), X)),
        Equals(lambda: [1.0, 2.0], jnp.result_type(float)),
    ),
    "Cheb.from_array: int dot": (
        lambda: dot(Cheb.from_array(np.array([1, 2]), X), Cheb.from_array(np.array([1, 2]), X)),
        Equals(lambda: 14 / 3),
    ),
    "Cheb.from_array: bool": (
        lambda: Cheb.from_array(np.array([True, False, True]), X)(0.5),
        Equals(chebval_at_half([1.0, 0.0, 1.0])),
    ),
    "Cheb.from_array: complex": (lambda: Cheb.from_array(z, X)(0.5), Equals(chebval_at_half(z))),
    "Cheb.from_array: object": (
        lambda: Cheb.from_array(np.array([1.0, None]), X),
        Raises(TypeError, r"Cheb.from_array: expected an array of numbers .* got dtype object"),
    ),
    "Cheb.from_array: string": (
        lambda: Cheb.from_array(np.array(["1"]), X),
        Raises(TypeError, r"Cheb.from_array: " + NOT_NUMBERS),
    ),
    "Cheb.from_array: empty": (
        lambda: Cheb.from_array(np.zeros(0), X),
        Raises(ValueError, r"Cheb.from_array: every axis needs at least one coefficient, got shape \(0,\)"),
    ),
    "Cheb.from_array: an empty axis": (
        lambda: Cheb.from_array(np.zeros((2, 0)), X, X),
        Raises(ValueError, r"Cheb.from_array: every axis needs at least one coefficient, got shape \(2, 0\)"),
    ),
    "Cheb.from_array: NaN": (lambda: Cheb.from_array([np.nan, 1.0], X)(0.5), Equals(lambda: np.nan)),
    "Cheb.from_array: inf": (lambda: Cheb.from_array([np.inf, 1.0], X)(0.5), Equals(lambda: np.inf)),
    "Cheb.from_array: list": (lambda: Cheb.from_array(series.tolist(), X)(0.5), Equals(chebval_at_half(series))),
    "Cheb.from_array: ragged list": (
        lambda: Cheb.from_array([[1.0], [1.0, 2.0]], X, X),
        Raises(TypeError, r"Cheb.from_array: expected an array of numbers, got list"),
    ),
    "Cheb.from_array: a power series": (
        lambda: Cheb.from_array(np.polynomial.Polynomial(series), X)(np.linspace(-1, 1, 5)),
        Equals(lambda: np.polynomial.Polynomial(series)(np.linspace(-1, 1, 5))),
    ),
    "Cheb.from_array: a series on [0, 1]": (
        lambda: Cheb.from_array(C.Chebyshev(series, domain=[0, 1]), X),
        Raises(ValueError, r"Cheb.from_array: a Chebyshev series on domain \[0\. 1\.\]"),
    ),
    "Cheb.from_array: too few points": (
        lambda: Cheb.from_array(series, X, points=2),
        Raises(ValueError, r"Cheb.from_array: 2 sample points cannot resolve 3 coefficients"),
    ),
    "Cheb.of: empty list": (lambda: Cheb.of([], X), Raises(ValueError, r"Cheb.of\[X\]: needs at least one element")),
    "Cheb.of: tag Dim": (lambda: Cheb.of([1.0], DIM), Raises(TypeError, r"Cheb.of: " + NOT_A_TAG)),
    "Cheb.of: ints": (lambda: Cheb.of([3, 1, 2], X)(0.5), Equals(chebval_at_half(ints))),
    "Cheb.of: objects": (lambda: Cheb.of([np.array(None)] * 2, X), Raises(TypeError, r"Cheb.of\[X\]: " + NOT_NUMBERS)),
    "Cheb.stack: empty": (
        lambda: Cheb.stack(jnp.zeros(0), X),
        Raises(ValueError, r"Cheb.stack\[X\]: a series needs at least one coefficient, got size 0"),
    ),
    "Cheb.stack: a list of numbers": (
        lambda: Cheb.stack([1.0, 2.0], X),
        Raises(ValueError, r"Cheb.stack\[X\]: leaves need one common leading axis"),
    ),
    "Cheb.stack: ints": (lambda: Cheb.stack(jnp.asarray(ints), X)(0.5), Equals(chebval_at_half(ints))),
    "Cheb.stack: tag Dim": (lambda: Cheb.stack(series, DIM), Raises(TypeError, r"Cheb.stack: " + NOT_A_TAG)),
    "Cheb.from_function: size 0": (
        lambda: Cheb.from_function(jnp.sin, X, 0),
        Raises(ValueError, r"Cheb.from_function: a series needs at least one coefficient, got size 0"),
    ),
    "Cheb.from_function: size 2.5": (
        lambda: Cheb.from_function(jnp.sin, X, bad(2.5)),
        Raises(ValueError, r"Cheb.from_function: a series needs at least one coefficient, got size 2.5"),
    ),
    "Cheb.from_function: integer values": (
        lambda: Cheb.from_function(lambda x: jnp.ones_like(x, int), X, 4)(0.5),
        Equals(lambda: 1.0),
    ),
    "Cheb.from_function: tag Dim": (
        lambda: Cheb.from_function(jnp.sin, DIM, 4),
        Raises(TypeError, r"Cheb.from_array: " + NOT_A_TAG),
    ),
    "Cheb: size disagrees with the data": (
        lambda: Cheb(jnp.ones(3), X, 5, 10)(0.5),
        Raises(ValueError, r"Cheb\[X\]\.__call__: 5 elements, but a leaf of the data has shape \(3,\)"),
    ),
    "Cheb: evaluated at a string": (
        lambda: Cheb.from_array(series, X)(bad("0.5")),
        Raises(TypeError, r"Cheb\[X\]\.__call__: " + NOT_NUMBERS),
    ),
    "Cheb: evaluated outside [-1, 1]": (
        lambda: Cheb.from_array(series, X)(1.5),
        Raises(ValueError, r"Cheb\[X\]: evaluation outside \[-1, 1\]"),
    ),
    # Compose
    "Compose: of an array": (
        lambda: Compose(bad(np.ones(3))).counit(),
        Raises(TypeError, r"Compose.counit: the outer"),
    ),
    "Compose: of a vector": (
        lambda: Compose(v3).fmap(jnp.sin),  # type: ignore[arg-type]
        Raises(TypeError, r"Compose.fmap: the outer structure is a Vec of scalars; expected a structure of structures"),
    ),
    "Compose: ints": (lambda: Compose(V(np.ones((2, 3), int), Seq, Model)).counit(), Equals(lambda: 6)),
    # Tree
    "Tree.from_nested: None": (
        lambda: Tree.from_nested((1.0, None)),
        Raises(ValueError, r"Tree.from_nested: the leaf at \[1\] is None"),
    ),
    "Tree.from_nested: a triple": (
        lambda: Tree.from_nested((1.0, 2.0, 3.0)),
        Raises(ValueError, r"Tree.from_nested: a tuple of length 3 at the root"),
    ),
    "Tree.from_nested: lists": (lambda: Tree.from_nested([1.0, [2.0, 4.0]]).counit(), Equals(lambda: 2.0)),
    "Tree.from_nested: NaN": (lambda: Tree.from_nested((1.0, np.nan)).counit(), Equals(lambda: np.nan)),
    "Tree.from_shape: a 1-tuple": (
        lambda: Tree.from_shape(bad((None,)), 1.0),
        Raises(ValueError, r"Tree.from_shape: the shape at the root is \(None,\)"),
    ),
    "Tree.from_shape: None values": (
        lambda: Tree.from_shape((None, None), None).counit(),
        Raises(ValueError, r"Tree.counit: a leaf holds None"),
    ),
    "Leaf: holding None": (lambda: Node(Leaf(1.0), Leaf(None)).counit(), Raises(ValueError, r"Tree.counit: a leaf")),
    "Node: a value for a child": (lambda: Node(bad(1.0), Leaf(2.0)), Raises(TypeError, r"Node: left must be a Tree")),
    # Graph
    "Graph.from_edges: no node": (
        lambda: Graph.from_edges(np.zeros((2, 0), int), []),
        Raises(ValueError, r"Graph.from_edges: .*a graph needs at least one node"),
    ),
    "Graph.from_edges: a missing node": (
        lambda: Graph.from_edges([[0, 7], [1, 2]], [1.0, 2.0, 3.0]),
        Raises(ValueError, r"Graph.from_edges .*edge 1 \(7 -> 2\) names a node that does not exist"),
    ),
    "Graph.from_edges: over capacity": (
        lambda: Graph.from_edges([[0], [1]], [1.0, 2.0, 3.0], capacity=2),
        Raises(ValueError, r"Graph.from_edges .*a graph of 3 nodes does not fit in capacity 2"),
    ),
    "Graph.from_edges: a cycle said acyclic": (
        lambda: Graph.from_edges([[0, 1], [1, 0]], [1.0, 2.0], dag=True),
        Raises(ValueError, r"Graph.from_edges: the graph is not acyclic"),
    ),
    "Graph.from_adjacency: not square": (
        lambda: Graph.from_adjacency(np.ones((2, 3)), [1.0, 2.0]),
        Raises(ValueError, r"Graph.from_adjacency: .*an adjacency matrix is square"),
    ),
    "Graph.pair: two shapes": (
        lambda: dot(Graph.from_edges([[0], [1]], [1.0, 2.0]), Graph.from_edges([[1], [0]], [1.0, 2.0])),
        Raises(ValueError, r"Graph.pair: two graphs of different shapes"),
    ),
    "Graph.counit: NaN": (lambda: Graph.from_edges([[0], [1]], [1.0, np.nan]).counit(), Equals(lambda: np.nan)),
    "Graph.counit: weights": (
        lambda: Graph.from_edges([[0], [1]], [1.0, 2.0], weights=[0.25, 4.0]).counit(),
        Equals(lambda: 0.25 * 1.0 + 4.0 * 2.0),
    ),
    # DenseTree
    "DenseTree.from_nested: None": (
        lambda: DenseTree.from_nested((1.0, None)),
        Raises(ValueError, r"DenseTree.from_nested: the leaf at \[1\] is None"),
    ),
    "DenseTree.from_nested: a triple": (
        lambda: DenseTree.from_nested((1.0, 2.0, 3.0)),
        Raises(ValueError, r"DenseTree.from_nested: a tuple of length 3 at the root"),
    ),
    "DenseTree.from_nested: lists": (
        lambda: DenseTree.from_nested([1.0, [2.0, 4.0]], 5).counit(),
        Equals(lambda: 2.0),
    ),
    "DenseTree.from_nested: NaN": (lambda: DenseTree.from_nested((1.0, np.nan)).counit(), Equals(lambda: np.nan)),
    "DenseTree.from_nested: text": (
        lambda: DenseTree.from_nested(("a", "b")),
        Raises(TypeError, r"DenseTree.from_nested: expected an array of numbers, got text"),
    ),
    "DenseTree.from_nested: unlike leaves": (
        lambda: DenseTree.from_nested((np.ones(2), np.ones(3))),
        Raises(ValueError, r"DenseTree.from_nested: element 1 has leaf shapes \[\(3,\)\], element 0 has \[\(2,\)\]"),
    ),
    "DenseTree.from_nested: capacity too small": (
        lambda: DenseTree.from_nested((1.0, (2.0, 3.0)), 2),
        Raises(ValueError, r"DenseTree.from_nested \(a tree of 3 leaves, capacity 2\): .* does not fit in capacity 2"),
    ),
    "DenseTree.from_nested: capacity 2.5": (
        lambda: DenseTree.from_nested((1.0, 2.0), bad(2.5)),
        Raises(TypeError, r"DenseTree.from_nested .*: the capacity must be a positive int \(not a bool\), got 2.5 of "
                          r"type float"),
    ),
    "DenseTree.of: capacity 4.0": (
        lambda: DenseTree.of((None, None), [1.0, 3.0], bad(4.0)),
        Raises(TypeError, r"DenseTree.of .*: the capacity must be a positive int \(not a bool\), got 4.0 of type "
                          r"float"),
    ),
    "DenseTree.stack: capacity True": (
        lambda: DenseTree.stack((None, None), np.array([1.0, 3.0]), bad(True)),
        Raises(TypeError, r"DenseTree.stack .*: the capacity must be a positive int \(not a bool\), got True of type "
                          r"bool"),
    ),
    "DenseTree.from_shape: capacity '4'": (
        lambda: DenseTree.from_shape((None, None), 1.0, bad("4")),
        Raises(TypeError, r"DenseTree.from_shape .*: the capacity must be a positive int \(not a bool\), got '4' of "
                          r"type str"),
    ),
    "DenseTree.of: capacity 4": (lambda: DenseTree.of((None, None), [1.0, 3.0], 4).counit(), Equals(lambda: 2.0)),
    "DenseTree.stack: capacity np.int64(4)": (
        lambda: DenseTree.stack((None, None), np.array([1.0, 3.0]), bad(np.int64(4))).counit(),
        Equals(lambda: 2.0),
    ),
    "DenseTree.from_shape: a 1-tuple": (
        lambda: DenseTree.from_shape(bad((None,)), 1.0),
        Raises(ValueError, r"DenseTree.from_shape: the shape at the root is \(None,\)"),
    ),
    "DenseTree.from_shape: too deep": (
        lambda: DenseTree.from_shape(bad(_comb(61)), 1.0),
        Raises(ValueError, r"DenseTree.from_shape .*: a leaf at depth 61, deeper than the 60 a layout holds"),
    ),
    "DenseTree.of: too few values": (
        lambda: DenseTree.of((None, None), [1.0]),
        Raises(ValueError, r"DenseTree.of: 1 leaf values for a shape of 2 leaves"),
    ),
    "DenseTree.of: ints": (lambda: DenseTree.of((None, None), [1, 3]).counit(), Equals(lambda: 2.0)),
    "DenseTree.stack: the wrong length": (
        lambda: DenseTree.stack((None, None), np.ones(3)),
        Raises(ValueError, r"DenseTree.stack \(a shape of 2 leaves\): 2 elements, but a leaf of the data has shape"),
    ),
    "DenseTree.stack: objects": (
        lambda: DenseTree.stack((None, None), np.array([object(), object()])),
        Raises(TypeError, r"DenseTree.stack: expected an array of numbers"),
    ),
    # Distribution, Quantum, mixture
    "Distribution: complex": (
        lambda: Distribution([0.0, 1.0], [2 + 0j, -1 + 0j]),
        Raises(TypeError, r"Distribution: probabilities must be real numbers, got dtype complex"),
    ),
    "Distribution: bool": (
        lambda: Distribution([0.0, 1.0], [True, False]),
        Raises(TypeError, r"Distribution: weights must be numbers, got bools"),
    ),
    "Distribution: object": (
        lambda: Distribution([0.0, 1.0], np.array([0.5, 0.5], dtype=object)),
        Raises(TypeError, r"Distribution: expected an array of numbers .* got dtype object"),
    ),
    "Distribution: NaN": (
        lambda: Distribution([0.0, 1.0], [np.nan, 1.0]),
        Raises(ValueError, r"Distribution: weights must be finite"),
    ),
    "Distribution: inf": (
        lambda: Distribution([0.0, 1.0], [np.inf, 0.0]),
        Raises(ValueError, r"Distribution: weights must be finite"),
    ),
    "Distribution: negative": (
        lambda: Distribution([0.0, 1.0], [1.5, -0.5]),
        Raises(ValueError, r"Distribution: probabilities must be non-negative, entry 1 is -0\.5"),
    ),
    "Distribution: not summing to one": (
        lambda: Distribution([0.0, 1.0], [0.7, 0.7]),
        Raises(ValueError, r"Distribution: the probabilities must sum to one"),
    ),
    "Distribution: wrong length": (
        lambda: Distribution([0.0, 1.0], [1.0]),
        Raises(ValueError, r"Distribution: need one weight per outcome \(2\)"),
    ),
    "Distribution: rank 2 weights": (
        lambda: Distribution([0.0, 1.0], bad([[0.5, 0.5]])),
        Raises(ValueError, r"Distribution: need one weight per outcome \(2\), got weights of shape \(1, 2\)"),
    ),
    "Distribution: empty": (lambda: Distribution([], []), Raises(ValueError, r"Distribution outcomes: a distribution")),
    "Distribution: string outcomes": (
        lambda: Distribution(["a", "b"], [0.5, 0.5]),
        Raises(TypeError, r"Distribution outcomes: " + NOT_NUMBERS),
    ),
    "Distribution: int probabilities": (lambda: Distribution([2.0], [1]).counit(), Equals(lambda: 2.0)),
    "Distribution: int outcomes": (lambda: Distribution([1, 3], [0.5, 0.5]).counit(), Equals(lambda: 2.0)),
    "Quantum: cancelling on merging": (
        lambda: Quantum([0.0, 0.0, 1.0], [0.5, -0.5, np.sqrt(0.5)]),
        Raises(ValueError, r"Quantum: the squared magnitudes of the amplitudes must sum to one .* sum to 0\.5"),
    ),
    "Quantum: normalised on merging": (lambda: Quantum([2.0, 2.0], [0.5, 0.5]).counit(), Equals(lambda: 2.0)),
    "Quantum: bool": (lambda: Quantum([0.0, 1.0], [True, False]), Raises(TypeError, r"Quantum: weights must be num")),
    "Quantum: object": (
        lambda: Quantum([0.0, 1.0], np.array([1.0, 0.0], dtype=object)),
        Raises(TypeError, r"Quantum: expected an array of numbers"),
    ),
    "Quantum: NaN": (
        lambda: Quantum([0.0, 1.0], [np.nan, 1.0]),
        Raises(ValueError, r"Quantum: weights must be finite"),
    ),
    "mixture: complex weights": (
        lambda: mixture(V(np.array([0.5 + 0j, 0.5]), Seq), components()),
        Raises(TypeError, r"mixture: probabilities must be real numbers"),
    ),
    "mixture: bool weights": (
        lambda: mixture(V(np.array([True, False]), Seq), components()),
        Raises(TypeError, r"mixture: weights must be numbers, got bools"),
    ),
    "mixture: negative weights": (
        lambda: mixture(V(np.array([1.5, -0.5]), Seq), components()),
        Raises(ValueError, r"mixture: probabilities must be non-negative"),
    ),
    "mixture: weights not summing to one": (
        lambda: mixture(V(np.array([0.5, 0.25]), Seq), components()),
        Raises(ValueError, r"mixture: the probabilities must sum to one"),
    ),
    "mixture: int weights": (lambda: mixture(V(np.array([0, 1]), Seq), components()).counit(), Equals(lambda: 1.0)),
    # The sequence helpers
    "one_hot: float tokens": (
        lambda: one_hot(np.array([0.0, 1.0]), Seq, 3, Model),
        Raises(ValueError, r"one_hot: needs a 1-D integer array of tokens, got float64"),
    ),
    "one_hot: bool tokens": (
        lambda: one_hot(np.array([True]), Seq, 3, Model),
        Raises(ValueError, r"one_hot: needs a 1-D integer array of tokens, got bool"),
    ),
    "one_hot: rank 2": (
        lambda: one_hot(np.zeros((2, 2), int), Seq, 3, Model),
        Raises(ValueError, r"one_hot: needs a 1-D integer array of tokens, got int64 \(2, 2\)"),
    ),
    "one_hot: out of range": (
        lambda: one_hot(np.array([0, 3]), Seq, 3, Model),
        Raises(ValueError, r"one_hot: tokens must lie in \[0, 3\)"),
    ),
    "one_hot: strings": (lambda: one_hot(bad(["a"]), Seq, 3, Model), Raises(TypeError, r"one_hot: " + NOT_NUMBERS)),
    "one_hot: vocabulary 2.5": (
        lambda: one_hot(ints, Seq, bad(2.5), Model),
        Raises(TypeError, r"one_hot: vocabulary must be an integer, got 2\.5"),
    ),
    "one_hot: tag Dim": (lambda: one_hot(ints, Seq, 4, DIM), Raises(TypeError, r"Vec.from_array: " + NOT_A_TAG)),
    "one_hot: a list": (lambda: to_array(one_hot(bad([2, 0]), Seq, 3, Model)), Equals(lambda: np.eye(3)[[2, 0]])),
    "one_hot: empty": (lambda: to_array(one_hot(np.zeros(0, int), Seq, 3, Model)), Equals(lambda: np.zeros((0, 3)))),
    "causal_mask: length 2.5": (
        lambda: causal_mask(bad(2.5), Seq),
        Raises(TypeError, r"causal_mask: length must be an integer, got 2\.5"),
    ),
    "causal_mask: length -1": (
        lambda: causal_mask(-1, Seq),
        Raises(ValueError, r"causal_mask: length must be non-negative, got -1"),
    ),
    "causal_mask: tag Dim": (lambda: causal_mask(2, DIM), Raises(TypeError, r"Vec.from_array: " + NOT_A_TAG)),
    "causal_mask: length 0": (lambda: to_array(causal_mask(0, Seq)), Equals(lambda: np.zeros((0, 0), bool))),
    "padding_mask: float length": (
        lambda: padding_mask(1.5, 3, Seq),
        Raises(ValueError, r"padding_mask: length must be an integer scalar, got float"),
    ),
    "padding_mask: a list as length": (
        lambda: padding_mask(bad([1]), 3, Seq),
        Raises(ValueError, r"padding_mask: length must be an integer scalar, got int\d+ \(1,\)"),
    ),
    "padding_mask: length above size": (
        lambda: padding_mask(4, 3, Seq),
        Raises(ValueError, r"padding_mask: length 4 is outside \[0, 3\]"),
    ),
    "padding_mask: size 2.5": (
        lambda: padding_mask(1, bad(2.5), Seq),
        Raises(TypeError, r"padding_mask: size must be an integer"),
    ),
    "padding_mask: query_size without query_seq": (
        lambda: padding_mask(1, 3, Seq, *bad([2])),
        Raises(TypeError, r"padding_mask: query_size and query_seq come together"),
    ),
    "padding_mask: int64 length": (
        lambda: to_array(padding_mask(np.int64(2), 3, Seq)),
        Equals(lambda: np.broadcast_to(np.arange(3) < 2, (3, 3))),
    ),
    "sinusoidal_positions: int dtype": (
        lambda: sinusoidal_positions(3, Seq, 4, Model, dtype=jnp.int32),
        Raises(TypeError, r"sinusoidal_positions: dtype must be a floating type, got int32"),
    ),
    "sinusoidal_positions: length 2.5": (
        lambda: sinusoidal_positions(bad(2.5), Seq, 4, Model),
        Raises(TypeError, r"sinusoidal_positions: length must be an integer, got 2\.5"),
    ),
    "sinusoidal_positions: tag Dim": (
        lambda: sinusoidal_positions(3, Seq, 4, DIM),
        Raises(TypeError, r"Vec.from_array: " + NOT_A_TAG),
    ),
    # The linear algebra (each on its fast path here; tests/applicative/test_linalg.py checks the generic one too)
    "dot: an array": (lambda: dot(bad(np.ones(3)), v3), Raises(TypeError, r"dot: argument a is a ndarray")),
    "dot: a list": (lambda: dot(v3, bad([1.0, 2.0, 3.0])), Raises(TypeError, r"dot: argument b is a list")),
    "dot: a matrix": (lambda: dot(m33, v3), Raises(TypeError, r"dot: argument a is a Vec\[Seq\] of size 3 of Vec")),
    "dot: wrong size": (lambda: dot(v3, V(np.ones(4), Seq)), Raises(ValueError, r"dot: dimension mismatch")),
    "dot: wrong tag": (lambda: dot(v3, bad(V(np.ones(3), Model))), Raises(ValueError, r"dot: dimension mismatch")),
    "dot: data disagreeing with size": (
        lambda: dot(v3, Vec(jnp.ones(2), Seq, 3)),
        Raises(ValueError, r"dot: a Vec\[Seq\] of size 3 holds coordinates of shape \(2,\), not \(3,\)"),
    ),
    "dot: ints": (lambda: dot(V(ints, Seq), v3), Equals(lambda: np.dot(ints, np.arange(3.0)))),
    "dot: generic, ints": (
        lambda: _generic(lambda: dot(V(ints, Seq), V(ints, Seq))),
        Equals(lambda: np.dot(ints, ints)),
    ),
    "outer: a matrix": (lambda: outer(v3, m33), Raises(TypeError, r"outer: argument b is a Vec\[Seq\] of size 3 of")),
    "outer: an array": (lambda: outer(bad(np.ones(2)), v3), Raises(TypeError, r"outer: argument a is a ndarray")),
    "mul_mv: a vector for the matrix": (
        lambda: mul_mv(bad(v3), v3),
        Raises(TypeError, r"mul_mv: argument m is a Vec\[Seq\] of size 3 holding scalars; expected a structure of st"),
    ),
    "mul_mv: an array for the vector": (
        lambda: mul_mv(m23, bad(np.ones(3))),
        Raises(TypeError, r"mul_mv: argument v is a ndarray; expected a structure \(a vector\)"),
    ),
    "mul_mv: generic, a tree of scalars for the matrix": (
        lambda: mul_mv(bad(Tree.from_nested((1.0, 2.0))), Tree.from_nested((1.0, 2.0))),
        Raises(TypeError, r"dot: argument a is a \w+; expected a structure \(a vector\)"),  # on each row
    ),
    "mul_mv: ints": (lambda: to_array(mul_mv(V(np.ones((2, 3), int), Model, Seq), v3)), Equals(lambda: [3.0, 3.0])),
    "mul_vm: a vector for the matrix": (lambda: mul_vm(v3, bad(v3)), Raises(TypeError, r"mul_vm: argument m is a Vec")),
    "mul_mm: a vector": (
        lambda: mul_mm(m23, bad(v3)),
        Raises(TypeError, r"mul_mm: argument b is a Vec\[Seq\] of size 3"),
    ),
    "mul_mm: an array": (
        lambda: mul_mm(bad(np.ones((2, 3))), m33),
        Raises(TypeError, r"mul_mm: argument a is a ndarray"),
    ),
    "mul_mmt: a vector": (lambda: mul_mmt(m23, bad(v3)), Raises(TypeError, r"mul_mmt: argument b is a Vec\[Seq\]")),
    "each_mul_mmt: matrices": (
        lambda: each_mul_mmt(bad(m33), m33),
        Raises(TypeError, r"each_mul_mmt: argument a is a"),
    ),
    "each_mul_mmt: a vector for the rows": (
        lambda: each_mul_mmt(bad(V(np.ones((2, 3, 3)), Model, Seq, Seq)), bad(v3)),
        Raises(TypeError, r"each_mul_mmt: argument b is a Vec\[Seq\] of size 3"),
    ),
    "sum_mul_mmt: matrices": (
        lambda: sum_mul_mmt(bad(m33), bad(m33)),
        Raises(TypeError, r"sum_mul_mmt: argument a is a"),
    ),
    "linear: a vector for the weights": (
        lambda: linear(bad(v3), v3, v3),
        Raises(TypeError, r"linear: argument w is a Vec\[Seq\] of size 3 holding scalars"),
    ),
    "linear: an array for the bias": (
        lambda: linear(m23, bad(np.ones(2)), v3),
        Raises(TypeError, r"linear: argument c is a ndarray"),
    ),
    "add: an array": (lambda: add(v3, bad(np.ones(3))), Raises(TypeError, r"add: argument b is a ndarray")),
    "add: a matrix and a vector": (
        lambda: add(m33, bad(v3)),
        Raises(TypeError, r"add: the arguments hold different elements, a Vec and an array of shape \(\)"),
    ),
    "add: ints and floats": (lambda: to_array(add(V(ints, Seq), v3)), Equals(lambda: ints + np.arange(3.0))),
    "scale: an array for r": (
        lambda: scale(jnp.ones(3), v3),
        Raises(TypeError, r"scale: r must be a scalar \(a number or a 0-d array\), got an array of shape \(3,\)"),
    ),
    "scale: a Vec for r": (lambda: scale(bad(v3), v3), Raises(TypeError, r"scale: r must be a scalar .* got Vec")),
    "scale: ints": (lambda: to_array(scale(2.0, V(ints, Seq))), Equals(lambda: 2.0 * ints)),
    # nn initialisers: templates
    # nn.attention: a shape mistake is attention's, naming the queries, keys and values
    "nn.attention: keys and values on two structures": (
        lambda: nn.attention(m23, m33, bad(V(np.ones((4, 3)), Hidden, Seq))),
        Raises(ValueError, r"attention: the keys are on a Vec\[Seq\] of size 3 but the values on a Vec\[Hidden\] "
                           r"of size 4 \(queries I \(H a\), keys F \(H a\), values F \(G a\), .*the queries are a "
                           r"Vec\[Model\] of size 2 of Vec\[Seq\] of size 3 holding scalars, the keys a Vec\[Seq\]"),
    ),
    "nn.attention: queries and keys of other features": (
        lambda: nn.attention(m23, bad(V(np.ones((3, 2)), Seq, Hidden)), m33),
        Raises(ValueError, r"attention: the queries' features are a Vec\[Seq\] of size 3 but the keys' features a "
                           r"Vec\[Hidden\] of size 2"),
    ),
    "nn.attention: queries a vector": (
        lambda: nn.attention(bad(v3), m33, m33),
        Raises(TypeError, r"attention: argument queries is a Vec\[Seq\] of size 3 holding scalars; expected a "
                          r"structure of structures"),
    ),
    "nn.attention: a mask of another shape": (
        lambda: nn.attention(m33, m33, m33, mask=V(np.ones((3, 2), bool), Seq, Seq)),
        Raises(ValueError, r"attention: the mask's columns are a Vec\[Seq\] of size 2 but the keys a Vec\[Seq\] "
                           r"of size 3"),
    ),
    "nn.attention: a mismatch the linear algebra meets inside": (
        lambda: nn.attention(m33, m33, m33, score=nn.Multiplicative(V(np.ones((2, 2)), Seq, Seq))),
        Raises(ValueError, r"attention: mul_mmt: dimension mismatch: Vec\[Seq\] of size 2 vs Vec\[Seq\] of size 3 "
                           r"\(the queries are a Vec\[Seq\] of size 3 of Vec\[Seq\] of size 3 holding scalars"),
    ),
    "nn.Linear.init: an array template": (
        lambda: nn.Linear.init(jax.random.key(0), bad(np.zeros(3)), template(2, Model)),
        Raises(TypeError, r"Linear.init: argument inputs is a ndarray"),
    ),
    "nn.Linear.init: a matrix template": (
        lambda: nn.Linear.init(jax.random.key(0), m23, template(2, Model)),  # type: ignore[arg-type]
        Raises(TypeError, r"Linear.init: argument inputs is a Vec\[Model\] of size 2 of Vec\[Seq\] of size 3"),
    ),
    "nn.Linear.init: an int template": (
        lambda: nn.Linear.init(jax.random.key(0), template(3, Seq, int), template(2, Model)),
        Raises(TypeError, r"Linear.init: inputs template's leaves must be floating .* got int64"),
    ),
    "nn.init_encoder: an array template": (
        lambda: encoder(hidden=np.zeros(4)),
        Raises(TypeError, r"init_encoder: argument hidden is a ndarray"),
    ),
    "nn.init_encoder: layers -1": (
        lambda: encoder(layers=-1),
        Raises(ValueError, r"init_encoder: layers must be a non-negative integer, got -1"),
    ),
    "nn.AttentionOptions: an array template": (
        lambda: options(model=bad(np.zeros(4))),
        Raises(TypeError, r"AttentionOptions: argument model is a ndarray"),
    ),
    "nn.AttentionOptions: an int template": (
        lambda: options(head_features=template(2, Hidden, int)),
        Raises(TypeError, r"AttentionOptions: head_features template's leaves must be floating .* got int64"),
    ),
    "nn.CrossAttentionBlock.init: an int source template": (
        lambda: nn.CrossAttentionBlock.init(jax.random.key(0), options(), source=template(3, Seq, int)),
        Raises(TypeError, r"CrossAttentionBlock.init: source template's leaves must be floating .* got int64"),
    ),
    "nn.FeedForward.init: a matrix template": (
        lambda: nn.FeedForward.init(jax.random.key(0), model=template(3, Seq), hidden=bad(m23)),
        Raises(TypeError, r"FeedForward.init: argument hidden is a Vec\[Model\] of size 2 of Vec\[Seq\] of size 3"),
    ),
    # nn modules built from parts: the parts must meet (tests/applicative/test_nn_blocks.py has every module)
    "nn.Linear: a bias that disagrees with the weight": (
        lambda: nn.Linear(m23, template(3, Model)),
        Raises(ValueError, r"Linear: the bias is a Vec\[Model\] of size 3 but the weight's outputs are a "
                           r"Vec\[Model\] of size 2"),
    ),
    "nn.Linear: a vector for the weight": (
        lambda: nn.Linear(bad(v3), None),
        Raises(TypeError, r"Linear: argument weight is a Vec\[Seq\] of size 3 holding scalars; expected a structure "
                          r"of structures"),
    ),
    "nn.Linear: a matrix for the bias": (
        lambda: nn.Linear(m23, bad(m23)),
        Raises(TypeError, r"Linear: argument bias is a Vec\[Model\] of size 2 of Vec\[Seq\] of size 3 holding "
                          r"scalars; expected a structure \(a vector\) of scalars"),
    ),
    "nn.MLP: hidden widths that disagree": (
        lambda: nn.MLP(nn.Linear(m23, None), nn.Linear(V(np.ones((3, 4)), Seq, Model), None)),
        Raises(ValueError, r"MLP: the hidden layer's outputs are a Vec\[Model\] of size 2 but the output layer's "
                           r"inputs are a Vec\[Model\] of size 4"),
    ),
    "nn.LayerNorm: gamma and beta of two sizes": (
        lambda: nn.LayerNorm(template(3, Model), template(4, Model)),
        Raises(ValueError, r"LayerNorm: gamma is a Vec\[Model\] of size 3 but beta is a Vec\[Model\] of size 4"),
    ),
}


def _generic(call: Callable[[], Any]) -> Any:
    with generic_only():
        return call()


def _raised_in(excinfo: pytest.ExceptionInfo[BaseException]) -> Path:
    """The file of the frame that raised."""
    return Path(excinfo.traceback[-1].path)


@pytest.mark.parametrize("name", list(CASES))
def test_bad_input_raises_clearly_or_gives_the_right_value(name: str) -> None:
    call, expected = CASES[name]
    if isinstance(expected, Raises):
        with pytest.raises(expected.error, match=expected.match) as excinfo:
            call()
        assert _raised_in(excinfo).is_relative_to(PACKAGE), f"raised in {_raised_in(excinfo)}, not in applicative"
        return
    value = np.asarray(call())
    reference = np.asarray(expected.reference())
    np.testing.assert_allclose(value, reference, rtol=1e-12, atol=1e-12)
    assert value.shape == reference.shape
    if expected.dtype is not None:
        assert value.dtype == expected.dtype


# Exports that build or compute nothing from user data: protocols, brands, types, the algebra, record
# machinery, and the readers and combinators (as_vec, to_array, ap, ...) that act on built structures.
NOT_ENTRY_POINTS = {
    "ARITHMETIC", "Applicative", "Arithmetic", "Axis", "ChebOf", "ComposeOf", "Counit", "Dense", "DenseTreeOf",
    "Dim", "DistributionOf", "Functor", "GraphOf", "Measured", "Module", "Pointwise", "QuantumOf", "Real", "Ring",
    "Shaped", "SparseMask", "TreeOf",
    "VecOf", "VectorSpace", "ap", "arithmetic", "as_cheb", "as_dense_tree", "as_graph", "as_tree", "as_vec", "counit",
    "generic_only", "lift_a2", "record", "record_fast_paths", "static", "to_array",
}  # fmt: skip


def test_every_public_constructor_and_entry_point_is_walked() -> None:
    # A new export of applicative is an entry point unless listed above: it needs cases here.
    walked = {name.split(":")[0].split(".")[0] for name in CASES}
    entry_points = set(applicative.__all__) - NOT_ENTRY_POINTS
    assert entry_points <= walked, entry_points - walked
    assert set(applicative.__all__) >= NOT_ENTRY_POINTS, NOT_ENTRY_POINTS - set(applicative.__all__)
