"""A hand-written jax.numpy encoder: the reference that bench/transformer.py times the generic one against.

The pre-norm encoder of ``applicative.nn`` (``init_encoder`` with ``outputs=None``, ``positions=None``:
an embedding, layers of multi-head softmax attention and a ReLU MLP, each with its layer norm and
residual, a final layer norm), written as one would write it by hand on batched arrays: ``einsum`` for
the heads, ``jax.nn.softmax``, ``@`` for the linear maps. ``extract`` reads its parameters from a
generic model (or from its gradient) as nested dicts of arrays. tests/applicative/test_encoder_hlo.py
compiles both and compares their kernels.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp

import applicative.nn as nn
from applicative import Vec, to_array

EPS = 1e-5
"""The layer norms' epsilon (``nn.LayerNorm``'s default)."""


# Weight extraction (once, outside the timed functions)


def arr(v: Any) -> jax.Array:
    return to_array(v) if isinstance(v, Vec) else jnp.asarray(v)


def extract(model: nn.Encoder[Any, Any, Any, Any]) -> dict[str, Any]:
    def norm(n: nn.LayerNorm[Any]) -> dict[str, jax.Array]:
        assert n.eps == EPS
        return {"gamma": arr(n.gamma), "beta": arr(n.beta)}

    layers = []
    for layer in model.layers:
        assert layer.norms is not None
        assert isinstance(layer.attention.normalise, nn.Softmax)
        assert layer.mlp.activation is jax.nn.relu
        heads = layer.attention.heads.data  # an AttentionHead whose leaves have a leading head axis
        assert isinstance(heads.score, nn.DotProduct)
        layers.append(
            {
                "ln1": norm(layer.norms[0]),
                "ln2": norm(layer.norms[1]),
                "wq": arr(heads.query.weight),  # (heads, hk, model)
                "bq": arr(heads.query.bias),  # (heads, hk)
                "wk": arr(heads.key.weight),
                "bk": arr(heads.key.bias),
                "wv": arr(heads.value.weight),
                "bv": arr(heads.value.bias),
                "wo": arr(heads.output),  # (heads, model, hv)
                "bo": arr(layer.attention.bias),  # (model,)
                "w1": arr(layer.mlp.hidden.weight),  # (hidden, model)
                "b1": arr(layer.mlp.hidden.bias),
                "w2": arr(layer.mlp.output.weight),  # (model, hidden)
                "b2": arr(layer.mlp.output.bias),
            }
        )
    assert model.embed.positions is None
    assert model.norm is not None
    assert model.unembed is None
    return {
        "embed_w": arr(model.embed.linear.weight),  # (model, inputs)
        "embed_b": arr(model.embed.linear.bias),
        "layers": layers,
        "norm": norm(model.norm),
    }


# The hand-written reference (batched over examples)


def ref_layer_norm(p: dict[str, jax.Array], x: jax.Array) -> jax.Array:
    # Centred once, sums over the features: measurably faster under grad on CPU than
    # jnp.mean(x) and jnp.mean(jnp.square(x - mean)) with x - mean written twice.
    n = x.shape[-1]
    centred = x - jnp.sum(x, axis=-1, keepdims=True) / n
    inv_std = jax.lax.rsqrt(jnp.sum(jnp.square(centred), axis=-1, keepdims=True) / n + EPS)
    return p["gamma"] * centred * inv_std + p["beta"]


def ref_attention(p: dict[str, jax.Array], x: jax.Array) -> jax.Array:
    q = jnp.einsum("bsd,hkd->bhsk", x, p["wq"]) + p["bq"][:, None, :]
    k = jnp.einsum("bsd,hkd->bhsk", x, p["wk"]) + p["bk"][:, None, :]
    v = jnp.einsum("bsd,hkd->bhsk", x, p["wv"]) + p["bv"][:, None, :]
    s = jnp.einsum("bhqk,bhsk->bhqs", q, k) / jnp.sqrt(jnp.float32(q.shape[-1]))
    a = jax.nn.softmax(s, axis=-1)
    o = jnp.einsum("bhqs,bhsv->bhqv", a, v)
    return jnp.einsum("bhqv,hdv->bqd", o, p["wo"]) + p["bo"]


def ref_mlp(p: dict[str, jax.Array], x: jax.Array) -> jax.Array:
    h = jax.nn.relu(x @ p["w1"].T + p["b1"])
    return h @ p["w2"].T + p["b2"]


def ref_forward(params: dict[str, Any], xs: jax.Array) -> jax.Array:
    h = xs @ params["embed_w"].T + params["embed_b"]
    for p in params["layers"]:
        h = h + ref_attention(p, ref_layer_norm(p["ln1"], h))
        h = h + ref_mlp(p, ref_layer_norm(p["ln2"], h))
    return ref_layer_norm(params["norm"], h)
