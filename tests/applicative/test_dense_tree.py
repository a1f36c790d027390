"""DenseTree against its specification, the recursive Tree, in float64: conversions, every operation
of the linear algebra, attention, the encoder, cross attention and gradients agree to 1e-12 on
random shapes of up to 64 leaves; one compiled function serves every shape; the dense formulas run
where the trees share a shape; bad input is named."""

from collections.abc import Callable
from typing import Any, TypeVar

import hypothesis
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from applicative import (
    ARITHMETIC,
    Cheb,
    DenseTree,
    Dim,
    Distribution,
    Leaf,
    Node,
    Pointwise,
    Tree,
    Vec,
    add,
    as_vec,
    counit,
    dot,
    laws,
    mul_mm,
    mul_mmt,
    mul_mv,
    mul_vm,
    nn,
    outer,
    record_fast_paths,
    scale,
    stacked,
    strategies,
    sum_mul_mmt,
    to_array,
)
from applicative.examples.trees import random_shape
from applicative.instances import dyadic
from applicative.instances.tree import Shape
from applicative.protocols.algebra import Arithmetic, Module, Real
from applicative.stacked import element, stack
from tests.applicative.dims import Hidden, Model, Seq
from tests.applicative.tolerance import Tolerance

N = TypeVar("N", bound=Dim)
TOL: Tolerance = {"rtol": 1e-12, "atol": 1e-12}
rng = np.random.default_rng(21)


class Head(Dim):
    """Attention heads."""


class Key(Dim):
    """Query/key features of a head."""


class X(Dim):
    """The variable of a function."""


# Shapes of 1 to 64 leaves: a leaf, a comb, a balanced tree and random ones.
COMB: Shape = None
for _ in range(9):
    COMB = (None, COMB)
BALANCED: Shape = None
for _ in range(5):
    BALANCED = (BALANCED, BALANCED)
SHAPES: list[Shape] = [None, COMB, BALANCED, *(random_shape(rng, n) for n in (3, 17, 40, 64))]


def vec(n: int = 3) -> Vec[Model, jax.Array]:
    return Vec.from_array(rng.normal(size=n), Model)


def scalar() -> jax.Array:
    return jnp.asarray(rng.normal())


def tree_with(shape: Shape, make: Callable[[], Any]) -> Tree[Any]:
    """The Tree of ``shape`` with a fresh value ``make()`` at each leaf."""
    return Leaf(make()) if shape is None else Node(tree_with(shape[0], make), tree_with(shape[1], make))


def random_tree(shape: Shape) -> Tree[jax.Array]:
    return tree_with(shape, scalar)


def pair_of(shape: Shape, make: Callable[[], Any] = scalar, capacity: int = 64) -> tuple[DenseTree[Any], Tree[Any]]:
    """A DenseTree of ``shape`` with fresh leaf values in ``capacity`` slots, and its Tree."""
    spec = tree_with(shape, make)
    return DenseTree.from_nested(spec, capacity), spec


def specification(x: object) -> object:
    """The recursive form of a result: DenseTrees as Trees, all the way down."""
    if isinstance(x, DenseTree):
        return x.to_tree().fmap(specification)
    if isinstance(x, Vec):
        return Vec.of([specification(e) for e in (x[i] for i in range(x.size))], x.tag) if _holds_trees(x) else x
    return x


def _holds_trees(v: Vec[Any, Any]) -> bool:
    return any(
        isinstance(e, DenseTree) for e in jax.tree_util.tree_leaves(v.data, is_leaf=lambda e: isinstance(e, DenseTree))
    )


def agree(dense: object, spec: object) -> None:
    """The dense result is the specification's: the same shapes all the way down, values to 1e-12."""
    laws.assert_close(specification(dense), spec, **TOL, what="DenseTree vs Tree")


# Conversions


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: f"{len(dyadic.depths_of(s))} leaves")
def test_conversions_round_trip_and_keep_the_shape(shape: Shape) -> None:
    dense, spec = pair_of(shape)
    assert dense.shape == spec.shape
    assert dense.depths() == spec.depths()
    assert dense.count() == len(spec.leaves()) <= dense.capacity == 64
    np.testing.assert_array_equal(dense.leaves(), spec.leaves())
    assert DenseTree.from_nested(spec.to_nested(), 64).to_nested() == dense.to_nested() == spec.to_nested()
    np.testing.assert_array_equal(DenseTree.of(shape, spec.leaves()).leaves(), spec.leaves())
    np.testing.assert_array_equal(DenseTree.stack(shape, np.asarray(spec.leaves())).leaves(), spec.leaves())
    assert DenseTree.from_shape(shape, 2.0).leaves() == [2.0] * dense.count()
    # Padding: measure zero, and a copy of the first leaf's value (equal functions, equal pytrees).
    weights = np.asarray(dense.weights())
    np.testing.assert_array_equal(weights[: dense.count()], [2.0**-d for d in spec.depths()])
    assert np.all(weights[dense.count() :] == 0)
    assert weights.sum() == 1.0
    np.testing.assert_array_equal(np.asarray(dense.data)[dense.count() :], spec.leaves()[0])


