"""The blocks of transformer layers, built alone (self-attention, cross attention, feed-forward), against
the float64 numpy reference in tests/applicative/numpy_reference.py; layers as their blocks; the blocks'
initialisers' scales; a cross-attention block over a function memory against numpy.polynomial; and the
construction checks: a module whose parts disagree raises, naming it and both parts, and no rebuild by
JAX (jit, grad, vmap, tree_map, eval_shape, optax) fails or checks again."""

import contextlib
import dataclasses
import functools
from collections.abc import Callable, Iterator
from typing import Any, TypeVar
from unittest import mock

import jax
import jax.numpy as jnp
import numpy as np
import numpy.polynomial.chebyshev as C
import optax
import pytest
import scipy.fft

from applicative import Cheb, Dim, Vec, VecOf, as_vec, causal_mask, nn, record, to_array
from tests.applicative import numpy_reference as ref
from tests.applicative.dims import Hidden, Model, Out, Seq
from tests.applicative.test_init import drawn
from tests.applicative.tolerance import Tolerance

N = TypeVar("N", bound=Dim)
T = TypeVar("T")

rng = np.random.default_rng(23)
TOL: Tolerance = {"rtol": 1e-10, "atol": 1e-10}


class Head(Dim):
    """Attention heads."""


class Key(Dim):
    """Query/key (and value) features of a head."""


class Vocab(Dim):
    """Token vocabulary."""


class X(Dim):
    """The variable of a memory that is a function."""


def zeros(n: int, tag: type[N]) -> Vec[N, jax.Array]:
    return Vec.from_array(np.zeros(n), tag)


def perturbed(model: T) -> T:
    """Every parameter moved off its initial value, so that biases, gains and shifts all matter."""
    moved: T = jax.tree_util.tree_map(lambda a: a + 0.1 * rng.normal(size=a.shape), model)
    return moved


HEADS, MODEL, FEATURES, SOURCE = zeros(3, Head), zeros(6, Model), zeros(4, Key), zeros(7, Hidden)
HIDDEN = zeros(10, Hidden)
OPTIONS = nn.AttentionOptions(heads=HEADS, model=MODEL, head_features=FEATURES)
NO_NORM = dataclasses.replace(OPTIONS, layer_norm=False)
# Modules are built once each and shared: records are immutable.


@functools.cache
def self_block(key: int, layer_norm: bool = True) -> nn.SelfAttentionBlock[VecOf[Head], VecOf[Model], VecOf[Key]]:
    return nn.SelfAttentionBlock.init(jax.random.key(key), OPTIONS if layer_norm else NO_NORM)


@functools.cache
def cross_block(
    key: int, layer_norm: bool = True
) -> nn.CrossAttentionBlock[VecOf[Head], VecOf[Model], VecOf[Hidden], VecOf[Key]]:
    return nn.CrossAttentionBlock.init(jax.random.key(key), OPTIONS if layer_norm else NO_NORM, source=SOURCE)


@functools.cache
def feed_forward(key: int, layer_norm: bool = True) -> nn.FeedForward[VecOf[Model], VecOf[Hidden]]:
    return nn.FeedForward.init(jax.random.key(key), model=MODEL, hidden=HIDDEN, layer_norm=layer_norm)


# The blocks against numpy: x + attention(norm x), x + attention(norm x, memory), x + mlp(norm x)


@pytest.mark.parametrize("layer_norm", [True, False])
@pytest.mark.parametrize("masked", [False, True])
def test_self_attention_block_matches_numpy(layer_norm: bool, masked: bool) -> None:
    block = perturbed(self_block(0, layer_norm))
    assert (block.norm is None) == (not layer_norm)
    x = rng.normal(size=(5, 6))
    mask = np.tril(np.ones((5, 5), bool)) if masked else None
    h = ref.layer_norm(block.norm, x)
    expected = x + ref.multi_head(block.attention, h, h, mask)
    m = None if mask is None else Vec.from_array(mask, Seq, Seq)
    np.testing.assert_allclose(to_array(block(Vec.from_array(x, Seq, Model), m)), expected, **TOL)
    jitted = jax.jit(lambda b, v, m: to_array(b(v, m)))(block, Vec.from_array(x, Seq, Model), m)
    np.testing.assert_allclose(jitted, expected, **TOL)


@pytest.mark.parametrize("layer_norm", [True, False])
@pytest.mark.parametrize("masked", [False, True])
def test_cross_attention_block_matches_numpy(layer_norm: bool, masked: bool) -> None:
    # 4 queries (Out) of 6 model features attend over 9 memory positions (Seq) of 7 other features.
    block = perturbed(cross_block(1, layer_norm))
    x, memory = rng.normal(size=(4, 6)), rng.normal(size=(9, 7))
    mask = rng.random((4, 9)) < 0.7 if masked else None
    expected = x + ref.multi_head(block.attention, ref.layer_norm(block.norm, x), memory, mask)
    queries, source = Vec.from_array(x, Out, Model), Vec.from_array(memory, Seq, Hidden)
    m = None if mask is None else Vec.from_array(mask, Out, Seq)
    out = as_vec(block(queries, source, m))
    assert out.tag is Out
    np.testing.assert_allclose(to_array(out), expected, **TOL)
    jitted = jax.jit(lambda b, q, s, m: to_array(b(q, s, m)))(block, queries, source, m)
    np.testing.assert_allclose(jitted, expected, **TOL)


