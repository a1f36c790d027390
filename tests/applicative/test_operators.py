"""Arithmetic operators on structures (applicative.protocols.operators) against float64 numpy:
``f + g``, ``f - g``, ``-f``, ``r * f``, ``f * r``, ``f / r`` mean the Module Pointwise(ARITHMETIC)
on Vec, Cheb, Compose, Tree and DenseTree; mismatched shapes, scalar broadcasts, products of
structures and distributions are refused; scalars on the left, jit and grad; as_tree and as_dense_tree."""

import operator
import re
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import numpy.polynomial.chebyshev as C
import pytest

from applicative import (
    ARITHMETIC,
    Applicative,
    Cheb,
    ChebOf,
    Compose,
    DenseTree,
    DenseTreeOf,
    Dim,
    Distribution,
    DistributionOf,
    Leaf,
    Node,
    Pointwise,
    Quantum,
    Tree,
    TreeOf,
    Vec,
    VecOf,
    VectorSpace,
    as_dense_tree,
    as_tree,
    counit,
    dot,
    to_array,
)
from applicative.instances.tree import Nested
from tests.applicative.dims import Model, Seq
from tests.applicative.tolerance import Tolerance


class X(Dim):
    """The first variable."""


class Y(Dim):
    """The second variable."""


rng = np.random.default_rng(23)
TOL: Tolerance = {"rtol": 1e-12, "atol": 1e-12}
R = 0.75


def arrays(a: Any) -> list[np.ndarray]:
    return [np.asarray(leaf) for leaf in jax.tree_util.tree_leaves(a)]


def assert_same(a: Any, b: Any) -> None:
    """One pytree structure (kinds, tags, sizes) and equal leaves to 1e-12."""
    structure: jax.tree_util.PyTreeDef = jax.tree_util.tree_structure(a)
    assert structure == jax.tree_util.tree_structure(b)
    for u, v in zip(arrays(a), arrays(b), strict=True):
        np.testing.assert_allclose(u, v, **TOL)


# The operators are Pointwise(ARITHMETIC)'s add and scale, and numpy's arithmetic on coordinates.

Operation = Callable[[Any, Any], Any]
OPERATIONS: dict[str, tuple[Operation, Operation]] = {
    # name: (the operator on structures, the same through Pointwise(ARITHMETIC))
    "f + g": (operator.add, lambda f, g: Pointwise(ARITHMETIC).add(f, g)),
    "f - g": (operator.sub, lambda f, g: Pointwise(ARITHMETIC).add(f, Pointwise(ARITHMETIC).scale(-1.0, g))),
    "-f": (lambda f, g: -f, lambda f, g: Pointwise(ARITHMETIC).scale(-1.0, f)),
    "r * f": (lambda f, g: R * f, lambda f, g: Pointwise(ARITHMETIC).scale(R, f)),
    "f * r": (lambda f, g: f * R, lambda f, g: Pointwise(ARITHMETIC).scale(R, f)),
    "f / r": (lambda f, g: f / R, lambda f, g: Pointwise(ARITHMETIC).scale(1 / R, f)),
}
ON_ARRAYS: dict[str, Operation] = {
    "f + g": operator.add,
    "f - g": operator.sub,
    "-f": lambda a, b: -a,
    "r * f": lambda a, b: R * a,
    "f * r": lambda a, b: a * R,
    "f / r": lambda a, b: a / R,
}


def dense_pairs() -> dict[str, tuple[Any, Any, np.ndarray, np.ndarray]]:
    """Structures whose coordinates are one array, with those arrays (float64)."""
    v, w = rng.normal(size=(2, 5))
    c, d = rng.normal(size=(2, 6))
    cv, dv = rng.normal(size=(2, 6, 3))
    m, n = rng.normal(size=(2, 4, 5))
    return {
        "Vec": (Vec.from_array(v, Seq), Vec.from_array(w, Seq), v, w),
        "Vec of Vecs": (Vec.from_array(m, Seq, Model), Vec.from_array(n, Seq, Model), m, n),
        "Cheb": (Cheb.from_array(c, X), Cheb.from_array(d, X), c, d),
        "Cheb of feature vectors": (Cheb.stack(jnp.asarray(cv), X), Cheb.stack(jnp.asarray(dv), X), cv, dv),
        "Cheb of Chebs": (Cheb.from_array(m, X, Y), Cheb.from_array(n, X, Y), m, n),
        "Compose of Cheb and Vec": (
            Compose(Cheb.of([Vec.from_array(row, Seq) for row in m], X)),
            Compose(Cheb.of([Vec.from_array(row, Seq) for row in n], X)),
            m,
            n,
        ),
        "Compose of Vecs": (Compose(Vec.from_array(m, Seq, Model)), Compose(Vec.from_array(n, Seq, Model)), m, n),
    }