def test_the_layout_is_the_dyadic_partition_exact_to_depth_60() -> None:
    depths = [1, *range(2, 61), 60]  # a comb down to depth 60: breakpoints 1/2, 3/4, ..., 1 - 2^-60
    lay = dyadic.intervals(dyadic.layout(depths, 64))
    starts = [(int(h) << 30) + int(lo) for h, lo in zip(lay.hi, lay.lo, strict=True)]
    assert starts[:61] == [sum(1 << (60 - d) for d in depths[:i]) for i in range(61)]
    assert starts[61:] == [1 << 60] * 3  # padding starts at 1
    assert dyadic.shape_of(depths) == Tree.from_shape(dyadic.shape_of(depths), 0).shape
    assert dyadic.depths_of(dyadic.shape_of(depths)) == depths


# Every operation against the specification


@pytest.mark.parametrize(("a", "b"), [(0, 1), (1, 2), (2, 6), (3, 5), (6, 4), (6, 6)])
def test_pair_is_the_common_refinement(a: int, b: int) -> None:
    (x, xs), (y, ys) = pair_of(SHAPES[a]), pair_of(SHAPES[b], capacity=80)
    paired = x.pair(y)
    assert paired.capacity == 64 + 80 - 1
    agree(paired, xs.pair(ys))
    agree(x.fmap(jnp.sin), xs.fmap(jnp.sin))
    agree(x.refine(y), xs.refine(ys))
    np.testing.assert_allclose(counit(x), counit(xs), **TOL)
    np.testing.assert_allclose(x.plain_sum(), xs.plain_sum(), **TOL)
    np.testing.assert_allclose(dot(x, y), dot(xs, ys), **TOL)
    agree(add(x, y), add(xs, ys))
    agree(scale(-1.5, x), scale(-1.5, xs))


@pytest.mark.parametrize("shapes", [(1, 4), (6, 3), (4, 4)])
def test_the_linear_algebra_agrees_with_the_specification(shapes: tuple[int, int]) -> None:
    a, b = (SHAPES[i] for i in shapes)
    (m, ms), (n, ns) = pair_of(a, vec), pair_of(b, vec)
    (v, vs), (u, us) = pair_of(a), pair_of(b)
    w = Vec.from_array(rng.normal(size=(3, 2)), Model, Hidden)
    x = vec()
    agree(outer(v, x), outer(vs, x))
    agree(mul_mv(m, x), mul_mv(ms, x))
    agree(mul_mm(m, w), mul_mm(ms, w))
    agree(mul_mmt(m, n), mul_mmt(ms, ns))  # a tree of trees: rows of n's shape
    agree(mul_vm(u, n), mul_vm(us, ns))
    agree(mul_vm(v, m), mul_vm(vs, ms))
    # Matrices over trees, trees of trees: rows of one shape (as a matrix's), and rows of many.
    for same_rows in (True, False):

        def row(same: bool = same_rows) -> Tree[jax.Array]:
            return random_tree(b if same else random_shape(rng, 8))

        ks = tree_with(a, row)
        k = DenseTree.from_nested(ks.fmap(lambda row: DenseTree.from_nested(row, 64)), 64)
        if same_rows:
            agree(mul_mm(k, n), mul_mm(ks, ns))
        agree(mul_mv(k, u), mul_mv(ks, us))
    # sum over heads of W_h o_h, each head's o_h a tree: multi-head attention's output projection.
    heads = Vec.from_array(rng.normal(size=2), Head)
    w_o = Vec.from_array(rng.normal(size=(2, 4, 3)), Head, Hidden, Model)
    agree(sum_mul_mmt(w_o, heads.fmap(lambda h: scale(h, m))), sum_mul_mmt(w_o, heads.fmap(lambda h: scale(h, ms))))


def test_pairing_trees_of_one_known_shape_is_a_zip() -> None:
    x, _ = pair_of(SHAPES[5])

    def primitives(f: Callable[..., Any], *args: Any) -> str:
        return str(jax.make_jaxpr(f)(*args))

    # Trees made from one tree pair for nothing (no sort, no gather); two trees refine.
    assert "sort" not in primitives(lambda t: t.pair(t.fmap(jnp.sin)).pair(t.pure(1.0)), x)
    assert "gather" not in primitives(lambda t: t.pair(t.fmap(jnp.sin)).pair(t.pure(1.0)), x)
    assert primitives(lambda t, u: t.pair(u), x, x).count(" sort[") == 1


def test_dense_formulas_run_where_the_trees_share_a_shape() -> None:
    m, _ = pair_of(SHAPES[5], vec)
    w = Vec.from_array(rng.normal(size=(3, 3)), Model, Model)
    with record_fast_paths() as taken:
        projected = mul_mmt(w, m)  # Linear.each: the tree keeps its layout
        scores = mul_mmt(projected, m)
        mul_mv(scores, m.fmap(lambda e: to_array(e)[0]))
        mul_mm(scores, projected)
        add(m, projected)
        dot(m.fmap(lambda e: to_array(e)[0]), projected.fmap(lambda e: to_array(e)[1]))
    assert taken == ["mul_mmt", "mul_mmt", "mul_mv", "mul_mm", "add", "dot"]


