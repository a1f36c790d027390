"""Structures of structures: a shape is never an element, two axes meet only on one measure, and the
leaves' array type never changes the formula (docs/design.md, "Composition is the point").

Each case is a composition that once gave wrong numbers with no error, checked against an
independent float64 numpy computation: a function over trees (a ``Cheb`` whose values are
``DenseTree`` s), trees of trees of different shapes, two measures of one tag and size, and
numpy leaves eagerly against the same structure under ``jit``.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import numpy.polynomial.chebyshev as C
import pytest
import scipy.fft

from applicative import (
    Axis,
    Cheb,
    Compose,
    DenseTree,
    Dim,
    Distribution,
    Shaped,
    Vec,
    add,
    as_dense_tree,
    dot,
    generic_only,
    laws,
    mul_mmt,
    nn,
    record_fast_paths,
    stacked,
    to_array,
)
from applicative.instances import dyadic
from applicative.stacked import element
from tests.applicative.dims import Hidden, Model, Seq
from tests.applicative.mesh import Mesh, trapezoid_weights

rng = np.random.default_rng(32)


class X(Dim):
    """The variable of the query function."""


BALANCED = (((None, None), (None, None)), ((None, None), (None, None)))
UNBALANCED = (None, ((None, (None, None)), ((None, None), (None, (None, None)))))


def _leaf_measure(shape: Any) -> np.ndarray:
    """2^-depth of each leaf, left to right, from the nested shape (the recursive specification)."""
    measure: np.ndarray = np.ldexp(1.0, -np.asarray(dyadic.depths_of(shape, "test")))
    return measure


def _attention_at_points(q: np.ndarray, k: np.ndarray, v: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Softmax attention against the keys' measure w: sum_i w_i e^(s_i) v_i / sum_i w_i e^(s_i)."""
    s = q @ k.T / np.sqrt(k.shape[1])
    p = w * np.exp(s - s.max(axis=-1, keepdims=True))
    attended: np.ndarray = (p / p.sum(axis=-1, keepdims=True)) @ v
    return attended


@pytest.mark.parametrize("shape", [BALANCED, UNBALANCED], ids=["balanced", "unbalanced"])
@pytest.mark.parametrize("values_on", ["own tree", "keys' layout"])
@pytest.mark.parametrize("jitted", [False, True], ids=["eager", "jit"])
def test_a_function_attends_over_trees_by_their_values_not_their_layout(
    shape: Any, values_on: str, jitted: bool
) -> None:
    # Queries: a function of x with values in R^4; keys and values: the leaves of a tree. The scores
    # are a Cheb whose values are trees; the softmax maps them through the Cheb's transforms, which
    # must reach the trees' values only (an identity through the DCT once turned depth 3 into 2.99...).
    n, leaves = 8, len(dyadic.depths_of(shape, "test"))
    q_coefficients = np.zeros((n, 4))
    q_coefficients[:3] = rng.normal(size=(3, 4))
    k, v = rng.normal(size=(leaves, 4)), rng.normal(size=(leaves, 3))
    queries = Cheb.stack(Vec.from_array(q_coefficients, X, Model).data, X)
    keys = DenseTree.stack(shape, Vec.from_array(k, Seq, Model).data, capacity=leaves + 2)
    if values_on == "own tree":
        values = DenseTree.stack(shape, Vec.from_array(v, Seq, Hidden).data, capacity=leaves + 2)
    else:  # on the keys' layout, its two padding slots holding copies of the first leaf's value
        values = keys.with_elements(Vec.from_array(np.concatenate([v, v[:1], v[:1]]), Seq, Hidden).data)
    run = jax.jit(nn.attention) if jitted else nn.attention
    out = to_array(run(queries, keys, values))

    # Direct: attention at the 2N Chebyshev points fmap samples, back to N coefficients by scipy's DCT.
    at_points = _attention_at_points(C.chebval(C.chebpts1(2 * n)[::-1], q_coefficients).T, k, v, _leaf_measure(shape))
    expected = scipy.fft.dct(at_points, type=2, axis=0)[:n] / (2 * n)
    expected[0] /= 2
    np.testing.assert_allclose(out, expected, rtol=1e-12, atol=1e-12)


def _trees(shapes: list[Any], capacity: int) -> list[DenseTree[jax.Array]]:
    sizes = [len(dyadic.depths_of(s, "test")) for s in shapes]
    return [DenseTree.stack(s, jnp.asarray(rng.normal(size=n)), capacity) for s, n in zip(shapes, sizes, strict=True)]