@pytest.mark.parametrize("layer_norm", [True, False])
def test_feed_forward_block_from_its_initialiser_matches_numpy(layer_norm: bool) -> None:
    block = perturbed(feed_forward(2, layer_norm))
    x = rng.normal(size=(5, 6))
    expected = x + ref.mlp(block.mlp, ref.layer_norm(block.norm, x))
    np.testing.assert_allclose(to_array(block(Vec.from_array(x, Seq, Model))), expected, **TOL)
    jitted = jax.jit(lambda b, v: to_array(b(v)))(block, Vec.from_array(x, Seq, Model))
    np.testing.assert_allclose(jitted, expected, **TOL)


def _integral(c: np.ndarray) -> float:
    """The integral over [-1, 1] of a Chebyshev series (numpy.polynomial)."""
    antiderivative = C.chebint(c)
    return float(C.chebval(1.0, antiderivative) - C.chebval(-1.0, antiderivative))


def test_cross_attention_block_attends_over_a_function_memory() -> None:
    """Vec queries over a memory that is a function of t (Cheb[X] of 7 features): each score row is a
    function of t, softmax(s / sqrt(d_k)) is exp sampled at 2N Chebyshev points and brought back to N
    coefficients (scipy's DCT), normalised by its integral, and the attention is the exact integral of
    the weights times the values (numpy.polynomial), per head."""
    block = perturbed(cross_block(3))
    n = 8
    m = np.zeros((n, 7))
    m[:3] = rng.normal(size=(3, 7))  # a quadratic memory path
    memory = Cheb.stack(Vec.from_array(m, X, Hidden).data, X)
    x = rng.normal(size=(3, 6))
    out = as_vec(block(Vec.from_array(x, Out, Model), memory))
    assert out.tag is Out

    h = ref.layer_norm(block.norm, x)
    points = C.chebpts1(2 * n)[::-1]
    expected = x + ref.arr(block.attention.bias)
    for i in range(block.attention.heads.size):  # type: ignore[attr-defined]
        p = ref.head(block.attention.heads, i)
        q = ref.linear(p.query, h)
        k, v = m @ ref.arr(p.key.weight).T, m @ ref.arr(p.value.weight).T
        k[0] += ref.arr(p.key.bias)  # a bias is the constant function: coefficient T_0
        v[0] += ref.arr(p.value.bias)
        attended = np.zeros((len(x), v.shape[1]))
        for r in range(len(x)):
            e = np.exp(C.chebval(points, k @ q[r] / np.sqrt(q.shape[1])))
            c = scipy.fft.dct(e, type=2)[:n] / (2 * n)
            c[0] /= 2
            weights = c / _integral(c)
            attended[r] = [_integral(C.chebmul(weights, v[:, j])) for j in range(v.shape[1])]
        expected = expected + attended @ ref.arr(p.output).T
    np.testing.assert_allclose(to_array(out), expected, rtol=1e-12, atol=1e-12)
    jitted = jax.jit(lambda b, q, s: to_array(b(q, s)))(block, Vec.from_array(x, Out, Model), memory)
    np.testing.assert_allclose(jitted, expected, rtol=1e-12, atol=1e-12)


# Layers are their blocks


def test_an_encoder_layer_is_a_self_attention_block_then_a_feed_forward_block() -> None:
    layer = nn.EncoderLayer.from_blocks(perturbed(self_block(4)), perturbed(feed_forward(5)))
    attend, forward = layer.blocks
    x = Vec.from_array(rng.normal(size=(5, 6)), Seq, Model)
    np.testing.assert_array_equal(to_array(layer(x)), to_array(forward(attend(x))))
    np.testing.assert_allclose(to_array(layer(x)), ref.encoder_layer(layer, np.asarray(to_array(x))), **TOL)
    rebuilt = nn.EncoderLayer.from_blocks(attend, forward)
    for a, b in zip(jax.tree_util.tree_leaves(rebuilt), jax.tree_util.tree_leaves(layer), strict=True):
        assert a is b
    with pytest.raises(ValueError, match=r"EncoderLayer.from_blocks: either every block has a norm or none has"):
        nn.EncoderLayer.from_blocks(self_block(4), feed_forward(5, layer_norm=False))


