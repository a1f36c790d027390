"""Tree[A] against numpy in float64: a tree is read as a piecewise-constant function on
2^D dyadic cells of [0, 1] (``grid``), so the dyadic counit is a mean over cells and the
linear algebra is numpy's on those grids. Laws, refinement invariance, the plain sum's
failure, jit, grad, vmap, the generic linear algebra and attention on Tree∘Vec."""

from typing import Any, cast

import hypothesis
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.test_util import check_grads

from applicative import (
    ARITHMETIC,
    Applicative,
    Compose,
    Pointwise,
    Vec,
    counit,
    dot,
    laws,
    mul_mm,
    mul_mmt,
    mul_mv,
    mul_vm,
    nn,
    outer,
)
from applicative.instances.tree import Leaf, Nested, Node, Shape, Tree
from applicative.protocols.integration import pairing_law
from applicative.strategies import TREE_SHAPES, tree_triples
from tests.applicative.dims import Hidden, Model, Seq
from tests.applicative.tolerance import Tolerance

D = 3
"""Every tree here has depth <= D, so it is constant on each of the 2^D cells."""
CELLS = 2**D
TOL: Tolerance = {"rtol": 1e-12, "atol": 1e-12}
rng = np.random.default_rng(7)


def grid(x: object, depth: int = D) -> np.ndarray:
    """The values of a structure on 2^depth dyadic cells per Tree axis (Tree axes and Vec axes in nesting order)."""
    if isinstance(x, Leaf):
        v = grid(x.value)
        return np.broadcast_to(v, (2**depth, *v.shape))
    if isinstance(x, Node):
        assert depth > 0, "tree deeper than the grid"
        return np.concatenate([grid(x.left, depth - 1), grid(x.right, depth - 1)])
    if isinstance(x, Vec):
        return np.stack([grid(x[i]) for i in range(x.size)])
    return np.asarray(x, dtype=np.float64)


def random_tree(shape: Shape, make: Any = lambda: jnp.asarray(rng.normal())) -> Tree[Any]:
    """A tree of ``shape`` with fresh values from ``make()`` at its leaves."""
    if shape is None:
        return Leaf(make())
    return Node(random_tree(shape[0], make), random_tree(shape[1], make))


def random_vec(n: int = 3) -> Vec[Model, jax.Array]:
    return Vec.from_array(rng.normal(size=n), Model)


SHAPE_PAIRS = [(TREE_SHAPES[i], TREE_SHAPES[j]) for i, j in [(0, 0), (0, 1), (1, 0), (2, 3), (4, 5), (6, 7), (7, 5)]]


# Laws


def test_structure_laws_hold_for_trees_of_vectors() -> None:
    def tree_of_vecs(t: Applicative[Any, jax.Array]) -> Applicative[Any, Vec[Model, jax.Array]]:
        return t.fmap(lambda a: Vec.from_array(jnp.stack([a, 2.0 * a + 1.0]), Model))

    triples = tree_triples().map(lambda xyz: (tree_of_vecs(xyz[0]), tree_of_vecs(xyz[1]), tree_of_vecs(xyz[2])))
    maps = laws.Maps(lambda v: v.fmap(laws.Maps.f), lambda v: v.fmap(laws.Maps.g), Pointwise(ARITHMETIC))
    for law in laws.LAWS:
        laws.check_law(law, triples, maps=maps, max_examples=8)


def test_pointwise_module_laws_on_trees_of_different_shapes() -> None:
    # add(a, b) lives on the common refinement of the shapes; every law's two sides refine
    # to the same shape, so they agree structurally, not just as functions.
    trees = tree_triples().map(lambda xyz: xyz[0])
    laws.check_algebra_laws(Pointwise(ARITHMETIC), trees, max_examples=40)


def test_the_law_suite_sees_different_shapes() -> None:
    shapes: set[tuple[Shape, ...]] = set()

    @hypothesis.settings(max_examples=60, database=None, deadline=None)
    @hypothesis.given(tree_triples())
    def collect(xyz: tuple[Tree[jax.Array], ...]) -> None:
        shapes.add(tuple(t.shape for t in xyz))

    collect()
    assert len({s[0] for s in shapes}) > 3
    assert any(s[0] != s[1] for s in shapes)


# The counit: the dyadic integral, against numpy; the plain sum breaks a law


