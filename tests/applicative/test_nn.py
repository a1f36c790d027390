"""Attention, MLP and the transformer family on Vec, against the float64 numpy
reference in tests/applicative/numpy_reference.py (same weights), plus masks, autoregression,
jit, and gradients."""

from typing import Any, TypeVar

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.test_util import check_grads

from applicative import (
    Dim,
    Vec,
    VecOf,
    as_vec,
    causal_mask,
    generic_only,
    nn,
    one_hot,
    record_fast_paths,
    sinusoidal_positions,
    to_array,
)
from tests.applicative import numpy_reference as ref
from tests.applicative.dims import Hidden, Model, Out, Seq
from tests.applicative.tolerance import Tolerance


class Head(Dim):
    """Attention heads."""


class Key(Dim):
    """Query/key features of a head."""


class Vocab(Dim):
    """Token vocabulary."""


N = TypeVar("N", bound=Dim)

rng = np.random.default_rng(2)
TOL: Tolerance = {"rtol": 1e-10, "atol": 1e-10}


def zeros(n: int, tag: type[N], dtype: type[np.floating[Any]] = np.float64) -> Vec[N, jax.Array]:
    return Vec.from_array(np.zeros(n, dtype), tag)


Options = nn.AttentionOptions[VecOf[Head], VecOf[Model], VecOf[Key]]


def options(dtype: type[np.floating[Any]] = np.float64, **choices: Any) -> Options:
    """The attention options of the models here: 3 heads of 4 key features on 6 model features."""
    return nn.AttentionOptions(heads=zeros(3, Head, dtype), model=zeros(6, Model, dtype),
                               head_features=zeros(4, Key, dtype), **choices)  # fmt: skip


OPTIONS = options()
MODEL, HIDDEN = OPTIONS.model, zeros(10, Hidden)
SCORES = [nn.DotProduct, nn.Multiplicative, nn.Additive]
NORMALISATIONS = [nn.Softmax(), nn.ReferenceSoftmax(), nn.ReluAttention()]


def random_mask(rows: int, cols: int) -> np.ndarray:
    mask = rng.random((rows, cols)) < 0.6
    mask[0] = False  # a fully masked row attends to nothing
    return mask


@pytest.mark.parametrize("normalise", NORMALISATIONS, ids=lambda n: type(n).__name__)
@pytest.mark.parametrize("score", SCORES, ids=lambda s: s.__name__)
@pytest.mark.parametrize("masked", [False, True])
def test_attention_matches_numpy(score: Any, normalise: Any, masked: bool) -> None:
    # Cross-structure shapes: 3 queries (Out), 5 keys/values (Seq), values of another width.
    q, k, v = rng.normal(size=(3, 4)), rng.normal(size=(5, 4)), rng.normal(size=(5, 2))
    mask = random_mask(3, 5) if masked else None
    s = score.init(jax.random.key(0), zeros(4, Key))
    out = as_vec(
        nn.attention(
            Vec.from_array(q, Out, Key),
            Vec.from_array(k, Seq, Key),
            Vec.from_array(v, Seq, Hidden),
            score=s,
            normalise=normalise,
            mask=None if mask is None else Vec.from_array(mask, Out, Seq),
        )
    )
    assert (out.tag, as_vec(out[0]).tag) == (Out, Hidden)
    np.testing.assert_allclose(to_array(out), ref.attention(q, k, v, s, normalise, mask), **TOL)


def test_a_fully_masked_row_gives_zeros() -> None:
    """By attention's dense formula on a Vec, and by its generic definition (the softmax of each row)."""
    q, k, v = rng.normal(size=(2, 4)), rng.normal(size=(3, 4)), rng.normal(size=(3, 2))
    mask = np.array([[False, False, False], [True, False, True]])

    def attend() -> Any:
        return nn.attention(
            Vec.from_array(q, Out, Key),
            Vec.from_array(k, Seq, Key),
            Vec.from_array(v, Seq, Hidden),
            mask=Vec.from_array(mask, Out, Seq),
        )

    with record_fast_paths() as taken:
        out = attend()
    assert "attention" in taken
    np.testing.assert_array_equal(to_array(out)[0], 0.0)
    with generic_only():
        np.testing.assert_array_equal(to_array(attend())[0], 0.0)