@pytest.mark.parametrize("with_cross", [True, False])
def test_a_decoder_layer_is_its_blocks(with_cross: bool) -> None:
    cross = perturbed(cross_block(7)) if with_cross else None
    layer = nn.DecoderLayer.from_blocks(perturbed(self_block(6)), cross, perturbed(feed_forward(8)))
    assert (layer.cross is None) == (not with_cross)
    assert layer.norms is not None
    assert (layer.norms[1] is None) == (not with_cross)
    attend, attend_memory, forward = layer.blocks
    assert (attend_memory is None) == (not with_cross)
    x, memory = rng.normal(size=(5, 6)), rng.normal(size=(9, 7))
    causal = np.tril(np.ones((5, 5), bool))
    xs, mask, source = Vec.from_array(x, Seq, Model), causal_mask(5, Seq), Vec.from_array(memory, Out, Hidden)
    h = attend(xs, mask)
    h = h if attend_memory is None else attend_memory(h, source)
    out = layer(xs, mask, source)
    np.testing.assert_array_equal(to_array(out), to_array(forward(h)))
    np.testing.assert_allclose(to_array(out), ref.decoder_layer(layer, x, causal, memory, None), **TOL)
    # No mask: every position sees every other (a tree's nodes), as under a mask of all ones.
    unmasked = layer(xs, None, source)
    everything = np.ones((5, 5), bool)
    np.testing.assert_allclose(to_array(unmasked), ref.decoder_layer(layer, x, everything, memory, None), **TOL)
    with pytest.raises(ValueError, match=r"DecoderLayer.from_blocks: .* the cross-attention block none"):
        nn.DecoderLayer.from_blocks(self_block(6), cross_block(7, layer_norm=False), feed_forward(8))


def test_an_encoder_may_stack_blocks() -> None:
    """Blocks are Layers: an encoder of a self-attention block and a feed-forward block computes what an
    encoder of the one EncoderLayer made of them does (the numpy reference's encoder)."""
    attend, forward = perturbed(self_block(10)), perturbed(feed_forward(11))
    embed: nn.Embedding[Any, VecOf[Vocab], VecOf[Model]]
    embed = nn.Embedding(nn.Linear.init(jax.random.key(12), zeros(8, Vocab), MODEL), None)
    of_blocks: nn.Encoder[Any, VecOf[Vocab], VecOf[Model], Any]
    of_blocks = nn.Encoder(embed, (attend, forward), nn.LayerNorm.init(MODEL), None)
    of_layer: nn.Encoder[Any, VecOf[Vocab], VecOf[Model], Any]
    of_layer = nn.Encoder(embed, (nn.EncoderLayer.from_blocks(attend, forward),), nn.LayerNorm.init(MODEL), None)
    x = rng.normal(size=(5, 8))
    out = of_blocks.encode(Vec.from_array(x, Seq, Vocab))
    np.testing.assert_array_equal(to_array(out), to_array(of_layer.encode(Vec.from_array(x, Seq, Vocab))))
    np.testing.assert_allclose(to_array(out), ref.encode(of_layer, x), **TOL)


@record
class Skip:
    """A user's own decoder layer: the identity."""

    def __call__(self, x: Any, mask: Any, memory: Any = None, memory_mask: Any = None, /) -> Any:
        return x


def test_a_decoders_layer_is_the_decoder_layer_it_holds() -> None:
    """``layer(i)`` is ``layers[i]``, typed as a DecoderLayer (tests/typing/pass/nn_blocks.py); a user's
    own layer, or an index out of range, is refused by name."""
    built = decoder()
    assert built.layer(0) is built.layers[0]
    assert built.layer(0).cross is not None
    own = nn.Decoder(built.embed, (Skip(), *built.layers), built.norm, built.unembed)
    assert own.layer(-1) is built.layers[0]
    with pytest.raises(TypeError, match=r"Decoder.layer: layer 0 is a Skip, not a DecoderLayer; read it from layers"):
        own.layer(0)
    with pytest.raises(IndexError, match=r"Decoder.layer: index 2 is out of range for 2 layers"):
        own.layer(2)


# The blocks' initialisers draw their documented scales (tests/applicative/test_init.py's sizes and tolerance)

BIG_HEADS, BIG_MODEL, BIG_FEATURES, BIG_SOURCE, BIG_HIDDEN = 8, 64, 16, 128, 128


def test_attention_block_initialisers_draw_the_documented_scales() -> None:
    """Queries N(0, 1/d_model), keys and values N(0, 1/d_source), each head's output projection
    N(0, 1 / (d_head heads)), zero bias; the norm the identity, or none."""
    big = nn.AttentionOptions(
        heads=zeros(BIG_HEADS, Head), model=zeros(BIG_MODEL, Model), head_features=zeros(BIG_FEATURES, Key)
    )
    attend = nn.SelfAttentionBlock.init(jax.random.key(13), big)
    cross = nn.CrossAttentionBlock.init(jax.random.key(14), big, source=zeros(BIG_SOURCE, Hidden))
    for block, sources in ((attend, BIG_MODEL), (cross, BIG_SOURCE)):
        heads: Any = as_vec(block.attention.heads).data
        drawn(heads.query.weight, 1 / np.sqrt(BIG_MODEL))
        drawn(heads.key.weight, 1 / np.sqrt(sources))
        drawn(heads.value.weight, 1 / np.sqrt(sources))
        drawn(heads.output, 1 / np.sqrt(BIG_FEATURES * BIG_HEADS))
        np.testing.assert_array_equal(to_array(block.attention.bias), 0.0)
        assert block.norm is not None
        np.testing.assert_array_equal(to_array(block.norm.gamma), 1.0)
        np.testing.assert_array_equal(to_array(block.norm.beta), 0.0)
    no_norm = dataclasses.replace(big, layer_norm=False)
    assert nn.CrossAttentionBlock.init(jax.random.key(14), no_norm, source=SOURCE).norm is None


