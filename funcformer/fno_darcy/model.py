"""Images in, functions out: ``applicative.nn``'s blocks across two structures, for the FNO benchmark.

The permeability is an image, a grid of values; the solution is a function. The model reads the
image as tokens and answers with a Chebyshev series u(x, y) = sum C[i, j] T_i(2x - 1) T_j(2y - 1),
evaluated wherever it is asked (``values``: the benchmark's grids at s = 85, 141, 211, 421):

    image (g, g), sampled from any s x s grid   -> patches Vec[Patch, Vec[Pixel]]        (p x p pixels each)
    encoder: nn.Encoder on Vec[Patch]           -> memory Vec[Patch, Vec[Token]]         (self-attention)
    decoder: learned queries, a state           Cheb[X, Compose[ChebOf[Y], VecOf[Channel]]]  (N x N x C)
             each layer along x or y: self-attention along its axis (the Funcformer's), cross
             attention to the memory (``nn.CrossAttentionBlock``), an MLP on each position
    unembed: one function of y at every x       -> C (N, N), the series of u / scale

A layer along x is the generic block on the state as a sequence of x, its features the channels of
functions of y; a layer along y is the same block on the transposed state (``funcformer.model.AlongY``,
``transpose``). In cross attention the query at x is a function of y (its channels), each patch's key
and value are functions of y drawn linearly from its token (``Linear`` from ``Vec[Token]`` to
``Compose[ChebOf[Y], VecOf[HeadChannel]]``), and the score is their integral over y: a row of x
weighs the patches, the values put back functions of y. Along y the roles swap. The softmax samples
the scores at P Chebyshev points of the sequence axis (``Cheb.fmap``), the MLP's ReLU at P points of
its features' axis.

With ``ImageConfig.solver_nodes`` the series is not u but its correction: the prediction is the recipe's own
solver run on the model's g x g image (``data.coarse_solution``, a spline interpolant of a five-point solve,
itself a function of (x, y)) plus the series, both evaluated at the grid asked for (``recipes.predict_image``).

The input side is a grid of values: an s x s coefficient is read at the model's g x g points
(``ImageConfig.grid``, the points of the benchmark's grid at s = g) by nearest neighbour (``sampler``):
exact from s = 421 and from s = g, within half a cell from the others. The output is a function: one
model answers at every s.
"""

from __future__ import annotations

import functools
import itertools
from dataclasses import dataclass
from typing import Generic, Protocol, TypeAlias, TypeVar

import jax
import jax.numpy as jnp
import numpy as np
from jax import Array
from jax.typing import ArrayLike

from applicative import Cheb, ChebOf, Compose, Dim, Vec, VecOf, record, static, to_array
from applicative.instances.collocation import vandermonde
from applicative.nn import (
    AttentionOptions,
    CrossAttentionBlock,
    Encoder,
    FeedForward,
    LayerNorm,
    Linear,
    Matrix,
    SelfAttentionBlock,
    Std,
    fan_in,
    init_encoder,
    normal_like,
)
from funcformer._fields import check_fields
from funcformer.fno_darcy.data import grid_points
from funcformer.model import Channel, Channels, Features, Head, HeadChannel, HiddenChannel, State, X, Y, transpose

__all__ = [
    "CrossLayer",
    "ImageConfig",
    "ImageToFunction",
    "Patch",
    "Pixel",
    "Token",
    "TokenHidden",
    "image_of",
    "init",
    "patches",
    "sampler",
    "values",
]


class Patch(Dim):
    """The image's patches, the memory's sequence."""


class Pixel(Dim):
    """The values of one patch."""


class Token(Dim):
    """The encoder's features."""


class TokenHidden(Dim):
    """The encoder MLP's hidden features."""


P = TypeVar("P", bound=Dim)  # the sequence axis of a decoder layer
Q = TypeVar("Q", bound=Dim)  # the function axis of its features
K = TypeVar("K", bound=Dim)  # a channel tag
Memory: TypeAlias = Matrix[VecOf[Patch], VecOf[Token]]
"""The encoder's output: a token per patch."""