# Attention, the encoder, cross attention and gradients


def zeros(n: int, tag: type[N]) -> Vec[N, jax.Array]:
    return Vec.from_array(np.zeros(n), tag)


ENCODER = nn.init_encoder(
    jax.random.key(3),
    nn.AttentionOptions(heads=zeros(2, Head), model=zeros(4, Model), head_features=zeros(3, Key)),
    inputs=zeros(4, Model),
    hidden=zeros(6, Hidden),
    layers=1,
    outputs=None,
)


def test_attention_and_the_encoder_agree_with_the_specification() -> None:
    # (The specification unrolls attention per pair of leaves, eagerly: 17 leaves take it 1 s.)
    x, xs = pair_of(SHAPES[4], vec)  # 17 leaves
    agree(nn.attention(x, x, x), nn.attention(xs, xs, xs))
    y, ys = pair_of(SHAPES[1], lambda: vec(4))  # a comb of 10 leaves
    agree(jax.jit(ENCODER.encode)(y), ENCODER.encode(ys))


def test_attention_on_64_leaves_is_the_softmax_against_the_dyadic_measure() -> None:
    # numpy in float64: out_i = sum_j w_j e_ij v_j / sum_j w_j e_ij, e_ij = exp(q_i . k_j / sqrt 3), w_j = 2^-depth_j.
    x, xs = pair_of(SHAPES[6], vec, capacity=80)  # 64 leaves in 80 slots: padding is no key
    v = np.stack([np.asarray(to_array(leaf)) for leaf in xs.leaves()])
    s = v @ v.T / np.sqrt(3)
    e = 2.0 ** -np.array(xs.depths()) * np.exp(s - s.max(1, keepdims=True))
    out = np.stack([to_array(leaf) for leaf in jax.jit(nn.attention)(x, x, x).leaves()])
    np.testing.assert_allclose(out, e @ v / e.sum(1, keepdims=True), **TOL)


def test_cross_attention_between_trees_vectors_and_functions() -> None:
    q, qs = pair_of(SHAPES[3], vec)
    k, ks = pair_of(SHAPES[5], vec)
    seq = Vec.from_array(rng.normal(size=(5, 3)), Seq, Model)
    function = Cheb.stack(Vec.from_array(rng.normal(size=(6, 3)), X, Model).data, X)
    agree(nn.attention(q, seq, seq), nn.attention(qs, seq, seq))  # a tree over a Vec
    agree(nn.attention(seq, k, k), nn.attention(seq, ks, ks))  # a Vec over a tree
    agree(nn.attention(q, function, function), nn.attention(qs, function, function))  # a tree over a Cheb
    agree(nn.attention(q, k, k), nn.attention(qs, ks, ks))  # a tree over another tree


def test_gradients_agree_with_the_specification() -> None:
    x, xs = pair_of(SHAPES[3], lambda: vec(4))

    def loss(model: Any, tree: Any) -> jax.Array:
        return jnp.asarray(counit(model.encode(tree).fmap(lambda v: jnp.sum(jnp.sin(to_array(v))))))

    dense, spec = jax.jit(jax.grad(loss))(ENCODER, x), jax.jit(jax.grad(loss))(ENCODER, xs)  # (spec: one program)
    laws.assert_close(dense, spec, **TOL, what="gradients")
    # With respect to the leaves (their values: a tree's shape is integers): the gradient of the
    # integral is each leaf's measure, 0 on padding.
    values = x.fmap(lambda v: v[0])
    np.testing.assert_allclose(jax.grad(lambda v: counit(values.with_elements(v)))(values.data), x.weights(), **TOL)


# One compilation for every shape; batches of mixed shapes


def test_one_compilation_serves_every_shape_and_jit_does_not_change_results() -> None:
    traces: list[int] = []

    def f(t: DenseTree[Any]) -> Any:
        traces.append(1)
        return ENCODER.encode(t)

    jitted = jax.jit(f)
    for shape in (None, COMB, SHAPES[3], (SHAPES[3], None)):
        x, xs = pair_of(shape, lambda: vec(4))
        agree(jitted(x), ENCODER.encode(xs))
    laws.assert_close(jitted(x), f(x), **TOL)
    assert len(traces) == 1 + 1  # one trace under jit for four shapes, one eager call


def test_vmap_over_a_batch_of_trees_of_different_shapes() -> None:
    trees = [pair_of(shape, lambda: vec(4)) for shape in (COMB, SHAPES[3], None)]
    batch = jax.tree_util.tree_map(lambda *leaves: jnp.stack(leaves), *(t for t, _ in trees))
    out = jax.jit(jax.vmap(ENCODER.encode))(batch)
    for i, (_, spec) in enumerate(trees):
        agree(jax.tree_util.tree_map(lambda leaf, i=i: leaf[i], out), ENCODER.encode(spec))