def test_feed_forward_initialiser_draws_the_documented_scales() -> None:
    block = nn.FeedForward.init(jax.random.key(15), model=zeros(BIG_MODEL, Model), hidden=zeros(BIG_HIDDEN, Hidden))
    drawn(block.mlp.hidden.weight, 1 / np.sqrt(BIG_MODEL))
    drawn(block.mlp.output.weight, 1 / np.sqrt(BIG_HIDDEN))
    for bias in (block.mlp.hidden.bias, block.mlp.output.bias):
        assert bias is not None
        np.testing.assert_array_equal(to_array(bias), 0.0)
    assert block.norm is not None
    assert block.norm.eps == 1e-5
    np.testing.assert_array_equal(to_array(block.norm.gamma), 1.0)
    assert nn.FeedForward.init(jax.random.key(15), model=MODEL, hidden=HIDDEN, layer_norm=False).norm is None


# Construction checks: a module whose parts disagree raises when built, naming it and both parts


@functools.cache
def linear(inputs: int, outputs: int, into: type[Dim] = Model, out: type[Dim] = Hidden) -> nn.Linear[Any, Any]:
    return nn.Linear.init(jax.random.key(0), zeros(inputs, into), zeros(outputs, out))


@functools.cache
def mha(model: int = 6, source: int | None = None) -> nn.MultiHeadAttention[Any, Any, Any, Any, Any]:
    attention: nn.MultiHeadAttention[Any, Any, Any, Any, Any] = nn.MultiHeadAttention.init(
        jax.random.key(0), dataclasses.replace(OPTIONS, model=zeros(model, Model)),
        source=None if source is None else zeros(source, Hidden),
    )  # fmt: skip
    return attention


def head(**change: Any) -> nn.AttentionHead[Any, Any, Any, Any]:
    """A head of ``mha()`` (stacked: its leaves carry the head axis), with some parts changed."""
    parts = vars(as_vec(mha().heads).data) | change
    return nn.AttentionHead(parts["query"], parts["key"], parts["value"], parts["output"], parts["score"])


def matrix(rows: int, cols: int, row: type[Dim] = Model, col: type[Dim] = Key) -> Vec[Any, Any]:
    return Vec.from_array(np.zeros((rows, cols)), row, col)


def kernel_head(**change: Any) -> nn.KernelHead[Any, Any, Any]:
    parts: dict[str, Any] = {"kernel": matrix(5, 5, Seq, Seq), "value": linear(6, 4, Model, Key)}
    parts |= {"output": matrix(6, 4)} | change
    return nn.KernelHead(parts["kernel"], parts["value"], parts["output"])


@functools.cache
def norm(n: int) -> nn.LayerNorm[Any]:
    return nn.LayerNorm.init(zeros(n, Model))


def encoder(**change: Any) -> Any:
    parts: dict[str, Any] = {
        "embed": nn.Embedding(linear(8, 6, Vocab, Model), None), "layers": (self_block(0),), "norm": norm(6),
        "unembed": linear(6, 8, Model, Vocab),
    } | change  # fmt: skip
    return nn.Encoder(parts["embed"], parts["layers"], parts["norm"], parts["unembed"])


def decoder(**change: Any) -> Any:
    layer = nn.DecoderLayer.from_blocks(self_block(0), cross_block(1), feed_forward(2))
    parts: dict[str, Any] = {
        "embed": nn.Embedding(linear(8, 6, Vocab, Model), None), "layers": (layer,), "norm": norm(6),
        "unembed": linear(6, 8, Model, Vocab),
    } | change  # fmt: skip
    return nn.Decoder(parts["embed"], parts["layers"], parts["norm"], parts["unembed"])


def narrow_feed_forward() -> nn.FeedForward[Any, Any]:
    """A feed-forward block on 5 model features (the others have 6)."""
    return nn.FeedForward(nn.MLP(linear(5, 10), linear(10, 5, Hidden, Model)), None)


def size(n: int) -> str:
    return rf"a Vec\[Model\] of size {n}"


