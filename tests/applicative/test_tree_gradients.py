"""Gradients through functions that take and return trees, and structures of trees, against central finite
differences in float64, eagerly and under ``jit`` (``DenseTree``'s module docstring, "Gradients").

``jax.vjp`` once ran forward and refused every cotangent, the output itself included: its pytree metadata
recorded where a shape came from, which differs inside and outside a trace ("(8, shared) in the original
output, but (8, None) here"). A tree's tangent has a float0 layout (a layout's element type is not a
float), and knows the shape of its tree."""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from applicative import DenseTree, Dim, Vec, as_dense_tree, laws, lift_a2, nn, stacked, to_array
from applicative.instances import dyadic

rng = np.random.default_rng(5252)
H = 1e-6  # central differences: truncation error ~H^2 x the third derivative, rounding ~1e-16 / H


class S(Dim):
    """A sequence's positions."""


class F(Dim):
    """Features at a tree's leaf."""


SHAPE = (None, ((None, None), (None, (None, None))))  # five leaves, at depths 1, 3, 3, 3, 4, 4 (six)
OTHER = ((None, None), (None, None))
CAPACITY = 8


def tree(shape: Any = SHAPE, features: int | None = None) -> DenseTree[Any]:
    n = len(dyadic.depths_of(shape))
    if features is None:
        return DenseTree.of(shape, list(jnp.asarray(rng.normal(size=n))), CAPACITY)
    return DenseTree.of(shape, [Vec.from_array(rng.normal(size=features), F) for _ in range(n)], CAPACITY)


PROBE = DenseTree.of(OTHER, list(jnp.asarray([0.5, -1.0, 2.0, 0.25])), CAPACITY)


def refined_product(t: DenseTree[jax.Array]) -> DenseTree[jax.Array]:
    """A tree to a tree of another shape: sin(t) t + PROBE, on the common refinement (capacity 15)."""
    return as_dense_tree(lift_a2(operator.mul, t.fmap(jnp.sin), t)) + PROBE


def attention(t: DenseTree[Any]) -> DenseTree[Any]:
    """A tree of vectors attending to itself (the dense formula: the measure a bias on each key)."""
    return as_dense_tree(nn.attention(t, t, t))


def sequence_map(v: Vec[S, DenseTree[jax.Array]]) -> Vec[S, DenseTree[jax.Array]]:
    """A sequence of trees of one shape to another: every tree squared, then the sequence reversed in sum."""
    squared = v.fmap(lambda t: t.fmap(jnp.square))
    return Vec.of([squared[0] + squared[1], squared[1]], S)


CASES: dict[str, tuple[Callable[[Any], Any], Callable[[], Any]]] = {
    "a tree to a tree of another shape": (refined_product, tree),
    "attention on a tree of vectors": (attention, lambda: tree(features=3)),
    "a sequence of trees": (sequence_map, lambda: Vec.of([tree(), tree()], S)),
}


def _value(leaf: Any) -> bool:
    return bool(jnp.issubdtype(leaf.dtype, jnp.inexact))


def values(x: Any) -> list[np.ndarray]:
    """The float leaves of a structure (its values, not its layouts, nor their float0 tangents), in float64."""
    return [np.asarray(leaf, np.float64) for leaf in jax.tree_util.tree_leaves(x) if _value(leaf)]


def with_values(x: Any, new: list[Any]) -> Any:
    """``x`` holding ``new`` as its float leaves, in order, its layouts kept."""
    it = iter(new)
    return jax.tree_util.tree_map(lambda leaf: jnp.asarray(next(it)) if _value(leaf) else leaf, x)


def structure(x: Any) -> jax.tree_util.PyTreeDef:
    """The pytree structure of ``x``, its metadata included (what a vjp compares its cotangents by)."""
    treedef: jax.tree_util.PyTreeDef = jax.tree_util.tree_structure(x)
    return treedef


def inner(a: list[np.ndarray], b: list[np.ndarray]) -> float:
    return float(sum(np.sum(x * y) for x, y in zip(a, b, strict=True)))


def finite_difference(f: Callable[[Any], Any], x: Any, direction: list[np.ndarray]) -> list[np.ndarray]:
    """(f(x + H d) - f(x - H d)) / 2H, leaf by leaf of the output's values."""
    plus = values(f(with_values(x, [v + H * d for v, d in zip(values(x), direction, strict=True)])))
    minus = values(f(with_values(x, [v - H * d for v, d in zip(values(x), direction, strict=True)])))
    return [(p - m) / (2 * H) for p, m in zip(plus, minus, strict=True)]


