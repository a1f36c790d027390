"""The Funcformer: ``applicative.nn``'s encoder instantiated on functions of two variables with channels.

A state is C channels of functions h_c(x, y) = sum H[i, j, c] T_i(x) T_j(y),
held as the generic structure

    Cheb[X, Compose[ChebOf[Y], VecOf[Channel], Array]]     (coefficients H of shape (N, N, C))

a function of x, the sequence, whose values are functions of y with C
channels, the features. The Funcformer is ``nn.Encoder`` on it, with no
forward pass of its own: linear maps are integrals against the exact Gram
matrix (``mul_mmt``, one contraction of coefficients), attention is
normalise(Q G K^T / sqrt(d_k)) G V, and ReLU and ``exp`` sample the
functions at P >= 2N Chebyshev points and transform back (``fmap``). A layer
along y (``Config.axes``) sees the same function the other way round,
Cheb[Y, Compose[ChebOf[X], VecOf[Channel], _]] (``AlongY``: the coefficient
array's first two axes swapped). A layer may instead be a learned kernel integral along its axis
(``nn.KernelIntegral``, ``Config.mixers``), linear mixing of the sequence.

The source f(x, y), an (N, N) coefficient array, is a ``Cheb[X, Cheb[Y, _]]``;
it is embedded by a linear map of its y-functions into the channels, plus
learned positions, and the final states are unembedded back to one function
of y at every x. tests/test_funcformer.py checks the model against an
independent float64 numpy implementation (tests/funcformer_reference.py).

Normalisations: ``"values"``, exp(s) / integral exp(s) over the keys (``nn.Softmax``), and
``"coefficients"``, softmax over each score row's coefficients (the reference text's,
``nn.CoefficientSoftmax``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal, TypeAlias, TypeVar, cast

import jax
import jax.numpy as jnp
import numpy as np
from jax import Array
from jax.typing import ArrayLike

from applicative import Cheb, ChebOf, Compose, ComposeOf, Dim, Vec, VecOf, as_vec, record, static, to_array
from applicative.nn import (
    MLP,
    AttentionHead,
    CoefficientSoftmax,
    DotProduct,
    Embedding,
    Encoder,
    EncoderLayer,
    FeedForward,
    KernelHead,
    KernelIntegral,
    Layer,
    LayerNorm,
    Linear,
    Matrix,
    MultiHeadAttention,
    Normalisation,
    Softmax,
)
from funcformer._fields import check_fields

__all__ = [
    "AlongY",
    "Channel",
    "Config",
    "Funcformer",
    "Head",
    "HeadChannel",
    "HiddenChannel",
    "Normalise",
    "X",
    "Y",
    "init",
    "parameter_count",
    "transpose",
    "weights",
]

Normalise = Literal["values", "coefficients"]


class X(Dim):
    """The first function axis."""


class Y(Dim):
    """The second function axis."""


class Channel(Dim):
    """The model's channels."""


class HeadChannel(Dim):
    """The channels of a head's queries, keys and values."""


class HiddenChannel(Dim):
    """The channels of the MLP's hidden layer."""


class Head(Dim):
    """The heads of an attention layer."""


P = TypeVar("P", bound=Dim)  # the sequence axis of a layer
Q = TypeVar("Q", bound=Dim)  # the function axis of its features
K = TypeVar("K", bound=Dim)  # channel tags
L = TypeVar("L", bound=Dim)
T = TypeVar("T")

