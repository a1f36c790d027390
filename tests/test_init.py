"""Initialisers draw the distributions their docstrings state, checked against the formulas written
here as literals (never read back from the model): each weight group's sample standard deviation
against its documented scale, on sizes large enough that a wrong factor of sqrt(2) cannot hide
(8,192 draws a group: the estimate's own spread is under 1%; fewer draws, a wider tolerance), zero
biases, LayerNorm's defaults, and independent draws for every head."""

import math
from typing import Any, TypeVar

import jax
import numpy as np
import pytest

import funcformer
from applicative import Dim, Vec, VecOf, nn, to_array
from tests.dims import Hidden, Model, Seq

N = TypeVar("N", bound=Dim)
MODEL, HEADS, FEATURES, SEQUENCE = 64, 8, 16, 128
RTOL = 0.05  # six times the spread of a standard deviation estimated from 8,192 normal draws


class Head(Dim):
    """Attention heads."""


class Key(Dim):
    """Query/key features of a head."""


def zeros(n: int, tag: type[N]) -> Vec[N, jax.Array]:
    return Vec.from_array(np.zeros(n), tag)


def drawn(weights: Any, std: float) -> None:
    """Independent N(0, std^2) draws: sample mean near 0, sample deviation near ``std``."""
    w = np.asarray(weights if isinstance(weights, np.ndarray) else to_array(weights), np.float64).ravel()
    assert abs(w.mean()) < 5 * std / math.sqrt(w.size)
    # The sample deviation of n normal draws spreads by std / sqrt(2 n): six times that, at least RTOL.
    np.testing.assert_allclose(w.std(), std, rtol=max(RTOL, 6 / math.sqrt(2 * w.size)))


def heads_differ(stacked: Any) -> None:
    """Every head has its own draw (no two heads share weights)."""
    per_head = np.asarray(to_array(stacked)).reshape(HEADS, -1)
    correlations = np.corrcoef(per_head) - np.eye(HEADS)
    assert np.abs(correlations).max() < 0.1


def test_linear_is_lecun_normal_with_zero_bias() -> None:
    layer = nn.Linear.init(jax.random.key(0), zeros(128, Model), zeros(96, Hidden))
    drawn(layer.weight, 1 / math.sqrt(128))
    assert layer.bias is not None
    np.testing.assert_array_equal(to_array(layer.bias), np.zeros(96))
    assert nn.Linear.init(jax.random.key(0), zeros(128, Model), zeros(96, Hidden), bias=False).bias is None


@pytest.mark.parametrize("kind", ["self", "cross"])
def test_multi_head_attention_scales_its_output_by_the_heads_it_sums(kind: str) -> None:
    source = zeros(128, Hidden) if kind == "cross" else None
    mha: nn.MultiHeadAttention[VecOf[Head], VecOf[Model], Any, VecOf[Key], VecOf[Key]]
    mha = nn.MultiHeadAttention.init(
        jax.random.key(1), heads=zeros(HEADS, Head), model=zeros(MODEL, Model), head_features=zeros(FEATURES, Key),
        source=source,
    )  # fmt: skip
    heads = mha.heads.data  # type: ignore[attr-defined]
    sources = 128 if kind == "cross" else MODEL
    drawn(heads.query.weight, 1 / math.sqrt(MODEL))
    drawn(heads.key.weight, 1 / math.sqrt(sources))
    drawn(heads.value.weight, 1 / math.sqrt(sources))
    drawn(heads.output, 1 / math.sqrt(FEATURES * HEADS))  # the heads' outputs are summed
    for weights in (heads.query.weight, heads.key.weight, heads.value.weight, heads.output):
        heads_differ(weights)
    np.testing.assert_array_equal(to_array(mha.bias), np.zeros(MODEL))


