"""A user's structure composes as safely as the library's own (docs/new_structure.md, "Shape is never an
element"): written as the guides teach, a structure of trees is right eagerly and under ``jit``; written as
docs/legendre.md once did (a ``tree_map`` over every leaf), it is refused by name, never silently wrong.

The user's structure is ``Fourier`` (tests/applicative/fourier.py), a coefficient structure: its ``fmap``
transforms its coefficients to values and back, so a tree among its values is reached through
``applicative.stacked.along`` and the tree's own ``restack``. Every value is checked against float64 numpy:
the series' coefficients contracted with the trees' leaf values through the dyadic measure 2^-depth.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any, TypeVar

import hypothesis.strategies as st
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from applicative import (
    Cheb,
    Compose,
    DenseTree,
    Dim,
    Leaf,
    Node,
    Vec,
    add,
    as_dense_tree,
    dot,
    generic_only,
    laws,
    mul_mv,
    nn,
    outer,
    record,
    record_fast_paths,
    to_array,
)
from applicative.instances import dyadic
from applicative.stacked import stack
from tests.applicative.fourier import Fourier, gram, transform
from tests.applicative.mesh import Mesh

N = TypeVar("N", bound=Dim)
A = TypeVar("A", covariant=True)
B = TypeVar("B")

SHAPE = (None, ((None, None), None))  # four leaves, at depths 1, 3, 3, 2
OTHER = ((None, None), (None, None))
CAPACITY = 6
rng = np.random.default_rng(43)


class X(Dim):
    """The variable of the user's series."""


class Key(Dim):
    """Query and key features."""


class Value(Dim):
    """Value features."""


def trees(count: int, shape: Any = SHAPE) -> list[DenseTree[jax.Array]]:
    """``count`` trees of one shape, normal leaf values."""
    n = len(dyadic.depths_of(shape))
    return [DenseTree.of(shape, list(jnp.asarray(rng.normal(size=n))), CAPACITY) for _ in range(count)]


def leaf_values(t: DenseTree[Any]) -> np.ndarray:
    """The values of a tree's leaves (a stack of trees: of each), padding dropped."""
    return np.asarray(t.data)[..., : len(dyadic.depths_of(SHAPE))]


MEASURE = np.ldexp(1.0, -np.asarray(dyadic.depths_of(SHAPE)))
"""2^-depth of each leaf of SHAPE: the dyadic measure, from the recursive specification."""


@record
class EveryLeaf(Fourier[N, A]):
    """``Fourier`` as docs/legendre.md wrote a coefficient structure before: its transforms map every pytree
    leaf of its values with ``jax.tree_util.tree_map``, a tree's layout among them."""

    def fmap(self, f: Callable[[A], B]) -> EveryLeaf[N, B]:
        values, project = transform(self.size, self.points)

        def every(matrix: np.ndarray, elements: Any) -> Any:
            return jax.tree_util.tree_map(lambda leaf: jnp.tensordot(matrix, leaf, axes=1), elements)

        mapped = jax.vmap(f, axis_size=self.points)(every(values, self.data))
        return self.with_elements(every(project, mapped))

    def with_elements(self, elements: B) -> EveryLeaf[N, B]:  # (pair and pure build through it too)
        return EveryLeaf(elements, self.tag, self.size, self.points)

    def pair(self, other: Any) -> EveryLeaf[N, tuple[A, Any]]:
        return self.with_elements(super().pair(other).data)


# JAX refuses the transform on the layout's dtype, whose name states the rule.
REFUSED = re.escape(str(dyadic.LAYOUT))  # key<DenseTree layout: a tree's shape is never an element; map its ...>


@pytest.mark.parametrize("jitted", [False, True], ids=["eager", "jit"])
def test_a_structure_that_transforms_every_leaf_is_refused_where_a_tree_is_rebuilt(jitted: bool) -> None:
    """Once right eagerly and wrong under jit (attention: relative error 0.75; mul_mv: other numbers), now
    refused both ways, the message naming the rule and the fix: its fmap, and attention whose softmax
    maps rows of trees through it."""
    run: Callable[[Callable[..., Any]], Callable[..., Any]] = jax.jit if jitted else (lambda f: f)
    g = EveryLeaf(stack(trees(4)), X, 4, 8)
    with pytest.raises((TypeError, ValueError), match=REFUSED):  # (JAX's kind of error varies with the operation)
        run(lambda g: g.fmap(lambda t: t.fmap(jnp.sin)))(g)
    queries = EveryLeaf(stack([Vec.from_array(rng.normal(size=2), Key) for _ in range(4)]), X, 4, 8)
    keys, values = (DenseTree.of(SHAPE, [Vec.from_array(rng.normal(size=2), tag) for _ in range(4)], CAPACITY)
                    for tag in (Key, Value))  # fmt: skip
    with pytest.raises((TypeError, ValueError), match=REFUSED):
        run(nn.attention)(queries, keys, values)
    # As written by the rule, the same structure attends right, eagerly and under jit (against numpy).
    right = Fourier(queries.data, X, 4, 8)
    expected = _attention_reference(right, keys, values)
    np.testing.assert_allclose(to_array(run(nn.attention)(right, keys, values)), expected, rtol=1e-12, atol=1e-12)