Channels: TypeAlias = ComposeOf[ChebOf[Q], VecOf[K]]
"""Channels K of functions of Q (a brand)."""
Features: TypeAlias = Channels[Q, Channel]
"""The features of a layer along P: the model's channels of functions of the other axis Q."""
State: TypeAlias = Matrix[ChebOf[P], Features[Q]]
"""C channels of functions of (P, Q), P the sequence."""
AxisLayer: TypeAlias = EncoderLayer[VecOf[Head], Features[Q], Channels[Q, HeadChannel], Channels[Q, HiddenChannel]]
"""An encoder layer whose features are functions of Q."""
KernelLayer: TypeAlias = KernelIntegral[VecOf[Head], ChebOf[P], Features[Q], Channels[Q, HeadChannel]]
"""A kernel integral along P whose features are functions of Q."""
FeedForwardLayer: TypeAlias = FeedForward[Features[Q], Channels[Q, HiddenChannel]]
"""An MLP on each position, whose features are functions of Q."""


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
    """Pre-norm layer normalisation (on the Poisson task it added 47% to a step and did worse)."""
    points: int = 0
    """Chebyshev points sampled for nonlinear maps (0: 2n)."""
    mixers: str = "a"
    """The mixing of successive layers, cycled: "a" attention (an encoder layer), "k" a learned kernel
    integral along the layer's axis (``nn.KernelIntegral``, linear), "m" an MLP on each position of the
    layer's axis (``nn.FeedForward``: its linear maps act on the functions of the other axis)."""

    def __post_init__(self) -> None:
        check_fields(self)
        for name in ("n", "channels", "heads", "head_channels", "hidden_channels", "layers"):
            if getattr(self, name) < 1:
                raise ValueError(f"Config.{name} must be positive, got {getattr(self, name)}")
        if not self.axes or set(self.axes) - {"x", "y"}:
            raise ValueError(f"Config.axes must be a string of 'x' and 'y', got {self.axes!r}")
        if self.normalise not in ("values", "coefficients"):
            raise ValueError(f"Config.normalise must be 'values' or 'coefficients', got {self.normalise!r}")
        if not self.mixers or set(self.mixers) - {"a", "k", "m"}:
            raise ValueError(f"Config.mixers must be a string of 'a', 'k' and 'm', got {self.mixers!r}")
        if self.points and self.points < self.n:
            raise ValueError(f"Config.points = {self.points} cannot resolve n = {self.n} coefficients")

    @property
    def samples(self) -> int:
        """P, the Chebyshev points sampled for a nonlinear map."""
        return self.points or 2 * self.n

    def axis(self, layer: int) -> str:
        """The attention axis of a layer."""
        return self.axes[layer % len(self.axes)]

    def mixer(self, layer: int) -> str:
        """The mixing of a layer: "a" attention, "k" a kernel integral, "m" an MLP."""
        return self.mixers[layer % len(self.mixers)]


def transpose(h: State[P, Q]) -> State[Q, P]:
    """The same functions with the other axis as the sequence: h(x, y) seen as a function of y
    (its coefficient array's first two axes swapped)."""
    if not (isinstance(h, Cheb) and isinstance(h.data, Compose) and isinstance(h.data.outer, Cheb)):
        raise TypeError(f"transpose: expected a Cheb of Compose(Cheb, Vec), got {type(h).__name__}")
    inner = h.data.outer
    swapped = inner.data.with_elements(jnp.swapaxes(to_array(h), 0, 1))
    return inner.with_elements(Compose(h.with_elements(swapped)))


@record
class AlongY:
    """An encoder layer along the second axis: attends over y, with x and the channels as features."""

    layer: AxisLayer[X] | KernelLayer[Y, X] | FeedForwardLayer[X]

    def __call__(self, h: State[X, Y], mask: Matrix[ChebOf[X], ChebOf[X]] | None = None, /) -> State[X, Y]:
        if mask is not None:
            raise ValueError("AlongY: the Funcformer's layers take no mask")
        return transpose(self.layer(transpose(h)))


@record
class Funcformer:
    """source f (N, N) -> potential (N, N), Chebyshev coefficients in the ``chebval2d`` convention:
    ``encoder`` is the generic ``nn.Encoder`` on ``Cheb[X, Compose[ChebOf[Y], VecOf[Channel], _]]``."""

    encoder: Encoder[ChebOf[X], ChebOf[Y], Features[Y], ChebOf[Y]]
    config: Config = static()

    def __call__(self, f: ArrayLike) -> Array:
        """One source (N, N) -> one potential (N, N); ``jax.vmap`` it for a batch."""
        n = self.config.n
        if jnp.shape(f) != (n, n):
            raise ValueError(f"Funcformer: expected source coefficients of shape ({n}, {n}), got {jnp.shape(f)}")
        return to_array(self.encoder(Cheb.from_array(f, X, Y, points=self.config.samples)))


def parameter_count(model: Funcformer) -> int:
    """The number of trained scalars."""
    return sum(int(np.prod(leaf.shape)) for leaf in jax.tree_util.tree_leaves(model))


