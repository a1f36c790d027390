"""Initialisers draw the distributions their docstrings state, checked against the formulas written
here as literals (never read back from the model): each weight group's sample standard deviation
against its documented scale, on sizes large enough that a wrong factor of sqrt(2) cannot hide
(8,192 draws a group: the estimate's own spread is under 1%; fewer draws, a wider tolerance), zero
biases, LayerNorm's defaults, and independent draws for every head; the variance rules (``by_measure``,
``fan_in``) and the draws (``jax.random``'s, by ``applicative.nn``'s rule, in the documented order). The
Funcformer's initial weights: tests/funcformer/test_init.py."""

import math
from typing import Any, TypeVar

import jax
import numpy as np
import pytest

from applicative import Cheb, Compose, Dim, Vec, VecOf, nn, to_array
from tests.applicative.dims import Hidden, Model, Seq

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
    options = nn.AttentionOptions(
        heads=zeros(HEADS, Head), model=zeros(MODEL, Model), head_features=zeros(FEATURES, Key)
    )
    mha = nn.MultiHeadAttention.init(jax.random.key(1), options, source=source)
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
    # Built from its parts, it has the same eps: on features of variance 1e-6, eps sets the scale (numpy).
    x = 1e-3 * np.random.default_rng(5).normal(size=MODEL)
    built = nn.LayerNorm(norm.gamma, norm.beta)
    expected = (x - x.mean()) / np.sqrt(x.var() + 1e-5)
    np.testing.assert_allclose(to_array(built(Vec.from_array(x, Model))), expected, rtol=1e-10)


def channels(n: int, c: int, tag: type[N]) -> Compose[Any, Any, jax.Array]:
    """A template: c channels of functions with n Chebyshev coefficients (n c coordinates, measure 2 c)."""
    return Compose(Cheb(Vec(jax.numpy.zeros((n, c)), tag, c), Seq, n, 2 * n))


def test_the_variance_rules_count_the_measure_or_the_coordinates() -> None:
    x = channels(16, 3, Model)
    np.testing.assert_allclose(float(nn.by_measure(x)), 2 * 3)  # the integral of 1 over [-1, 1], per channel
    assert nn.fan_in(x) == 16 * 3
    assert nn.fan_in(zeros(7, Head)) == 7


def test_initialisers_draw_by_the_variance_rule_they_are_given() -> None:
    n, c, h, k = 16, 8, 6, 4
    model, hidden = channels(n, c, Model), channels(n, h, Hidden)
    drawn(nn.Linear.init(jax.random.key(0), model, hidden).weight, 1 / math.sqrt(2 * c))
    drawn(nn.Linear.init(jax.random.key(0), model, hidden, variance=nn.fan_in, gain=0.5).weight, 0.5 / math.sqrt(n * c))
    mlp = nn.MLP.init(jax.random.key(1), model, hidden, variance=nn.fan_in, output_gain=0.5)
    drawn(mlp.hidden.weight, 1 / math.sqrt(n * c))
    drawn(mlp.output.weight, 0.5 / math.sqrt(n * h))
    options = nn.AttentionOptions(heads=zeros(HEADS, Head), model=model, head_features=channels(n, k, Key),
                                  variance=nn.fan_in, output_gain=0.5)  # fmt: skip
    mha: Any = nn.MultiHeadAttention.init(jax.random.key(2), options)
    drawn(mha.heads.data.query.weight, 1 / math.sqrt(n * c))
    drawn(mha.heads.data.output, 0.5 / math.sqrt(n * k * HEADS))
    kernel: Any = nn.KernelIntegral.init(
        jax.random.key(3), heads=zeros(HEADS, Head), sequence=Cheb.from_array(np.zeros(SEQUENCE), Seq),
        model=model, value_features=channels(n, k, Key), variance=nn.fan_in,
    )  # fmt: skip
    drawn(kernel.heads.data.kernel, 1 / SEQUENCE)
    drawn(kernel.heads.data.value.weight, 1 / math.sqrt(n * c))