DENSE = dense_pairs()


@pytest.mark.parametrize("name", list(OPERATIONS))
@pytest.mark.parametrize("kind", list(DENSE))
def test_operators_on_coordinates_are_the_pointwise_module_and_numpy(kind: str, name: str) -> None:
    f, g, a, b = DENSE[kind]
    op, definition = OPERATIONS[name]
    out = op(f, g)
    assert type(out) is type(f)
    assert_same(out, definition(f, g))  # Cheb: through fmap, which samples and transforms back
    np.testing.assert_allclose(np.asarray(jax.tree_util.tree_leaves(out)[0]), ON_ARRAYS[name](a, b), **TOL)


def test_cheb_sums_are_numpy_series_sums() -> None:
    c, d = rng.normal(size=5), rng.normal(size=5)
    f, g = Cheb.from_array(c, X), Cheb.from_array(d, X)
    np.testing.assert_allclose(to_array(f + g), C.chebadd(c, d), **TOL)
    np.testing.assert_allclose(to_array(f - 2.0 * g), C.chebsub(c, 2.0 * d), **TOL)
    x = np.linspace(-1, 1, 7)
    np.testing.assert_allclose((3.0 * f - g / 2)(x), 3.0 * C.chebval(x, c) - C.chebval(x, d) / 2, **TOL)
    assert (f + g).points == f.points


def tree_values(t: Nested[float], x: np.ndarray) -> np.ndarray:
    """A tree in nested pairs as a piecewise-constant function on [0, 1], evaluated at x (numpy)."""
    if not isinstance(t, tuple):
        return np.full(x.shape, float(np.asarray(t)))
    left, right = t
    return np.where(x < 0.5, tree_values(left, np.minimum(2 * x, 1.0)), tree_values(right, np.maximum(2 * x - 1, 0.0)))


TREES: list[tuple[Nested[float], Nested[float]]] = [
    ((1.0, (2.0, 4.0)), (-1.0, (3.0, 0.5))),  # one shape
    ((1.0, (2.0, 4.0)), ((1.0, -1.0), 3.0)),  # two shapes: the common refinement
    (5.0, ((1.0, (2.0, -3.0)), 0.25)),  # a leaf against a deep tree
]
MIDPOINTS = (np.arange(64) + 0.5) / 64  # every leaf above is constant on these cells


@pytest.mark.parametrize("name", list(OPERATIONS))
@pytest.mark.parametrize("pair", range(len(TREES)))
def test_trees_add_and_scale_as_functions_on_the_common_refinement(pair: int, name: str) -> None:
    s, t = TREES[pair]
    op, definition = OPERATIONS[name]
    f, g = Tree.from_nested(s), Tree.from_nested(t)
    out = op(f, g)
    assert_same(out, definition(f, g))
    expected = ON_ARRAYS[name](tree_values(s, MIDPOINTS), tree_values(t, MIDPOINTS))
    np.testing.assert_allclose(tree_values(out.to_nested(), MIDPOINTS), expected, **TOL)
    # DenseTree, whose specification is Tree: the same function, at the refinement's capacity.
    dense = op(DenseTree.from_nested(s, capacity=8), DenseTree.from_nested(t, capacity=8))
    assert isinstance(dense, DenseTree)
    np.testing.assert_allclose(tree_values(dense.to_nested(), MIDPOINTS), expected, **TOL)
    assert dense.shape == out.shape


