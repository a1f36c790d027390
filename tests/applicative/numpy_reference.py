"""An independent float64 numpy transformer, fed the weights of the generic models.

Written from the textbook definitions (Vaswani et al.; pre-norm layers),
with weights indexed [out, in] and heads stacked on a leading axis. It reads
only weights and the choice of score and normalisation from the model: every
hyperparameter (LayerNorm's eps, the sqrt(d_k) scalings) is its own literal, so
a changed constant in the library is a mismatch, not a shared mistake.
"""

from __future__ import annotations

from typing import Any

import jax
import numpy as np
from numpy.typing import NDArray

from applicative import Dense, nn, to_array

F64 = NDArray[np.float64]
"""An activation, a state or a weight: the reference computes in float64 throughout."""
Mask = NDArray[np.bool_]
"""mask[i, j]: query i may attend to key j."""
EPS = 1e-5
"""LayerNorm's eps, the library's documented default (``nn.LayerNorm.init``)."""


def arr(x: Any) -> F64:
    """The float64 array of a Vec (of Vecs) or of an array."""
    return np.asarray(to_array(x) if isinstance(x, Dense) else x, np.float64)


def linear(layer: nn.Linear[Any, Any], x: F64) -> F64:
    """x W^T + b, row by row."""
    y = x @ arr(layer.weight).swapaxes(-1, -2)
    return y if layer.bias is None else y + arr(layer.bias)


def normalise(kind: object, s: F64, mask: Mask | None, d_k: int) -> F64:
    if (own := getattr(kind, "numpy", None)) is not None:  # a user's normalisation brings its reference
        result: F64 = own(s, mask, d_k)
        return result
    keep = np.ones_like(s, bool) if mask is None else mask
    if isinstance(kind, nn.ReluAttention):
        relu: F64 = np.where(keep, np.maximum(s / np.sqrt(d_k), 0.0), 0.0) / s.shape[-1]
        return relu
    z = np.where(keep, s / np.sqrt(d_k) if isinstance(kind, nn.Softmax) else s, -np.inf)
    e = np.exp(z - np.max(np.where(keep, z, -1e300), axis=-1, keepdims=True))
    e = np.where(keep, e, 0.0)
    total = e.sum(axis=-1, keepdims=True)
    p = e / np.where(total > 0, total, 1.0)
    return p / np.sqrt(d_k) if isinstance(kind, nn.ReferenceSoftmax) else p


def scores(score: object, q: F64, k: F64) -> F64:
    if (own := getattr(score, "numpy", None)) is not None:  # a user's score brings its reference
        result: F64 = own(q, k)
        return result
    if isinstance(score, nn.Multiplicative):
        return q @ arr(score.weight) @ k.T
    if isinstance(score, nn.Additive):
        keys = k @ arr(score.keys.weight).T
        queries = q @ arr(score.queries.weight).T + arr(score.queries.bias)
        return np.tanh(queries[:, None, :] + keys[None, :, :]) @ arr(score.u)
    return q @ k.T


def attention(q: F64, k: F64, v: F64, score: object, kind: object, mask: Mask | None) -> F64:
    return normalise(kind, scores(score, q, k), mask, q.shape[-1]) @ v


def head(heads: Any, h: int) -> Any:
    """The h-th head of a stacked structure of heads, with numpy leaves."""
    return jax.tree_util.tree_map(lambda leaf: np.asarray(leaf)[h], heads.data)


def multi_head(mha: nn.MultiHeadAttention[Any, Any, Any, Any, Any], x: F64, source: F64,
               mask: Mask | None) -> F64:  # fmt: skip
    out = np.zeros((x.shape[0], arr(mha.bias).shape[0]))
    for h in range(mha.heads.size):  # type: ignore[attr-defined]
        p = head(mha.heads, h)
        o = attention(linear(p.query, x), linear(p.key, source), linear(p.value, source), p.score, mha.normalise, mask)
        out += o @ arr(p.output).T
    return out + arr(mha.bias)


def layer_norm(norm: nn.LayerNorm[Any] | None, x: F64) -> F64:
    if norm is None:
        return x
    mean: F64 = x.mean(axis=-1, keepdims=True)
    var: F64 = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
    return arr(norm.gamma) * (x - mean) / np.sqrt(var + EPS) + arr(norm.beta)


def mlp(m: nn.MLP[Any, Any], x: F64, activation: Any = lambda a: np.maximum(a, 0.0)) -> F64:
    return linear(m.output, activation(linear(m.hidden, x)))


def encoder_layer(layer: nn.EncoderLayer[Any, Any, Any, Any], x: F64, mask: Mask | None = None,
                  activation: Any = lambda a: np.maximum(a, 0.0)) -> F64:  # fmt: skip
    n1, n2 = layer.norms if layer.norms is not None else (None, None)
    h = layer_norm(n1, x)
    x = x + multi_head(layer.attention, h, h, mask)
    return x + mlp(layer.mlp, layer_norm(n2, x), activation)


def decoder_layer(layer: nn.DecoderLayer[Any, Any, Any, Any, Any], x: F64, mask: Mask,
                  memory: F64 | None, memory_mask: Mask | None) -> F64:  # fmt: skip
    n1, n2, n3 = layer.norms if layer.norms is not None else (None, None, None)
    h = layer_norm(n1, x)
    x = x + multi_head(layer.attention, h, h, mask)
    if layer.cross is not None:
        assert memory is not None, "a layer with cross attention attends to the encoder's states"
        x = x + multi_head(layer.cross, layer_norm(n2, x), memory, memory_mask)
    return x + mlp(layer.mlp, layer_norm(n3, x))


def embed(e: nn.Embedding[Any, Any, Any], x: F64) -> F64:
    y = linear(e.linear, x)
    return y if e.positions is None else y + arr(e.positions)


def encode(enc: nn.Encoder[Any, Any, Any, Any], x: F64, mask: Mask | None = None) -> F64:
    h = embed(enc.embed, x)
    for layer in enc.layers:
        assert isinstance(layer, nn.EncoderLayer), f"the reference computes EncoderLayers, not {type(layer)}"
        h = encoder_layer(layer, h, mask)
    return layer_norm(enc.norm, h)


def decoder(dec: nn.Decoder[Any, Any, Any, Any, Any], x: F64, mask: Mask,
            memory: F64 | None = None, memory_mask: Mask | None = None) -> F64:  # fmt: skip
    h = embed(dec.embed, x)
    for layer in dec.layers:
        assert isinstance(layer, nn.DecoderLayer), f"the reference computes DecoderLayers, not {type(layer)}"
        h = decoder_layer(layer, h, mask, memory, memory_mask)
    return linear(dec.unembed, layer_norm(dec.norm, h))
