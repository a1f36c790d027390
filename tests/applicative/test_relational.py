"""Relational attention (``nn.RelationalAttention``, issue 63): edge vectors read by the keys and values of
every pair and updated, written once, on a ``Graph`` (edge vectors from ``on_edges``, the mask its edges)
and on a ``Vec`` (every pair), eagerly and under ``jit``, against a float64 numpy transcription of the
equations (the module docstring's); and trained: its gradients against central differences."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from applicative import Dim, Graph, Vec, nn, to_array


class D(Dim):
    """Node features."""


class E(Dim):
    """Edge features."""


class H(Dim):
    """Query/key features."""


class Hidden(Dim):
    """The edge update's hidden features."""


class S(Dim):
    """A sequence's positions."""


rng = np.random.default_rng(23)
EDGES = np.array([[0, 1, 2, 3, 0], [1, 2, 3, 0, 2]])
N, CAP = 4, 5


def templates() -> tuple[Vec[D, jax.Array], Vec[E, jax.Array], Vec[H, jax.Array], Vec[Hidden, jax.Array]]:
    return tuple(Vec.from_array(np.zeros(n), tag) for n, tag in ((3, D), (2, E), (2, H), (4, Hidden)))  # type: ignore[return-value]


def weights(block: nn.RelationalAttention[Any, Any, Any, Any]) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Each linear map's (W [out, in], b) in float64."""
    out = {}
    for name in ("query", "key", "value", "edge_key", "edge_value", "out", "receiver", "sender", "edge_in", "edge_out"):
        linear = getattr(block, name)
        out[name] = (np.asarray(to_array(linear.weight), np.float64), np.asarray(to_array(linear.bias), np.float64))
    return out


def reference(
    w: dict[str, Any], x: np.ndarray, e: np.ndarray, mask: np.ndarray, measure: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """The module docstring's equations in numpy: x (n, d), e (n, n, de) [query i, key j], mask (n, n)."""

    def lin(name: str, a: np.ndarray) -> np.ndarray:
        W, b = w[name]
        return np.asarray(a @ W.T + b)

    q, k, v = lin("query", x), lin("key", x), lin("value", x)
    k_pair = k[None, :, :] + lin("edge_key", e)  # [i, j]
    v_pair = v[None, :, :] + lin("edge_value", e)
    s = np.einsum("ih,ijh->ij", q, k_pair) / np.sqrt(q.shape[1])
    s = np.where(mask & (measure[None, :] > 0), s + np.log(np.where(measure > 0, measure, 1.0))[None, :], -np.inf)
    a = np.exp(s - np.max(np.where(np.isfinite(s), s, -1e300), axis=1, keepdims=True))
    a = a / np.where(a.sum(1, keepdims=True) > 0, a.sum(1, keepdims=True), 1.0)
    y = lin("out", np.einsum("ij,ijd->id", a, v_pair))
    hidden = np.maximum(lin("receiver", x)[:, None, :] + lin("sender", x)[None, :, :] + lin("edge_in", e), 0.0)
    return y, e + lin("edge_out", hidden)


@pytest.mark.parametrize("jitted", [False, True], ids=["eager", "jit"])
def test_on_a_graph_against_numpy(jitted: bool) -> None:
    block = nn.RelationalAttention.init(jax.random.key(0), *templates())
    x = rng.normal(size=(N, 3))
    g = Graph.from_edges(EDGES, [Vec.from_array(r, D) for r in x], capacity=CAP, edge_capacity=6)
    edge_vectors = rng.normal(size=(6, 2))
    e = g.on_edges(jnp.asarray(edge_vectors)).fmap(lambda row: row.fmap(lambda a: Vec.from_array(a, E)))
    mask = g.mask(1)
    run = jax.jit if jitted else (lambda f: f)
    y, e_new = run(lambda g, e, m: block(g, e, m))(g, e, mask)
    dense_e = np.zeros((CAP, CAP, 2))
    dense_e[EDGES[1], EDGES[0]] = edge_vectors[:5]
    sees = np.asarray(to_array(mask), bool)
    expected_y, expected_e = reference(weights(block), np.asarray(to_array(g), np.float64), dense_e, sees,
                                       np.r_[np.ones(N), np.zeros(CAP - N)])  # fmt: skip
    np.testing.assert_allclose(np.asarray(to_array(y))[:N], expected_y[:N], rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(np.asarray(to_array(e_new))[:N, :N], expected_e[:N, :N], rtol=1e-10, atol=1e-12)


def test_on_a_vec_every_pair_against_numpy_and_its_gradient() -> None:
    block = nn.RelationalAttention.init(jax.random.key(1), *templates())
    x = rng.normal(size=(3, 3))
    e = rng.normal(size=(3, 3, 2))
    xs = Vec.from_array(x, S, D)
    es = Vec.from_array(e, S, S, E)
    y, e_new = block(xs, es)
    expected_y, expected_e = reference(weights(block), x, e, np.ones((3, 3), bool), np.ones(3))
    np.testing.assert_allclose(to_array(y), expected_y, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(to_array(e_new), expected_e, rtol=1e-10, atol=1e-12)

    def loss(values: jax.Array) -> jax.Array:
        y, e_next = block(Vec.from_array(values, S, D), es)
        return jnp.sum(to_array(y) ** 2) + jnp.sum(to_array(e_next) ** 3)

    grad = np.asarray(jax.grad(loss)(jnp.asarray(x)))
    direction = rng.normal(size=x.shape)
    h = 1e-6
    numeric = (float(loss(jnp.asarray(x + h * direction))) - float(loss(jnp.asarray(x - h * direction)))) / (2 * h)
    assert float(np.sum(grad * direction)) == pytest.approx(numeric, rel=1e-6)
