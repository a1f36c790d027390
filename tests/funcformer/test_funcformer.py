"""The Funcformer, the generic encoder on functions of two variables with channels, against an
independent float64 numpy implementation (tests/funcformer/funcformer_reference.py), plus jit, vmap and
gradient checks, the dense formulas it runs on, and its checks of parameters and input."""

from __future__ import annotations

import functools
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.test_util import check_grads

from applicative import generic_only, record_fast_paths
from funcformer import Funcformer, ModelConfig, init, parameter_count, weights
from funcformer.model import Normalise
from tests.funcformer.funcformer_reference import Basis, forward

TOL = 1e-12

CONFIGS = {
    # several heads, head/hidden channels > 1; alternating axes, values softmax, layer norms
    "xy-values-norm": ModelConfig(
        n=6, channels=3, heads=2, head_channels=2, hidden_channels=3, layers=2, axes="xy", normalise="values"
    ),
    # the default model's choices: values softmax, no layer norm
    "xy-values-plain": ModelConfig(
        n=5, channels=2, heads=2, head_channels=3, hidden_channels=4, layers=2, axes="xy", layer_norm=False
    ),
    # along x only, coefficient softmax, no layer norms, an odd number of sample points
    "x-coefficients-plain": ModelConfig(
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
    "xy-coefficients-norm": ModelConfig(
        n=4, channels=2, heads=2, head_channels=2, hidden_channels=3, layers=3, axes="xy", normalise="coefficients"
    ),
    # kernel integrals along x and y, then attention along x and y
    "kernels-then-attention": ModelConfig(
        n=5, channels=3, heads=2, head_channels=2, hidden_channels=3, layers=4, axes="xy", mixers="kkaa"
    ),
    # kernel integral and MLP layers, alternating, along x, x, y, y (a neural operator), with layer norms
    "kernel-mlp-norm": ModelConfig(
        n=5,
        channels=3,
        heads=2,
        head_channels=2,
        hidden_channels=3,
        layers=4,
        axes="xxyy",
        mixers="km",
        layer_norm=True,
    ),
}


@functools.cache
def model(name: str) -> Funcformer:
    """init, then every leaf perturbed (nonzero biases, positions, betas; gamma away from 1)."""
    m = init(0, CONFIGS[name], np.float64)
    leaves, tree = jax.tree_util.tree_flatten(m)
    rng = np.random.default_rng(1)
    leaves = [jnp.asarray(np.asarray(x) + 0.3 * rng.standard_normal(x.shape)) for x in leaves]
    perturbed: Funcformer = jax.tree_util.tree_unflatten(tree, leaves)
    return perturbed


def source(n: int, seed: int) -> np.ndarray:
    """Random coefficients decaying like those of a smooth source."""
    return np.random.default_rng(seed).standard_normal((n, n)) / (1.0 + np.add.outer(np.arange(n), np.arange(n)))


def reference(m: Funcformer, f: np.ndarray) -> np.ndarray:
    return forward(weights(m), f, normalise=m.config.normalise, points=m.config.points)


@functools.cache
def jitted() -> Any:
    """One jitted batched forward, reused (the model is an argument; its config is static metadata)."""
    return jax.jit(lambda m, fs: jax.vmap(m)(fs))


def _error(got: np.ndarray, want: np.ndarray) -> float:
    return float(np.abs(got - want).max() / max(1.0, np.abs(want).max()))


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
def test_the_generic_funcformer_matches_the_numpy_reference(name: str) -> None:
    m = model(name)
    n = m.config.n
    fs = np.stack([source(n, seed) for seed in (0, 1)])
    got = np.asarray(jitted()(m, jnp.asarray(fs)))
    assert got.dtype == np.float64
    for f, out in zip(fs, got, strict=True):
        want = reference(m, f)
        assert np.abs(want).max() > 1e-3  # not vacuous: the output depends on the source and the layers
        assert _error(out, want) < TOL, f"{name}: relative error {_error(out, want):.2e}"


def test_jit_eager_and_vmap_agree_with_the_reference() -> None:
    m = model("xy-values-norm")
    n = m.config.n
    fs = np.stack([source(n, s) for s in range(3)])
    batched = np.asarray(jitted()(m, jnp.asarray(fs)))
    eager_vmap = np.asarray(jax.vmap(m)(jnp.asarray(fs)))
    for s in range(3):
        one = np.asarray(m(jnp.asarray(fs[s])))
        np.testing.assert_allclose(batched[s], one, rtol=0, atol=TOL * max(1.0, np.abs(one).max()))
        np.testing.assert_allclose(eager_vmap[s], one, rtol=0, atol=TOL * max(1.0, np.abs(one).max()))
        assert _error(one, reference(m, fs[s])) < TOL


def test_every_product_runs_its_dense_formula() -> None:
    # The model's linear maps, scores, weighted values, head projections, biases, residuals and
    # softmax scalings all contract coefficients (no sampling): the generic definitions would integrate
    # truncated products instead, a different model, far from the reference.
    m = model("xy-values-plain")
    f = jnp.asarray(source(m.config.n, 2))
    with record_fast_paths() as taken:
        jax.eval_shape(m, f)
    assert set(taken) == {"mul_mmt", "each_mul_mmt", "mul_mm", "mul_mv", "sum_mul_mmt", "add", "scale"}
    with generic_only():
        generic = np.asarray(jax.jit(lambda x: m(x))(f))  # a fresh function: traced in this block
    assert _error(generic, reference(m, np.asarray(f))) > 1e-4


@pytest.mark.parametrize("normalise", ["values", "coefficients"])
@pytest.mark.slow
def test_gradients_match_finite_differences(normalise: Normalise) -> None:
    config = ModelConfig(
        n=4, channels=2, heads=2, head_channels=2, hidden_channels=2, layers=1, axes="x", normalise=normalise
    )
    m = init(3, config, np.float64)
    # An O(1) source: the layer norms' variances are not small, so finite differences (eps 1e-4) are accurate.
    f = jnp.asarray(np.random.default_rng(7).standard_normal((4, 4)))
    check_grads(jax.jit(lambda x: jnp.sum(m(x) ** 2)), (f,), order=1, modes=["rev"])
    weight_loss = jax.jit(lambda mm: jnp.sum(mm(f) ** 2))
    check_grads(weight_loss, (m,), order=1, modes=["rev"], eps=1e-5)


def test_parameters_and_input_are_checked() -> None:
    config = ModelConfig(channels=3, heads=2, head_channels=2, hidden_channels=4, layers=1, layer_norm=True)
    m = init(0, config)
    n, c, k, h = 16, 3, 2, 4
    attention = 2 * 3 * (n * k * n * c + n * k) + 2 * n * c * n * k + n * c
    mlp = (n * h * n * c + n * h) + (n * c * n * h + n * c)
    expected = (n * c * n + n * c) + n * n * c + attention + mlp  # embedding, positions, one layer
    expected += 2 * 2 * n * c + 2 * n * c + (n * n * c + n)  # two layer norms, the final one, the unembedding
    assert parameter_count(m) == expected
    with pytest.raises(ValueError, match=r"shape \(16, 16\), got \(12, 12\)"):
        m(np.zeros((12, 12), np.float32))
    for bad, field in [
        ({"axes": "xz"}, "ModelConfig.axes"),
        ({"normalise": "max"}, "ModelConfig.normalise"),
        ({"heads": 0}, "ModelConfig.heads"),
        ({"points": 8}, "ModelConfig.points"),
        ({"channels": 8.0}, r"ModelConfig\.channels must be an int, got 8\.0"),
        ({"layers": True}, r"ModelConfig\.layers must be an int, got True"),
        ({"layer_norm": 1}, r"ModelConfig\.layer_norm must be a bool, got 1"),
        ({"mixers": None}, r"ModelConfig\.mixers must be a string, got None"),
    ]:
        with pytest.raises(ValueError, match=field):
            ModelConfig(**bad)  # type: ignore[arg-type]


def test_initialisation_is_deterministic_and_float32_by_default() -> None:
    a, b = init(5, ModelConfig(n=6, channels=2, layers=2)), init(5, ModelConfig(n=6, channels=2, layers=2))
    for x, y in zip(jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b), strict=True):
        assert x.dtype == jnp.float32
        np.testing.assert_array_equal(x, y)