MISMATCHES: dict[str, tuple[Callable[[], object], str]] = {
    "Linear: bias of another size": (
        lambda: nn.Linear(linear(6, 10).weight, zeros(96, Hidden)),
        r"Linear: the bias is a Vec\[Hidden\] of size 96 but the weight's outputs are a Vec\[Hidden\] of size 10",
    ),
    "Linear: bias of another tag": (
        lambda: nn.Linear(linear(6, 10).weight, zeros(10, Model)),
        r"Linear: the bias is a Vec\[Model\] of size 10 but the weight's outputs are a Vec\[Hidden\] of size 10",
    ),
    "Linear: bias of another kind": (
        lambda: nn.Linear(linear(6, 10).weight, Cheb.from_array(np.zeros(10), Hidden)),
        r"Linear: the bias is a Cheb\[Hidden\] of size 10 but the weight's outputs are a Vec\[Hidden\] of size 10",
    ),
    "MLP: hidden widths": (
        lambda: nn.MLP(linear(6, 10), linear(12, 6, Hidden, Model)),
        r"MLP: the hidden layer's outputs are a Vec\[Hidden\] of size 10 but the output layer's inputs are a "
        r"Vec\[Hidden\] of size 12",
    ),
    "MLP: model widths": (
        lambda: nn.MLP(linear(6, 10), linear(10, 5, Hidden, Model)),
        r"MLP: the output layer's outputs are " + size(5) + " but the hidden layer's inputs are " + size(6),
    ),
    "LayerNorm: gamma and beta": (
        lambda: nn.LayerNorm(zeros(6, Model), zeros(7, Model)),
        r"LayerNorm: gamma is " + size(6) + " but beta is " + size(7),
    ),
    "AttentionHead: query and key features": (
        lambda: head(key=linear(6, 5, Model, Key)),
        r"AttentionHead: the query's outputs are a Vec\[Key\] of size 4 but the key's outputs are a Vec\[Key\] of "
        r"size 5",
    ),
    "AttentionHead: output and model": (
        lambda: head(output=matrix(5, 4)),
        r"AttentionHead: the query's inputs are " + size(6) + " but the output's outputs are " + size(5),
    ),
    "MultiHeadAttention: bias": (
        lambda: nn.MultiHeadAttention(mha().heads, zeros(5, Model)),
        r"MultiHeadAttention: the bias is " + size(5) + " but the heads' outputs are " + size(6),
    ),
    "KernelHead: kernel not square": (
        lambda: kernel_head(kernel=matrix(5, 4, Seq, Seq)),
        r"KernelHead: the kernel's rows are a Vec\[Seq\] of size 5 but its columns are a Vec\[Seq\] of size 4",
    ),
    "KernelHead: value and output": (
        lambda: kernel_head(output=matrix(6, 3)),
        r"KernelHead: the value's outputs are a Vec\[Key\] of size 4 but the output's inputs are a Vec\[Key\] of "
        r"size 3",
    ),
    "SelfAttentionBlock: a cross attention": (
        lambda: nn.SelfAttentionBlock(mha(source=7), None),
        r"SelfAttentionBlock: the self-attention's queries come from " + size(6) + r" but its keys and values from "
        r"a Vec\[Hidden\] of size 7",
    ),
    "SelfAttentionBlock: norm": (
        lambda: nn.SelfAttentionBlock(mha(), norm(5)),
        r"SelfAttentionBlock: the self-attention's features are " + size(6) + " but the norm is on " + size(5),
    ),
    "CrossAttentionBlock: norm": (
        lambda: nn.CrossAttentionBlock(mha(source=7), norm(5)),
        r"CrossAttentionBlock: the cross attention's features are " + size(6) + " but the norm is on " + size(5),
    ),
    "FeedForward: norm": (
        lambda: nn.FeedForward(feed_forward(0).mlp, norm(5)),
        r"FeedForward: the MLP's features are " + size(6) + " but the norm is on " + size(5),
    ),
    "EncoderLayer: MLP": (
        lambda: nn.EncoderLayer(mha(), nn.MLP.init(jax.random.key(0), zeros(5, Model), HIDDEN), None),
        r"EncoderLayer: the self-attention's features are " + size(6) + " but the MLP's features are " + size(5),
    ),
    "EncoderLayer: second norm": (
        lambda: nn.EncoderLayer(mha(), feed_forward(0).mlp, (norm(6), norm(5))),
        r"EncoderLayer: the self-attention's features are " + size(6) + r" but norms\[1\] is on " + size(5),
    ),
    "DecoderLayer: cross attention": (
        lambda: nn.DecoderLayer(mha(), mha(model=5, source=7), feed_forward(0).mlp, None),
        r"DecoderLayer: the self-attention's features are " + size(6) + " but the cross attention's features are "
        + size(5),
    ),
    "Embedding: positions": (
        lambda: nn.Embedding(linear(8, 6, Vocab, Model), matrix(5, 7, Seq, Model)),
        r"Embedding: the linear map's outputs are " + size(6) + r" but the positions' features are " + size(7),
    ),
    "Encoder: a layer": (
        lambda: encoder(layers=(self_block(0), narrow_feed_forward())),
        r"Encoder: the embedding's outputs are " + size(6) + r" but layers\[1\]'s features are " + size(5),
    ),
    "Encoder: unembedding": (
        lambda: encoder(unembed=linear(5, 8, Model, Vocab)),
        r"Encoder: the embedding's outputs are " + size(6) + r" but the unembedding's inputs are " + size(5),
    ),
    "Decoder: final norm": (
        lambda: decoder(norm=norm(5)),
        r"Decoder: the embedding's outputs are " + size(6) + " but the final norm is on " + size(5),
    ),
    "EncoderDecoder: memory features": (
        lambda: nn.EncoderDecoder(encoder(), decoder()),
        r"EncoderDecoder: the encoder's features are " + size(6) + r" but the decoder's cross attention reads a "
        r"Vec\[Hidden\] of size 7",
    ),
}


