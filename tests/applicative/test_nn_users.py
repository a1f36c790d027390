"""nn for users: a user's own score and normalisation run everywhere the built-in ones do, cross
attention takes its own score, a decoder-only model has no parameter without a gradient, and
padding masks (True = may attend) give what PyTorch's negated key_padding_mask gives."""

from dataclasses import dataclass
from typing import Any, TypeVar

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from applicative import Applicative, Vec, causal_mask, dot, nn, padding_mask, record, to_array
from applicative.nn import Matrix
from applicative.protocols.kinds import Measured
from tests.applicative import numpy_reference as ref
from tests.applicative.dims import Model, Out, Seq
from tests.applicative.test_nn import HIDDEN, MODEL, OPTIONS, Vocab, options, zeros
from tests.applicative.tolerance import Tolerance

I = TypeVar("I")  # noqa: E741  (queries)
F = TypeVar("F", bound=Measured)  # keys: summed over
H = TypeVar("H", bound=Measured)  # key features: summed over

rng = np.random.default_rng(11)
TOL: Tolerance = {"rtol": 1e-10, "atol": 1e-10}


def difference(q: Applicative[H, jax.Array], k: Applicative[H, jax.Array]) -> Applicative[H, jax.Array]:
    return q.pair(k).fmap(lambda p: p[0] - p[1])


@record
class NegativeDistance:
    """A user's score: s_ij = -|q_i - k_j|^2 / 2 (attention as a Gaussian kernel on the queries)."""

    def __call__(self, queries: Matrix[I, H], keys: Matrix[F, H]) -> Matrix[I, F]:
        return queries.fmap(lambda q: keys.fmap(lambda k: -0.5 * dot(difference(q, k), difference(q, k))))

    @staticmethod
    def init(key: jax.Array, features: Applicative[H, jax.Array]) -> "NegativeDistance":
        return NegativeDistance()

    @staticmethod
    def numpy(q: np.ndarray, k: np.ndarray) -> np.ndarray:
        result: np.ndarray = -0.5 * ((q[:, None, :] - k[None, :, :]) ** 2).sum(-1)
        return result


@dataclass(frozen=True)
class Sigmoid:
    """A user's normalisation: sigmoid(s / sqrt(d_k)) entrywise, masked entries 0 (sigmoid attention)."""

    def __call__(self, scores: Matrix[I, F], mask: Matrix[I, F] | None, d_k: jax.Array) -> Matrix[I, F]:
        weights = scores.fmap(lambda row: row.fmap(lambda s: jax.nn.sigmoid(s / jnp.sqrt(d_k))))
        if mask is None:
            return weights
        return weights.pair(mask).fmap(lambda p: p[0].pair(p[1]).fmap(lambda w: jnp.where(w[1], w[0], 0.0)))

    @staticmethod
    def numpy(s: np.ndarray, mask: np.ndarray | None, d_k: int) -> np.ndarray:
        w: np.ndarray = 1.0 / (1.0 + np.exp(-s / np.sqrt(d_k)))
        return w if mask is None else np.where(mask, w, 0.0)


def test_a_users_score_and_normalisation_run_in_an_encoder_as_the_numpy_reference_does() -> None:
    x = rng.normal(size=(5, 8))
    enc: nn.Encoder[Any, Any, Any, Any] = nn.init_encoder(
        jax.random.key(0),
        options(score=NegativeDistance, normalise=Sigmoid()),
        inputs=zeros(8, Vocab),
        hidden=HIDDEN,
        outputs=zeros(3, Vocab),
        layers=2,
    )
    layer = enc.layers[0]
    assert isinstance(layer, nn.EncoderLayer)
    assert isinstance(layer.attention.heads, Vec)
    assert isinstance(layer.attention.heads.data.score, NegativeDistance)
    assert layer.attention.normalise == Sigmoid()
    assert enc.unembed is not None
    expected = ref.linear(enc.unembed, ref.encode(enc, x))
    out = jax.jit(lambda m, v: m(v))(enc, Vec.from_array(x, Seq, Vocab))
    np.testing.assert_allclose(to_array(out), expected, **TOL)


