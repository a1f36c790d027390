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
"axis" strings, which come from the config. Only encoder layers (``ModelConfig.mixers`` "a":
attention, then an MLP, each with its pre-norm if ``layer_norm``) are written here; the kernel
integrals and MLP-only layers of the other mixers are refused. Nothing of ``funcformer`` is imported:
the weights arrive as nested dicts, the config as anything with ``ModelConfig``'s ``samples``,
``normalise`` and ``axis``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, Protocol, cast

import jax
import jax.numpy as jnp
import numpy as np
from jax import Array

from applicative.instances.chebyshev import gram, integral_weights, to_coefficients, to_values

Params = dict[str, Any]


class Config(Protocol):
    """What ``forward`` reads of a ``funcformer.ModelConfig``."""

    @property
    def samples(self) -> int: ...

    @property
    def normalise(self) -> str: ...

    def axis(self, layer: int) -> str: ...


def params(weights: Params, dtype: Any = jnp.float32) -> Params:
    """The generic model's weights, ``funcformer.weights(model)``, as a pytree of arrays for ``forward``;
    a ValueError if a layer is not an encoder layer (attention, then an MLP)."""
    layers = []
    for i, layer in enumerate(weights["layers"]):
        if "attention" not in layer:
            kind = "a kernel integral" if "kernel" in layer else "an MLP alone"
            raise ValueError(f"layer {i} is {kind}: the hand-written Funcformer has attention layers only (mixers 'a')")
        layers.append({name: value for name, value in layer.items() if name != "axis"})
    arrays = jax.tree_util.tree_map(lambda a: jnp.asarray(np.asarray(a, dtype)), {**weights, "layers": layers})
    return cast(Params, arrays)


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
    normalised: Array = product * jax.lax.rsqrt(var + eps)[:, None, None] + ln["beta"]
    return normalised


def _mlp(mlp: Params, h: Array, p: int) -> Array:
    hidden = _linear(mlp["hidden"], h) + mlp["hidden"]["bias"]
    out: Array = _linear(mlp["output"], _feature_map(jax.nn.relu, hidden, p)) + mlp["output"]["bias"]
    return out


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


def forward(params: Params, config: Config, f: Array) -> Array:
    """One source (N, N) -> one potential (N, N)."""
    p = config.samples

    def norm(ln: Params | None, h: Array) -> Array:
        """The layer norm of every row of h (S, N, C), or h if there is none."""
        return h if ln is None else _sequence_map(functools.partial(_layer_norm, ln, p=p), h, p)

    h = _affine(params["embed"], f[:, :, None]) + params["positions"]
    for i, layer in enumerate(params["layers"]):
        if config.axis(i) == "y":
            h = h.swapaxes(0, 1)
        norms = layer["norms"] or (None, None)
        h = h + _attention(layer["attention"], norm(norms[0], h), config.normalise, p)
        h = h + _sequence_map(functools.partial(_mlp, layer["mlp"], p=p), norm(norms[1], h), p)
        if config.axis(i) == "y":
            h = h.swapaxes(0, 1)
    h = norm(params["norm"], h)
    out: Array = _affine(params["unembed"], h)[:, :, 0]
    return out
