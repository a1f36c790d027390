"""The Funcformer: the generic encoder on ``Cheb∘Cheb``, written on coefficient arrays.

A state is an (N, N, C) array H, C channels of functions of two variables,
h_c(x, y) = sum H[i, j, c] T_i(x) T_j(y). Each layer runs along one axis, the
"sequence"; the other function axis and the channels are the features. With
G the exact Chebyshev Gram matrix (``applicative.instances.chebyshev.gram``):

    linear      W (G h) + b: the integral over the feature axis (``mul_mv``); b lands on T_0 of the sequence axis
    attention   weights = normalise(Q G K^T / sqrt(d_k)),  output = weights G V   (``mul_mmt``, ``mul_mm``)
    nonlinear   a map f of the values (ReLU, exp, a square) samples P >= 2N Chebyshev points, applies f and
                transforms back (DCT): ``fmap``. A layer norm or an MLP is nonlinear along the sequence
                axis too, so it runs on the sequence's P sample points: a 2-D DCT on an oversampled grid.

Every step is the one the generic ``applicative.nn`` encoder takes on
``Cheb[X, Cheb[Y, _]]`` (``fmap`` of a nonlinear map over the sequence
samples it; ``mul_mm`` integrates exactly), so a one-channel Funcformer equals
it with the same weights (``funcformer.generic``; tests/test_funcformer.py,
float64); channels extend each feature function to C of them (the Vec of
channels composed with the function axes), checked against a numpy reference.
One deliberate difference, at rounding level: the value softmax subtracts the
largest sampled score before ``exp`` (the generic code, the largest coefficient).

Normalisations: ``"values"``, exp(s) / integral exp(s) over the keys (``applicative.nn.Softmax``),
and ``"coefficients"``, softmax over each score row's coefficients (the reference's,
``applicative.CoefficientSoftmax``). Layers alternate between the axes listed in
``Config.axes``: "x" attends along x only, "xy" alternates x and y.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

import jax
import jax.numpy as jnp
import numpy as np
from jax import Array

from applicative.instances.chebyshev import gram, integral_weights, to_coefficients, to_values
from applicative.nn import module, static

Normalise = Literal["values", "coefficients"]


@dataclass(frozen=True)
class Config:
    """The shape of a Funcformer (hashable: it is static metadata of the model)."""

    n: int = 16
    """Chebyshev coefficients per axis."""
    channels: int = 8
    heads: int = 4
    head_channels: int = 4
    """Channels of a head's queries, keys and values (each a function of the feature axis)."""
    hidden_channels: int = 16
    """Channels of the MLP's hidden layer."""
    layers: int = 4
    axes: str = "xy"
    """Attention axis of successive layers, cycled: "x" (all along x), "xy" (alternating)."""
    normalise: Normalise = "values"
    layer_norm: bool = False
    """Pre-norm layer normalisation (on the Poisson task it added 44% to a step and did worse)."""
    points: int = 0
    """Chebyshev points sampled for nonlinear maps (0: 2n)."""

    def __post_init__(self) -> None:
        for name in ("n", "channels", "heads", "head_channels", "hidden_channels", "layers"):
            if getattr(self, name) < 1:
                raise ValueError(f"Config.{name} must be positive, got {getattr(self, name)}")
        if not self.axes or set(self.axes) - {"x", "y"}:
            raise ValueError(f"Config.axes must be a string of 'x' and 'y', got {self.axes!r}")
        if self.normalise not in ("values", "coefficients"):
            raise ValueError(f"Config.normalise must be 'values' or 'coefficients', got {self.normalise!r}")
        if self.points and self.points < self.n:
            raise ValueError(f"Config.points = {self.points} cannot resolve n = {self.n} coefficients")

    @property
    def samples(self) -> int:
        """P, the Chebyshev points sampled for a nonlinear map."""
        return self.points or 2 * self.n

    def axis(self, layer: int) -> str:
        """The attention axis of a layer."""
        return self.axes[layer % len(self.axes)]


# Parameters: frozen pytree dataclasses of coefficient arrays.


@module
class Linear:
    """W (G h) + b on features (..., N_in, C_in) -> (..., N_out, C_out); ``weight`` is (N_out, C_out, N_in, C_in)."""

    weight: Array
    bias: Array | None

    def __call__(self, h: Array) -> Array:
        g = jnp.asarray(gram(self.weight.shape[2]), h.dtype)
        weighted = jnp.einsum("ocjd,ji->ocid", self.weight, g)  # fold G into W: one matmul per call
        return jnp.einsum("ocid,...id->...oc", weighted, h)