def init(seed: int, config: Config, dtype: type = np.float32) -> Funcformer:
    """A Funcformer with N(0, 1 / fan-in) weights (fan-in counts coefficients times channels in),
    the projections into the residual stream scaled by 1 / sqrt(2 layers) (a head's output, summed
    over the heads, also by 1 / sqrt(heads)), a kernel N(0, 1 / N^2), zero biases, layer norms at the
    identity and positions N(0, 1 / N^2). Drawn with numpy (deterministic in ``seed``; no compile)."""
    rng = np.random.default_rng(seed)
    n, c, ck, ch, heads = config.n, config.channels, config.head_channels, config.hidden_channels, config.heads
    p, residual = config.samples, 1.0 / np.sqrt(2.0 * config.layers)

    # Structures around coefficient arrays; an array may carry more leading axes (stacked storage).
    def function(a: T, axis: type[Q]) -> Cheb[Q, T]:
        return Cheb(a, axis, n, p)

    def features(a: T, axis: type[Q], channel: type[K], count: int) -> Compose[ChebOf[Q], VecOf[K], T]:
        return Compose(function(Vec(a, channel, count), axis))

    def weight(*shape: int, scale: float = 1.0) -> Array:
        return jnp.asarray(rng.standard_normal(shape) * scale / np.sqrt(shape[-1] * shape[-2]), dtype)

    def zeros(*shape: int) -> Array:
        return jnp.zeros(shape, dtype)

    def linear(w: Array, axis: type[Q], into: type[K], out: type[L]) -> Linear[Channels[Q, K], Channels[Q, L]]:
        """(..., N, C_out, N, C_in) weights between channel sets of functions of ``axis``, zero biases."""
        c_in, c_out = w.shape[-1], w.shape[-3]
        bias = features(zeros(*w.shape[:-2]), axis, out, c_out)
        return Linear(features(features(w, axis, into, c_in), axis, out, c_out), bias)

    def layer(axis: type[Q]) -> AxisLayer[Q]:
        """An encoder layer whose features are the channels of functions of ``axis``."""

        q, k, v = (stacked(lambda: weight(n, ck, n, c)) for _ in range(3))
        output = stacked(lambda: weight(n, c, n, ck, scale=residual / np.sqrt(heads)))
        each_head = AttentionHead(
            linear(q, axis, Channel, HeadChannel),
            linear(k, axis, Channel, HeadChannel),
            linear(v, axis, Channel, HeadChannel),
            features(features(output, axis, HeadChannel, ck), axis, Channel, c),
            DotProduct(),
        )
        normalise: Normalisation = CoefficientSoftmax() if config.normalise == "coefficients" else Softmax()
        attention = MultiHeadAttention(Vec(each_head, Head, heads), features(zeros(n, c), axis, Channel, c), normalise)
        return EncoderLayer(attention, mlp(axis), (layer_norm(axis), layer_norm(axis)) if config.layer_norm else None)

    def mlp(axis: type[Q]) -> MLP[Features[Q], Channels[Q, HiddenChannel]]:
        hidden = linear(weight(n, ch, n, c), axis, Channel, HiddenChannel)
        return MLP(hidden, linear(weight(n, c, n, ch, scale=residual), axis, HiddenChannel, Channel))

    def feed_forward(axis: type[Q]) -> FeedForwardLayer[Q]:
        return FeedForward(mlp(axis), layer_norm(axis) if config.layer_norm else None)

    def kernel_layer(sequence: type[P], axis: type[Q]) -> KernelLayer[P, Q]:
        """A kernel integral along ``sequence`` whose features are the channels of functions of ``axis``."""
        kernel = stacked(lambda: weight(n, n))
        v = stacked(lambda: weight(n, ck, n, c))
        output = stacked(lambda: weight(n, c, n, ck, scale=residual / np.sqrt(heads)))
        each_head = KernelHead(
            Cheb(Cheb(kernel, sequence, n, p), sequence, n, p),
            linear(v, axis, Channel, HeadChannel),
            features(features(output, axis, HeadChannel, ck), axis, Channel, c),
        )
        return KernelIntegral(Vec(each_head, Head, heads), features(zeros(n, c), axis, Channel, c))

    def stacked(make: Callable[[], Array]) -> Array:
        return jnp.stack([make() for _ in range(heads)])

    def layer_norm(axis: type[Q]) -> LayerNorm[Features[Q]]:
        one = zeros(n, c).at[0].set(1.0)  # gamma: the constant function 1
        return LayerNorm(features(one, axis, Channel, c), features(zeros(n, c), axis, Channel, c))

    # The draws' order is the model's history: keep it (embedding, positions, layers, unembedding).
    embed_weight = features(function(weight(n, c, n, 1)[..., 0], Y), Y, Channel, c)
    embed = Embedding(
        Linear(embed_weight, features(zeros(n, c), Y, Channel, c)),
        function(features(jnp.asarray(rng.standard_normal((n, n, c)) / n, dtype), Y, Channel, c), X),
        learned=True,
    )

    def mixing(i: int) -> Layer[ChebOf[X], Features[Y]]:
        if config.mixer(i) == "k":
            return kernel_layer(X, Y) if config.axis(i) == "x" else AlongY(kernel_layer(Y, X))
        if config.mixer(i) == "m":
            return feed_forward(Y) if config.axis(i) == "x" else AlongY(feed_forward(X))
        return layer(Y) if config.axis(i) == "x" else AlongY(layer(X))

    layers = tuple(mixing(i) for i in range(config.layers))
    unembed = Linear(function(features(weight(n, 1, n, c)[:, 0], Y, Channel, c), Y), function(zeros(n), Y))
    return Funcformer(Encoder(embed, layers, layer_norm(Y) if config.layer_norm else None, unembed), config)