@pytest.mark.parametrize("name", list(MISMATCHES))
def test_a_module_whose_parts_disagree_is_refused_when_built(name: str) -> None:
    build, message = MISMATCHES[name]
    with pytest.raises(ValueError, match=message):
        build()


def test_the_modules_of_the_mismatch_cases_build_when_their_parts_agree() -> None:
    """The controls: the same constructions with agreeing parts build (the checks refuse only mismatches)."""
    nn.Linear(linear(6, 10).weight, zeros(10, Hidden))
    nn.MLP(linear(6, 10), linear(10, 6, Hidden, Model))
    head()
    kernel_head()
    nn.SelfAttentionBlock(mha(), norm(6))
    nn.CrossAttentionBlock(mha(source=7), norm(6))
    nn.DecoderLayer(mha(), mha(source=7), feed_forward(0).mlp, (norm(6), norm(6), norm(6)))
    nn.Embedding(linear(8, 6, Vocab, Model), matrix(5, 6, Seq, Model))
    nn.EncoderDecoder(encoder(), decoder(layers=(nn.DecoderLayer.from_blocks(self_block(0), None, feed_forward(2)),)))


# Construction checks: a block or a layer built of parts of the wrong kind is refused, naming the field

WRONG_KINDS: dict[str, tuple[Callable[[], object], str]] = {
    "SelfAttentionBlock: no attention": (
        lambda: nn.SelfAttentionBlock(None, norm(6)),  # type: ignore[arg-type]
        r"SelfAttentionBlock: attention must be of type MultiHeadAttention, got None",
    ),
    "SelfAttentionBlock: an MLP for the norm": (
        lambda: nn.SelfAttentionBlock(mha(), feed_forward(0).mlp),  # type: ignore[arg-type]
        r"SelfAttentionBlock: norm must be of type LayerNorm or None, got MLP",
    ),
    "CrossAttentionBlock: a block for the attention": (
        lambda: nn.CrossAttentionBlock(self_block(0), None),  # type: ignore[arg-type]
        r"CrossAttentionBlock: attention must be of type MultiHeadAttention, got SelfAttentionBlock",
    ),
    "FeedForward: a norm for the MLP": (
        lambda: nn.FeedForward(norm(6), None),  # type: ignore[arg-type]
        r"FeedForward: mlp must be of type MLP, got LayerNorm",
    ),
    "EncoderLayer: an MLP for the attention": (
        lambda: nn.EncoderLayer(feed_forward(0).mlp, feed_forward(0).mlp, None),  # type: ignore[arg-type]
        r"EncoderLayer: attention must be of type MultiHeadAttention, got MLP",
    ),
    "EncoderLayer: one norm for both blocks": (
        lambda: nn.EncoderLayer(mha(), feed_forward(0).mlp, norm(6)),  # type: ignore[arg-type]
        r"EncoderLayer: norms must be None or a tuple of 2, one per block, got LayerNorm",
    ),
    "DecoderLayer: no norm for the self-attention": (
        lambda: nn.DecoderLayer(mha(), None, feed_forward(0).mlp, (None, None, norm(6))),  # type: ignore[arg-type]
        r"DecoderLayer: norms\[0\] must be of type LayerNorm, got None",
    ),
    "EncoderLayer.from_blocks: the blocks swapped": (
        lambda: nn.EncoderLayer.from_blocks(feed_forward(5), self_block(4)),  # type: ignore[arg-type]
        r"EncoderLayer.from_blocks: attention must be of type SelfAttentionBlock, got FeedForward",
    ),
    "DecoderLayer.from_blocks: the last two blocks swapped": (
        lambda: nn.DecoderLayer.from_blocks(self_block(6), feed_forward(8), cross_block(7)),  # type: ignore[arg-type]
        r"DecoderLayer.from_blocks: cross must be of type CrossAttentionBlock or None, got FeedForward",
    ),
    "DecoderLayer.from_blocks: a self-attention block for the cross attention": (
        lambda: nn.DecoderLayer.from_blocks(self_block(6), self_block(6), feed_forward(8)),  # type: ignore[arg-type]
        r"DecoderLayer.from_blocks: cross must be of type CrossAttentionBlock or None, got SelfAttentionBlock",
    ),
}