def test_a_function_whose_values_are_trees_maps_their_values_and_keeps_their_shape() -> None:
    trees = _trees([UNBALANCED] * 4, capacity=9)
    f = Cheb.of(trees, X)
    for g in (f.fmap(lambda t: t), f.pure(trees[0])):
        inner = g.data
        assert isinstance(inner, DenseTree)
        assert inner.layout.dtype == dyadic.LAYOUT
        # Every coefficient keeps the layout, exactly (its words, not a transform's 2.9999...).
        for row in np.asarray(jax.random.key_data(inner.layout)):
            np.testing.assert_array_equal(row, np.asarray(jax.random.key_data(trees[0].layout)))
    np.testing.assert_allclose(f.fmap(lambda t: t).data.data, f.data.data, rtol=0, atol=1e-14)
    # pure is the constant function: the tree in the first coefficient, zero trees after.
    constant = f.pure(trees[1]).data.data
    np.testing.assert_array_equal(constant[0], trees[1].data)
    np.testing.assert_array_equal(constant[1:], 0.0)
    # Evaluation at x gives the tree of sum_n c_n T_n(x) at each leaf, on the same shape.
    x = 0.3
    at_x = f(x)
    assert isinstance(at_x, DenseTree)
    assert at_x.shape == UNBALANCED
    expected = C.chebval(x, np.stack([np.asarray(t.data) for t in trees]))
    np.testing.assert_allclose(at_x.data, expected, rtol=1e-12, atol=1e-12)


def test_a_function_whose_values_are_trees_of_different_shapes_is_refused() -> None:
    trees = _trees([BALANCED, UNBALANCED], capacity=9)
    with pytest.raises(ValueError, match=r"Cheb\.stack\[X\]: a stack of trees of different shapes"):
        Cheb.of(trees, X)


def _integral_of_product(a: DenseTree[Any], b: DenseTree[Any]) -> float:
    """The integral over [0, 1] of the product of two piecewise-constant functions, on the finest
    dyadic grid either needs (numpy: each leaf's value repeated over its 2^(deepest - depth) cells)."""
    deepest = max(*a.depths(), *b.depths())

    def cells(t: DenseTree[Any]) -> np.ndarray:
        return np.repeat(np.asarray(t.data)[: t.count()], [2 ** (deepest - d) for d in t.depths()])

    return float(np.mean(cells(a) * cells(b)))


def test_trees_whose_rows_are_trees_of_different_shapes_contract_each_row_on_its_own_shape() -> None:
    # A tree of two leaves whose values are trees of different shapes (one capacity): a matrix whose
    # rows have different measures. Only rows that all share one shape may be contracted as one.
    rows = [
        DenseTree.from_nested((1.0, (2.0, 3.0)), capacity=4),
        DenseTree.from_nested(((2.0, 1.0), (3.0, 4.0)), capacity=4),
    ]
    m = DenseTree.of((None, None), rows)
    expected = np.array([[_integral_of_product(r, s) for r in rows] for s in rows])
    for run in (mul_mmt, jax.jit(mul_mmt)):
        got = as_dense_tree(run(m, m)).data  # one tree of the rows' results, each a tree of two leaves
        np.testing.assert_allclose(np.asarray(got.data), expected, rtol=1e-14)


def test_two_measures_of_one_tag_and_size_never_meet_in_a_dense_formula() -> None:
    # Two axes with the same kind, tag and size but different Gram matrices (a measure computed from
    # data, its ``shape`` left None) are two measures: equal only if their matrices are.
    def axis(gram: Any) -> Axis:
        return Axis("Mesh", Seq, 3, gram)

    a, b = np.array([0.25, 0.5, 0.25]), np.array([0.1, 0.6, 0.3])
    assert axis(a) == axis(a.copy())
    assert axis(a) == axis(a)
    assert axis(a) != axis(b)
    assert axis(None) != axis(a)
    # Traced matrices cannot be compared by value: no proof, no dense formula (unless one object).
    assert not bool(jax.jit(lambda g, h: jnp.asarray(axis(g) == axis(h)))(a, a.copy()))
    assert bool(jax.jit(lambda g: jnp.asarray(axis(g) == axis(g)))(a))
    # Nor a traced matrix against a concrete one, either way round: no proof, and the tracer is never read.
    assert not bool(jax.jit(lambda g: jnp.asarray(axis(g) == axis(a)))(a))
    assert not bool(jax.jit(lambda g: jnp.asarray(axis(a) == axis(g)))(a))


def _structures(leaves: Any) -> dict[str, Any]:
    """One scalar structure of each dense kind, its coordinates ``leaves`` (numpy or JAX) unconverted;
    a Cheb's coordinates within its ``Axis.exact`` ((N + 1) // 2), where the dense formula is the
    generic definition, but for one past it."""
    layout = dyadic.layout(dyadic.depths_of(UNBALANCED, "test"), 11)
    within = np.concatenate([rng.normal(size=3), np.zeros(3)])
    constants = np.stack([rng.normal(size=3), np.zeros(3)], axis=1)  # Cheb of 2: exact 1
    return {
        "Vec": Vec(leaves(rng.normal(size=6)), Seq, 6),
        "Cheb": Cheb(leaves(within), X, 6, 12),
        "Cheb past Axis.exact": Cheb(leaves(rng.normal(size=6)), X, 6, 12),
        "Compose": Compose(Vec(Cheb(leaves(constants), X, 2, 4), Seq, 3)),
        "DenseTree": DenseTree(leaves(rng.normal(size=11)), layout, 11),
    }