class _ImageSettings(Protocol):
    """What both image models' settings hold (``ImageConfig``, ``vit.ViTConfig``; vit imports this module,
    so the type is this protocol, not their union)."""

    @property
    def grid(self) -> int: ...
    @property
    def patch(self) -> int: ...
    @property
    def width(self) -> int: ...
    @property
    def heads(self) -> int: ...
    @property
    def low(self) -> float: ...
    @property
    def high(self) -> float: ...
    @property
    def solver_nodes(self) -> int: ...


def check_image_config(config: _ImageSettings, positive: tuple[str, ...]) -> None:
    """The checks both image models' settings share: the fields' types (``check_fields``), the ``positive``
    sizes, heads dividing the width, the patch the grid, the coefficient's two values rising and a solver of
    at least 4 nodes if any. ValueError naming the class and the field."""
    name = type(config).__name__
    check_fields(config)
    for field in positive:
        if getattr(config, field) < 1:
            raise ValueError(f"{name}.{field} must be positive, got {getattr(config, field)}")
    if config.width % config.heads:
        raise ValueError(f"{name}.heads = {config.heads} does not divide {name}.width = {config.width}")
    if config.grid % config.patch:
        raise ValueError(f"{name}.patch = {config.patch} does not divide {name}.grid = {config.grid}")
    if config.solver_nodes and config.solver_nodes < 4:
        raise ValueError(f"{name}.solver_nodes must be 0 (no solver) or >= 4, got {config.solver_nodes}")
    if not config.low < config.high:
        raise ValueError(f"{name}: the coefficient's values low = {config.low} and high = {config.high} must rise")