def test_reference_softmax_rows_sum_to_one_over_sqrt_dk() -> None:
    # The reference's own formula, kept as an option: its rows sum to 1/sqrt(d_k).
    scores = Vec.from_array(rng.normal(size=(3, 5)), Out, Seq)
    rows = to_array(nn.ReferenceSoftmax()(scores, None, jnp.asarray(16.0))).sum(axis=1)
    np.testing.assert_allclose(rows, 0.25, **TOL)


@pytest.mark.parametrize("normalise", NORMALISATIONS, ids=lambda n: type(n).__name__)
def test_multi_head_attention_matches_numpy(normalise: Any) -> None:
    # value_features and source left out: the head features and the model's (brands that mypy cannot infer)
    mha: nn.MultiHeadAttention[VecOf[Head], VecOf[Model], VecOf[Model], VecOf[Key], VecOf[Key]]
    mha = nn.MultiHeadAttention.init(jax.random.key(1), options(normalise=normalise))
    mha = jax.tree_util.tree_map(lambda a: a + 0.1 * rng.normal(size=a.shape), mha)  # non-zero biases
    x = rng.normal(size=(5, 6))
    mask = np.tril(np.ones((5, 5), bool))
    out = mha(Vec.from_array(x, Seq, Model), mask=Vec.from_array(mask, Seq, Seq))
    np.testing.assert_allclose(to_array(out), ref.multi_head(mha, x, x, mask), **TOL)


def test_cross_attention_between_structures_matches_numpy() -> None:
    mha: nn.MultiHeadAttention[VecOf[Head], VecOf[Model], VecOf[Hidden], VecOf[Key], VecOf[Key]]
    mha = nn.MultiHeadAttention.init(jax.random.key(2), OPTIONS, source=zeros(7, Hidden))
    x, memory = rng.normal(size=(4, 6)), rng.normal(size=(9, 7))
    out = as_vec(mha(Vec.from_array(x, Out, Model), Vec.from_array(memory, Seq, Hidden)))
    assert out.tag is Out
    np.testing.assert_allclose(to_array(out), ref.multi_head(mha, x, memory, None), **TOL)


def _encoder(
    key: int, learned_positions: bool = False, **choices: Any
) -> nn.Encoder[VecOf[Seq], VecOf[Vocab], VecOf[Model], VecOf[Vocab]]:
    noise = np.random.default_rng(key)
    enc = nn.init_encoder(jax.random.key(key), options(**choices), inputs=zeros(8, Vocab), hidden=HIDDEN,
                          outputs=zeros(8, Vocab), layers=2, positions=sinusoidal_positions(5, Seq, 6, Model),
                          learned_positions=learned_positions)  # fmt: skip
    # Perturb every parameter so that biases, gains and shifts all matter.
    perturbed: nn.Encoder[VecOf[Seq], VecOf[Vocab], VecOf[Model], VecOf[Vocab]]
    perturbed = jax.tree_util.tree_map(lambda a: a + 0.1 * noise.normal(size=a.shape), enc)
    return perturbed


@pytest.mark.parametrize("layer_norm", [True, False])
def test_encoder_layer_and_encoder_match_numpy(layer_norm: bool) -> None:
    enc = _encoder(3, layer_norm=layer_norm)
    x = rng.normal(size=(5, 8))
    h = rng.normal(size=(5, 6))
    layer = enc.layers[0]
    assert isinstance(layer, nn.EncoderLayer)  # the reference computes an EncoderLayer's formulas
    assert enc.unembed is not None  # built with outputs
    np.testing.assert_allclose(to_array(layer(Vec.from_array(h, Seq, Model))), ref.encoder_layer(layer, h), **TOL)
    expected = ref.linear(enc.unembed, ref.encode(enc, x))
    np.testing.assert_allclose(to_array(enc(Vec.from_array(x, Seq, Vocab))), expected, **TOL)
    np.testing.assert_allclose(to_array(jax.jit(enc)(Vec.from_array(x, Seq, Vocab))), expected, **TOL)