@pytest.mark.parametrize("shape", TREE_SHAPES)
def test_counit_is_the_integral_over_the_cells(shape: Shape) -> None:
    t = random_tree(shape)
    expected = grid(t).mean()
    np.testing.assert_allclose(counit(t), expected, **TOL)
    weights = np.array([2.0**-d for d in t.depths()])
    np.testing.assert_allclose(counit(t), weights @ np.array(t.leaves()), **TOL)
    np.testing.assert_allclose(t.plain_sum(), np.sum(t.leaves()), **TOL)


def test_plain_sum_breaks_counit_respects_pairing_and_the_dyadic_counit_does_not() -> None:
    one, split = Leaf(1.0), Node(Leaf(1.0), Leaf(1.0))
    # docs/design.md, correction 5: with the plain sum, dot(Leaf 1, Leaf 1) = 1 but
    # dot(Leaf 1, Node(Leaf 1, Leaf 1)) = 2.
    product = one.pair(split).fmap(lambda p: p[0] * p[1])
    assert one.pair(one).fmap(lambda p: p[0] * p[1]).plain_sum() == 1.0
    assert product.plain_sum() == 2.0
    assert product.counit() == 1.0 == dot(one, split) == dot(one, one)
    # The law counit(fmap(fst, pair(x, y))) = counit(x), with each counit:
    refined = one.pair(split).fmap(lambda p: p[0])
    assert (refined.plain_sum(), one.plain_sum()) == (2.0, 1.0)
    assert pairing_law(ARITHMETIC, one, split) == (1.0, 1.0)


@pytest.mark.parametrize(("a_shape", "b_shape"), SHAPE_PAIRS)
def test_refinement_does_not_change_dot_products(a_shape: Shape, b_shape: Shape) -> None:
    a, b = random_tree(a_shape), random_tree(b_shape)
    fine = random_tree(TREE_SHAPES[7])
    a_fine = a.refine(fine)
    assert a_fine.shape == a.pair(fine).shape
    np.testing.assert_allclose(grid(a_fine), grid(a), **TOL)  # the same function
    np.testing.assert_allclose(dot(a_fine, b), dot(a, b), **TOL)
    np.testing.assert_allclose(dot(a, b), np.mean(grid(a) * grid(b)), **TOL)


def test_refinement_invariance_of_the_counit_holds_for_every_pair_of_law_shapes() -> None:
    for x_shape in TREE_SHAPES:
        for y_shape in TREE_SHAPES:
            x = random_tree(x_shape)
            np.testing.assert_allclose(counit(x.refine(Tree.from_shape(y_shape, 0.0))), counit(x), **TOL)


# Pairing, construction and errors


def test_pair_is_the_common_refinement() -> None:
    a = Tree.from_nested((1.0, (2.0, 3.0)))
    b = Tree.from_nested(((10.0, 20.0), 30.0))
    assert a.pair(b).leaves() == [(1.0, 10.0), (1.0, 20.0), (2.0, 30.0), (3.0, 30.0)]
    assert a.pair(b).shape == ((None, None), (None, None))
    # to_nested() is a Nested union; this one is a pair of pairs.
    nested = cast(tuple[Any, tuple[Any, Any]], a.pair(b).to_nested())
    assert repr(nested[1][0]) == "Leaf((2.0, 30.0))"  # a pair as a value stays a Leaf
    assert a.pure(5.0).pair(a).fmap(lambda p: p[1]).to_nested() == a.to_nested()
    assert isinstance(a.pure(5.0), Leaf)


def test_construction_and_conversion() -> None:
    nested = (1.0, ((2.0, 3.0), 4.0))
    t = Tree.from_nested(nested)
    assert t.to_nested() == nested
    as_lists: Nested[float] = [1.0, [2.0, 3.0]]
    assert Tree.from_nested(as_lists).to_nested() == (1.0, (2.0, 3.0))
    assert t.leaves() == [1.0, 2.0, 3.0, 4.0]
    assert t.depths() == [1, 3, 3, 2]
    assert t.shape == (None, ((None, None), None))
    assert repr(t) == "Node(Leaf(1.0), Node(Node(Leaf(2.0), Leaf(3.0)), Leaf(4.0)))"
    tuple_leaf = Leaf((1.0, 2.0))
    assert Tree.from_nested(tuple_leaf) is tuple_leaf
    assert tuple_leaf.to_nested() is tuple_leaf
    assert Tree.from_nested((tuple_leaf, 3.0)).leaves() == [(1.0, 2.0), 3.0]
    assert Tree.from_shape(t.shape, 0.0).leaves() == [0.0] * 4
    leaves, structure = jax.tree_util.tree_flatten(t)
    assert leaves == [1.0, 2.0, 3.0, 4.0]
    assert jax.tree_util.tree_unflatten(structure, [5.0, 6.0, 7.0, 8.0]).to_nested() == (5.0, ((6.0, 7.0), 8.0))