def test_training_on_a_batch_of_shapes_runs_only_dense_formulas() -> None:
    # The gradient of the encoder over a vmapped batch of trees: every tree level of attention
    # shares the input's layout, so nothing refines (no sort, no gather), attention runs on coordinates
    # (the measure a bias on each key) and the other products are dense.
    trees = [pair_of(shape, lambda: vec(4))[0] for shape in (COMB, SHAPES[3], None)]
    batch = jax.tree_util.tree_map(lambda *leaves: jnp.stack(leaves), *trees)

    def loss(model: Any, trees: Any) -> jax.Array:
        out = jax.vmap(model.encode)(trees)
        return jnp.sum(jax.vmap(lambda t: counit(t.fmap(lambda v: jnp.sum(to_array(v) ** 2))))(out))

    with record_fast_paths() as taken:
        jaxpr = jax.make_jaxpr(jax.grad(loss))(ENCODER, batch)
    primitives = {str(equation.primitive) for equation in jaxpr.jaxpr.eqns}
    assert not primitives & {"sort", "gather"}
    assert {"attention", "sum_mul_mmt"} <= set(taken)


@pytest.mark.parametrize("mode", ["eager", "jit", "jit of the values"])
def test_trees_are_carried_through_scan_cond_and_loops(mode: str) -> None:
    # One pytree structure in and out, as lax control flow requires of carries and branches: also
    # where the layout is closed over and only the values are traced (a trace-time record is made).
    x, xs = pair_of(SHAPES[3], lambda: vec(4))

    def layers(t: Any) -> Any:
        t, _ = jax.lax.scan(lambda c, _: (ENCODER.encode(c), None), t, None, length=2)
        t = jax.lax.fori_loop(0, 2, lambda i, c: c.fmap(lambda v: v.fmap(jnp.tanh)), t)
        return jax.lax.cond(True, lambda c: c.fmap(lambda v: v.fmap(jnp.sin)), lambda c: c, t)

    expected = ENCODER.encode(ENCODER.encode(xs)).fmap(lambda v: v.fmap(lambda e: jnp.sin(jnp.tanh(jnp.tanh(e)))))
    if mode == "jit of the values":
        agree(jax.jit(lambda data: layers(x.with_elements(data)))(x.data), expected)
    else:
        agree((jax.jit(layers) if mode == "jit" else layers)(x), expected)


def test_a_stack_made_in_a_trace_is_one_shape_only_where_it_can_be_shown() -> None:
    """A scan's outputs stacked from trees of the shapes its body computes (here two shapes, alternating) are
    trees of several shapes, each contracted on its own. Those of a body that maps one tree's values, closed
    over, are one shape: eagerly, read off their concrete rows, they meet that tree in the dense formula;
    under jit, where JAX stacked them from traced leaves, nothing shows it and the generic definition gives
    the same values (``stacked.vmap`` stacks such trees knowing it: the test above)."""
    (a, a_spec), (b, b_spec) = pair_of(SHAPES[3]), pair_of(SHAPES[5])
    probe, probe_spec = pair_of(SHAPES[4])

    def alternating(_: Any, i: jax.Array) -> tuple[None, DenseTree[Any]]:
        return None, jax.lax.cond(i % 2 == 0, lambda: a.fmap(jnp.sin), lambda: b.fmap(jnp.cos))

    def products(a: DenseTree[Any], values: jax.Array) -> Any:
        _, ys = jax.lax.scan(lambda _, s: (None, a.fmap(lambda x: s * x)), None, jnp.array([1.0, -2.0]))
        return mul_mv(Vec(ys, Seq, 2), a.with_elements(values))

    values = jnp.asarray(rng.normal(size=64))
    on_a = a.with_elements(values)
    for run, formula in ((lambda f: f, ["mul_mv"]), (jax.jit, [])):
        _, ys = run(lambda: jax.lax.scan(alternating, None, jnp.arange(3)))()
        sine, cosine = a_spec.fmap(jnp.sin), b_spec.fmap(jnp.cos)
        expected = [dot(spec, probe_spec) for spec in (sine, cosine, sine)]
        np.testing.assert_allclose(to_array(run(mul_mv)(Vec(ys, Seq, 3), probe)), expected, **TOL)
        with record_fast_paths() as taken:
            by_formula = run(products)(a, values)
        assert taken == formula
        np.testing.assert_allclose(to_array(by_formula), [s * float(dot(a, on_a)) for s in (1.0, -2.0)], **TOL)


def test_shapes_known_inside_one_trace_are_never_trusted_outside_it() -> None:
    # The outputs of one compiled function for two shapes share a trace-time provenance; pairing
    # them must still refine (a zip would be silently wrong), and pass through jit without retracing.
    (a, a_spec), (b, b_spec) = pair_of(SHAPES[3]), pair_of(SHAPES[5])
    sine = jax.jit(lambda t: t.fmap(jnp.sin))
    agree(sine(a).pair(sine(b)), a_spec.fmap(jnp.sin).pair(b_spec.fmap(jnp.sin)))
    product = jax.jit(lambda a, b: dot(a, b))  # its own cache (jax.jit(dot) shares one across the suite)
    np.testing.assert_allclose(product(sine(a), sine(b)), dot(a_spec.fmap(jnp.sin), b_spec.fmap(jnp.sin)), **TOL)
    np.testing.assert_allclose(product(sine(b), sine(a)), dot(b_spec.fmap(jnp.sin), a_spec.fmap(jnp.sin)), **TOL)
    assert product._cache_size() == 1  # type: ignore[attr-defined]
    nested = jax.jit(lambda x, y: dot(sine(x), sine(y)))  # an inner jit's outputs, inside an outer trace
    np.testing.assert_allclose(nested(a, b), dot(a_spec.fmap(jnp.sin), b_spec.fmap(jnp.sin)), **TOL)
    rows = jax.vmap(lambda t: t.fmap(jnp.cos))(jax.tree_util.tree_map(lambda u, v: jnp.stack([u, v]), a, b))
    first, second = (jax.tree_util.tree_map(lambda leaf, i=i: leaf[i], rows) for i in range(2))
    agree(first.pair(second), a_spec.fmap(jnp.cos).pair(b_spec.fmap(jnp.cos)))