@pytest.mark.parametrize("kind", ["Vec", "Cheb", "Cheb past Axis.exact", "Compose", "DenseTree"])
def test_numpy_leaves_take_the_formula_they_take_under_jit(kind: str) -> None:
    # eager on numpy leaves == eager on JAX leaves == jit, by the dense formula; == the generic
    # definition too, where the instance says they agree (not past a Cheb's Axis.exact: there the dense
    # formula is the exact integral, the generic one integrates a truncated product).
    seed = rng.bit_generator.state
    host = _structures(np.asarray)[kind]
    rng.bit_generator.state = seed
    device = _structures(jnp.asarray)[kind]
    with record_fast_paths() as taken:
        eager_host = dot(host, host)
    assert taken == ["dot"]
    np.testing.assert_allclose(eager_host, dot(device, device), rtol=1e-14)
    np.testing.assert_allclose(eager_host, jax.jit(dot)(host, host), rtol=1e-14)
    with generic_only():
        generic = dot(device, device)
    if kind == "Cheb past Axis.exact":
        assert abs(float(generic) - float(eager_host)) > 1e-6
    else:
        np.testing.assert_allclose(eager_host, generic, rtol=1e-12)


def test_functions_whose_values_are_trees_of_one_shape_built_apart_are_one_structure() -> None:
    # Two series over trees of one shape built apart (their trees too), and a constant one, pure of a
    # third tree of that shape computed on the device (a refinement: its layout another array): one pytree
    # structure (they stack together), and they meet in the dense formulas and in pair, which zips their
    # trees: a sum keeps the trees' capacity. Under jit, f and g are two arguments, two values that the one
    # compiled function serves whatever their shapes: their trees pair on their common refinement there,
    # the same function.
    f, g = Cheb.of(_trees([UNBALANCED] * 4, 11), X), Cheb.of(_trees([UNBALANCED] * 4, 11), X)
    refined = _trees([UNBALANCED], 11)[0].refine(DenseTree.from_nested(0.0))  # capacity 11 + 1 - 1
    constant = f.pure(refined)
    structures: list[jax.tree_util.PyTreeDef] = [jax.tree_util.tree_structure(h) for h in (f, g, constant)]
    assert structures[1] == structures[0]
    assert structures[2] == structures[0]
    cf, cg, cc = (np.asarray(to_array(h)) for h in (f, g, constant))  # coefficients x slots
    with record_fast_paths() as taken:
        total = add(f, constant)
    assert taken == ["add"]
    np.testing.assert_allclose(to_array(total), cf + cc, rtol=1e-14)
    def sum_(f: Cheb[X, DenseTree[jax.Array]], g: Cheb[X, DenseTree[jax.Array]]) -> Any:
        return f.pair(g).fmap(lambda p: p[0] + p[1])

    summed = sum_(f, g)
    assert as_dense_tree(summed.data).capacity == 11
    np.testing.assert_allclose(to_array(summed), cf + cg, rtol=1e-12, atol=1e-12)
    compiled = jax.jit(sum_)
    laws.assert_close(compiled(f, g), summed, rtol=1e-12, atol=1e-12)
    other = Cheb.of(_trees([BALANCED] * 4, 11), X)
    laws.assert_close(compiled(f, other), sum_(f, other), rtol=1e-12, atol=1e-12)
    assert compiled._cache_size() == 1  # type: ignore[attr-defined]  # (one compile for two shapes)
    # One argument paired with itself zips its trees under jit as eagerly, and the sum is still one shape
    # (a map along it, the Chebyshev transform of fmap, needs that).
    doubled = jax.jit(lambda f: sum_(f, f).fmap(lambda t: t.fmap(jnp.sin)))(f)
    assert as_dense_tree(doubled.data).capacity == 11
    np.testing.assert_allclose(to_array(doubled), to_array(sum_(f, f).fmap(lambda t: t.fmap(jnp.sin))),
                               rtol=1e-12, atol=1e-12)  # fmt: skip