def test_bad_input_is_rejected_clearly() -> None:
    with pytest.raises(ValueError, match="length 3"):
        Tree.from_nested((1.0, 2.0, 3.0))
    with pytest.raises(TypeError, match="Node: left must be a Tree"):
        Node(1.0, Leaf(2.0))  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="Tree paired with Vec"):
        Leaf(1.0).pair(random_vec())  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="Tree paired with Vec"):
        Node(Leaf(1.0), Leaf(2.0)).pair(random_vec())  # type: ignore[arg-type]


# JAX: jit, grad, vmap


def test_jit_equals_eager_and_compiles_once_per_shape() -> None:
    traces: list[object] = []

    def f(a: Tree[jax.Array], b: Tree[jax.Array], m: Tree[Vec[Model, jax.Array]], v: Vec[Model, jax.Array]) -> Any:
        traces.append(a.shape)
        return dot(a.fmap(jnp.tanh), b) + counit(mul_mv(m, v).pair(b).fmap(lambda p: p[0] * p[1]))

    jitted = jax.jit(f)
    for a_shape, b_shape in [(TREE_SHAPES[6], TREE_SHAPES[5]), (TREE_SHAPES[6], TREE_SHAPES[5]), (None, None)]:
        args = (random_tree(a_shape), random_tree(b_shape), random_tree(TREE_SHAPES[3], random_vec), random_vec())
        eager = f(*args)
        np.testing.assert_allclose(jitted(*args), eager, **TOL)
        m, v = grid(args[2]), grid(args[3])
        np.testing.assert_allclose(eager, np.mean(np.tanh(grid(args[0])) * grid(args[1]) + (m @ v) * grid(args[1])))
    assert len(traces) == 3 + 2  # three eager calls, two traces: the repeated shape reused its compilation


def test_grad_through_counit_and_dot_matches_finite_differences() -> None:
    a, b = random_tree(TREE_SHAPES[6]), random_tree(TREE_SHAPES[7])
    check_grads(lambda a, b: dot(a.fmap(jnp.sin), b), (a, b), order=2, modes=["rev"])
    # d counit / d leaf = 2^-depth: the gradient is the dyadic measure of each leaf.
    g = jax.grad(counit)(a)
    assert isinstance(g, Tree)
    assert g.shape == a.shape
    np.testing.assert_allclose(g.leaves(), [2.0**-d for d in a.depths()], **TOL)
    m, v = random_tree(TREE_SHAPES[4], random_vec), random_vec()
    check_grads(lambda m, v: dot(mul_mv(m, v), b), (m, v), order=1, modes=["fwd", "rev"])


def test_vmap_over_a_batch_of_trees_of_one_shape() -> None:
    batch = random_tree(TREE_SHAPES[5], lambda: jnp.asarray(rng.normal(size=4)))
    other = random_tree(TREE_SHAPES[3])
    out = jax.vmap(lambda t: dot(t, other))(batch)
    np.testing.assert_allclose(out, np.mean(grid(batch) * grid(other)[:, None], axis=0), **TOL)


# The generic linear algebra on trees, Tree∘Vec, Vec∘Tree and Tree∘Tree


