"""Compose's fast paths (applicative/instances/compose.py): pair, pure and counit on a Dense outer
structure act on the stacked inner structures at once. Each equals its definition through the outer
``fmap``, and each runs: on a Cheb outer the definitions sample and transform back (matrix products,
the DCTs), the fast paths do not."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from applicative import Cheb, Compose, Distribution, Leaf, Node, Vec, counit, to_array
from applicative.laws import assert_close
from tests.applicative.dims import Hidden, Model, Seq
from tests.applicative.tolerance import Tolerance

rng = np.random.default_rng(5)
TOL: Tolerance = {"rtol": 1e-12, "atol": 1e-12}


def _composite(kind: str) -> Any:
    """A Compose of the given outer and inner kinds, with random coefficients."""
    a = rng.normal(size=(5, 3))
    outer, inner = kind.split("∘")
    shell = Vec(jnp.asarray(a), Model, 3) if inner == "Vec" else Cheb(jnp.asarray(a), Model, 3, 6)
    return Compose(Vec(shell, Seq, 5) if outer == "Vec" else Cheb(shell, Seq, 5, 10))


KINDS = ["Vec∘Vec", "Vec∘Cheb", "Cheb∘Vec", "Cheb∘Cheb"]


def _definitions(x: Any, y: Any) -> dict[str, tuple[Any, Any]]:
    """Each operation by the fast path, and by its definition through the outer fmap."""
    return {
        "pair": (x.pair(y), Compose(x.outer.pair(y.outer).fmap(lambda p: p[0].pair(p[1])))),
        "pure": (x.pure(jnp.asarray(2.5)), Compose(x.outer.fmap(lambda g: g.pure(jnp.asarray(2.5))))),
        "counit": (x.counit(), counit(x.outer.fmap(lambda g: counit(g)))),
    }


@pytest.mark.parametrize("kind", KINDS)
def test_fast_paths_equal_their_definitions(kind: str) -> None:
    x, y = _composite(kind), _composite(kind)
    for name, (fast, definition) in _definitions(x, y).items():
        assert_close(fast, definition, what=f"{kind} {name}", **TOL)


def _matmuls(f: Any, *args: Any) -> int:
    return str(jax.make_jaxpr(f)(*args)).count("dot_general")


def test_fast_paths_run_on_a_cheb_outer() -> None:
    x, y = _composite("Cheb∘Vec"), _composite("Cheb∘Vec")
    assert _matmuls(lambda a, b: a.pair(b), x, y) == 0
    assert _matmuls(lambda a: a.pure(jnp.asarray(1.0)), x) == 0
    assert _matmuls(lambda a: a.counit(), x) == 0  # the integral weights: a weighted sum
    # the definitions sample (to values and back) for each of them
    assert _matmuls(lambda a, b: Compose(a.outer.pair(b.outer).fmap(lambda p: p[0].pair(p[1]))), x, y) == 4
    assert _matmuls(lambda a: counit(a.outer.fmap(lambda g: counit(g))), x) == 2


def test_a_non_dense_outer_and_product_pairings_take_the_definitions() -> None:
    # A Tree of Vecs: the outer structure has no stacked elements.
    v = Vec.from_array(rng.normal(size=3), Hidden)
    tree = Compose(Node(Leaf(v), Leaf(v)))
    np.testing.assert_allclose(tree.counit(), np.sum(to_array(v)), **TOL)
    # A Vec of distributions: their pointwise sum is a product, not a sum of their leaves (adding
    # stacked outcomes leaf by leaf would be wrong), so the counit maps the expectation instead.
    d1, d2 = Distribution([0.0, 1.0], [0.25, 0.75]), Distribution([0.0, 2.0], [0.25, 0.75])
    stacked = Compose(Vec.stack(jax.tree_util.tree_map(lambda a, b: jnp.stack([a, b]), d1, d2), Seq))
    np.testing.assert_allclose(stacked.counit(), 0.75 + 1.5, **TOL)