def weights(model: Funcformer) -> dict[str, Any]:
    """The parameters as nested dicts of float64 numpy arrays, for inspection and for the independent
    implementations that check this one (tests/funcformer_reference.py, bench/funcformer.py).

    Every linear map is an (N_out, C_out, N_in, C_in) weight and an (N_out, C_out) bias (the source and
    the output count as one channel; a head's maps are stacked over the heads), a layer norm a gamma and
    a beta of shape (N, C): {"embed", "positions", "layers": [{"axis", "attention": {"query", "key",
    "value", "output", "bias"}, "mlp": {"hidden", "output"}, "norms"}], "norm", "unembed"}; a kernel
    layer is {"axis", "kernel": {"kernel" (heads, N_s, N_t), "value", "output", "bias"}}, an MLP layer
    {"axis", "mlp", "norms": [norm] | None}."""

    def a(x: Any) -> np.ndarray:
        array: np.ndarray = np.asarray(to_array(x), np.float64)
        return array

    def linear(lin: Linear[Any, Any]) -> dict[str, np.ndarray]:
        return {"weight": a(lin.weight), "bias": a(lin.bias)}

    def mlp(m: MLP[Any, Any]) -> dict[str, dict[str, np.ndarray]]:
        return {"hidden": linear(m.hidden), "output": linear(m.output)}

    def norm(ln: LayerNorm[Any] | None) -> dict[str, np.ndarray] | None:
        return None if ln is None else {"gamma": a(ln.gamma), "beta": a(ln.beta)}

    def layer(i: int, layer: Any) -> dict[str, Any]:
        inner: AxisLayer[Any] | KernelLayer[Any, Any] | FeedForwardLayer[Any]
        inner = layer.layer if isinstance(layer, AlongY) else layer
        if isinstance(inner, FeedForward):
            return {"axis": model.config.axis(i), "mlp": mlp(inner.mlp), "norms": inner.norm and [norm(inner.norm)]}
        if isinstance(inner, KernelIntegral):
            kernel_heads = as_vec(inner.heads).data
            return {
                "axis": model.config.axis(i),
                "kernel": {
                    "kernel": a(kernel_heads.kernel),
                    "value": linear(kernel_heads.value),
                    "output": a(kernel_heads.output),
                    "bias": a(inner.bias),
                },
            }
        heads = as_vec(inner.attention.heads).data
        return {
            "axis": model.config.axis(i),
            "attention": {
                **{name: linear(getattr(heads, name)) for name in ("query", "key", "value")},
                "output": a(heads.output),
                "bias": a(inner.attention.bias),
            },
            "mlp": mlp(inner.mlp),
            "norms": None if inner.norms is None else [norm(n) for n in inner.norms],
        }

    encoder = model.encoder
    embed, unembed = linear(encoder.embed.linear), linear(cast(Linear[Any, Any], encoder.unembed))
    return {
        "embed": {"weight": embed["weight"][..., None], "bias": embed["bias"]},
        "positions": a(encoder.embed.positions),
        "layers": [layer(i, lay) for i, lay in enumerate(encoder.layers)],
        "norm": norm(encoder.norm),
        "unembed": {"weight": unembed["weight"][:, None], "bias": unembed["bias"][:, None]},
    }