def test_scores_with_weights_draw_the_documented_scales() -> None:
    multiplicative = nn.Multiplicative.init(jax.random.key(2), zeros(96, Key))
    drawn(multiplicative.weight, 1 / math.sqrt(96))
    additive = nn.Additive.init(jax.random.key(3), zeros(96, Key))
    drawn(additive.keys.weight, 1 / math.sqrt(96))
    drawn(additive.queries.weight, 1 / math.sqrt(96))
    u = np.asarray(to_array(additive.u))
    np.testing.assert_allclose(np.sqrt(np.mean(u**2)), 1 / math.sqrt(96), rtol=0.5)  # 96 draws only


def test_kernel_integral_kernels_keep_a_function_s_size() -> None:
    layer = nn.KernelIntegral.init(
        jax.random.key(4), heads=zeros(HEADS, Head), sequence=zeros(SEQUENCE, Seq), model=zeros(MODEL, Model),
        value_features=zeros(FEATURES, Key),
    )  # fmt: skip
    heads = layer.heads.data  # type: ignore[attr-defined]
    drawn(heads.kernel, 1 / SEQUENCE)
    drawn(heads.value.weight, 1 / math.sqrt(MODEL))
    drawn(heads.output, 1 / math.sqrt(FEATURES * HEADS))
    heads_differ(heads.kernel)


def test_layer_norm_starts_as_the_identity_normalisation() -> None:
    norm = nn.LayerNorm.init(zeros(MODEL, Model))
    np.testing.assert_array_equal(to_array(norm.gamma), np.ones(MODEL))
    np.testing.assert_array_equal(to_array(norm.beta), np.zeros(MODEL))
    assert norm.eps == 1e-5


def test_funcformer_draws_its_documented_scales() -> None:
    """N(0, 1 / fan-in), fan-in = coefficients x channels in; the maps into the residual stream (each
    head's output, the MLP's output) times 1 / sqrt(2 layers), a head's output also 1 / sqrt(heads);
    positions N(0, 1 / N^2); zero biases; layer norms the identity. Three attention layers (pooled)."""
    n, c, heads, ck, ch, layers = 16, 8, 4, 4, 16, 3
    config = funcformer.Config(n=n, channels=c, heads=heads, head_channels=ck, hidden_channels=ch, layers=layers,
                               layer_norm=True)  # fmt: skip
    w = funcformer.weights(funcformer.init(0, config, np.float64))
    residual = 1 / math.sqrt(2 * layers)

    def pooled(*path: str) -> np.ndarray:
        def get(layer: Any) -> np.ndarray:
            for key in path:
                layer = layer[key]
            return np.asarray(layer)

        return np.concatenate([get(layer).ravel() for layer in w["layers"]])

    for name in ("query", "key", "value"):
        drawn(pooled("attention", name, "weight"), 1 / math.sqrt(n * c))
    drawn(pooled("attention", "output"), residual / math.sqrt(heads * n * ck))
    drawn(pooled("mlp", "hidden", "weight"), 1 / math.sqrt(n * c))
    drawn(pooled("mlp", "output", "weight"), residual / math.sqrt(n * ch))
    drawn(w["positions"], 1 / n)
    drawn(w["embed"]["weight"], 1 / math.sqrt(n))  # 2,048 draws each: a 9% tolerance
    drawn(w["unembed"]["weight"], 1 / math.sqrt(n * c))
    biases = [pooled("attention", "bias"), pooled("mlp", "hidden", "bias"), pooled("mlp", "output", "bias")]
    for bias in [*biases, w["embed"]["bias"], w["unembed"]["bias"]]:
        np.testing.assert_array_equal(bias, 0.0)
    constant_one = np.zeros((n, c))
    constant_one[0] = 1.0  # gamma: the function 1 in every channel (coefficient T_0)
    for norm in [*(nm for layer in w["layers"] for nm in layer["norms"]), w["norm"]]:
        np.testing.assert_array_equal(norm["gamma"], constant_one)
        np.testing.assert_array_equal(norm["beta"], 0.0)
