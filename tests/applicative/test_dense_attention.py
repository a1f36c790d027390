"""Attention's dense formula (``applicative.nn._dense_attention``) against its specification, the generic
definition (``generic_only``), in float64 to 1e-12: on every structure whose measure is a weight per
position (Vec, DenseTree of every shape drawn, a Compose grid, a user's Mesh), with features of any
structure (a Cheb), self and cross attention, masks, chunks of every size, gradients, eagerly and
under ``jit``; structures whose softmax is not a weight per position keep the generic path; the
chunked attention's temporaries grow as the keys, not as queries x keys; and the fused kernel
(``jax.nn.dot_product_attention``: XLA's here, cuDNN's on a GPU) computes the same where it is taken."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import hypothesis
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from applicative import (
    Cheb,
    Compose,
    DenseTree,
    Dim,
    Vec,
    generic_only,
    laws,
    nn,
    record_fast_paths,
    strategies,
    to_array,
)
from applicative.instances.tree import Node, Shape
from applicative.nn import _dense_attention as dense
from applicative.nn._dense_attention import fused_implementation as nn_fused_implementation
from tests.applicative.dims import Hidden, Seq
from tests.applicative.fourier import Fourier
from tests.applicative.mesh import Mesh
from tests.applicative.tolerance import Tolerance, float32

TOL: Tolerance = {"rtol": 1e-12, "atol": 1e-12}
rng = np.random.default_rng(35)


class Key(Dim):
    """Query/key features."""


class Value(Dim):
    """Value features."""


class Column(Dim):
    """The second axis of a grid."""


Maps = tuple[np.ndarray, np.ndarray, np.ndarray]
SOFTMAX = nn.Softmax()
MAPS: Maps = (rng.normal(size=(3, 4)), rng.normal(size=(3, 4)), rng.normal(size=(3, 2)))


def features(a: jax.Array, tag: type[Dim]) -> Vec[Any, jax.Array]:
    return Vec.from_array(a, tag)


def attend(x: Any, source: Any = None, mask: Any = None, normalise: nn.Normalisation = SOFTMAX) -> Any:
    """Attention of x's projections to the source's (x's own by default): each a structure of Vecs."""
    source = x if source is None else source
    wq, wk, wv = (jnp.asarray(w) for w in MAPS)
    q = x.fmap(lambda e: features(to_array(e) @ wq, Key))
    k = source.fmap(lambda e: features(to_array(e) @ wk, Key))
    v = source.fmap(lambda e: features(to_array(e) @ wv, Value))
    return nn.attention(q, k, v, mask=mask, normalise=normalise)


def values(x: Any) -> list[Any]:
    """The leaves of ``x`` that are values (floats), not shapes (a tree's layout)."""
    return [leaf for leaf in jax.tree_util.tree_leaves(x) if jnp.issubdtype(leaf.dtype, jnp.inexact)]


def same(x: Any, y: Any) -> None:
    laws.assert_close(x, y, **TOL)


def check(run: Callable[..., Any], *inputs: Any) -> None:
    """``run(*inputs)`` by the dense formula (which must run) equals it by the generic definition, eagerly
    and under jit, and so do the gradients (under jit) of a random projection of it with respect to the
    inputs' elements."""
    with record_fast_paths() as taken:
        fast = run(*inputs)
    assert "attention" in taken
    with generic_only():
        spec = run(*inputs)
    same(fast, spec)
    same(jax.jit(run)(*inputs), spec)
    weights = [rng.normal(size=np.shape(leaf)) for leaf in values(spec)]

    def loss(*elements: Any) -> jax.Array:
        out = run(*(x.with_elements(e) for x, e in zip(inputs, elements, strict=True)))
        return sum((jnp.sum(leaf * w) for leaf, w in zip(values(out), weights, strict=True)), jnp.zeros(()))

    elements = [x.elements() for x in inputs]
    grad = jax.grad(loss, argnums=tuple(range(len(inputs))))
    with generic_only():
        spec_grad = grad(*elements)
    same(jax.jit(grad)(*elements), spec_grad)


def vec(n: int, tag: type[Dim] = Seq) -> Vec[Any, Any]:
    return Vec.from_array(rng.normal(size=(n, 3)), tag, Hidden)


def tree(shape: Shape, capacity: int) -> DenseTree[Any]:
    n = len(jax.tree_util.tree_leaves(Node.from_shape(shape, 0.0)))
    return DenseTree.of(shape, [Vec.from_array(rng.normal(size=3), Hidden) for _ in range(n)], capacity)


def mesh(nodes: tuple[float, ...]) -> Mesh[Any, Any]:
    return Mesh.of([Vec.from_array(rng.normal(size=3), Hidden) for _ in nodes], Seq, nodes)


@pytest.mark.parametrize("normalise", [nn.Softmax(), nn.Softmax(chunk=4)])
@pytest.mark.slow
def test_on_a_vec_self_and_cross(normalise: nn.Softmax) -> None:
    x, memory = vec(37), vec(23, Column)
    check(lambda x: attend(x, normalise=normalise), x)
    check(lambda x, m: attend(x, m, normalise=normalise), x, memory)


@pytest.mark.slow  # a compile per shape drawn; one tree is checked in test_with_masks
@hypothesis.given(strategies.shapes(48), strategies.shapes(48))
@hypothesis.settings(max_examples=3, deadline=None, database=None)
def test_on_trees_of_every_shape_drawn(shape: Shape, other: Shape) -> None:
    x, memory = tree(shape, 48), tree(other, 64)
    check(lambda x: attend(x, normalise=nn.Softmax(chunk=5)), x)
    check(lambda x, m: attend(x, m), x, memory)  # queries on one tree, keys on another


@pytest.mark.slow
def test_on_a_grid_a_mesh_and_features_of_any_structure() -> None:
    grid = Compose(Vec.from_array(rng.normal(size=(5, 4, 3)), Seq, Column, Hidden))
    check(lambda q, g: attend(q, g, normalise=nn.Softmax(chunk=3)), vec(7, Key), grid)
    check(lambda m: attend(m, normalise=nn.Softmax(chunk=2)), mesh((0.0, 0.1, 0.15, 0.5, 0.9, 1.0)))
    # Features on a Cheb: the scores contract through its Gram matrix (the exact integral; the generic
    # dot truncates a product to 4 coefficients, so the factors have 2, Axis.exact), the values are
    # its coefficients.
    x = Vec.from_array(rng.normal(size=(9, 4)), Seq, Hidden)

    def run(x: Any) -> Any:
        low = jnp.asarray([1.0, 1.0, 0.0, 0.0])
        q = x.fmap(lambda e: Cheb.from_array(to_array(e) * low, Key))
        k = x.fmap(lambda e: Cheb.from_array(jnp.sin(to_array(e)) * low, Key))
        v = x.fmap(lambda e: Cheb.from_array(to_array(e)[:3], Value))
        return nn.attention(q, k, v, normalise=nn.Softmax(chunk=4))

    check(run, x)


def test_on_a_grid_of_trees() -> None:
    """Keys on a Compose of a tree of trees: two axes whose weights are data, the product measure 2^-depth
    2^-depth' the bias log w + log w' (a sum of the weights instead of their product once passed: 0.33 off)."""
    inner: Shape = (None, ((None, None), None))
    grid = Compose(DenseTree.of((None, (None, None)), [tree(inner, 6) for _ in range(3)], 4))
    queries = vec(5, Key)
    with record_fast_paths() as taken:
        fast = attend(queries, grid)
    assert "attention" in taken
    with generic_only():
        spec = attend(queries, grid)
    same(fast, spec)
    same(jax.jit(attend)(queries, grid), spec)


def test_keys_on_a_compose_of_coefficients_take_the_generic_path() -> None:
    """A Compose of a Vec and a user's Fourier series: the series' Gram matrix is a diagonal but no weight per
    position (its coordinates are coefficients), so not every axis is nodal and attention samples the keys'
    function by the generic definition (the dense formula on coefficients once ran: 0.11 where 0.36 is right)."""
    series = [Fourier.of([Vec.from_array(rng.normal(size=3), Hidden) for _ in range(4)], Seq) for _ in range(2)]
    keys = Compose(Vec.of(series, Column))
    queries = vec(5, Key)
    with record_fast_paths() as taken:
        fast = attend(queries, keys)
    assert "attention" not in taken
    with generic_only():
        spec = attend(queries, keys)
    same(fast, spec)
    same(jax.jit(attend)(queries, keys), spec)


@pytest.mark.slow
def test_with_masks() -> None:
    n = 13
    x = vec(n)
    keep = rng.random((n, n)) > 0.4
    keep[3] = False  # a query that sees no key: 0, as the generic definition gives
    masks = {
        "causal": nn.causal_mask(n, Seq),
        "padding": nn.padding_mask(9, n, Seq),
        "a user's": Vec.from_array(keep, Seq, Seq),
    }
    for mask, chunk in zip(masks.values(), (None, 4, 5), strict=True):
        check(lambda x, mask=mask, chunk=chunk: attend(x, mask=mask, normalise=nn.Softmax(chunk)), x)
    out = attend(x, mask=masks["a user's"])
    np.testing.assert_array_equal(to_array(out)[3], 0.0)

    # On a tree, a mask that depends on the data: query i sees key j where their first features
    # sum above 0 (built on the tree, so it shares its shape).
    def on_tree(t: Any) -> Any:
        first = t.fmap(lambda e: to_array(e)[0])
        mask = first.fmap(lambda a: first.fmap(lambda b: a + b > 0))
        return attend(t, mask=mask, normalise=nn.Softmax(chunk=3))

    check(on_tree, tree(((None, None), (None, (None, (None, None)))), 8))


def test_structures_whose_softmax_is_not_a_weight_per_position_keep_the_generic_path() -> None:
    x = vec(6)
    cheb = Cheb.from_array(rng.normal(size=(6, 3)), Seq, Hidden)
    wq, wk, wv = (jnp.asarray(w) for w in MAPS)
    cases: dict[str, Callable[[], Any]] = {
        "a Cheb of keys": lambda: attend(cheb),
        "the reference's softmax": lambda: attend(x, normalise=nn.ReferenceSoftmax()),
        "a multiplicative score": lambda: nn.attention(
            x.fmap(lambda e: features(to_array(e) @ wq, Key)),
            x.fmap(lambda e: features(to_array(e) @ wk, Key)),
            x.fmap(lambda e: features(to_array(e) @ wv, Value)),
            score=nn.Multiplicative(Vec.from_array(jnp.eye(4), Key, Key)),
        ),
    }
    for name, case in cases.items():
        with record_fast_paths() as taken:
            case()
        assert "attention" not in taken, name
    with generic_only(), record_fast_paths() as taken:
        attend(x)
    assert taken == []


def test_softmax_refuses_a_chunk_that_is_not_a_number_of_queries() -> None:
    with pytest.raises(ValueError, match=r"Softmax: chunk must be a positive number of queries, got 0"):
        nn.Softmax(chunk=0)
    with pytest.raises(TypeError, match=r"Softmax: chunk must be a positive integer, \"auto\" or None, got 2.5"):
        nn.Softmax(chunk=2.5)  # type: ignore[arg-type]
    assert nn.Softmax().rows_per_chunk(64, 64) is None
    assert nn.Softmax().rows_per_chunk(1024, 1024) is None
    assert nn.Softmax().rows_per_chunk(1025, 1024) == nn.CHUNK == nn.Softmax(chunk=nn.CHUNK).rows_per_chunk(1, 1)


def temporaries(n: int, chunk: int | None) -> float:
    """XLA's temporary bytes of the gradient of attention over n positions (16 features, 2 heads' worth
    of batch), compiled and never run."""
    xs = jnp.zeros((2, n, 16), jnp.float32)

    def loss(data: jax.Array) -> jax.Array:
        def one(a: jax.Array) -> jax.Array:
            x = Vec.from_array(a, Seq, Key)
            return jnp.sum(to_array(nn.attention(x, x, x, normalise=nn.Softmax(chunk))))

        return jnp.sum(jax.vmap(one)(data))

    analysis = jax.jit(jax.grad(loss)).lower(xs).compile().memory_analysis()
    assert analysis is not None
    return float(analysis.temp_size_in_bytes)


def test_chunked_attention_needs_memory_linear_in_the_keys() -> None:
    small, large = temporaries(1024, 128), temporaries(4096, 128)
    assert large < 6 * small  # 4x the keys: about 4x, where the whole score matrix would be 16x
    assert temporaries(4096, None) > 8 * large


# The fused kernel (jax.nn.dot_product_attention): cuDNN's on a GPU for bfloat16 and float16, XLA's here


def cast_attend(x: Any, dtype: Any, source: Any = None, mask: Any = None) -> Any:
    """``attend`` with the projections in ``dtype``."""
    source = x if source is None else source
    wq, wk, wv = (jnp.asarray(w) for w in MAPS)

    def project(e: Any, w: jax.Array, tag: type[Dim]) -> Vec[Any, jax.Array]:
        return features((to_array(e) @ w).astype(dtype), tag)

    q, k = x.fmap(lambda e: project(e, wq, Key)), source.fmap(lambda e: project(e, wk, Key))
    return nn.attention(q, k, source.fmap(lambda e: project(e, wv, Value)), mask=mask)


SOME_KEPT = rng.random((13, 13)) > 0.3
SOME_KEPT[1] = False  # a query that sees no key: 0
QUERIES = vec(6, Key)
FUSED_CASES: dict[str, tuple[Callable[[Any, Any], Any], Any]] = {
    "a Vec, a mask with a row of no key": (
        lambda x, dtype: cast_attend(x, dtype, mask=Vec.from_array(SOME_KEPT, Seq, Seq)), vec(13),
    ),
    "a tree and its padding": (lambda x, dtype: cast_attend(x, dtype), tree(((None, None), (None, (None, None))), 9)),
    "a Vec's queries, a tree's keys": (
        lambda x, dtype: cast_attend(QUERIES, dtype, source=x), tree((None, ((None, None), None)), 7),
    ),
}  # fmt: skip


def fused_kernel(monkeypatch: pytest.MonkeyPatch, implementation: str, dtype: Any) -> list[str | None]:
    """The dense path takes ``jax.nn.dot_product_attention`` of ``implementation`` for ``dtype`` on this
    backend until the test ends; the list of the implementations it is called with (as traced)."""
    monkeypatch.setitem(dense.FUSED, jax.default_backend(), (implementation, (jnp.dtype(dtype).name,)))
    calls: list[str | None] = []
    kernel = jax.nn.dot_product_attention

    def counted(*args: Any, implementation: str | None = None, **kwargs: Any) -> jax.Array:
        calls.append(implementation)
        return kernel(*args, implementation=implementation, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(jax.nn, "dot_product_attention", counted)
    return calls


@pytest.mark.parametrize(
    ("implementation", "dtype"),
    [
        ("xla", jnp.float32),
        pytest.param(
            "cudnn", jnp.bfloat16,
            marks=pytest.mark.skipif(nn_fused_implementation(jnp.bfloat16) is None, reason="no fused kernel here"),
        ),
    ],
)  # fmt: skip
@pytest.mark.parametrize("case", list(FUSED_CASES))
def test_the_fused_kernel_computes_the_dense_formula(
    monkeypatch: pytest.MonkeyPatch, implementation: str, dtype: Any, case: str
) -> None:
    # The bias as one more feature, features padded to 8, values narrower than keys, a mask, a row with no
    # key left, padding: against the generic definition in float64, forward and gradient, under jit.
    run, x = FUSED_CASES[case]
    calls = fused_kernel(monkeypatch, implementation, dtype)
    with generic_only():  # (jit of a fresh function: one program, where eagerly each operation compiles)
        spec = jax.jit(lambda x: run(x, jnp.float64))(x)
    fast = jax.jit(run, static_argnums=1)(x, dtype)
    assert calls == [implementation]
    for got, expected in zip(values(fast), values(spec), strict=True):
        np.testing.assert_allclose(np.asarray(got, np.float64), expected, **near(expected, dtype))
    weights = [rng.normal(size=np.shape(leaf)) for leaf in values(spec)]

    def loss(elements: Any, dtype: Any) -> jax.Array:
        out = run(x.with_elements(elements), dtype)
        return sum((jnp.sum(leaf * w) for leaf, w in zip(values(out), weights, strict=True)), jnp.zeros(()))

    with generic_only():
        spec_grad = jax.jit(lambda elements: jax.grad(loss)(elements, jnp.float64))(x.elements())
    grad = jax.jit(jax.grad(loss), static_argnums=1)(x.elements(), dtype)
    for got, expected in zip(jax.tree_util.tree_leaves(grad), jax.tree_util.tree_leaves(spec_grad), strict=True):
        np.testing.assert_allclose(np.asarray(got, np.float64), expected, **near(expected, dtype))


def near(expected: Any, dtype: Any) -> Tolerance:
    """The tolerance of a result in ``dtype`` against float64's ``expected``. bfloat16 keeps 8 significant bits
    (u = 2^-8), and a gradient's entry sums terms larger than itself: its error follows the largest entry,
    not its own, and 16 u of that holds it (an H200's cuDNN kernel 3.7% of it, XLA's generic definition in
    bfloat16 on the CPU 3.2%, where a bound of 5% of each entry failed an entry of 0.046 computed as 0.176)."""
    if dtype == jnp.float32:
        return float32(2e-5)
    return Tolerance(rtol=0.0, atol=16 * 2.0**-8 * float(np.abs(np.asarray(expected)).max()))


def test_the_fused_kernel_takes_a_tree_of_trees_measure(monkeypatch: pytest.MonkeyPatch) -> None:
    # Keys on a Compose of a tree of trees: two axes whose weights are data, the bias the sum of their logs, in
    # the kernel's extra feature. Eagerly: under jit, a Compose of trees passed as an argument (their shapes
    # tracers) takes the generic definition, which test_on_a_grid_of_trees checks against it.
    grid = Compose(DenseTree.of((None, (None, None)), [tree((None, ((None, None), None)), 6) for _ in range(3)], 4))
    calls = fused_kernel(monkeypatch, "xla", jnp.float32)
    fast = cast_attend(QUERIES, jnp.float32, source=grid)
    assert calls == ["xla"]
    with generic_only():
        spec = cast_attend(QUERIES, jnp.float64, source=grid)
    for got, expected in zip(values(fast), values(spec), strict=True):
        np.testing.assert_allclose(np.asarray(got, np.float64), expected, **float32(2e-5))


@pytest.mark.parametrize(
    ("backend", "dtype", "implementation"),
    [("gpu", "bfloat16", "cudnn"), ("gpu", "float16", "cudnn"), ("gpu", "float32", None), ("cpu", "bfloat16", None),
     ("tpu", "bfloat16", None)],
)  # fmt: skip
def test_the_fused_kernel_is_taken_where_the_backend_has_one(
    monkeypatch: pytest.MonkeyPatch, backend: str, dtype: str, implementation: str | None
) -> None:
    monkeypatch.setattr(jax, "default_backend", lambda: backend)
    assert nn_fused_implementation(jnp.dtype(dtype)) == implementation


def test_a_fused_kernel_that_refuses_its_operands_leaves_them_to_the_formula(monkeypatch: pytest.MonkeyPatch) -> None:
    # cuDNN's kernel asked for on the CPU refuses as it is traced ("cuDNN is not detected"), as it refuses sizes
    # or a GPU it does not support: the dense formula answers, the same as the generic definition.
    monkeypatch.setitem(dense.FUSED, jax.default_backend(), ("cudnn", ("float64",)))
    run, x = FUSED_CASES["a tree and its padding"]
    with pytest.raises(RuntimeError):
        dense.fused_attention(*(jnp.ones((4, 3)),) * 3, None, None, jnp.ones(()), "cudnn")
    with record_fast_paths() as taken:
        fast = jax.jit(run, static_argnums=1)(x, jnp.float64)
    assert "attention" in taken
    with generic_only():
        spec = run(x, jnp.float64)
    same(fast, spec)


class Head(Dim):
    """An attention head."""


def test_the_fused_kernel_serves_every_head_of_an_encoder_under_vmap(monkeypatch: pytest.MonkeyPatch) -> None:
    # Multi-head attention maps the dense path over the heads (and here over a batch): the kernel's call
    # vmapped, forward and gradient, as the generic definition gives them.
    def template(n: int, tag: type[Dim]) -> Vec[Any, jax.Array]:
        return Vec.from_array(np.zeros(n, np.float32), tag)

    options = nn.AttentionOptions(heads=template(2, Head), model=template(8, Hidden), head_features=template(4, Key))
    encoder = nn.init_encoder(jax.random.key(0), options, inputs=template(8, Hidden), hidden=template(16, Value),
                              layers=1, outputs=None, positions=None)  # fmt: skip
    # (a generator of its own: the draw does not depend on which tests of the file ran before, in this process)
    xs = jnp.asarray(np.random.default_rng(36).normal(size=(3, 11, 8)), jnp.float32)

    def terms(model: Any, xs: jax.Array) -> jax.Array:
        out = jax.vmap(lambda x: to_array(model.encode(Vec.from_array(x, Seq, Hidden))))(xs)
        return out * jnp.cos(jnp.arange(out.size).reshape(out.shape))

    def loss(model: Any, xs: jax.Array) -> jax.Array:
        return jnp.sum(terms(model, xs))

    with generic_only():  # (under jit: one program, where eagerly each operation compiles)
        spec, spec_grad = jax.jit(jax.value_and_grad(loss))(encoder, xs)
        scale = float(jnp.sum(jnp.abs(jax.jit(terms)(encoder, xs))))
    calls = fused_kernel(monkeypatch, "xla", jnp.float32)
    fast, fast_grad = jax.jit(jax.value_and_grad(loss))(encoder, xs)
    assert calls == ["xla"]  # traced once, for every head and example
    tol = float32(1e-4)
    # the loss is a sum whose terms cancel: judged at their scale (under TF32, 0.014 apart on a loss of 0.39
    # whose terms sum to about 135 in absolute value, for another draw)
    np.testing.assert_allclose(fast, spec, rtol=0, atol=tol["atol"] * scale)
    largest = max(float(np.abs(leaf).max()) for leaf in jax.tree_util.tree_leaves(spec_grad))
    for got, expected in zip(jax.tree_util.tree_leaves(fast_grad), jax.tree_util.tree_leaves(spec_grad), strict=True):
        # (the key bias's gradient is 0 in exact arithmetic: each leaf to the largest gradient's scale)
        np.testing.assert_allclose(got, expected, rtol=tol["rtol"], atol=tol["atol"] * largest)