def test_cross_attention_takes_its_own_score() -> None:
    dec: nn.Decoder[Any, Any, Any, Any, Any] = nn.init_decoder(
        jax.random.key(1), OPTIONS, inputs=zeros(8, Vocab), hidden=HIDDEN, outputs=zeros(3, Vocab), layers=1,
        source=MODEL, cross_score=NegativeDistance,
    )  # fmt: skip
    layer = dec.layers[0]
    assert isinstance(layer, nn.DecoderLayer)
    assert layer.cross is not None
    assert isinstance(layer.attention.heads, Vec)
    assert isinstance(layer.cross.heads, Vec)
    assert isinstance(layer.attention.heads.data.score, nn.DotProduct)
    assert isinstance(layer.cross.heads.data.score, NegativeDistance)
    target, memory = rng.normal(size=(4, 8)), rng.normal(size=(6, 6))
    causal = np.tril(np.ones((4, 4), bool))
    out = dec(Vec.from_array(target, Out, Vocab), causal_mask(4, Out), Vec.from_array(memory, Seq, Model))
    np.testing.assert_allclose(to_array(out), ref.decoder(dec, target, causal, memory), **TOL)


def test_a_decoder_without_a_source_has_no_parameter_without_a_gradient() -> None:
    dec: nn.Decoder[Any, Any, Any, Any, Any] = nn.init_decoder(
        jax.random.key(2), OPTIONS, inputs=zeros(8, Vocab), hidden=HIDDEN, outputs=zeros(3, Vocab), layers=2
    )
    assert all(
        isinstance(layer, nn.DecoderLayer)
        and layer.cross is None
        and layer.norms is not None
        and layer.norms[1] is None
        for layer in dec.layers
    )
    x = Vec.from_array(rng.normal(size=(4, 8)), Out, Vocab)

    def loss(model: nn.Decoder[Any, Any, Any, Any, Any]) -> jax.Array:
        return jnp.sum(jnp.sin(to_array(model(x, causal_mask(4, Out)))))

    gradients = jax.tree_util.tree_leaves(jax.jit(jax.grad(loss))(dec))  # jitted: eager, it took 19 s
    assert len(gradients) == len(jax.tree_util.tree_leaves(dec))
    assert all(float(jnp.max(jnp.abs(g))) > 0 for g in gradients)
    with_source: nn.Decoder[Any, Any, Any, Any, Any] = nn.init_decoder(
        jax.random.key(2), OPTIONS, inputs=zeros(8, Vocab), hidden=HIDDEN, outputs=zeros(3, Vocab), layers=2,
        source=MODEL,
    )  # fmt: skip
    assert all(
        isinstance(layer, nn.DecoderLayer) and layer.norms is not None and layer.norms[1] is not None
        for layer in with_source.layers
    )


def test_a_padded_sequence_attends_only_to_its_real_positions() -> None:
    """Padding changes nothing at the real positions; the mask is PyTorch's key_padding_mask negated."""
    enc: nn.Encoder[Any, Any, Any, Any] = nn.init_encoder(
        jax.random.key(3), OPTIONS, inputs=zeros(8, Vocab), hidden=HIDDEN, outputs=zeros(3, Vocab), layers=2
    )
    length, size = 3, 6
    x = rng.normal(size=(size, 8))
    other_padding = np.concatenate([x[:length], rng.normal(size=(size - length, 8))])
    mask = padding_mask(length, size, Seq)
    torch_key_padding_mask = np.arange(size) >= length  # torch: True = ignore this key
    np.testing.assert_array_equal(to_array(mask), np.broadcast_to(~torch_key_padding_mask, (size, size)))
    run = jax.jit(lambda v, m: enc(Vec.from_array(v, Seq, Vocab), m))
    out, out_other = to_array(run(x, mask)), to_array(run(other_padding, mask))
    np.testing.assert_allclose(out[:length], out_other[:length], **TOL)
    assert enc.unembed is not None
    np.testing.assert_allclose(out, ref.linear(enc.unembed, ref.encode(enc, x, np.asarray(to_array(mask)))), **TOL)
    unpadded = to_array(enc(Vec.from_array(x[:length], Seq, Vocab)))
    np.testing.assert_allclose(out[:length], unpadded, **TOL)


def test_padding_masks_for_cross_attention_and_batches_and_bad_lengths() -> None:
    cross = padding_mask(2, 5, Seq, 3, Out)
    np.testing.assert_array_equal(to_array(cross), np.broadcast_to(np.arange(5) < 2, (3, 5)))
    batched = jax.vmap(lambda n: to_array(padding_mask(n, 4, Seq)))(jnp.array([0, 4]))
    np.testing.assert_array_equal(batched, [np.zeros((4, 4), bool), np.ones((4, 4), bool)])
    with pytest.raises(ValueError, match=r"length 7 is outside \[0, 5\] for Seq"):
        padding_mask(7, 5, Seq)
    with pytest.raises(ValueError, match="integer scalar"):
        padding_mask(2.5, 5, Seq)