def _affine(linear: Linear, h: Array) -> Array:
    """linear(h) for a sequence h (S, N, C) in coefficients: the constant bias is the T_0 coefficient."""
    out = linear(h)
    return out if linear.bias is None else out.at[0].add(linear.bias)


@module
class LayerNorm:
    """gamma (h - mean) / sqrt(var + eps) + beta over the features of each point (gamma, beta: (N, C) functions)."""

    gamma: Array
    beta: Array
    eps: float = static(default=1e-5)

    def __call__(self, h: Array, p: int) -> Array:
        """h: (S, N, C) rows of feature functions (S sample points of the sequence axis)."""
        w = jnp.asarray(integral_weights(h.shape[1]), h.dtype)[:, None]
        measure = 2.0 * h.shape[2]  # integral of 1 over [-1, 1], times the channels
        mean = jnp.sum(w * h, axis=(1, 2)) / measure
        centred = h.at[:, 0].add(-mean[:, None])
        var = jnp.sum(w * _feature_map(jnp.square, centred, p), axis=(1, 2)) / measure
        inv_std = jax.lax.rsqrt(var + self.eps)[:, None, None]
        scaled = _feature_map2(lambda g, a: g * a, self.gamma, centred, p) * inv_std
        return scaled + self.beta


@module
class MLP:
    """W2 relu(W1 h + b1) + b2, relu on the values of the hidden functions."""

    hidden: Linear
    output: Linear

    def __call__(self, h: Array, p: int) -> Array:
        """h: (S, N, C) rows; the biases are functions of the feature axis, added at every point."""
        hidden = self.hidden(h) + _bias(self.hidden)
        return self.output(_feature_map(jax.nn.relu, hidden, p)) + _bias(self.output)


def _bias(linear: Linear) -> Array | float:
    return 0.0 if linear.bias is None else linear.bias


@module
class Attention:
    """Multi-head self-attention along the sequence axis; heads stacked on a leading axis of every leaf."""

    query: Linear
    key: Linear
    value: Linear
    output: Array
    """(heads, N, C, N, C_head): each head's projection back to the model features (no bias)."""
    bias: Array

    def __call__(self, h: Array, normalise: Normalise, p: int) -> Array:
        """h: (N, N, C) in coefficients along the sequence (axis 0)."""
        g = jnp.asarray(gram(h.shape[0]), h.dtype)

        def head(query: Linear, key: Linear, value: Linear) -> Array:
            q, k, v = _affine(query, h), _affine(key, h), _affine(value, h)
            scores = jnp.einsum("aic,ij,bjc->ab", q, jnp.asarray(gram(q.shape[1]), h.dtype), k)
            d_k = 2.0 * q.shape[2]  # the measure of a head's features
            weights = _normalise(scores / jnp.sqrt(d_k), normalise, p)
            return jnp.einsum("ab,bc,cjd->ajd", weights, g, v)

        attended = jax.vmap(head)(self.query, self.key, self.value)
        out = jax.vmap(lambda w, o: Linear(w, None)(o))(self.output, attended).sum(axis=0)
        return out.at[0].add(self.bias)


def _normalise(scores: Array, normalise: Normalise, p: int) -> Array:
    """Each query's row of scores (a function of the key) normalised; nonlinear in the query, so sampled there."""
    n = scores.shape[0]
    rows = to_values(scores, p, axis=0)  # (P, N): the score functions at P query points
    if normalise == "coefficients":
        weights = jax.nn.softmax(rows, axis=1)
    else:
        # exp(s - c) / integral exp(s - c) for any constant c; the generic code subtracts the largest
        # coefficient, which does not bound the values (float32 exp overflows at 88): take the largest value.
        values = to_values(rows, p, axis=1)
        shift = jax.lax.stop_gradient(jnp.max(values, axis=1, keepdims=True))
        e = to_coefficients(jnp.exp(values - shift), n, axis=1)
        weights = e / (e @ jnp.asarray(integral_weights(n), e.dtype))[:, None]
    return to_coefficients(weights, n, axis=0)


def _feature_map(f: Callable[[Array], Array], h: Array, p: int) -> Array:
    """fmap f over the feature functions of rows h (S, N, C): sample P points, apply, transform back."""
    return to_coefficients(f(to_values(h, p, axis=1)), h.shape[1], axis=1)


def _feature_map2(f: Callable[[Array, Array], Array], a: Array, b: Array, p: int) -> Array:
    """lift_a2 f of a feature function a (N, C) and rows b (S, N, C): both sampled at P points."""
    return to_coefficients(f(to_values(a, p, axis=0), to_values(b, p, axis=1)), b.shape[1], axis=1)