@pytest.mark.parametrize("jitted", [False, True], ids=["eager", "jit"])
@pytest.mark.parametrize("case", list(CASES))
def test_vjp_and_jvp_of_a_function_of_trees_agree_with_finite_differences(case: str, jitted: bool) -> None:
    f, make = CASES[case]
    x = make()
    fun = jax.jit(f) if jitted else f
    out = f(x)
    direction = [rng.normal(size=v.shape) for v in values(x)]
    expected = finite_difference(f, x, direction)
    # jvp: the tangent of x is x holding the direction, as a tangent (its layouts float0).
    primal, tangent = jax.jvp(fun, (x,), (stacked.tangent(with_values(x, direction)),))
    laws.assert_close(primal, out, rtol=1e-13, atol=1e-13)
    assert structure(tangent) == structure(out)
    np.testing.assert_allclose(np.concatenate([t.ravel() for t in values(tangent)]),
                               np.concatenate([e.ravel() for e in expected]), rtol=1e-6, atol=1e-8)  # fmt: skip
    # vjp: its cotangent may be the output itself (once refused: its metadata differed inside the trace) or
    # any structure like it; <ct, J d> = <J^T ct, d>.
    result, pullback = jax.vjp(fun, x)
    assert structure(result) == structure(out)
    for cotangent in (out, with_values(out, [rng.normal(size=v.shape) for v in values(out)])):
        (back,) = pullback(cotangent)
        assert structure(back) == structure(x)
        np.testing.assert_allclose(inner(values(back), direction), inner(values(cotangent), expected),
                                   rtol=1e-6, atol=1e-8)  # fmt: skip


@pytest.mark.parametrize("jitted", [False, True], ids=["eager", "jit"])
def test_the_gradient_with_respect_to_a_tree_is_read_on_the_tree(jitted: bool) -> None:
    """``jax.grad`` takes ``allow_int=True`` for a tree (JAX's rule for a pytree with a leaf that is not a
    float: the layout's gradient is float0) and returns a tree whose layout is float0, which holds no shape
    (eagerly as under jit: no shape is lent by metadata): read on the tree, ``x.with_elements(grad.data)``."""
    x = tree(features=3)

    def loss(t: DenseTree[Any]) -> jax.Array:
        out = attention(t)
        return out.fmap(lambda v: jnp.sum(to_array(v) ** 2)).counit()

    grad = (jax.jit if jitted else (lambda g: g))(jax.grad(loss, allow_int=True))(x)
    direction = [rng.normal(size=v.shape) for v in values(x)]
    (expected,) = finite_difference(loss, x, direction)
    np.testing.assert_allclose(inner(values(grad), direction), expected, rtol=1e-6)
    assert grad.layout.dtype == jax.dtypes.float0
    with pytest.raises(ValueError, match=r"DenseTree.depths: a tangent of a tree \(its layout is float0.*"
                                         r"tree.with_elements\(tangent.data\)"):  # fmt: skip
        _ = grad.shape
    grad = x.with_elements(grad.data)
    assert grad.shape == x.shape
    np.testing.assert_allclose(to_array(grad.fmap(lambda v: jnp.sum(to_array(v)))), np.sum(values(grad)[0], -1))
    with pytest.raises(TypeError, match=r"grad requires real- or complex-valued inputs .* got key<DenseTree layout"):
        jax.grad(loss)(x)  # JAX's own refusal: set allow_int, as for any pytree holding a PRNG key


def test_linear_transpose_of_a_function_of_a_trees_values() -> None:
    """``jax.linear_transpose`` admits float leaves only (a tree's layout is refused, as an integer is): the
    transpose of a linear map of a tree's values, the tree closed over, is its vjp's pullback."""
    x = tree(features=3)
    weights = jnp.asarray(rng.normal(size=(3, 3)))

    def linear(data: Any) -> Any:
        t = x.with_elements(data)
        return (t.fmap(lambda v: Vec.from_array(weights @ to_array(v), F)) + t).data

    transpose = jax.linear_transpose(linear, x.data)
    cotangent = jax.tree_util.tree_map(lambda leaf: jnp.asarray(rng.normal(size=leaf.shape)), x.data)
    (by_transpose,) = transpose(cotangent)
    _, pullback = jax.vjp(linear, x.data)
    (by_vjp,) = pullback(cotangent)
    np.testing.assert_allclose(to_array(by_transpose), to_array(by_vjp), rtol=1e-14)
    with pytest.raises(TypeError, match=r"linear_transpose only supports"):
        jax.linear_transpose(lambda t: t, x)