def test_encoder_decoder_matches_numpy() -> None:
    # Without positions, mypy cannot infer the sequence brands; the encoder has no output brand.
    encoder: nn.Encoder[VecOf[Seq], VecOf[Vocab], VecOf[Model], Any]
    encoder = nn.init_encoder(jax.random.key(4), OPTIONS, inputs=zeros(8, Vocab), hidden=HIDDEN, outputs=None, layers=2)
    decoder: nn.Decoder[VecOf[Out], VecOf[Vocab], VecOf[Model], VecOf[Model], VecOf[Vocab]]
    decoder = nn.init_decoder(jax.random.key(5), OPTIONS, inputs=zeros(8, Vocab), hidden=HIDDEN,
                              outputs=zeros(8, Vocab), layers=2, source=MODEL)  # fmt: skip
    model = jax.tree_util.tree_map(lambda a: a + 0.1 * rng.normal(size=a.shape), nn.EncoderDecoder(encoder, decoder))
    source, target = rng.normal(size=(7, 8)), rng.normal(size=(4, 8))
    causal = np.tril(np.ones((4, 4), bool))
    out = jax.jit(lambda m, s, t: m(s, t, causal_mask(4, Out)))(
        model, Vec.from_array(source, Seq, Vocab), Vec.from_array(target, Out, Vocab)
    )
    expected = ref.decoder(model.decoder, target, causal, ref.encode(model.encoder, source), None)
    np.testing.assert_allclose(to_array(out), expected, **TOL)


def test_decoder_is_autoregressive() -> None:
    # No positions and no source: mypy cannot infer the sequence brand, and there is no memory brand.
    dec: nn.Decoder[VecOf[Seq], VecOf[Vocab], VecOf[Model], Any, VecOf[Vocab]]
    dec = nn.init_decoder(jax.random.key(6), OPTIONS, inputs=zeros(8, Vocab), hidden=HIDDEN, outputs=zeros(8, Vocab),
                          layers=2)  # fmt: skip
    run = jax.jit(lambda x, mask: to_array(dec(Vec.from_array(x, Seq, Vocab), Vec.from_array(mask, Seq, Seq))))
    causal, full = to_array(causal_mask(6, Seq)), np.ones((6, 6), bool)
    np.testing.assert_array_equal(causal, np.tril(np.ones((6, 6), bool)))  # query i sees keys j <= i
    x = rng.normal(size=(6, 8))
    base = run(x, causal)
    for t in range(6):
        changed = x.copy()
        changed[t] += rng.normal(size=8)
        out = run(changed, causal)
        np.testing.assert_allclose(out[:t], base[:t], **TOL)  # earlier outputs unchanged
        assert np.abs(out[t] - base[t]).max() > 1e-6  # the changed position does change
    # Without the mask the first output sees the future.
    assert np.abs(run(changed, full)[0] - base[0]).max() > 1e-6


def _fourth_differences(values: np.ndarray) -> np.ndarray:
    """Delta^4 along the first axis of samples at t - 2h, ..., t + 2h (groups of five)."""
    f = values.reshape(-1, 5, *values.shape[1:])
    differences: np.ndarray = f[:, 4] - 4 * f[:, 3] + 6 * f[:, 2] - 4 * f[:, 1] + f[:, 0]
    return differences