def _attention_reference(queries: Fourier[Any, Any], keys: DenseTree[Any], values: DenseTree[Any]) -> np.ndarray:
    """Attention of a Fourier series of queries over a tree, in numpy: at the series' points the softmax of
    q . k / sqrt(2) against the leaves' measure, the values' average projected back to coefficients."""
    at_points, project = transform(queries.size, queries.points)
    q = at_points @ np.asarray(to_array(queries))
    k, v = (np.asarray(to_array(t))[: len(MEASURE)] for t in (keys, values))
    s = q @ k.T / np.sqrt(2.0)
    w = MEASURE * np.exp(s - s.max(axis=1, keepdims=True))
    averaged: np.ndarray = project @ ((w / w.sum(axis=1, keepdims=True)) @ v)
    return averaged


def test_a_tree_built_with_a_layout_that_is_no_layout_is_refused() -> None:
    t = trees(1)[0]
    floats = jnp.asarray(np.asarray(jax.random.key_data(t.layout))[:, 0], jnp.float32)
    with pytest.raises(ValueError, match=r"DenseTree: a tree's layout is an array of dyadic.LAYOUT of its 6 slots, "
                                         r"got float32\[6\]"):  # fmt: skip
        DenseTree(t.data, floats, CAPACITY)
    data, treedef = jax.tree_util.tree_flatten(t)
    for host in (np.asarray(floats), np.arange(CAPACITY, dtype=np.int32)):  # numpy's arrays are checked too
        with pytest.raises(ValueError, match=rf"a tree's layout is an array of dyadic.LAYOUT .* got {host.dtype}"):
            jax.tree_util.tree_unflatten(treedef, [data[0], host])
    # What JAX lets through a map over every leaf (a slice of the slots) is refused where the tree is rebuilt;
    # what it does not (a sum over the slots) JAX refuses, naming the rule.
    with pytest.raises(ValueError, match=r"of its 6 slots, got key<DenseTree layout.*>\[3, 3\]"):
        jax.tree_util.tree_map(lambda leaf: leaf[:, :3], stack(trees(3)))
    with pytest.raises(TypeError, match=REFUSED):
        jax.tree_util.tree_map(lambda leaf: jnp.sum(leaf, axis=-1), stack(trees(3)))
    # The tangents of a layout (jax.grad with allow_int) are float0: a tree's gradient is read on the tree.
    gradient = t.with_elements(jax.grad(lambda t: t.counit(), allow_int=True)(t).data)
    np.testing.assert_array_equal(leaf_values(gradient), MEASURE)
    assert gradient.shape == t.shape


def test_a_stack_of_trees_of_one_shape_is_one_shape_under_jit() -> None:
    """``stack`` records the one shape of trees of one shape: the user's series of trees transforms, pairs
    and contracts under jit as it does eagerly (it was refused there: 'trees of shapes not known to be
    one'), against numpy; and fmap keeps what it records (functor identity holds on pytree structure)."""
    values = trees(4)
    g = Fourier(stack(values), X, 4, 8)  # coefficients c_n: trees of one shape, stacked as stacked.py says
    v = trees(1)[0]
    c = np.stack([leaf_values(t) for t in values])  # coefficients x leaves
    at_points, project = transform(4, 8)
    for run in (lambda f: f, jax.jit):
        np.testing.assert_allclose(to_array(run(mul_mv)(g, v)), c @ (MEASURE * leaf_values(v)), rtol=1e-13)
        mapped = as_dense_tree(run(lambda g: g.fmap(lambda t: t.fmap(jnp.sin)))(g).data)
        np.testing.assert_allclose(leaf_values(mapped), project @ np.sin(at_points @ c), rtol=1e-12, atol=1e-13)
        one_shape = np.asarray(jax.random.key_data(dyadic.layout(dyadic.depths_of(SHAPE), CAPACITY)))
        np.testing.assert_array_equal(np.asarray(jax.random.key_data(mapped.layout)), np.tile(one_shape, (4, 1, 1)))
    # A sequence of them, an argument of a jit, mapped by its own fmap (a vmap: its trees rebuilt one by one),
    # is still one shape: its products with one of its trees run the dense formula.
    def products(s: Vec[X, DenseTree[jax.Array]]) -> Any:
        mapped = s.fmap(lambda t: t.fmap(jnp.sin))
        return mul_mv(mapped, mapped[0])

    with record_fast_paths() as taken:
        by_formula = jax.jit(products)(Vec.of(values, X))
    assert taken == ["mul_mv"]
    np.testing.assert_allclose(to_array(by_formula), np.sin(c) @ (MEASURE * np.sin(c[0])), rtol=1e-13)
    laws.check_law("functor identity", st.just((g, g, g)), max_examples=1)
    laws.check_law("functor identity", st.just((Mesh.of(values, X, (0.0, 0.3, 0.5, 1.0)),) * 3), max_examples=1)
    # Trees of different shapes stack as a batch (one compiled function maps them), but no map along a
    # structure combines their values: a series of them is refused when it is built.
    mixed = [*trees(2), *trees(2, OTHER)]
    integrals = [float(np.sum(np.ldexp(1.0, -np.asarray(t.depths())) * np.asarray(t.leaves()))) for t in mixed]
    np.testing.assert_allclose(jax.jit(jax.vmap(lambda t: t.counit()))(stack(mixed)), integrals, rtol=1e-14)
    with pytest.raises(ValueError, match=r"Fourier\.of\[X\]: a stack of trees of different shapes"):
        Fourier.of(mixed, X)