def test_a_tree_sum_keeps_its_shape_and_refines_only_where_needed() -> None:
    f = Tree.from_nested((1.0, (2.0, 4.0)))
    assert (f + f).shape == f.shape
    one: Tree[float] = Leaf(1.0)  # (typed as a Tree: Self-typed operands of a Leaf are Leaves)
    assert (one + f).to_nested() == (2.0, (3.0, 5.0))
    assert (f - Node(Leaf(1.0), Leaf(0.0))).to_nested() == (0.0, (2.0, 4.0))


def test_structures_with_structured_elements_add_element_by_element() -> None:
    # A tree of vectors: each leaf a Vec, added by Vec's own operator.
    v, w = rng.normal(size=(2, 3))
    u, z = Vec.from_array(v, Model), Vec.from_array(w, Model)
    t = Tree.from_nested((u, (z, u))) + Leaf(z)
    np.testing.assert_allclose(
        np.stack([to_array(leaf) for leaf in t.leaves()]), np.stack([v + w, 2 * w, v + w]), **TOL
    )
    # A Vec of trees of different shapes: each pair of trees refines.
    trees = Vec.of([Tree.from_nested((1.0, 2.0)), Tree.from_nested((3.0, 4.0))], Seq)
    leaves = Vec.of([Leaf(10.0), Leaf(20.0)], Seq)
    total = trees + 2.0 * leaves
    assert isinstance(total.data, Node)
    np.testing.assert_allclose(np.stack(arrays(total.data)), [[21.0, 43.0], [22.0, 44.0]], **TOL)


# Never a broadcast: mismatches raise pair's error; scalars and products are refused.


def test_mismatched_structures_raise_the_error_pair_gives() -> None:
    f = Vec.from_array(np.ones(3), Seq)
    cases: list[tuple[Any, Any]] = [
        (f, Vec.from_array(np.ones(4), Seq)),
        (f, Vec.from_array(np.ones(3), Model)),
        (Cheb.from_array(np.ones(3), X), Cheb.from_array(np.ones(4), X)),
        (Cheb.from_array(np.ones(3), X), Cheb.from_array(np.ones(3), Y)),
        (f, Cheb.from_array(np.ones(3), X)),
        (Tree.from_nested((1.0, 2.0)), DenseTree.from_nested((1.0, 2.0))),
        (Compose(Vec.from_array(np.ones((2, 3)), Seq, Model)), f),
    ]
    for a, b in cases:
        with pytest.raises((TypeError, ValueError)) as raised:
            a.pair(b)
        for op in (operator.add, operator.sub):
            with pytest.raises(type(raised.value), match=f"^{re.escape(str(raised.value))}$"):
                op(a, b)
    with pytest.raises(ValueError, match=r"pair: dimension mismatch: Vec\[Seq\] of size 3 vs Vec\[Seq\] of size 4"):
        f + Vec.from_array(np.ones(4), Seq)


def test_elements_of_different_shapes_are_not_broadcast() -> None:
    vectors, scalars = Cheb.stack(jnp.ones((4, 3)), X), Cheb.stack(jnp.ones(4), X)
    with pytest.raises(TypeError, match=r"Cheb \+ Cheb: the elements differ, an array of shape \(3,\) and an array"):
        vectors + scalars
    with pytest.raises(TypeError, match=r"Vec - Vec: the elements differ, an array of shape \(3,\) and an array"):
        Vec.stack(jnp.ones((2, 3)), Seq) - Vec.stack(jnp.ones((2, 1)), Seq)
    with pytest.raises(TypeError, match=r"Leaf \+ Leaf: the elements differ, a Vec and an array of shape \(\)"):
        Leaf(Vec.from_array(np.ones(2), Seq)) + Leaf(1.0)  # type: ignore[arg-type]