# Laws on larger shapes (the law suite draws up to 8 leaves), and the module of trees


@pytest.mark.slow
def test_laws_hold_on_shapes_of_up_to_64_leaves() -> None:
    for law in ("pair associativity", "counit respects pairing"):
        laws.check_law(law, strategies.dense_tree_triples(64, (64,)), max_examples=3)
    trees = strategies.dense_tree_triples().map(lambda xyz: xyz[0])
    laws.check_algebra_laws(Pointwise(ARITHMETIC), trees, max_examples=10)


def test_drawn_shapes_never_pass_the_deepest_layout_and_reach_it() -> None:
    # 64 leaves admit a comb of depth 63; drawn shapes stop at what a layout holds (the case that
    # found it: a comb of 63 leaves, one leaf at depth 62). At a depth of 6, 64 leaves fit one way only.
    def deepest(shape: Shape) -> int:
        return max(dyadic.depths_of(shape))

    def balanced(depth: int) -> Shape:
        return None if depth == 0 else (balanced(depth - 1), balanced(depth - 1))

    @hypothesis.given(strategies.shapes(64), strategies.shapes(64, max_depth=6))
    @hypothesis.settings(max_examples=200, deadline=None, database=None)
    def fits(shape: Shape, shallow: Shape) -> None:
        assert deepest(shape) <= dyadic.MAX_DEPTH
        assert deepest(shallow) <= 6
        assert len(dyadic.depths_of(shallow)) < 64 or shallow == balanced(6)
        DenseTree.stack(shape, np.zeros(len(dyadic.depths_of(shape))), 64)

    fits()
    # found, not shrunk: shrinking a shape once found took 4 of this test's 5 s and proves nothing more; in the
    # draws of a fixed seed, as one CI run's 1000 random draws held no shape 40 deep
    settings = hypothesis.settings(max_examples=1000, database=None, phases=[hypothesis.Phase.generate],
                                   derandomize=True)  # fmt: skip
    assert deepest(hypothesis.find(strategies.shapes(64), lambda s: deepest(s) >= 40, settings=settings)) >= 40
    full = hypothesis.find(strategies.shapes(64, 6), lambda s: len(dyadic.depths_of(s)) == 64, settings=settings)
    assert full == balanced(6)


def test_ordinary_arithmetic_adds_trees_through_pair() -> None:
    (a, a_spec), (b, b_spec) = pair_of(SHAPES[3]), pair_of(SHAPES[4])
    agree(ARITHMETIC.add(a, b), add(a_spec, b_spec))
    agree(ARITHMETIC.zero(a), a_spec.fmap(jnp.zeros_like))
    stack = Vec.of([a, b], Seq)  # a Vec of two trees: its counit sums them on their common refinement
    agree(counit(stack), add(a_spec, b_spec))


# Bad input


def test_bad_trees_and_capacities_are_named() -> None:
    deep: Any = 1.0
    for _ in range(61):
        deep = (deep, 0.0)
    with pytest.raises(ValueError, match=r"a leaf at depth 61, deeper than the 60 a layout holds"):
        DenseTree.from_nested(deep, 64)
    with pytest.raises(ValueError, match=r"DenseTree.from_nested \(a tree of 3 leaves, capacity 2\).* does not fit"):
        DenseTree.from_nested((1.0, (2.0, 3.0)), 2)
    with pytest.raises(ValueError, match=r"DenseTree.of: the shape at \[1\] is 3"):
        DenseTree.of((None, 3), [1.0, 2.0])  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"DenseTree.of: 3 leaf values for a shape of 2 leaves"):
        DenseTree.of((None, None), [1.0, 2.0, 3.0])
    with pytest.raises(ValueError, match=r"DenseTree.from_nested: the leaf at \[1\]\[0\] is None"):
        DenseTree.from_nested((1.0, (None, 2.0)))
    with pytest.raises(ValueError, match=r"DenseTree.from_nested: a tuple of length 3 at \[0\]"):
        DenseTree.from_nested(((1.0, 2.0, 3.0), 2.0))
    with pytest.raises(ValueError, match=r"not those of a binary tree"):
        dyadic.layout([1, 2], 4)  # [0, 1/2), [1/2, 3/4): does not reach 1
    with pytest.raises(ValueError, match=r"leaf depths \[2, 1, 2\] are not those of a binary tree"):
        dyadic.layout([2, 1, 2], 4)  # [0, 1/4), [1/4, 3/4), [3/4, 1): tiles [0, 1), but no node splits at 1/4..3/4
    tree = DenseTree.from_nested((1.0, 2.0))
    with pytest.raises(TypeError, match="pair: DenseTree paired with Vec"):
        tree.pair(vec())  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"DenseTree.counit: a stack of trees \(layout of shape \(2, 2\)\)"):
        Vec.of([tree, tree], Seq).data.counit()
    with pytest.raises(ValueError, match=r"DenseTree.depths: needs a concrete tree"):
        jax.jit(lambda t: t.depths())(tree)