@pytest.mark.parametrize("name", list(WRONG_KINDS))
def test_a_module_built_of_parts_of_the_wrong_kind_is_refused_naming_the_field(name: str) -> None:
    build, message = WRONG_KINDS[name]
    with pytest.raises(TypeError, match=message):
        build()


def test_the_modules_of_the_wrong_kind_cases_build_of_parts_of_their_kinds() -> None:
    """The controls: the same constructions with parts of their kinds (a None norm or cross attention
    among them) build."""
    nn.SelfAttentionBlock(mha(), None)
    nn.CrossAttentionBlock(mha(source=7), None)
    nn.FeedForward(feed_forward(0).mlp, None)
    nn.EncoderLayer(mha(), feed_forward(0).mlp, (norm(6), norm(6)))
    nn.DecoderLayer(mha(), None, feed_forward(0).mlp, (norm(6), None, norm(6)))
    nn.EncoderLayer.from_blocks(self_block(4), feed_forward(5))
    nn.DecoderLayer.from_blocks(self_block(6), None, feed_forward(8))


def test_a_cross_attention_block_refuses_a_memory_of_other_features_by_name() -> None:
    """The memory must hold the features the keys and values read (7 Hidden): other sizes, tags or
    nestings are named by the block, eagerly and under jit, not by the linear algebra inside it."""
    block, x, memory = cross_block(1), rng.normal(size=(4, 6)), rng.normal(size=(9, 7))
    queries = Vec.from_array(x, Out, Model)
    expected = x + ref.multi_head(block.attention, ref.layer_norm(block.norm, x), memory, None)
    np.testing.assert_allclose(to_array(block(queries, Vec.from_array(memory, Seq, Hidden))), expected, **TOL)
    memories: dict[str, Any] = {
        r"a Vec\[Hidden\] of size 3": Vec.from_array(np.ones((9, 3)), Seq, Hidden),
        r"a Vec\[Model\] of size 7": Vec.from_array(np.ones((9, 7)), Seq, Model),
    }
    for call in (block, jax.jit(block)):
        for features, other in memories.items():
            message = rf"CrossAttentionBlock: the memory's features are {features} but its keys and values read a "
            with pytest.raises(ValueError, match=message + r"Vec\[Hidden\] of size 7"):
                call(queries, other)
    vector = r"CrossAttentionBlock: argument memory is a Vec\[Seq\] of size 9 holding scalars; expected a structure of"
    with pytest.raises(TypeError, match=vector):
        block(queries, Vec.from_array(np.ones(9), Seq))  # type: ignore[arg-type]


# Construction checks under JAX's rebuilds: never a failure, never a second check


def _model() -> nn.DecoderLayer[VecOf[Head], VecOf[Model], VecOf[Hidden], VecOf[Key], VecOf[Hidden]]:
    return perturbed(nn.DecoderLayer.from_blocks(self_block(6), cross_block(7), feed_forward(8)))


def test_jax_rebuilds_models_around_tracers_and_placeholders_without_failing() -> None:
    layer = _model()
    x, memory = rng.normal(size=(5, 6)), rng.normal(size=(9, 7))
    xs, mask, source = Vec.from_array(x, Seq, Model), causal_mask(5, Seq), Vec.from_array(memory, Out, Hidden)
    expected = ref.decoder_layer(layer, x, np.tril(np.ones((5, 5), bool)), memory, None)

    def run(m: Any) -> jax.Array:
        return to_array(m(xs, mask, source))

    np.testing.assert_allclose(jax.jit(run)(layer), expected, **TOL)
    gradient = jax.jit(jax.grad(lambda m: jnp.sum(run(m) ** 2)))(layer)
    assert isinstance(gradient, nn.DecoderLayer)
    # vmap over a stack of two models, its axis spec a model of integers; an unbatched output, a model of Nones.
    stacked = jax.tree_util.tree_map(lambda a: jnp.stack([a, a]), layer)
    in_axes = jax.tree_util.tree_map(lambda _: 0, layer)
    np.testing.assert_allclose(jax.jit(jax.vmap(run, in_axes=(in_axes,)))(stacked), np.stack([expected] * 2), **TOL)
    unbatched = jax.vmap(lambda _: layer, out_axes=jax.tree_util.tree_map(lambda _: None, layer))
    assert isinstance(unbatched(jnp.zeros(2)), nn.DecoderLayer)  # type: ignore[no-untyped-call]
    for placeholder in (None, object(), 0, True):
        rebuilt = jax.tree_util.tree_map(lambda _, p=placeholder: p, layer)
        assert isinstance(rebuilt, nn.DecoderLayer)
    shapes = jax.eval_shape(_blocks_layer, jax.random.key(0))
    assert isinstance(as_vec(shapes.attention.bias).data, jax.ShapeDtypeStruct)
    # optax: Adam's moments are models; a mask is a model of bools, masked out parts are placeholders.
    optimiser = optax.masked(optax.adam(1e-3), jax.tree_util.tree_map(lambda _: True, layer))
    updates, _ = jax.jit(optimiser.update)(gradient, optimiser.init(layer), layer)
    assert isinstance(optax.apply_updates(layer, updates), nn.DecoderLayer)