def test_a_scalar_added_to_a_structure_is_refused() -> None:
    f = Vec.from_array(np.ones(3), Seq)
    hint = r"would broadcast it; add a structure of the same shape, such as the constant f.pure\(c\)"
    ops: dict[str, Operation] = {"+": operator.add, "-": operator.sub}
    for left, right, op in [(f, 1.0, "+"), (1.0, f, "+"), (f, 2, "-"), (2, f, "-"), (f, np.ones(3), "+")]:
        with pytest.raises(TypeError, match=rf"unsupported operand type\(s\) for {re.escape(op)}: .*{hint}"):
            ops[op](left, right)
    with pytest.raises(TypeError, match=r"sum\(fs\) starts from 0: write sum\(fs\[1:\], start=fs\[0\]\)"):
        sum([f, f])  # type: ignore[list-item]
    np.testing.assert_allclose(to_array(sum([f, f, f][1:], start=f)), 3 * np.ones(3), **TOL)
    np.testing.assert_allclose(to_array(f + f.pure(jnp.asarray(1.0))), 2 * np.ones(3), **TOL)


def test_products_of_structures_and_array_factors_are_refused() -> None:
    f = Cheb.from_array(np.ones(3), X)
    product = r"structures are scaled by scalars, never multiplied together here; dot\(f, g\) is the integral"
    with pytest.raises(TypeError, match=rf"unsupported operand type\(s\) for \*: 'Cheb' and 'Cheb': {product}"):
        f * f  # type: ignore[operator]
    with pytest.raises(TypeError, match=rf"for /: 'Cheb' and 'Cheb': {product}"):
        f / f  # type: ignore[operator]
    scalar = r"r must be a scalar \(a number or a 0-d array\), got an array of shape \(3,\)"
    factors: list[tuple[Any, Any]] = [(f, np.ones(3)), (np.ones(3), f), (jnp.ones(3), f), (f, jnp.ones(3))]
    for left, right in factors:
        with pytest.raises(TypeError, match=scalar):
            left * right
    for bad in (True, "2", None):
        with pytest.raises(TypeError, match=r"a Cheb is scaled by a number or a 0-d array"):
            f * bad  # type: ignore[operator]
    # The linear algebra's claim "a product of structures is refused" stands: a nested dot names it, and
    # * itself refuses two structures that have no operators.
    with pytest.raises(TypeError, match=r"dot: an element is a Leaf, a structure, not a scalar"):
        dot(Leaf(Leaf(1.0)), Leaf(Leaf(1.0)))
    with pytest.raises(TypeError, match=r"unsupported operand type\(s\) for \*: 'Leaf' and 'Leaf'"):
        Leaf(1.0) * Leaf(1.0)  # type: ignore[operator]


def test_distributions_have_no_operators() -> None:
    # Pointwise(ARITHMETIC) pairs distributions independently: x + x would be the law of the sum of two
    # independent copies (outcomes 0, 1, 2 here), not 2x (outcomes 0, 2). So + is not offered.
    d = Distribution([0.0, 1.0], [0.5, 0.5])
    q = Quantum([0.0, 1.0], [2**-0.5, 2**-0.5])
    lifted: Pointwise[DistributionOf, float] = Pointwise(ARITHMETIC)
    twice = lifted.add(d, d)
    assert isinstance(twice, Distribution)
    assert sorted(np.asarray(twice.outcomes).tolist()) == [0.0, 1.0, 2.0]
    for x in (d, q):
        assert not isinstance(x, VectorSpace)
        with pytest.raises(TypeError, match=r"unsupported operand type\(s\) for \+"):
            x + x  # type: ignore[operator]
        with pytest.raises(TypeError, match=r"unsupported operand type\(s\) for \*"):
            2.0 * x  # type: ignore[operator]
    with pytest.raises(TypeError, match=r"Vec \+ Vec: the elements are Distributions, which have no arithmetic"):
        Vec.of([d, d], Seq) + Vec.of([d, d], Seq)
    with pytest.raises(TypeError, match=r"Compose.__add__: the outer structure is a Distribution, which has no"):
        Compose(Distribution([Vec.from_array(np.ones(2), Seq)], [1.0])) + Compose(
            Distribution([Vec.from_array(np.ones(2), Seq)], [1.0])
        )
    with pytest.raises(TypeError, match=r"unsupported operand type\(s\) for \+: 'Distribution' and 'Vec'"):
        d + Vec.from_array(np.ones(2), Seq)  # type: ignore[operator]


# Scalars on the left, jit, grad, and what the operators leave alone.