def test_trees_built_from_device_arrays_compile_nothing_per_leaf_count() -> None:
    """DenseTree.stack and DenseTree.of lay device arrays out at the capacity without an XLA computation
    per leaf count: after one tree at a capacity, trees of three other leaf counts lower nothing to XLA
    (a compilation, or a load from a cache, is lowered first) and hold the values given."""
    lowered: list[str] = []

    def listen(event: str, duration_secs: float, **_: str | int) -> None:
        if event == "/jax/core/compile/jaxpr_to_mlir_module_duration":
            lowered.append(event)

    counts = (3, 5, 9)
    shapes = {n: random_shape(np.random.default_rng(n), n) for n in (2, *counts)}
    values = {n: jax.device_put(np.arange(2.0 * n).reshape(n, 2)) for n in (2, *counts)}
    leaves = {n: [jax.device_put(row) for row in np.asarray(values[n])] for n in (2, *counts)}
    DenseTree.stack(shapes[2], values[2], 16), DenseTree.of(shapes[2], leaves[2], 16)  # once per capacity
    jax.monitoring.register_event_duration_secs_listener(listen)
    try:
        built = [(DenseTree.stack(shapes[n], values[n], 16), DenseTree.of(shapes[n], leaves[n], 16)) for n in counts]
    finally:
        jax.monitoring.unregister_event_duration_listener(listen)
    assert lowered == []
    for n, trees in zip(counts, built, strict=True):
        for tree in trees:
            assert tree.shape == shapes[n]
            np.testing.assert_array_equal(np.stack(tree.leaves()), np.asarray(values[n]))


# Boundaries that the mutants of dense_tree.py and linalg.py found untested (docs/mutants.md, issue 32 part 6)


def test_the_largest_value_is_a_leafs_when_every_leaf_is_negative() -> None:
    # The padding slots (two here) are no values: the largest of -3, -2, -5 is -2, never 0.
    t = DenseTree.from_nested((-3.0, (-2.0, -5.0)), 5)
    assert float(t.largest()) == -2.0
    # So attention whose every score is far below 0 (about -1550) is still the softmax: shifted by a
    # padding slot's 0, every exp would underflow to 0. numpy in float64, keys = values, w_j = 2^-depth_j.
    k = np.array([[-30.0, -30.0, -30.0], [-31.0, -29.0, -30.0], [-30.0, -30.0, -31.0]])
    keys = DenseTree.from_nested((k[0], (k[1], k[2])), 5).fmap(lambda a: Vec.from_array(a, Model))
    q = np.array([[30.0, 30.0, 30.0], [30.0, 29.0, 31.0]])
    s = q @ k.T / np.sqrt(3)
    assert s.max() < -1500
    e = np.array([0.5, 0.25, 0.25]) * np.exp(s - s.max(1, keepdims=True))
    out = to_array(nn.attention(Vec.from_array(q, Seq, Model), keys, keys))
    np.testing.assert_allclose(out, e @ k / e.sum(1, keepdims=True), **TOL)


def test_trees_are_built_from_values_traced_inside_jit() -> None:
    shape = SHAPES[4]  # 17 leaves in 24 slots
    depths, values = dyadic.depths_of(shape), rng.normal(size=(17, 2))
    expected = 2.0 ** -np.array(depths) @ values
    stacked = jax.jit(lambda v: counit(DenseTree.stack(shape, v, 24)))(values)
    listed = jax.jit(lambda v: counit(DenseTree.of(shape, [v[i] for i in range(17)], 24)))(values)
    np.testing.assert_allclose(stacked, expected, **TOL)
    np.testing.assert_allclose(listed, expected, **TOL)


class Recording(Module[Any]):
    """Ordinary sums and scalings, each scaling's factor recorded."""

    def __init__(self) -> None:
        self.factors: list[float] = []

    def zero(self, like: Any) -> Any:
        return jnp.zeros_like(like)

    def add(self, a: Any, b: Any) -> Any:
        return a + b

    def scale(self, r: float | jax.Array, a: Any) -> Any:
        self.factors.append(float(r))
        return r * a


def test_the_counit_folds_through_the_module_it_is_given() -> None:
    # Not ordinary arithmetic: the Module scales every slot by its measure (0 on the two padding slots).
    t, module = DenseTree.from_nested((-3.0, (-2.0, -5.0)), 5), Recording()
    assert float(t.counit(module)) == -3.25 == 0.5 * -3.0 + 0.25 * -2.0 + 0.25 * -5.0
    assert module.factors == [0.5, 0.25, 0.25, 0.0, 0.0]