@pytest.mark.parametrize(("a_shape", "b_shape"), SHAPE_PAIRS)
def test_linear_algebra_on_trees_matches_numpy(a_shape: Shape, b_shape: Shape) -> None:
    a, b = random_tree(a_shape), random_tree(b_shape)
    np.testing.assert_allclose(dot(a, b), np.mean(grid(a) * grid(b)), **TOL)
    np.testing.assert_allclose(grid(outer(a, b)), np.outer(grid(a), grid(b)), **TOL)

    # Tree∘Vec: a function on [0, 1] with 3 channels; matrices of rows per cell.
    m, n = random_tree(a_shape, random_vec), random_tree(b_shape, random_vec)
    v, w = random_vec(), Vec.from_array(rng.normal(size=(3, 2)), Model, Hidden)
    M, N, V, W = grid(m), grid(n), grid(v), grid(w)
    np.testing.assert_allclose(grid(mul_mv(m, v)), M @ V, **TOL)
    np.testing.assert_allclose(grid(mul_mm(m, w)), M @ W, **TOL)
    np.testing.assert_allclose(grid(mul_mmt(m, n)), N @ M.T, **TOL)  # one row per cell of n
    np.testing.assert_allclose(grid(mul_vm(a, n)), grid(a) @ N / CELLS, **TOL)
    np.testing.assert_allclose(dot(Compose(m), Compose(n)), np.sum(M * N) / CELLS, **TOL)

    # Vec∘Tree: 4 functions of one shape (stacked), and Tree∘Tree: functions of two variables.
    rows = Vec.stack(random_tree(a_shape, lambda: jnp.asarray(rng.normal(size=4))), Seq)
    np.testing.assert_allclose(grid(rows), grid(rows.data).T, **TOL)
    np.testing.assert_allclose(grid(mul_mv(rows, b)), grid(rows) @ grid(b) / CELLS, **TOL)
    np.testing.assert_allclose(grid(mul_mm(rows, n)), grid(rows) @ N / CELLS, **TOL)
    k = random_tree(a_shape, lambda: random_tree(b_shape))
    j = random_tree(b_shape, lambda: random_tree(TREE_SHAPES[2]))
    np.testing.assert_allclose(grid(mul_mm(k, j)), grid(k) @ grid(j) / CELLS, **TOL)
    np.testing.assert_allclose(grid(mul_mv(k, b)), grid(k) @ grid(b) / CELLS, **TOL)


def test_attention_on_trees_of_vectors_matches_numpy() -> None:
    q, kv = random_tree(TREE_SHAPES[6], random_vec), random_tree(TREE_SHAPES[7], random_vec)
    values = kv.fmap(lambda x: x.fmap(jnp.cos))
    out = jax.jit(nn.attention)(q, kv, values)
    Q, K, V = grid(q), grid(kv), grid(values)
    s = Q @ K.T / np.sqrt(3.0)
    weights = np.exp(s - s.max(axis=1, keepdims=True))
    weights /= weights.sum(axis=1, keepdims=True)  # the softmax against the dyadic measure, on the cells
    assert isinstance(out, Tree)
    assert out.shape == q.shape
    np.testing.assert_allclose(grid(out), weights @ V, **TOL)


def test_none_leaves_are_rejected_naming_their_position() -> None:
    with pytest.raises(ValueError, match=r"Tree.from_nested: the leaf at \[1\] is None"):
        Tree.from_nested((1.0, None))
    with pytest.raises(ValueError, match=r"Tree.from_nested: the leaf at \[0\]\[1\] is None"):
        Tree.from_nested(((1.0, None), 2.0))
    with pytest.raises(ValueError, match=r"Tree.from_nested: the leaf at the root is None"):
        Tree.from_nested(None)
    with pytest.raises(ValueError, match=r"Tree.from_nested: a tuple of length 1 at \[1\]"):
        Tree.from_nested((1.0, (2.0,)))


def test_bad_shapes_are_rejected_naming_their_position() -> None:
    with pytest.raises(ValueError, match=r"Tree.from_shape: the shape at the root is \(None,\)"):
        Tree.from_shape((None,), 1.0)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"Tree.from_shape: the shape at \[1\] is 3"):
        Tree.from_shape((None, 3), 1.0)  # type: ignore[arg-type]
    assert Tree.from_shape([None, None], 1.0).leaves() == [1.0, 1.0]  # type: ignore[arg-type]


def test_a_template_of_none_has_a_shape_but_no_sum() -> None:
    template = Tree.from_shape((None, (None, None)), None)
    assert template.depths() == [1, 2, 2]
    with pytest.raises(ValueError, match=r"Tree.counit: a leaf holds None"):
        template.counit()
    with pytest.raises(ValueError, match=r"Tree.plain_sum: a leaf holds None"):
        template.plain_sum()