def test_a_function_whose_values_are_trees_of_vectors_is_evaluated_leaf_by_leaf() -> None:
    # The transform reaches a tree's values through along, one array leaf at a time: here a Vec per leaf.
    coefficients = rng.normal(size=(3, 9, 2))  # 3 Chebyshev coefficients, each a tree of 9 leaves of 2-vectors
    trees = [DenseTree.stack(UNBALANCED, Vec.from_array(c, Seq, Model).data, 11) for c in coefficients]
    at_x = as_dense_tree(Cheb.of(trees, X)(0.3))
    assert at_x.shape == UNBALANCED
    leaves = np.stack([np.asarray(to_array(v)) for v in at_x.leaves()])
    np.testing.assert_allclose(leaves, C.chebval(0.3, coefficients), rtol=1e-12, atol=1e-12)


def test_gram_matrices_that_differ_in_their_last_bit_are_two_measures() -> None:
    a = np.array([0.25, 0.5, 0.25])
    assert Axis("Mesh", Seq, 3, a) != Axis("Mesh", Seq, 3, np.nextafter(a, 1.0))


def test_two_meshes_of_one_size_never_contract_by_one_of_their_measures(monkeypatch: pytest.MonkeyPatch) -> None:
    # A user's mesh whose hook leaves Axis.shape None (its Gram matrix, the trapezoid weights, is data of
    # its nodes): two meshes of one tag and node count once contracted by the first one's weights
    # (dot(f, g) = 0.660, dot(g, f) = 0.776). Their Gram matrices differ, so the dense formula does not
    # run and the mesh's own pair refuses the two, naming both.
    monkeypatch.setattr(Mesh, "axes", lambda self: (Axis("Mesh", self.tag, self.size, trapezoid_weights(self.nodes)),))
    f = Mesh.from_function(jnp.sin, Seq, (0.0, 0.1, 0.5, 1.0))
    g = Mesh.from_function(jnp.cos, Seq, (0.0, 0.6, 0.9, 1.0))
    for a, b in ((f, g), (g, f)):
        with pytest.raises(ValueError, match=r"pair: Mesh\[Seq\] .* vs Mesh\[Seq\] .*: not one mesh"):
            dot(a, b)
    # On one mesh the dense formula runs and is the trapezoid rule of the product, both ways.
    h = Mesh.from_function(jnp.cos, Seq, f.nodes)
    with record_fast_paths() as taken:
        both = float(dot(f, h)), float(dot(h, f))
    assert taken == ["dot", "dot"]
    x = np.asarray(f.nodes)
    np.testing.assert_allclose(both, [np.sum(trapezoid_weights(f.nodes) * np.sin(x) * np.cos(x))] * 2, rtol=1e-14)


def test_the_softmax_shift_reads_values_never_a_shape() -> None:
    """``stacked.largest`` (the softmax's shift) of structures that hold trees or series is their largest value,
    from numpy: a tree's leaves (its padding and its layout, whose start words reach 2^30, never), a series'
    values at the points its fmap samples. Keys on a grid of trees once shifted every score by about 1e9,
    the layout's largest word: every weight of the generic softmax was 0."""
    inner = _trees([UNBALANCED] * 3, 11)
    grid = Compose(DenseTree.of((None, (None, None)), inner, 4))
    top = max(float(v) for t in inner for v in t.leaves())
    np.testing.assert_equal([float(stacked.largest(grid)), float(stacked.largest(grid.outer))], [top, top])
    at = np.cos(np.pi * (np.arange(8) + 0.5) / 8)  # the 8 Chebyshev points a series of 4 samples
    c = rng.normal(size=(2, 4))
    channels = Compose(Vec.of([Cheb.from_array(row, X) for row in c], Model))
    np.testing.assert_allclose(stacked.largest(channels), np.max(C.chebval(at, c.T)), rtol=1e-14)
    series = Cheb.of(_trees([UNBALANCED] * 4, 11), X)  # coefficients: trees of 9 leaves
    leaves = np.stack([np.asarray(to_array(t))[:9] for t in (element(series.data, n) for n in range(4))])
    np.testing.assert_allclose(stacked.largest(series), np.max(C.chebval(at, leaves)), rtol=1e-14)
    assert float(stacked.largest(Distribution([-3.0, -2.0], [0.25, 0.75]))) == -2.0  # an outcome, not a weight
    # A structure with no largest of its own (a Vec, a tuple) answers by its parts': its trees by their leaves,
    # all negative here, never a word of their layouts.
    negative = [t.fmap(lambda v: -jnp.abs(v) - 1.0) for t in inner]
    below = max(float(v) for t in negative for v in t.leaves())
    assert float(stacked.largest(Vec.of(negative, Seq))) == below
    assert float(stacked.largest((negative[0], jnp.full(2, -50.0)))) == max(float(v) for v in negative[0].leaves())

    class Opaque(Shaped):
        """A user's structure whose leaves are not values, with no largest of its own."""

    with pytest.raises(TypeError, match=r"largest: a structure of type Opaque has no largest value"):
        stacked.largest((jnp.ones(3), Opaque()))