def test_every_kind_of_scalar_scales_from_either_side() -> None:
    v = rng.normal(size=4)
    f = Vec.from_array(v, Seq)
    scalars: list[Any] = [2, 2.0, np.float64(2.0), np.float32(2.0), np.array(2.0), jnp.float32(2.0), jnp.array(2.0)]
    for r in scalars:
        np.testing.assert_allclose(to_array(r * f), 2.0 * v, rtol=1e-6)
        np.testing.assert_allclose(to_array(f * r), 2.0 * v, rtol=1e-6)
        np.testing.assert_allclose(to_array(f / r), v / 2.0, rtol=1e-6)
        assert isinstance(r * f, Vec)
    np.testing.assert_allclose(to_array(1j * f), 1j * v, **TOL)


def test_operators_run_under_jit_and_grad() -> None:
    c, d = rng.normal(size=(2, 6))
    f, g = Cheb.from_array(c, X), Cheb.from_array(d, X)

    @jax.jit
    def combine(r: jax.Array, f: Cheb[X, jax.Array], g: Cheb[X, jax.Array]) -> Cheb[X, jax.Array]:
        return r * f - g / r + (-f) * 0.5

    out = combine(jnp.asarray(2.0), f, g)
    np.testing.assert_allclose(to_array(out), 2.0 * c - d / 2.0 - 0.5 * c, **TOL)
    # d/dr of the integral of (r f + g) is the integral of f; d/dc of it is r times the integral weights.
    weights = np.array([C.chebint(np.eye(6)[k], lbnd=-1) for k in range(6)])
    integrals = np.array([C.chebval(1.0, w) for w in weights])

    def integral(r: jax.Array, f: Cheb[X, jax.Array]) -> jax.Array:
        return counit(r * f + g)

    dr, df = jax.grad(integral, argnums=(0, 1))(jnp.asarray(3.0), f)
    np.testing.assert_allclose(float(dr), integrals @ c, **TOL)
    np.testing.assert_allclose(to_array(df), 3.0 * integrals, **TOL)
    # A traced scalar on the left (jax.Array.__mul__ defers to the structure).
    np.testing.assert_allclose(to_array(jax.jit(lambda r: r * f)(jnp.float32(2.0))), 2.0 * c, rtol=1e-6)
    trees = jax.jit(lambda s, t: s + 2.0 * t)(Tree.from_nested((1.0, 2.0)), Leaf(jnp.asarray(1.0)))
    np.testing.assert_allclose([float(x) for x in trees.leaves()], [3.0, 4.0], **TOL)


def test_operators_leave_identity_and_pytree_structure_alone() -> None:
    f = Vec.from_array(np.ones(3), Seq)
    g = f + f
    assert f == f  # records compare by identity
    assert g != f
    assert hash(f) != hash(g)
    structure: jax.tree_util.PyTreeDef = jax.tree_util.tree_structure(g)
    assert structure == jax.tree_util.tree_structure(f)
    d = DenseTree.from_nested((1.0, 2.0))
    assert (d + d).capacity == d.capacity
    assert (-d).shape == d.shape


# Casting generic results back: as_tree, as_dense_tree (as as_vec and as_cheb do).


def test_as_tree_and_as_dense_tree_return_the_structure_or_name_what_they_got() -> None:
    t = Tree.from_nested((1.0, 2.0))
    generic_tree: Applicative[TreeOf, float] = t
    assert as_tree(generic_tree) is t
    d = DenseTree.from_nested((1.0, 2.0))
    generic_dense: Applicative[DenseTreeOf, float] = d
    assert as_dense_tree(generic_dense) is d
    with pytest.raises(TypeError, match=r"as_tree: expected a Tree, got DenseTree"):
        as_tree(d)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"as_dense_tree: expected a DenseTree, got Leaf"):
        as_dense_tree(Leaf(1.0))  # type: ignore[arg-type]
    f: Applicative[VecOf[Seq], jax.Array] = Vec.from_array(np.ones(2), Seq)
    g: Applicative[ChebOf[X], jax.Array] = Cheb.from_array(np.ones(2), X)
    assert isinstance(f, VectorSpace)
    assert isinstance(g, VectorSpace)