def _sequence_map(f: Callable[[Array], Array], h: Array, p: int) -> Array:
    """fmap f over the sequence axis of h (N, N, C): f sees the rows at P sample points."""
    return to_coefficients(f(to_values(h, p, axis=0)), h.shape[0], axis=0)


@module
class Layer:
    """x <- x + attention(norm x);  x <- x + fmap mlp (norm x), along ``axis``."""

    attention: Attention
    mlp: MLP
    norms: tuple[LayerNorm, LayerNorm] | None

    def __call__(self, h: Array, config: Config, axis: str) -> Array:
        p = config.samples
        if axis == "y":
            h = h.swapaxes(0, 1)
        n1, n2 = self.norms if self.norms is not None else (None, None)
        x = h if n1 is None else _sequence_map(lambda rows: n1(rows, p), h, p)
        h = h + self.attention(x, config.normalise, p)
        x = h if n2 is None else _sequence_map(lambda rows: n2(rows, p), h, p)
        h = h + _sequence_map(lambda rows: self.mlp(rows, p), x, p)
        return h.swapaxes(0, 1) if axis == "y" else h


@module
class Funcformer:
    """source f (N, N) -> potential (N, N): embed (a linear map of each row, plus learned
    positions), layers, norm, unembed, all in Chebyshev coefficients."""

    embed: Linear
    positions: Array
    layers: tuple[Layer, ...]
    norm: LayerNorm | None
    unembed: Linear
    config: Config = static()

    def __call__(self, f: Array) -> Array:
        """One source (N, N) -> one potential (N, N); ``jax.vmap`` it for a batch."""
        n = self.config.n
        if f.shape != (n, n):
            raise ValueError(f"Funcformer: expected source coefficients of shape ({n}, {n}), got {f.shape}")
        h = _affine(self.embed, f[:, :, None]) + self.positions
        for i, layer in enumerate(self.layers):
            h = layer(h, self.config, self.config.axis(i))
        p = self.config.samples
        if self.norm is not None:
            norm = self.norm
            h = _sequence_map(lambda rows: norm(rows, p), h, p)
        return _affine(self.unembed, h)[:, :, 0]


def parameter_count(model: Funcformer) -> int:
    """The number of trained scalars."""
    return sum(int(np.prod(leaf.shape)) for leaf in jax.tree_util.tree_leaves(model))


def init(seed: int, config: Config, dtype: type = np.float32) -> Funcformer:
    """A Funcformer with N(0, 1 / fan-in) weights (fan-in counts coefficients times channels),
    the projections into the residual stream scaled by 1 / sqrt(2 layers), zero biases,
    layer norms at the identity and small random positions. Drawn with numpy (deterministic
    in ``seed``; no compile)."""
    rng = np.random.default_rng(seed)
    n, c, ck, ch = config.n, config.channels, config.head_channels, config.hidden_channels
    residual = 1.0 / np.sqrt(2.0 * config.layers)

    def weight(*shape: int, scale: float = 1.0) -> Array:
        fan_in = shape[-1] * shape[-2]
        return jnp.asarray(rng.standard_normal(shape) * scale / np.sqrt(fan_in), dtype)

    def linear(out_channels: int, in_channels: int, scale: float = 1.0, bias: bool = True) -> Linear:
        b = jnp.zeros((n, out_channels), dtype) if bias else None
        return Linear(weight(n, out_channels, n, in_channels, scale=scale), b)

    def heads(out_channels: int, bias: bool) -> Linear:
        w = jnp.stack([linear(out_channels, c).weight for _ in range(config.heads)])
        return Linear(w, jnp.zeros((config.heads, n, out_channels), dtype) if bias else None)

    def layer_norm() -> LayerNorm:
        gamma = np.zeros((n, c))
        gamma[0] = 1.0  # the constant function 1
        return LayerNorm(jnp.asarray(gamma, dtype), jnp.zeros((n, c), dtype))

    def layer() -> Layer:
        attention = Attention(
            heads(ck, True),
            heads(ck, True),
            heads(ck, True),
            jnp.stack([weight(n, c, n, ck, scale=residual / np.sqrt(config.heads)) for _ in range(config.heads)]),
            jnp.zeros((n, c), dtype),
        )
        mlp = MLP(linear(ch, c), linear(c, ch, scale=residual))
        norms = (layer_norm(), layer_norm()) if config.layer_norm else None
        return Layer(attention, mlp, norms)

    return Funcformer(
        embed=linear(c, 1),
        positions=jnp.asarray(rng.standard_normal((n, n, c)) / n, dtype),
        layers=tuple(layer() for _ in range(config.layers)),
        norm=layer_norm() if config.layer_norm else None,
        unembed=linear(1, c),
        config=config,
    )
