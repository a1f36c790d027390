"""A one-channel Funcformer as the generic ``applicative.nn`` encoder on ``Cheb[X, Cheb[Y, _]]``.

``generic(model)`` rebuilds the model's weights as Chebyshev series and runs
the transformer written once against the protocols: ``Embedding``,
``EncoderLayer`` (a layer along y sees the transposed function, Cheb[Y, Cheb[X, _]]),
``LayerNorm`` and ``Linear``. It is the specification the fast backend is
tested against, and the "generic" side of ``bench/funcformer.py``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
from jax import Array

from applicative import CoefficientSoftmax, Dim, Vec
from applicative.instances.chebyshev import Cheb
from applicative.nn import MLP, AttentionHead, DotProduct, Embedding, EncoderLayer, MultiHeadAttention, Softmax
from applicative.nn import LayerNorm as GenericLayerNorm
from applicative.nn import Linear as GenericLinear
from funcformer.model import Attention, Funcformer, Layer, LayerNorm, Linear


class X(Dim):
    """The first function axis."""


class Y(Dim):
    """The second function axis."""


class Source(Dim):
    """The input's feature axis (y, before embedding)."""


class Target(Dim):
    """The output's feature axis (y, after unembedding)."""


class Hidden(Dim):
    """The MLP's hidden function axis."""


class HeadAxis(Dim):
    """A head's query/key/value function axis."""


class Heads(Dim):
    """The heads."""


def _function(a: Array, tag: type[Dim], p: int) -> Cheb[Any, Array]:
    return Cheb(a, tag, a.shape[0], p)


def _function2(a: Array, outer: type[Dim], inner: type[Dim], p: int) -> Cheb[Any, Cheb[Any, Array]]:
    """The 2-D series with coefficient matrix a (chebval2d convention)."""
    return Cheb(Cheb(a, inner, a.shape[1], p), outer, a.shape[0], p)


def _one_channel(a: Array, what: str) -> Array:
    if any(a.shape[axis] != 1 for axis in range(1, a.ndim, 2)):
        raise ValueError(f"funcformer.generic: {what} has channels {a.shape[1::2]}; the generic model has one")
    return a[(slice(None), 0) * (a.ndim // 2)]


def _positions(model: Funcformer) -> Array:
    if model.positions.shape[2] != 1:
        raise ValueError(f"funcformer.generic: the model has {model.positions.shape[2]} channels; the generic has one")
    return model.positions[:, :, 0]


def _linear(linear: Linear, out: type[Dim], into: type[Dim], p: int) -> GenericLinear[Any, Any]:
    bias = None if linear.bias is None else _function(_one_channel(linear.bias, "a bias"), out, p)
    return GenericLinear(_function2(_one_channel(linear.weight, "a weight"), out, into, p), bias)


def _layer_norm(norm: LayerNorm, feature: type[Dim], p: int) -> GenericLayerNorm[Any]:
    gamma, beta = (_function(_one_channel(a, "a layer norm"), feature, p) for a in (norm.gamma, norm.beta))
    return GenericLayerNorm(gamma, beta, norm.eps)


def _attention(
    attention: Attention, feature: type[Dim], normalise: str, p: int
) -> MultiHeadAttention[Any, Any, Any, Any, Any]:
    def head(i: int) -> AttentionHead[Any, Any, Any, Any]:
        q, k, v = (
            jax.tree_util.tree_map(lambda a: a[i], lin) for lin in (attention.query, attention.key, attention.value)
        )
        return AttentionHead(
            _linear(q, HeadAxis, feature, p),
            _linear(k, HeadAxis, feature, p),
            _linear(v, HeadAxis, feature, p),
            _function2(_one_channel(attention.output[i], "an output projection"), feature, HeadAxis, p),
            DotProduct(),
        )

    heads = [head(i) for i in range(attention.output.shape[0])]
    stacked = jax.tree_util.tree_map(lambda *leaves: jnp.stack(leaves), *heads)
    norm = CoefficientSoftmax() if normalise == "coefficients" else Softmax()
    return MultiHeadAttention(
        Vec.stack(stacked, Heads), _function(_one_channel(attention.bias, "a bias"), feature, p), norm
    )


def _layer(layer: Layer, feature: type[Dim], normalise: str, p: int) -> EncoderLayer[Any, Any, Any, Any]:
    mlp = MLP(_linear(layer.mlp.hidden, Hidden, feature, p), _linear(layer.mlp.output, feature, Hidden, p), jax.nn.relu)
    norms = None if layer.norms is None else tuple(_layer_norm(n, feature, p) for n in layer.norms)
    return EncoderLayer(_attention(layer.attention, feature, normalise, p), mlp, norms)  # type: ignore[arg-type]


def _transpose(h: Any, outer: type[Dim], inner: type[Dim], p: int) -> Cheb[Any, Cheb[Any, Array]]:
    """The function (x, y) -> h(y, x): its coefficient matrix transposed."""
    return _function2(h.to_array().T, outer, inner, p)


def generic(model: Funcformer) -> Callable[[Array], Array]:
    """The generic encoder with ``model``'s weights: source coefficients (N, N) -> potential (N, N)."""
    config = model.config
    p = config.samples
    embed = Embedding(_linear(model.embed, Y, Source, p), _function2(_positions(model), X, Y, p), True)
    layers = [
        (config.axis(i), _layer(layer, X if config.axis(i) == "y" else Y, config.normalise, p))
        for i, layer in enumerate(model.layers)
    ]
    norm = None if model.norm is None else _layer_norm(model.norm, Y, p)
    unembed = _linear(model.unembed, Target, Y, p)

    def run(f: Array) -> Array:
        h: Any = embed(_function2(f, X, Source, p))
        for axis, layer in layers:
            h = _transpose(layer(_transpose(h, Y, X, p)), X, Y, p) if axis == "y" else layer(h)
        if norm is not None:
            h = h.fmap(norm)
        return h.fmap(unembed).to_array()  # type: ignore[no-any-return]

    return run
