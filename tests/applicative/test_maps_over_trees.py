"""A map over every leaf of a structure holding trees is right or refused, naming the rule (docs/design.md, "A
shape is never an element"): issue 52's cases, which were silently wrong (``2 * x``, ``-x``, ``x + 1`` and
``jnp.add`` of two structures kept a tree's layout integer and changed its shape), every other kind of map a
user writes (casts, numpy, fills, identities, moves), and structures of trees (a sequence, a function, a
user's series, trees of vectors), eagerly and under ``jit``.

Right means: what the map does to the values alone (the reference maps every leaf but the layouts), read
both as the structure (compared as functions, ``laws.assert_close``) and through a product computed in the
same trace (a dot with another tree, a matrix-vector product), against the reference's."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from applicative import Cheb, DenseTree, Dim, Vec, dot, laws, mul_mv, to_array
from applicative.instances import dyadic
from applicative.stacked import stack
from tests.applicative.fourier import Fourier

rng = np.random.default_rng(52)


class S(Dim):
    """A sequence's positions."""


class X(Dim):
    """A function's variable."""


class F(Dim):
    """Features at a tree's leaf."""


SHAPE = (None, ((None, None), None))  # leaves at depths 1, 3, 3, 2
OTHER = ((None, None), (None, None))  # four leaves at depth 2
CAPACITY = 6


def tree(shape: Any = SHAPE) -> DenseTree[jax.Array]:
    return DenseTree.of(shape, list(jnp.asarray(rng.normal(size=len(dyadic.depths_of(shape))))), CAPACITY)


PROBE = DenseTree.of(OTHER, list(jnp.asarray([0.5, -1.0, 2.0, 0.25])), CAPACITY)
"""Another shape: products with it refine, so a wrong layout shows in their values."""


def _structures() -> dict[str, tuple[Any, Callable[[Any], jax.Array]]]:
    """Each structure holding trees, with a product of it computed where it is made."""
    trees = [tree() for _ in range(4)]

    def by_probe(x: Any) -> jax.Array:
        return to_array(mul_mv(x, PROBE))

    return {
        "a tree": (trees[0], lambda t: dot(t, PROBE)),
        "a sequence of trees of one shape": (Vec.of(trees[:2], S), by_probe),
        "a sequence of trees of two shapes": (Vec.of([trees[0], tree(OTHER)], S), by_probe),
        "a function whose values are trees": (Cheb.of(trees, X), by_probe),
        "a user's series of trees": (Fourier(stack(trees), X, 4, 8), by_probe),
        "a tree of vectors": (
            DenseTree.of(SHAPE, [Vec.from_array(rng.normal(size=2), F) for _ in range(4)], CAPACITY),
            lambda t: dot(t.fmap(lambda v: jnp.sum(to_array(v))), PROBE),
        ),
    }


STRUCTURES = _structures()


def values_only(f: Callable[..., Any], *xs: Any) -> Any:
    """``f`` on every leaf but the layouts: what a map of the values means."""
    return jax.tree_util.tree_map(lambda leaf, *rest: leaf if dyadic.is_layout(leaf) else f(leaf, *rest), *xs)


# Maps that compute with their leaf: every one of them would change a tree's shape.
COMPUTING: dict[str, Callable[..., Any]] = {
    "2 * x": lambda x: 2 * x,
    "-x": lambda x: -x,
    "x + 1": lambda x: x + 1,
    "x * 0.5": lambda x: x * 0.5,
    "jnp.sin": jnp.sin,
    "a cast": lambda x: x.astype(jnp.float32),
    "jnp.astype": lambda x: jnp.astype(x, jnp.float32),
    "numpy": lambda x: np.asarray(x) * 0.5,
}
# Maps that copy or fill: right, as maps of the values (a fill of a layout reads as the constant function).
COPYING: dict[str, Callable[..., Any]] = {
    "jax.device_put": jax.device_put,
    "jnp.asarray": jnp.asarray,
    "a copy": jnp.array,
    "stop_gradient": jax.lax.stop_gradient,
    "zeros_like": jnp.zeros_like,
    "ones_like": jnp.ones_like,
    "full_like": lambda x: jnp.full_like(x, 2),
}
RULE = str(dyadic.LAYOUT)  # key<DenseTree layout: a tree's shape is never an element; map its values with ...>


# Two refusals JAX words itself, eagerly only (under jit the dtype's name is in both): a layout's ``astype``
# method, and numpy's conversion (the layout's element type is of the kind PRNG keys are).
JAX_OWN = ("Cannot call abstract method astype", "JAX array with PRNGKey dtype cannot be converted to a NumPy array")


def _refused_naming_the_rule(error: BaseException) -> None:
    message = str(error)
    assert RULE in message or "applicative.stacked.along" in message or message.startswith(JAX_OWN), message


