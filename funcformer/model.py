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
along y (``ModelConfig.axes``) sees the same function the other way round,
Cheb[Y, Compose[ChebOf[X], VecOf[Channel], _]] (``AlongY``: the coefficient
array's first two axes swapped). A layer may instead be a learned kernel integral along its axis
(``nn.KernelIntegral``, ``ModelConfig.mixers``), linear mixing of the sequence.

The source f(x, y), an (N, N) coefficient array, is a ``Cheb[X, Cheb[Y, _]]``;
it is embedded by a linear map of its y-functions into the channels, plus
learned positions, and the final states are unembedded back to one function
of y at every x. tests/funcformer/test_funcformer.py checks the model against an
independent float64 numpy implementation (tests/funcformer/funcformer_reference.py).

Normalisations: ``"values"``, exp(s) / integral exp(s) over the keys (``nn.Softmax``), and
``"coefficients"``, softmax over each score row's coefficients (the reference text's,
``nn.CoefficientSoftmax``).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any, Literal, TypeAlias, TypeVar, cast

import jax
import jax.numpy as jnp
import numpy as np
from jax import Array
from jax.typing import ArrayLike

from applicative import Cheb, ChebOf, Compose, ComposeOf, Dim, Vec, VecOf, record, static, to_array
from applicative.nn import (
    AttentionOptions,
    CoefficientSoftmax,
    Embedding,
    Encoder,
    EncoderLayer,
    FeedForward,
    KernelIntegral,
    Layer,
    LayerNorm,
    Linear,
    Matrix,
    Normalisation,
    SelfAttentionBlock,
    Softmax,
    Std,
    fan_in,
    normal_like,
)
from funcformer._fields import check_fields

