"""A hand-written jax.numpy Funcformer: the reference that bench/funcformer.py times the library against.

The same model as ``funcformer.Funcformer`` (the generic encoder), written
directly on coefficient arrays, as the library's own backend was before the
Funcformer became the generic encoder. A state is an (N, N, C) array H, C
channels of h_c(x, y) = sum H[i, j, c] T_i(x) T_j(y); a layer runs along axis
0 (a "y" layer transposes first). With G the exact Gram matrix:

    linear      W (G h) + b, G folded into W (one matmul per call); b lands on T_0 of the sequence
    attention   normalise(Q G K^T / sqrt(d_k)) G V, heads stacked and vmapped
    nonlinear   sample at P Chebyshev points, apply, transform back (the DCTs as matrices)

Parameters are ``funcformer.weights(model)`` as JAX arrays, minus the layers'
"axis" strings, which come from the config.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
from jax import Array

from applicative.instances.chebyshev import gram, integral_weights, to_coefficients, to_values
from funcformer import Funcformer, ModelConfig, weights

Params = dict[str, Any]


def params(model: Funcformer, dtype: Any = jnp.float32) -> Params:
    """The generic model's weights as a pytree of arrays for ``forward``."""
    w = weights(model)
    for layer in w["layers"]:
        del layer["axis"]
    return jax.tree_util.tree_map(lambda a: jnp.asarray(a, dtype), w)


def _linear(lin: Params, h: Array) -> Array:
    """W (G h) on features (..., N_in, C_in) -> (..., N_out, C_out), no bias."""
    weight = lin["weight"]
    g = jnp.asarray(gram(weight.shape[2]), h.dtype)
    return jnp.einsum("ocid,...id->...oc", jnp.einsum("ocjd,ji->ocid", weight, g), h)


def _affine(lin: Params, h: Array) -> Array:
    """The linear map of a sequence h (S, N, C) in coefficients: the constant bias is the T_0 coefficient."""
    return _linear(lin, h).at[0].add(lin["bias"])


def _feature_map(f: Callable[[Array], Array], h: Array, p: int) -> Array:
    return to_coefficients(f(to_values(h, p, axis=1)), h.shape[1], axis=1)


def _sequence_map(f: Callable[[Array], Array], h: Array, p: int) -> Array:
    return to_coefficients(f(to_values(h, p, axis=0)), h.shape[0], axis=0)


def _layer_norm(ln: Params, h: Array, p: int, eps: float = 1e-5) -> Array:
    """Rows h (S, N, C): gamma (h - mean) / sqrt(var + eps) + beta, moments over y and the channels."""
    w = jnp.asarray(integral_weights(h.shape[1]), h.dtype)[:, None]
    measure = 2.0 * h.shape[2]
    mean = jnp.sum(w * h, axis=(1, 2)) / measure
    centred = h.at[:, 0].add(-mean[:, None])
    var = jnp.sum(w * _feature_map(jnp.square, centred, p), axis=(1, 2)) / measure
    product = to_coefficients(to_values(ln["gamma"], p, axis=0) * to_values(centred, p, axis=1), h.shape[1], axis=1)
    return product * jax.lax.rsqrt(var + eps)[:, None, None] + ln["beta"]


def _mlp(mlp: Params, h: Array, p: int) -> Array:
    hidden = _linear(mlp["hidden"], h) + mlp["hidden"]["bias"]
    return _linear(mlp["output"], _feature_map(jax.nn.relu, hidden, p)) + mlp["output"]["bias"]


def _normalise(scores: Array, how: str, p: int) -> Array:
    n = scores.shape[0]
    rows = to_values(scores, p, axis=0)  # the score functions at P query points
    if how == "coefficients":
        weights = jax.nn.softmax(rows, axis=1)
    else:
        values = to_values(rows, p, axis=1)
        shift = jax.lax.stop_gradient(jnp.max(values, axis=1, keepdims=True))
        e = to_coefficients(jnp.exp(values - shift), n, axis=1)
        weights = e / (e @ jnp.asarray(integral_weights(n), e.dtype))[:, None]
    return to_coefficients(weights, n, axis=0)


def _attention(att: Params, h: Array, how: str, p: int) -> Array:
    g = jnp.asarray(gram(h.shape[0]), h.dtype)

    def head(query: Params, key: Params, value: Params) -> Array:
        q, k, v = _affine(query, h), _affine(key, h), _affine(value, h)
        scores = jnp.einsum("aic,ij,bjc->ab", q, jnp.asarray(gram(q.shape[1]), h.dtype), k)
        weights = _normalise(scores / jnp.sqrt(2.0 * q.shape[2]), how, p)
        return jnp.einsum("ab,bc,cjd->ajd", weights, g, v)

    attended = jax.vmap(head)(att["query"], att["key"], att["value"])
    out = jax.vmap(lambda w, o: _linear({"weight": w}, o))(att["output"], attended).sum(axis=0)
    return out.at[0].add(att["bias"])


def forward(params: Params, config: ModelConfig, f: Array) -> Array:
    """One source (N, N) -> one potential (N, N)."""
    p = config.samples
    h = _affine(params["embed"], f[:, :, None]) + params["positions"]
    for i, layer in enumerate(params["layers"]):
        if config.axis(i) == "y":
            h = h.swapaxes(0, 1)
        norms = layer["norms"] or (None, None)
        x = h if norms[0] is None else _sequence_map(lambda r, ln=norms[0]: _layer_norm(ln, r, p), h, p)
        h = h + _attention(layer["attention"], x, config.normalise, p)
        x = h if norms[1] is None else _sequence_map(lambda r, ln=norms[1]: _layer_norm(ln, r, p), h, p)
        h = h + _sequence_map(lambda r, mlp=layer["mlp"]: _mlp(mlp, r, p), x, p)
        if config.axis(i) == "y":
            h = h.swapaxes(0, 1)
    if params["norm"] is not None:
        h = _sequence_map(lambda r: _layer_norm(params["norm"], r, p), h, p)
    return _affine(params["unembed"], h)[:, :, 0]