def test_a_tree_whose_rows_are_trees_of_one_shape_contracts_them_by_the_dense_formula() -> None:
    # Built from nested pairs of trees of one shape, the tree knows its rows share it (a matrix's rows):
    # mul_mmt of it with itself contracts the rows in one formula, and equals the specification's.
    spec = tree_with(SHAPES[3], lambda: random_tree(SHAPES[1]))
    k = DenseTree.from_nested(spec.fmap(lambda row: DenseTree.from_nested(row, 16)), 4)
    with record_fast_paths() as taken:
        product = mul_mmt(k, k)
    assert taken == ["mul_mmt"]
    agree(product, mul_mmt(spec, spec))
    # Built with one tree at every leaf (its layout broadcast, not stacked from a list), it knows it too:
    # under jit, where the rows' layouts are traced, the formula still runs. (Two arguments of a jit are
    # two values, one shape each, which the compiled function cannot assume to be the same.)
    row = DenseTree.from_nested(random_tree(SHAPES[1]), 16)
    constant = DenseTree.from_shape(SHAPES[3], row, 4)
    with record_fast_paths() as taken:
        product = jax.jit(lambda c: mul_mmt(c, c))(constant)
    assert taken == ["mul_mmt"]
    with record_fast_paths() as taken:
        again = jax.jit(mul_mmt)(constant, constant)
    assert taken == []
    laws.assert_close(again, product, **TOL)
    agree(product, mul_mmt(constant.to_tree().fmap(DenseTree.to_tree), constant.to_tree().fmap(DenseTree.to_tree)))


def test_with_elements_refuses_a_stack_of_trees_of_different_shapes() -> None:
    stack = Vec.of([DenseTree.from_nested((1.0, (2.0, 3.0)), 4), DenseTree.from_nested(((1.0, 2.0), 3.0), 4)], Seq)
    with pytest.raises(ValueError, match=r"DenseTree.with_elements: a stack of trees of different shapes"):
        stack.data.with_elements(jnp.zeros((2, 4)))


def test_to_array_of_trees_of_several_shapes_names_their_values_and_layouts() -> None:
    stack = Vec.of([DenseTree.from_nested((1.0, (2.0, 3.0)), 4), DenseTree.from_nested(((1.0, 2.0), 3.0), 4)], Seq)
    with pytest.raises(ValueError, match=r"to_array: this Vec\[Seq\] of size 2 holds 1 arrays of values and 1 of "
                                         r"structures' shapes \(a tree's layout\), not one array"):  # fmt: skip
        to_array(stack)
    np.testing.assert_array_equal(to_array(stack[1]), [1.0, 2.0, 3.0, 1.0])  # one tree: its values


def test_add_takes_trees_of_different_capacities_as_one_kind_of_element_and_names_others() -> None:
    (a, a_spec), (b, b_spec) = pair_of(SHAPES[3], capacity=4), pair_of(SHAPES[4], capacity=24)
    total = as_vec(add(Vec.of([a], Seq), Vec.of([b], Seq)))
    agree(total[0], add(a_spec, b_spec))  # on the common refinement, at capacity 4 + 24 - 1
    outcomes = Distribution(np.array([1.0, 2.0]), np.array([0.5, 0.5]))
    with pytest.raises(TypeError, match=r"add: the arguments hold different elements, a DenseTree and a Distribution"):
        add(Vec.of([a], Seq), Vec.of([outcomes], Seq))


def test_a_shape_recorded_inside_a_trace_is_kept_there_and_dropped_outside_it() -> None:
    # A vmap of a tree's values alone records the tree's layout on the stack it makes (a trace-time
    # provenance). Inside the jit that made it, an axis spec built by tree_map (placeholders for leaves,
    # as equinox's filter_vmap builds one) keeps it, so that the spec has the stack's structure. The
    # outputs of that jit for two shapes hold one recorded object (one trace serves both shapes): outside
    # it, eagerly and inside another jit, it is dropped, and rows of the two pair on their common
    # refinement and contract by the generic definition, never zipped.
    (a, a_spec), (b, b_spec) = pair_of(SHAPES[3]), pair_of(SHAPES[5])
    scales = jnp.array([1.0, -2.0])

    def scaled(t: DenseTree[jax.Array]) -> DenseTree[jax.Array]:
        return jax.vmap(lambda s: t.fmap(lambda x: s * x))(scales)

    def counits(t: DenseTree[jax.Array]) -> jax.Array:
        stack = scaled(t)
        spec = jax.tree_util.tree_map(lambda _: 0, stack)
        return jax.vmap(counit, in_axes=(spec,))(stack)

    np.testing.assert_allclose(jax.jit(counits)(a), np.asarray(scales) * counit(a_spec), **TOL)

    def second(stack: DenseTree[jax.Array]) -> DenseTree[jax.Array]:
        row: DenseTree[jax.Array] = jax.tree_util.tree_map(lambda leaf: leaf[1], stack)
        return row

    compiled, double = jax.jit(scaled), (lambda x: -2.0 * x)
    agree(second(compiled(a)).pair(second(compiled(b))), a_spec.fmap(double).pair(b_spec.fmap(double)))
    inside = jax.jit(lambda x, y: dot(second(compiled(x)), second(compiled(y))))
    np.testing.assert_allclose(inside(a, b), dot(a_spec.fmap(double), b_spec.fmap(double)), **TOL)