@dataclass(frozen=True)
class ImageConfig:
    """The architecture of an ``ImageToFunction`` (hashable: static metadata of the model)."""

    grid: int = 85
    """g: the model reads the coefficient at the g x g points of the benchmark's grid at s = g."""
    patch: int = 5
    """p: patches of p x p values, (g / p)^2 tokens; p must divide g."""
    width: int = 64
    """The encoder's features per token."""
    hidden: int = 128
    """The encoder MLP's hidden features."""
    encoder_layers: int = 4
    n: int = 32
    """Chebyshev coefficients of the output per axis."""
    channels: int = 8
    """The decoder's channels, each a function of the other axis."""
    heads: int = 4
    head_channels: int = 4
    hidden_channels: int = 16
    axes: str = "xyxy"
    """The axis of each decoder layer: one letter a layer, "x" or "y"."""
    self_attention: bool = True
    """Each decoder layer attends along its axis before it attends to the memory."""
    points: int = 0
    """Chebyshev points sampled for nonlinear maps (0: 2n)."""
    low: float = 3.0
    high: float = 12.0
    """The coefficient's two values (the data's: ``dataset.json``'s ``low`` and ``data.HIGH``), read as -1 and 1."""
    solver_nodes: int = 0
    """0: the series is u. n >= 4: the series is a correction, added to the recipe's solver run on the model's
    g x g image at n x n nodes (``data.coarse_solution``; ``recipes.solver_part``, ``recipes.predict_image``)."""

    def __post_init__(self) -> None:
        sizes = ("grid", "patch", "width", "hidden", "encoder_layers", "n", "channels", "heads", "head_channels")
        check_image_config(self, (*sizes, "hidden_channels"))
        if not self.axes or set(self.axes) - {"x", "y"}:
            raise ValueError(f"ImageConfig.axes must be a non-empty string of 'x' and 'y', got {self.axes!r}")
        if self.points and self.points < self.n:
            raise ValueError(f"ImageConfig.points = {self.points} cannot resolve n = {self.n} coefficients")

    @property
    def samples(self) -> int:
        """P, the Chebyshev points sampled for a nonlinear map."""
        return self.points or 2 * self.n

    @property
    def tokens(self) -> int:
        """The number of patches, (g / p)^2."""
        return (self.grid // self.patch) ** 2


@functools.lru_cache(maxsize=16)
def sampler(s: int, g: int) -> np.ndarray:
    """The (g,) indices of the s-grid points nearest the g-grid points (``grid_points``): ``a[i][:, i]``
    is an s x s image read at the model's g x g points (exact where the g points are among the s points)."""
    source, target = grid_points(s), grid_points(g)
    return np.asarray(np.abs(target[:, None] - source[None, :]).argmin(axis=1), dtype=np.intp)


def image_of(a: ArrayLike, g: int, low: float, high: float, model: str) -> Array:
    """One (s, s) coefficient, s one of the benchmark's grids, as the (g, g) image a model reads: sampled at
    its g x g points (``sampler``), ``low`` and ``high`` (the data's two values) mapped to -1 and 1. A
    ValueError naming ``model`` for anything but one square image."""
    a = jnp.asarray(a)
    if a.ndim != 2 or a.shape[0] != a.shape[1]:
        raise ValueError(f"{model}: expected one square (s, s) coefficient image, got shape {a.shape}")
    index = jnp.asarray(sampler(a.shape[0], g))
    middle, half = (high + low) / 2, (high - low) / 2
    return (a[index][:, index] - middle) / half


def patches(image: Array, p: int) -> Array:
    """The (g / p)^2 tokens of a (g, g) image, (tokens, p p): token i (g / p) + j holds the p x p patch
    ``image[i p : (i + 1) p, j p : (j + 1) p]``, row by row (p divides g)."""
    g = image.shape[0]
    return image.reshape(g // p, p, g // p, p).transpose(0, 2, 1, 3).reshape((g // p) ** 2, p * p)


def values(c: ArrayLike, s: int) -> Array:
    """The series C (..., N, N) at the benchmark's s x s grid points: (..., s, s), V C V^T with
    V[p, j] = T_j(2 x_p - 1) (``collocation.vandermonde`` at ``grid_points``; in numpy,
    ``collocation.evaluate_grid``)."""
    c = jnp.asarray(c)
    v = jnp.asarray(vandermonde(2.0 * grid_points(s) - 1.0, c.shape[-1]), c.dtype)
    return jnp.einsum("pi,...ij,qj->...pq", v, c, v)


@record
class CrossLayer(Generic[Q]):
    """One decoder layer along the state's sequence axis, its features the channels of functions of Q:
    self-attention along the axis (or none), cross attention to the memory, an MLP on each position."""

    attention: SelfAttentionBlock[VecOf[Head], Features[Q], Channels[Q, HeadChannel]] | None
    cross: CrossAttentionBlock[VecOf[Head], Features[Q], VecOf[Token], Channels[Q, HeadChannel]]
    feed_forward: FeedForward[Features[Q], Channels[Q, HiddenChannel]]

    def __call__(self, h: State[P, Q], memory: Memory) -> State[P, Q]:
        if self.attention is not None:
            h = self.attention(h)
        return self.feed_forward(self.cross(h, memory))


@record
class CrossAlongY:
    """A decoder layer along y: the layer on the transposed state (x and the channels its features)."""

    layer: CrossLayer[X]

    def __call__(self, h: State[X, Y], memory: Memory) -> State[X, Y]:
        return transpose(self.layer(transpose(h), memory))


@record
class ImageToFunction:
    """coefficient image (s, s) -> the series (N, N) of the solution u (with ``config.solver_nodes``: of u minus
    the solver's part, ``recipes.solver_part``); ``jax.vmap`` it for a batch, ``values`` evaluates it. The
    encoder's tokens, the decoder's layers, a final norm, the unembedding, times ``scale``."""

    encoder: Encoder[VecOf[Patch], VecOf[Pixel], VecOf[Token], VecOf[Token]]
    queries: State[X, Y]
    layers: tuple[CrossLayer[Y] | CrossAlongY, ...]
    norm: LayerNorm[Features[Y]]
    unembed: Linear[Features[Y], ChebOf[Y]]
    config: ImageConfig = static()
    scale: float = static(default=1.0)
    """The output's unit: the model's series times ``scale`` is u (set from the training targets)."""

    def __call__(self, a: ArrayLike) -> Array:
        """One (s, s) coefficient image, s one of the benchmark's grids -> the (N, N) series of u."""
        config = self.config
        p = config.patch
        image = image_of(a, config.grid, config.low, config.high, "ImageToFunction")
        pixels = patches(image, p).astype(to_array(self.queries).dtype)
        tokens = Vec(Vec(pixels, Pixel, p * p), Patch, config.tokens)
        memory = self.encoder.encode(tokens)
        h = self.queries
        for layer in self.layers:
            h = layer(h, memory)
        return to_array(self.unembed.each(h.fmap(self.norm))) * self.scale


def init(
    seed: int, config: ImageConfig = ImageConfig(), scale: float = 1.0, dtype: type = np.float32
) -> ImageToFunction:
    """An ``ImageToFunction`` drawn from ``jax.random.key(seed)``: the encoder by ``nn.init_encoder``
    (pre-norm layers, learned positions N(0, 1 / tokens)), the queries N(0, 1 / N^2), each decoder
    layer's blocks by their initialisers (N(0, 1 / fan-in) weights, the projections into the residual
    stream scaled by 1 / sqrt(2 layers)), the unembedding N(0, 1 / fan-in); zero biases, norms the identity."""
    n, pts, c = config.n, config.samples, config.channels
    key = jax.random.key(seed)
    parts = (jax.random.fold_in(key, i) for i in itertools.count())

    def vec(tag: type[K], size: int) -> Vec[K, Array]:
        return Vec(jnp.zeros(size, dtype), tag, size)

    def channels(axis: type[Q], tag: type[K], count: int) -> Compose[ChebOf[Q], VecOf[K], Array]:
        return Compose(Cheb(Vec(jnp.zeros((n, count), dtype), tag, count), axis, n, pts))

    heads = vec(Head, config.heads)
    token_options = AttentionOptions(
        heads=heads, model=vec(Token, config.width), head_features=vec(HeadChannel, config.width // config.heads)
    )
    template = Vec(Vec(jnp.zeros((config.tokens, config.width), dtype), Token, config.width), Patch, config.tokens)
    positions = normal_like(next(parts), template, Std(config.tokens).value)
    encoder = init_encoder(
        next(parts), token_options, inputs=vec(Pixel, config.patch**2), hidden=vec(TokenHidden, config.hidden),
        layers=config.encoder_layers, outputs=None, positions=positions, learned_positions=True,
    )  # fmt: skip
    residual = 1.0 / np.sqrt(2.0 * len(config.axes))

    def layer(axis: type[Q]) -> CrossLayer[Q]:
        """A layer whose features are the channels of functions of ``axis``."""
        model, head = channels(axis, Channel, c), channels(axis, HeadChannel, config.head_channels)
        options = AttentionOptions(heads=heads, model=model, head_features=head, variance=fan_in, output_gain=residual)
        attention = SelfAttentionBlock.init(next(parts), options) if config.self_attention else None
        cross = CrossAttentionBlock.init(next(parts), options, source=vec(Token, config.width))
        feed_forward = FeedForward.init(
            next(parts), model=model, hidden=channels(axis, HiddenChannel, config.hidden_channels), variance=fan_in,
            output_gain=residual,
        )  # fmt: skip
        return CrossLayer(attention, cross, feed_forward)

    queries = Cheb(Compose(Cheb(Vec(jnp.zeros((n, n, c), dtype), Channel, c), Y, n, pts)), X, n, pts)
    queries = normal_like(next(parts), queries, Std(n * n).value)
    layers = tuple(layer(Y) if axis == "x" else CrossAlongY(layer(X)) for axis in config.axes)
    model = channels(Y, Channel, c)
    unembed = Linear.init(next(parts), model, Cheb(jnp.zeros(n, dtype), Y, n, pts), variance=fan_in)
    return ImageToFunction(encoder, queries, layers, LayerNorm.init(model), unembed, config, scale)
