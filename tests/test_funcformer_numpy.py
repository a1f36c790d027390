"""The JAX Funcformer (``funcformer.model``) against an independent float64 numpy reference
(``tests/funcformer_reference.py``), plus vmap, jit and gradient checks."""

from __future__ import annotations

import functools
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.test_util import check_grads

from funcformer.model import Config, Funcformer, init
from tests.funcformer_reference import Basis, forward

TOL = 1e-10

CONFIGS = {
    # several heads, head/hidden channels > 1; alternating axes, values softmax, layer norms
    "xy-values-norm": Config(
        n=6, channels=3, heads=2, head_channels=2, hidden_channels=3, layers=2, axes="xy", normalise="values"
    ),
    # along x only, coefficient softmax, no layer norms, an odd number of sample points
    "x-coefficients-plain": Config(
        n=5,
        channels=2,
        heads=3,
        head_channels=3,
        hidden_channels=2,
        layers=2,
        axes="x",
        normalise="coefficients",
        layer_norm=False,
        points=9,
    ),
    # three layers x, y, x; coefficient softmax with layer norms
    "xy-coefficients-norm": Config(
        n=4, channels=2, heads=2, head_channels=2, hidden_channels=3, layers=3, axes="xy", normalise="coefficients"
    ),
}


@functools.cache
def model(name: str) -> Funcformer:
    """init, then every leaf perturbed (nonzero biases, positions, betas; gamma away from 1)."""
    m = init(0, CONFIGS[name], np.float64)
    leaves, tree = jax.tree_util.tree_flatten(m)
    rng = np.random.default_rng(1)
    leaves = [jnp.asarray(np.asarray(x) + 0.3 * rng.standard_normal(x.shape)) for x in leaves]
    return jax.tree_util.tree_unflatten(tree, leaves)


def source(n: int, seed: int) -> np.ndarray:
    """Random coefficients decaying like those of a smooth source."""
    return np.random.default_rng(seed).standard_normal((n, n)) / (1.0 + np.add.outer(np.arange(n), np.arange(n)))


def _np(x: Any) -> np.ndarray:
    return np.asarray(x, np.float64)


def _lin(linear: Any) -> dict[str, np.ndarray]:
    return {"weight": _np(linear.weight), "bias": _np(linear.bias)}


def _ln(norm: Any) -> dict[str, np.ndarray] | None:
    return None if norm is None else {"gamma": _np(norm.gamma), "beta": _np(norm.beta)}


def params(m: Funcformer) -> dict[str, Any]:
    """The model's pytree as plain numpy arrays in the reference's nested dicts."""
    layers = []
    for i, layer in enumerate(m.layers):
        att = layer.attention
        layers.append(
            {
                "axis": m.config.axis(i),
                "attention": {
                    "query": _lin(att.query),
                    "key": _lin(att.key),
                    "value": _lin(att.value),
                    "output": _np(att.output),
                    "bias": _np(att.bias),
                },
                "mlp": {"hidden": _lin(layer.mlp.hidden), "output": _lin(layer.mlp.output)},
                "norms": None if layer.norms is None else [_ln(nm) for nm in layer.norms],
            }
        )
    return {
        "embed": _lin(m.embed),
        "positions": _np(m.positions),
        "layers": layers,
        "norm": _ln(m.norm),
        "unembed": _lin(m.unembed),
    }


def reference(m: Funcformer, f: np.ndarray) -> np.ndarray:
    eps = m.norm.eps if m.norm is not None else 1e-5
    return forward(params(m), f, normalise=m.config.normalise, points=m.config.points, eps=eps)


@functools.cache
def jitted_batch() -> Any:
    """One jitted batched forward, reused (the model is an argument; its config is static metadata)."""
    return jax.jit(lambda m, fs: jax.vmap(m)(fs))


# The reference's own building blocks, against closed forms and numpy's DCT-free identities.


def test_reference_basis_matches_closed_forms() -> None:
    b = Basis(7, 11)
    i, j = np.meshgrid(np.arange(7), np.arange(7), indexing="ij")
    with np.errstate(divide="ignore"):
        closed = np.where((i + j) % 2 == 0, 1.0 / (1.0 - (i + j) ** 2) + 1.0 / (1.0 - (i - j) ** 2), 0.0)
    np.testing.assert_allclose(b.gram, closed, atol=1e-14)
    k = np.arange(7)
    with np.errstate(divide="ignore"):
        closed_weights = np.where(k % 2 == 0, 2.0 / (1.0 - k**2), 0.0)
    np.testing.assert_allclose(b.weights, closed_weights, atol=1e-14)
    c = np.random.default_rng(0).standard_normal((7, 3))
    np.testing.assert_allclose(b.analyse(b.sample(c, 0), 0), c, atol=1e-13)  # exact for degree < P
    fit = np.polynomial.chebyshev.chebfit(b.points, b.sample(c, 0), 10)[:7]
    np.testing.assert_allclose(fit, c, atol=1e-12)


@pytest.mark.parametrize("name", list(CONFIGS))
def test_model_matches_numpy_reference(name: str) -> None:
    m = model(name)
    n = m.config.n
    for seed in (0, 1):
        f = source(n, seed)
        want = reference(m, f)
        got = np.asarray(m(jnp.asarray(f)))
        assert got.dtype == np.float64
        scale = max(1.0, np.abs(want).max())
        err = np.abs(got - want).max() / scale
        assert err < TOL, f"{name}: max error {err:.3e} (output scale {scale:.3e})"
        # not vacuous: the output depends on the source and on the layers
        assert np.abs(want).max() > 1e-3


def test_vmap_jit_match_per_sample_eager() -> None:
    m = model("xy-values-norm")
    n = m.config.n
    fs = np.stack([source(n, s) for s in range(3)])
    batched = np.asarray(jitted_batch()(m, jnp.asarray(fs)))
    eager_vmap = np.asarray(jax.vmap(m)(jnp.asarray(fs)))
    for s in range(3):
        one = np.asarray(m(jnp.asarray(fs[s])))
        np.testing.assert_allclose(batched[s], one, rtol=0, atol=TOL)
        np.testing.assert_allclose(eager_vmap[s], one, rtol=0, atol=TOL)
        np.testing.assert_allclose(one, reference(m, fs[s]), rtol=0, atol=TOL * max(1.0, np.abs(one).max()))


def test_jit_matches_eager() -> None:
    m = model("x-coefficients-plain")
    f = jnp.asarray(source(m.config.n, 5))
    np.testing.assert_allclose(np.asarray(jax.jit(lambda mm, x: mm(x))(m, f)), np.asarray(m(f)), rtol=0, atol=TOL)


@pytest.mark.parametrize("normalise", ["values", "coefficients"])
def test_gradients_of_tiny_model(normalise: str) -> None:
    config = Config(
        n=4, channels=2, heads=2, head_channels=2, hidden_channels=2, layers=1, axes="x", normalise=normalise
    )
    m = init(3, config, np.float64)
    # O(1) source: the layer norms' variances are not small, so finite differences (eps 1e-4) are accurate
    f = jnp.asarray(np.random.default_rng(7).standard_normal((4, 4)))
    loss = jax.jit(lambda x: jnp.sum(m(x) ** 2))
    check_grads(loss, (f,), order=1, modes=["rev"])