def test_a_jit_serves_stacks_of_every_shape_with_their_own() -> None:
    """One compiled function serves stacks of trees whatever their shapes: a stack known to be one shape reads it
    off its own rows in every call, never the shape of the value the function was first traced with (nor of its
    first output), and a stack of several shapes is never taken for one."""
    shapes = (SHAPES[3], SHAPES[4], SHAPES[2])
    functions = [Cheb.of([pair_of(shape, capacity=40)[0] for _ in range(3)], X) for shape in shapes]
    mapped = jax.jit(lambda f: f.fmap(lambda t: t.fmap(jnp.sin)))  # a map along the stack: its one shape
    for f in functions:
        got, expected = mapped(f).data, f.fmap(lambda t: t.fmap(jnp.sin)).data
        assert [t.shape for t in (got.element(i) for i in range(3))] == [expected.element(i).shape for i in range(3)]
        laws.assert_close(got, expected, **TOL)
    probe = pair_of(SHAPES[5], capacity=40)[0]
    products = jax.jit(lambda v: mul_mv(v, probe))
    one_shape = Vec.of([pair_of(SHAPES[3], capacity=40)[0] for _ in range(2)], Seq)
    several = Vec.of([pair_of(shape, capacity=40)[0] for shape in (SHAPES[3], SHAPES[4])], Seq)
    for v in (one_shape, several):
        np.testing.assert_allclose(to_array(products(v)), [float(dot(v[i], probe)) for i in range(2)], **TOL)
    assert products._cache_size() == 2  # type: ignore[attr-defined]  # (one shape, several: two kinds)


@pytest.mark.parametrize("jitted", [False, True], ids=["eager", "jit"])
def test_a_stack_the_librarys_vmap_makes_knows_its_shape_inside_the_trace(jitted: bool) -> None:
    # stacked.vmap of a tree's values alone (the tree closed over) stacks trees that know they hold its layout;
    # mapped by stacked.vmap again, each row meets the tree it came from in the dense formula. jax.vmap
    # stacks the same values knowing nothing (JAX built the stack): the generic definition, the same values.
    a, a_spec = pair_of(SHAPES[3])
    scales = jnp.array([1.0, -2.0])
    expected = np.asarray(scales) * dot(a_spec, a_spec)
    run = jax.jit if jitted else (lambda f: f)
    for vmap, formula in ((stacked.vmap, ["dot"]), (lambda f, x: jax.vmap(f)(x), [])):

        def rows_dot(t: DenseTree[jax.Array]) -> jax.Array:
            stack = vmap(lambda s: t.fmap(lambda x: s * x), scales)  # noqa: B023
            dots: jax.Array = vmap(lambda row: dot(row, t), stack)  # noqa: B023
            return dots

        with record_fast_paths() as taken:
            out = run(rows_dot)(a)
        assert taken == formula
        np.testing.assert_allclose(out, expected, **TOL)


def test_a_subclass_of_ordinary_arithmetic_is_respected_by_a_trees_counit() -> None:
    """An Arithmetic whose scale ignores the factor makes a tree's counit the plain sum of its leaves, as
    the specification's (Tree) does; it is not ordinary arithmetic, so no leafwise shortcut applies."""

    class Unscaled(Arithmetic[Any]):
        def scale(self, r: Real, a: Any) -> Any:
            return a

    t = DenseTree.from_nested((1.0, (2.0, 4.0)))
    assert float(counit(t, Unscaled())) == float(counit(t.to_tree(), Unscaled())) == 7.0


def test_stacks_of_trees_pair_and_map_tree_by_tree() -> None:
    """A stack of trees met as a value (the coefficients of a function whose values are trees, added by ordinary
    arithmetic) pairs with a stack of as many trees row by row, each pair the common refinement of its two
    trees (the recursive Tree's pair), and maps every tree; stacks of other counts are refused by name."""
    shapes_a = [(None, (None, None)), ((None, None), None), None]
    shapes_b = [((None, None), None), (None, None), (None, (None, None))]
    a = stack([DenseTree.of(s, [float(v) for v in range(len(dyadic.depths_of(s)))], 4) for s in shapes_a])
    b = stack([DenseTree.of(s, [10.0 + v for v in range(len(dyadic.depths_of(s)))], 4) for s in shapes_b])
    summed = a.pair(b).fmap(lambda p: p[0] + 2.0 * p[1])
    for i in range(3):
        spec = element(a, i).to_tree().pair(element(b, i).to_tree()).fmap(lambda p: p[0] + 2.0 * p[1])
        assert element(summed, i).to_nested() == spec.to_nested()
    with pytest.raises(ValueError, match=r"DenseTree.pair: a stack of trees of shape \(3,\) paired with one of shape "
                                         r"\(2,\); stacks pair tree by tree, so they need as many trees"):  # fmt: skip
        a.pair(stack([element(b, 0), element(b, 1)]))