@pytest.mark.parametrize("block", ["attention", "encoder block"])
def test_relu_transformer_is_piecewise_cubic_along_lines(block: str) -> None:
    # Reference 000, Theorem 3.3: a ReLU attention module and a ReLU encoder block
    # are cubic splines, so along a line their fourth differences vanish on every
    # piece (wherever no ReLU input changes sign within the stencil).
    line = np.random.default_rng(7)
    x0, direction = line.normal(size=(5, 6)), line.normal(size=(5, 6))
    h, centres = 0.005, np.linspace(-1.0, 1.0, 41)
    ts = (centres[:, None] + h * np.arange(-2, 3)[None, :]).ravel()
    xs = x0[None] + ts[:, None, None] * direction[None]

    def run(layer: Any) -> np.ndarray:
        block_fn = layer.attention if block == "attention" else layer
        return np.asarray(jax.jit(jax.vmap(lambda x: to_array(block_fn(Vec.from_array(x, Seq, Model)))))(xs))

    def relu_inputs(layer: Any, x: np.ndarray) -> np.ndarray:
        heads = [ref.head(layer.attention.heads, h) for h in range(layer.attention.heads.size)]
        inputs = [ref.linear(p.query, x) @ ref.linear(p.key, x).T for p in heads]
        if block == "encoder block":
            inputs.append(ref.linear(layer.mlp.hidden, x + ref.multi_head(layer.attention, x, x, None)))
        return np.concatenate([a.ravel() for a in inputs])

    layer = _encoder(7, layer_norm=False, normalise=nn.ReluAttention()).layers[0]
    d4 = _fourth_differences(run(layer))
    scale = np.abs(run(layer)).max()
    fine = np.linspace(-2 * h, 2 * h, 17)
    on_a_piece = np.array(
        [len({tuple(relu_inputs(layer, x0 + (c + u) * direction) > 0) for u in fine}) == 1 for c in centres]
    )
    assert on_a_piece.sum() >= 10, "too few stencils on a single piece to test"
    assert np.abs(d4[on_a_piece]).max() < 1e-12 * scale  # rounding level (about 4e-15 seen)
    # Control: with softmax attention the same fourth differences do not vanish.
    softmax_layer = _encoder(7, layer_norm=False).layers[0]
    assert np.abs(_fourth_differences(run(softmax_layer))).max() > 1e-10 * scale  # about 7e-9 seen


def test_gradients_match_finite_differences() -> None:
    enc = _encoder(8, learned_positions=True)  # fixed positions stop gradients on purpose
    # Inputs of their own seed: drawn from the module's generator they depended on which tests ran first, and
    # one such draw (tools/mutants.py's selection of this file) was 1.8e-5 off at check_grads' tolerance 1e-5.
    x = Vec.from_array(np.random.default_rng(231).normal(size=(5, 8)), Seq, Vocab)
    check_grads(jax.jit(lambda m, x: to_array(m(x))), (enc, x), order=1, modes=("rev",))


def test_positional_encodings() -> None:
    table = to_array(sinusoidal_positions(7, Seq, 6, Model))
    p, i = np.arange(7)[:, None], np.arange(3)[None, :]
    np.testing.assert_allclose(table[:, 0::2], np.sin(p / 10000 ** (2 * i / 6)), **TOL)
    np.testing.assert_allclose(table[:, 1::2], np.cos(p / 10000 ** (2 * i / 6)), **TOL)
    x = Vec.from_array(rng.normal(size=(5, 8)), Seq, Vocab)

    def loss(enc: Any) -> jax.Array:
        return jnp.sum(to_array(enc(x)) ** 2)

    fixed = _encoder(9)
    gradient = jax.jit(jax.grad(loss))  # (one program for each kind of positions, where eagerly ~100 compile)
    assert not np.any(to_array(gradient(fixed).embed.positions))
    learned = nn.Encoder(nn.Embedding(fixed.embed.linear, fixed.embed.positions, learned=True), fixed.layers,
                         fixed.norm, fixed.unembed)  # fmt: skip
    assert np.all(np.abs(to_array(gradient(learned).embed.positions)).sum(axis=1) > 0)


def test_one_hot_tokens_and_bad_tokens() -> None:
    np.testing.assert_array_equal(to_array(one_hot(np.array([2, 0]), Seq, 3, Vocab)), [[0, 0, 1], [1, 0, 0]])
    with pytest.raises(ValueError, match=r"tokens must lie in \[0, 3\), got \[0, 3\]"):
        one_hot(np.array([0, 3]), Seq, 3, Vocab)