def test_to_array_reads_a_structure_of_trees_made_inside_jit() -> None:
    t = trees(1)[0]
    f = Cheb.from_array(rng.normal(size=3), X)
    cases: dict[str, tuple[Callable[..., Any], np.ndarray]] = {
        "outer": (outer, np.outer(np.asarray(to_array(f)), np.asarray(to_array(t)))),
        "pure": (lambda f, t: f.pure(t), np.outer([1.0, 0.0, 0.0], np.asarray(to_array(t)))),
    }
    for name, (make, expected) in cases.items():
        np.testing.assert_allclose(to_array(jax.jit(make)(f, t)), expected, rtol=1e-14, err_msg=name)


def _function_of_trees() -> Compose[Any, Any, jax.Array]:
    """Compose(Cheb of DenseTree): 4 coefficients, trees of one shape, the last two zero (Axis.exact)."""
    return Compose(Cheb.of([*trees(2), *(t.fmap(jnp.zeros_like) for t in trees(2))], X))


def test_a_compose_of_a_function_of_trees_runs_its_generic_definitions() -> None:
    """Compose(Cheb of DenseTree), a structure of scalars of two axes: its generic definitions, under
    generic_only, once refused ('DenseTree.pair: a stack of trees ..., not one tree'); a sum of outer products
    equals numpy's."""
    x, y = _function_of_trees(), _function_of_trees()
    with generic_only(), record_fast_paths() as taken:
        generic = add(outer(x, y), outer(y, x))
    assert taken == []
    a, b = (np.asarray(to_array(c)).reshape(-1) for c in (x, y))
    grid = np.asarray(to_array(generic)).reshape(a.size, b.size)
    valid = np.tile(np.arange(CAPACITY) < len(MEASURE), 4)  # the slots holding leaves
    np.testing.assert_allclose(grid[np.ix_(valid, valid)], (np.outer(a, b) + np.outer(b, a))[np.ix_(valid, valid)],
                               rtol=1e-13, atol=1e-13)  # fmt: skip


@pytest.mark.slow  # check_dense runs each operation both ways, eagerly: 8 s
def test_a_compose_of_a_function_of_trees_passes_the_check_of_its_dense_hook() -> None:
    laws.check_dense(st.just((_function_of_trees(), _function_of_trees(), _function_of_trees())), max_examples=1)


def test_a_product_of_structures_points_to_compose() -> None:
    compose = r"to take a structure of structures as one structure, over the product measure, wrap it: Compose\(x\)"
    series_of_trees = Fourier.of(trees(4), X)
    nested = r"dot: argument a is a Fourier\[X\] of size 4 of DenseTree of size 6 holding scalars; expected a structure"
    with pytest.raises(TypeError, match=nested + r" \(a vector\) of scalars \(" + compose):
        dot(series_of_trees, series_of_trees)
    tree_of_trees = Node(Leaf(Leaf(1.0)), Leaf(Node(Leaf(2.0), Leaf(3.0))))  # not Dense: seen by the generic dot
    with pytest.raises(TypeError, match=r"dot: an element is a Leaf, a structure, not a scalar; .*" + compose):
        dot(tree_of_trees, tree_of_trees)
    np.testing.assert_allclose(dot(Compose(series_of_trees), Compose(series_of_trees)),
                               np.sum(np.asarray(to_array(Compose(series_of_trees))) ** 2 * _compose_gram()),
                               rtol=1e-13)  # fmt: skip


def _compose_gram() -> np.ndarray:
    """The Gram matrix of Fourier (4 coefficients) x tree (the slots' measure), as the coordinates' weights."""
    series = gram(4)
    slots = np.concatenate([MEASURE, np.zeros(CAPACITY - len(MEASURE))])
    weights: np.ndarray = np.multiply.outer(series, slots)
    return weights