__all__ = [
    "AlongY",
    "Channel",
    "Funcformer",
    "Head",
    "HeadChannel",
    "HiddenChannel",
    "ModelConfig",
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
class ModelConfig:
    """The architecture of a Funcformer, the shape of its weights (hashable: it is static metadata of
    the model)."""

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
    """Pre-norm layer normalisation: a ``LayerNorm`` before each attention and MLP block (a kernel
    integral has none) and one after the last layer."""
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
                raise ValueError(f"ModelConfig.{name} must be positive, got {getattr(self, name)}")
        if not self.axes or set(self.axes) - {"x", "y"}:
            raise ValueError(f"ModelConfig.axes must be a string of 'x' and 'y', got {self.axes!r}")
        if self.normalise not in ("values", "coefficients"):
            raise ValueError(f"ModelConfig.normalise must be 'values' or 'coefficients', got {self.normalise!r}")
        if not self.mixers or set(self.mixers) - {"a", "k", "m"}:
            raise ValueError(f"ModelConfig.mixers must be a string of 'a', 'k' and 'm', got {self.mixers!r}")
        if self.points and self.points < self.n:
            raise ValueError(f"ModelConfig.points = {self.points} cannot resolve n = {self.n} coefficients")

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
    config: ModelConfig = static()

    def __call__(self, f: ArrayLike) -> Array:
        """One source (N, N) -> one potential (N, N); ``jax.vmap`` it for a batch."""
        n = self.config.n
        if jnp.shape(f) != (n, n):
            raise ValueError(f"Funcformer: expected source coefficients of shape ({n}, {n}), got {jnp.shape(f)}")
        return to_array(self.encoder(Cheb.from_array(f, X, Y, points=self.config.samples)))


def parameter_count(params: object) -> int:
    """The number of trained real numbers of a model: its pytree's array sizes, summed (a complex weight held
    as two real arrays counts twice, as torch's ``count_params`` counts it). One count for every model."""
    return sum(int(np.prod(np.shape(leaf))) for leaf in jax.tree_util.tree_leaves(params))


def init(seed: int, config: ModelConfig, dtype: type = np.float32) -> Funcformer:
    """A Funcformer with N(0, 1 / fan-in) weights (``nn.fan_in``: fan-in counts coefficients times channels
    in), the projections into the residual stream scaled by 1 / sqrt(2 layers) (a head's output, summed
    over the heads, also by 1 / sqrt(heads)), a kernel N(0, 1 / N^2), zero biases, layer norms at the
    identity and positions N(0, 1 / N^2).

    Built by ``applicative.nn``'s initialisers from templates, drawing from ``jax.random.key(seed)`` by
    ``applicative.nn``'s rule (deterministic in ``seed``; ``nn.normal_like``): the i-th part, in this
    order, is drawn from ``fold_in(key, i)``: the embedding, the positions, then each layer (attention:
    a ``SelfAttentionBlock``, then a ``FeedForward``; a kernel integral: a ``KernelIntegral``; an MLP: a
    ``FeedForward``), and the unembedding."""
    n, p, c = config.n, config.samples, config.channels
    key = jax.random.key(seed)
    parts = (jax.random.fold_in(key, i) for i in itertools.count())
    residual = 1.0 / np.sqrt(2.0 * config.layers)
    normalise: Normalisation = CoefficientSoftmax() if config.normalise == "coefficients" else Softmax()
    heads = Vec(jnp.zeros(config.heads, dtype), Head, config.heads)

    # Templates: their shapes, tags and dtype are the weights'.
    def function(axis: type[Q]) -> Cheb[Q, Array]:
        return Cheb(jnp.zeros(n, dtype), axis, n, p)

    def channels(axis: type[Q], tag: type[K], count: int) -> Compose[ChebOf[Q], VecOf[K], Array]:
        return Compose(Cheb(Vec(jnp.zeros((n, count), dtype), tag, count), axis, n, p))

    def feed_forward(axis: type[Q]) -> FeedForwardLayer[Q]:
        return FeedForward.init(
            next(parts), model=channels(axis, Channel, c), hidden=channels(axis, HiddenChannel, config.hidden_channels),
            layer_norm=config.layer_norm, variance=fan_in, output_gain=residual,
        )  # fmt: skip

    def layer(mixer: str, sequence: type[P], axis: type[Q]) -> AxisLayer[Q] | KernelLayer[P, Q] | FeedForwardLayer[Q]:
        """A layer along ``sequence`` whose features are the channels of functions of ``axis``."""
        model, head = channels(axis, Channel, c), channels(axis, HeadChannel, config.head_channels)
        if mixer == "k":
            return KernelIntegral.init(
                next(parts), heads=heads, sequence=function(sequence), model=model, value_features=head,
                variance=fan_in, output_gain=residual,
            )  # fmt: skip
        if mixer == "m":
            return feed_forward(axis)
        options = AttentionOptions(
            heads=heads, model=model, head_features=head, layer_norm=config.layer_norm, normalise=normalise,
            variance=fan_in, output_gain=residual,
        )  # fmt: skip
        attention = SelfAttentionBlock.init(next(parts), options)
        return EncoderLayer.from_blocks(attention, feed_forward(axis))

    def mixing(i: int) -> Layer[ChebOf[X], Features[Y]]:
        return layer(config.mixer(i), X, Y) if config.axis(i) == "x" else AlongY(layer(config.mixer(i), Y, X))

    model = channels(Y, Channel, c)
    positions = Cheb(Compose(Cheb(Vec(jnp.zeros((n, n, c), dtype), Channel, c), Y, n, p)), X, n, p)
    embed = Linear.init(next(parts), function(Y), model, variance=fan_in)
    embedding = Embedding(embed, normal_like(next(parts), positions, Std(n * n).value), learned=True)
    layers = tuple(mixing(i) for i in range(config.layers))
    norm = LayerNorm.init(model) if config.layer_norm else None
    unembed = Linear.init(next(parts), model, function(Y), variance=fan_in)
    return Funcformer(Encoder(embedding, layers, norm, unembed), config)


def weights(model: Funcformer) -> dict[str, Any]:
    """The parameters as nested dicts of float64 numpy arrays, for inspection and for the independent
    implementations that check this one (tests/funcformer/funcformer_reference.py, bench/funcformer.py).

    Every linear map is an (N_out, C_out, N_in, C_in) weight and an (N_out, C_out) bias (the source and
    the output count as one channel; a head's maps are stacked over the heads), a layer norm a gamma and
    a beta of shape (N, C): {"embed", "positions", "layers": [{"axis", "attention": {"query", "key",
    "value", "output", "bias"}, "mlp": {"hidden", "output"}, "norms"}], "norm", "unembed"}; a kernel
    layer is {"axis", "kernel": {"kernel" (heads, N_s, N_t), "value", "output", "bias"}}, an MLP layer
    {"axis", "mlp", "norms": [norm] | None}. Read off the model's pytree by path: the fields of the
    records, with the renames of ``_place``."""
    encoder = model.encoder
    tree: dict[Any, Any] = {
        "embed": {},
        "positions": None,
        "layers": {i: {"axis": model.config.axis(i)} for i in range(len(encoder.layers))},
        "norm": None,
        "unembed": {},
    }
    for path, leaf in jax.tree_util.tree_flatten_with_path(encoder)[0]:
        *parents, last = _place([name for name in map(_field, path) if name not in _STRUCTURE])
        node = tree
        for name in parents:
            if node.get(name) is None:  # the keys seeded None are there only to keep the layout's order
                node[name] = {}
            node = node[name]
        node[last] = np.asarray(leaf, np.float64)
    for layer in tree["layers"].values():
        if "mlp" in layer:
            layer.setdefault("norms", None)
    tree["embed"]["weight"] = tree["embed"]["weight"][..., None]
    tree["unembed"] = {name: a[:, None] for name, a in tree["unembed"].items()}
    return cast(dict[str, Any], _lists(tree))


_STRUCTURE = {"data", "outer", "layer"}
"""Fields on a parameter's path that are not the model's: a structure's own (``Vec``, ``Cheb``,
``Compose``) and ``AlongY``'s ``layer``."""


def _field(key: object) -> str | int:
    """A record's field name or a tuple's index, from a key of a pytree path."""
    match key:
        case jax.tree_util.GetAttrKey(name=name):
            return str(name)
        case jax.tree_util.SequenceKey(idx=idx):
            return int(idx)
    raise TypeError(f"weights: unexpected pytree key {key!r}")


def _place(fields: list[str | int]) -> list[str | int]:
    """Where the parameter at ``fields`` (of ``model.encoder``) goes in ``weights``' layout."""
    match fields:
        case ["embed", "linear", name]:
            return ["embed", name]
        case ["embed", "positions"]:
            return ["positions"]
        case ["layers", i, "attention", "heads", *rest]:
            return ["layers", i, "attention", *rest]
        case ["layers", i, "heads", *rest]:  # a kernel integral
            return ["layers", i, "kernel", *rest]
        case ["layers", i, "bias"]:
            return ["layers", i, "kernel", "bias"]
        case ["layers", i, "norm", name]:  # a feed-forward layer's one norm
            return ["layers", i, "norms", 0, name]
    return fields


def _lists(node: object) -> object:
    """``node`` with every dict keyed 0, 1, ... turned into a list."""
    if not isinstance(node, dict):
        return node
    items = {key: _lists(value) for key, value in node.items()}
    return list(items.values()) if items and list(items) == list(range(len(items))) else items