def standard_normals(key: jax.Array, shape: tuple[int, ...], dtype: Any) -> np.ndarray:
    """``applicative.nn``'s rule for one leaf: the first prod(shape) standard normals of
    jax.random.normal(fold_in(key, j), (BLOCK,)), j = 0, 1, ..., in ``dtype``, reshaped."""
    n = math.prod(shape)
    blocks = [jax.random.normal(jax.random.fold_in(key, j), (nn.BLOCK,), dtype) for j in range(-(-n // nn.BLOCK))]
    normals: np.ndarray = np.concatenate([np.asarray(b) for b in blocks] or [np.zeros(0, dtype)])[:n].reshape(shape)
    return normals


def requested(key: jax.Array, request: int | None, shape: tuple[int, ...], std: float, dtype: Any) -> np.ndarray:
    """The one-leaf weight of ``shape`` an initialiser draws from ``key`` at its ``request``-th request
    (None: drawn by ``nn.normal_like(key, ...)`` itself): leaf 0 of that key, times ``std`` in ``dtype``."""
    drawn_from = key if request is None else jax.random.fold_in(key, request)
    weight: np.ndarray = standard_normals(jax.random.fold_in(drawn_from, 0), shape, dtype) * np.asarray(std, dtype)
    return weight


def test_normal_like_draws_each_leaf_from_blocks_of_its_key() -> None:
    """Leaf l: the first n standard normals of fold_in(key, l)'s blocks, times std in the leaf's dtype; a
    leaf of several blocks (three halves of BLOCK and more), a float32 leaf, an empty one; the same eagerly,
    under jit and vmapped over keys."""
    template: tuple[np.ndarray, ...] = (np.zeros((3, nn.BLOCK // 2 + 1)), np.zeros(7, np.float32), np.zeros((0, 3)))
    key = jax.random.key(3)
    got: tuple[np.ndarray, ...] = nn.normal_like(key, template, 0.5)
    for leaf, (drawn_leaf, like) in enumerate(zip(got, template, strict=True)):
        want = standard_normals(jax.random.fold_in(key, leaf), like.shape, like.dtype) * like.dtype.type(0.5)
        assert drawn_leaf.dtype == like.dtype
        np.testing.assert_array_equal(drawn_leaf, want)
    for traced in (jax.jit(lambda k: nn.normal_like(k, template, 0.5))(key),
                   jax.vmap(lambda k: nn.normal_like(k, template, 0.5))(key[None])):  # fmt: skip
        for a, b in zip(jax.tree_util.tree_leaves(traced), got, strict=True):
            np.testing.assert_allclose(np.reshape(a, np.shape(b)), b, rtol=1e-6)


def test_an_initialiser_draws_its_requests_in_its_documented_order() -> None:
    """MultiHeadAttention.init: queries, keys, values and output projections, each one request for every
    head at once (the heads' axis in front), then the score's key (one per head, fold_in by the head's
    index); zero biases."""
    heads, d, k = 3, 6, 4
    key = jax.random.key(4)
    options = nn.AttentionOptions(heads=zeros(heads, Head), model=zeros(d, Model), head_features=zeros(k, Key),
                                  score=nn.Multiplicative, output_gain=0.5)  # fmt: skip
    mha: Any = nn.MultiHeadAttention.init(key, options)
    for request, name in enumerate(("query", "key", "value")):
        want = requested(key, request, (heads, k, d), 1.0 / np.sqrt(d), np.float64)
        np.testing.assert_array_equal(to_array(getattr(mha.heads.data, name).weight), want)
        np.testing.assert_array_equal(to_array(getattr(mha.heads.data, name).bias), np.zeros((heads, k)))
    want = requested(key, 3, (heads, d, k), 0.5 / np.sqrt(k * heads), np.float64)
    np.testing.assert_array_equal(to_array(mha.heads.data.output), want)
    np.testing.assert_array_equal(to_array(mha.bias), np.zeros(d))
    score_key = jax.random.fold_in(key, 4)
    for h in range(heads):
        alone = nn.Multiplicative.init(jax.random.fold_in(score_key, h), zeros(k, Key))
        np.testing.assert_allclose(to_array(mha.heads.data.score.weight)[h], to_array(alone.weight), rtol=1e-12)