def test_a_sequence_longer_than_the_positions_is_rejected() -> None:
    enc = _encoder(10)
    with pytest.raises(ValueError, match=r"Vec\[Seq\] of size 6 vs Vec\[Seq\] of size 5"):
        enc(Vec.from_array(np.zeros((6, 8)), Seq, Vocab))


def test_decoder_with_cross_attention_needs_memory() -> None:
    dec: nn.Decoder[VecOf[Seq], VecOf[Vocab], VecOf[Model], VecOf[Model], VecOf[Vocab]]
    dec = nn.init_decoder(jax.random.key(11), OPTIONS, inputs=zeros(8, Vocab), hidden=HIDDEN,
                          outputs=zeros(8, Vocab), layers=1, source=MODEL)  # fmt: skip
    with pytest.raises(ValueError, match="pass memory="):
        dec(Vec.from_array(np.zeros((3, 8)), Seq, Vocab), causal_mask(3, Seq))


def test_float32_templates_give_a_float32_model_under_x64() -> None:
    def zeros(n: int, tag: type[N]) -> Vec[N, jax.Array]:
        return Vec.from_array(np.zeros(n, np.float32), tag)

    enc: nn.Encoder[VecOf[Seq], VecOf[Vocab], VecOf[Model], VecOf[Vocab]]
    enc = nn.init_encoder(jax.random.key(12), options(np.float32), inputs=zeros(8, Vocab), hidden=zeros(10, Hidden),
                          layers=1, outputs=zeros(8, Vocab))  # fmt: skip
    assert {leaf.dtype for leaf in jax.tree_util.tree_leaves(enc)} == {jnp.dtype(jnp.float32)}
    out = jax.jit(enc)(one_hot(np.array([1, 2, 3]), Seq, 8, Vocab, jnp.float32))
    assert to_array(out).dtype == jnp.float32


def test_kernel_integral_on_a_vec_sequence_matches_numpy() -> None:
    """x + sum_h (K_h (x W_v^T + b_v)) W_o^T + b: token mixing by learned kernels, one per head."""
    layer = nn.KernelIntegral.init(
        jax.random.key(7), heads=zeros(3, Head), sequence=zeros(5, Seq), model=zeros(6, Model),
        value_features=zeros(4, Key),
    )  # fmt: skip
    layer = jax.tree_util.tree_map(lambda a: a + 0.1 * rng.normal(size=a.shape), layer)
    x = rng.normal(size=(5, 6))
    heads = as_vec(layer.heads)
    expected = x + ref.arr(layer.bias)
    for h in range(heads.size):
        p = ref.head(heads, h)
        expected = expected + (ref.arr(p.kernel) @ ref.linear(p.value, x)) @ ref.arr(p.output).T
    out = jax.jit(lambda m, v: m(v))(layer, Vec.from_array(x, Seq, Model))
    np.testing.assert_allclose(to_array(out), expected, **TOL)
    with pytest.raises(ValueError, match="KernelIntegral: a learned kernel takes no mask"):
        layer(Vec.from_array(x, Seq, Model), causal_mask(5, Seq))


@pytest.mark.parametrize("layer_norm", [True, False])
def test_feed_forward_on_a_vec_sequence_matches_numpy(layer_norm: bool) -> None:
    """x + mlp(norm x) at each position: an encoder layer's second block, mixing no positions."""
    mlp = nn.MLP.init(jax.random.key(8), zeros(6, Model), zeros(7, Hidden))
    norm = nn.LayerNorm.init(zeros(6, Model)) if layer_norm else None
    layer = jax.tree_util.tree_map(lambda a: a + 0.1 * rng.normal(size=a.shape), nn.FeedForward(mlp, norm))
    x = rng.normal(size=(5, 6))
    expected = x + ref.mlp(layer.mlp, ref.layer_norm(layer.norm, x))
    out = jax.jit(lambda m, v: m(v))(layer, Vec.from_array(x, Seq, Model))
    np.testing.assert_allclose(to_array(out), expected, **TOL)