@pytest.mark.parametrize("jitted", [False, True], ids=["eager", "jit"])
@pytest.mark.parametrize("structure", list(STRUCTURES))
def test_a_map_that_computes_with_every_leaf_is_refused_naming_the_rule(structure: str, jitted: bool) -> None:
    x, product = STRUCTURES[structure]
    for name, f in COMPUTING.items():
        if name == "numpy" and jitted:
            continue  # (numpy converts no traced value, a tree's or not)

        def mapped(x: Any, f: Callable[..., Any] = f) -> Any:
            return product(jax.tree_util.tree_map(f, x))

        with pytest.raises((TypeError, ValueError, NotImplementedError)) as refusal:  # (JAX's kind varies)
            (jax.jit(mapped) if jitted else mapped)(x)
        _refused_naming_the_rule(refusal.value)
        assert jitted or name not in ("a cast", "numpy") or str(refusal.value).startswith(JAX_OWN)
        # What the map means, on the values alone, is computed the same way: only the layout was refused.
        product(values_only(f, x))


@pytest.mark.parametrize("jitted", [False, True], ids=["eager", "jit"])
@pytest.mark.parametrize("structure", list(STRUCTURES))
def test_a_map_that_copies_or_fills_every_leaf_is_a_map_of_the_values(structure: str, jitted: bool) -> None:
    x, product = STRUCTURES[structure]

    def every_map(x: Any) -> list[tuple[Any, jax.Array]]:  # (one compilation for every map)
        return [(mapped := jax.tree_util.tree_map(f, x), product(mapped)) for f in COPYING.values()]

    results = (jax.jit(every_map) if jitted else every_map)(x)
    for (name, f), (mapped, by_product) in zip(COPYING.items(), results, strict=True):
        reference = values_only(f, x)
        laws.assert_close(mapped, reference, rtol=1e-13, atol=1e-13, what=name)
        np.testing.assert_allclose(by_product, product(reference), rtol=1e-13, atol=1e-13, err_msg=name)


@pytest.mark.parametrize("jitted", [False, True], ids=["eager", "jit"])
def test_a_map_of_two_structures_is_refused_or_picks_one(jitted: bool) -> None:
    """``tree_map(jnp.add, a, b)`` was accepted and silently wrong (its layouts added: for this tree, dot(t + t,
    t) came out 3.5, eagerly and under jit, where 7.5 is right); now refused, for one tree with itself, two
    trees and two sequences of trees, and a map that picks one of the two is that one."""
    run: Callable[[Callable[..., Any]], Callable[..., Any]] = jax.jit if jitted else (lambda g: g)
    t = DenseTree.from_nested((1.0, (2.0, 3.0)), 8)
    for a, b in ((t, t), (t, DenseTree.from_nested(((0.5, -1.0), 2.0), 8)), (Vec.of([t, t], S), Vec.of([t, t], S))):
        with pytest.raises(TypeError) as refusal:
            run(lambda a, b: jax.tree_util.tree_map(jnp.add, a, b))(a, b)
        _refused_naming_the_rule(refusal.value)
        laws.assert_close(run(lambda a, b: jax.tree_util.tree_map(lambda u, _: u, a, b))(a, b), a)
    leaves, measure = np.array([1.0, 2.0, 3.0]), np.array([0.5, 0.25, 0.25])
    assert float(dot(t + t, t)) == np.sum(measure * 2 * leaves * leaves) == 7.5  # the sum as functions add


def test_a_map_that_moves_whole_slots_moves_each_interval_with_its_value() -> None:
    """A move along the leading axis of every leaf (a reversal) moves a sequence's trees whole, and a tree's
    slots with their intervals: the same function (no operation reads the slots' order), eagerly and under
    jit; its leaves read left to right."""
    t, u = tree(), tree(OTHER)

    def reverse(x: Any) -> Any:
        return jax.tree_util.tree_map(lambda leaf: leaf[::-1], x)

    for run in (lambda g: g, jax.jit):
        flipped = run(reverse)(t)
        assert flipped.shape == t.shape
        np.testing.assert_array_equal(np.asarray(flipped.leaves()), np.asarray(t.leaves()))
        np.testing.assert_allclose(run(dot)(flipped, PROBE), np.asarray(dot(t, PROBE)), rtol=1e-14)
        np.testing.assert_allclose(run(lambda a: dot(a, a))(flipped), np.asarray(dot(t, t)), rtol=1e-14)
        laws.assert_close(run(lambda a: a + PROBE)(flipped), t + PROBE, rtol=1e-14, atol=1e-14)
        both = run(reverse)(Vec.of([t, u], S))
        laws.assert_close(both, Vec.of([u, t], S))
        by_tree = np.asarray([dot(u, PROBE), dot(t, PROBE)])
        np.testing.assert_allclose(to_array(run(mul_mv)(both, PROBE)), by_tree, rtol=1e-14)


def test_a_fill_is_the_constant_function_wherever_it_is_read() -> None:
    """``zeros_like`` and its kin build a layout without reading one: it holds no leaf, which reads as the
    one-leaf tree, so a filled tree is the constant function, as a map of its values means."""
    t = tree()
    for fill, c in ((jnp.zeros_like, 0.0), (jnp.ones_like, 1.0), (lambda x: jnp.full_like(x, 2.5), 2.5)):
        filled = jax.tree_util.tree_map(fill, t)
        assert filled.shape is None  # the one-leaf tree
        assert float(filled.counit()) == c
        np.testing.assert_allclose(dot(filled, PROBE), c * PROBE.counit(), rtol=1e-15)
        laws.assert_close(filled + t, t.fmap(functools.partial(jnp.add, c)))