def _blocks_layer(key: jax.Array) -> nn.DecoderLayer[Any, Any, Any, Any, Any]:
    k1, k2, k3 = jax.random.split(key, 3)
    return nn.DecoderLayer.from_blocks(
        nn.SelfAttentionBlock.init(k1, OPTIONS),
        nn.CrossAttentionBlock.init(k2, OPTIONS, source=SOURCE),
        nn.FeedForward.init(k3, model=MODEL, hidden=HIDDEN),
    )


CHECKED = (
    nn.Linear, nn.MLP, nn.LayerNorm, nn.AttentionHead, nn.MultiHeadAttention, nn.KernelHead, nn.KernelIntegral,
    nn.SelfAttentionBlock, nn.CrossAttentionBlock, nn.FeedForward, nn.EncoderLayer, nn.DecoderLayer, nn.Embedding,
    nn.Encoder, nn.Decoder, nn.EncoderDecoder,
)  # fmt: skip


@contextlib.contextmanager
def counted_checks() -> Iterator[list[str]]:
    """The names of the modules whose check (``__post_init__``) runs inside the block, in order."""
    calls: list[str] = []
    with contextlib.ExitStack() as stack:
        for cls in CHECKED:

            def counting(self: Any, check: Callable[[Any], None] = cls.__post_init__, name: str = cls.__name__) -> None:
                calls.append(name)
                check(self)

            stack.enter_context(mock.patch.object(cls, "__post_init__", counting))
        yield calls


def test_a_model_is_checked_when_built_and_never_when_jax_rebuilds_it() -> None:
    """Constructing runs the check; no rebuild does, around arrays, tracers or placeholders: unflatten,
    tree_map, jit, grad, vmap, eval_shape, optax (a module is rebuilt with object.__new__)."""
    blocks = self_block(6), cross_block(7), feed_forward(8)
    with counted_checks() as checks:
        layer = nn.DecoderLayer.from_blocks(*blocks)
        assert checks == ["DecoderLayer"]
        checks.clear()

        leaves, treedef = jax.tree_util.tree_flatten(layer)
        assert isinstance(jax.tree_util.tree_unflatten(treedef, leaves), nn.DecoderLayer)
        for placeholder in (None, object(), 0, True):
            assert isinstance(jax.tree_util.tree_map(lambda _, p=placeholder: p, layer), nn.DecoderLayer)
        assert isinstance(jax.tree_util.tree_unflatten(treedef, [object()] * len(leaves)), nn.DecoderLayer)

        def total(m: Any) -> jax.Array:  # reads every leaf, builds no module
            return sum((jnp.sum(leaf**2) for leaf in jax.tree_util.tree_leaves(m)), jnp.zeros(()))

        assert isinstance(jax.jit(lambda m: m)(layer), nn.DecoderLayer)
        gradient = jax.jit(jax.grad(total))(layer)
        assert isinstance(jax.grad(total)(layer), nn.DecoderLayer)
        stacked = jax.tree_util.tree_map(lambda a: jnp.stack([a, a]), layer)
        in_axes = jax.tree_util.tree_map(lambda _: 0, layer)
        doubled = jax.vmap(lambda m: jax.tree_util.tree_map(lambda a: 2 * a, m), in_axes=(in_axes,))(stacked)
        assert isinstance(doubled, nn.DecoderLayer)
        assert isinstance(jax.eval_shape(lambda m: m, layer), nn.DecoderLayer)
        optimiser = optax.masked(optax.adam(1e-3), jax.tree_util.tree_map(lambda _: True, layer))
        updates, _ = jax.jit(optimiser.update)(gradient, optimiser.init(layer), layer)
        assert isinstance(optax.apply_updates(layer, updates), nn.DecoderLayer)
        assert checks == []


def test_a_model_is_checked_when_constructed_not_when_rebuilt_around_other_leaves() -> None:
    """Built around placeholders, nothing shows and nothing is checked; a rebuild around arrays is not
    checked either (as Equinox's); constructing it from those arrays is."""

    def shapes(*shape: int) -> Any:
        return jax.ShapeDtypeStruct(shape, jnp.float64)  # type: ignore[no-untyped-call]

    weight = Vec(Vec(shapes(10, 6), Model, 6), Hidden, 10)
    template = nn.Linear(weight, Vec(shapes(9), Hidden, 9))  # placeholders: nothing to check
    rebuilt = jax.tree_util.tree_map(lambda s: jnp.zeros(s.shape, s.dtype), template)  # a rebuild: no check
    with pytest.raises(ValueError, match=r"Linear: the bias is a Vec\[Hidden\] of size 9"):
        nn.Linear(rebuilt.weight, rebuilt.bias)
