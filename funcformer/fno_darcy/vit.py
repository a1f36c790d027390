"""Images in, functions out, as a vision transformer: every cell of the image a token, the answer per cell,
projected onto a Chebyshev series (docs/fno_darcy.md, "A model that learns").

    image (g, g), read at the model's g x g points  -> tokens Vec[Cell, Vec[Pixel]]: each p x p cell with
                                                       ``context`` pixels of its neighbours on every side (a
                                                       (p + 2 context)^2 window of the zero-padded image)
    encoder: nn.Encoder on Vec[Cell]                -> layers of mixing ("a": self-attention, "k": a learned
                                                       kernel integral over the cells, nn.KernelIntegral), each
                                                       then an MLP (pre-norm, GELU); learned positions that
                                                       start as 2-D sinusoids
    unembed, per cell                               -> Vec[Cell, Vec[Value]]: the p x p values at the cell's
                                                       grid points, in the units of the training solutions'
                                                       pointwise moments: u = scale (mean + std * output)
    projection (fixed, linear)                      -> C = P U P^T, P = pinv(V) (N, g): the least-squares N x N
                                                       Chebyshev series of the assembled g x g values

The answer is a function: ``model.values(C, s)`` evaluates it at any of the benchmark's grids, and the
input may come from any of them (``model.sampler``). ``mean`` and ``std`` are fixed leaves, set from the
training data (``init``'s ``moments``): no gradient reaches them and the optimiser leaves them
(``trained``).
"""

from __future__ import annotations

import functools
import itertools
from dataclasses import dataclass
from typing import Any, TypeVar

import jax
import jax.numpy as jnp
import numpy as np
from jax import Array
from jax.typing import ArrayLike

from applicative import Dim, Vec, VecOf, record, static, to_array
from applicative.instances.collocation import vandermonde
from applicative.nn import (
    AttentionOptions,
    Embedding,
    Encoder,
    FeedForward,
    KernelIntegral,
    Layer,
    LayerNorm,
    Linear,
    SelfAttentionBlock,
)
from funcformer.fno_darcy.data import grid_points
from funcformer.fno_darcy.model import check_image_config, image_of
from funcformer.model import Head, HeadChannel

K = TypeVar("K", bound=Dim)

__all__ = ["Cell", "Pixel", "Token", "TokenHidden", "Value", "ViTConfig", "ViTToFunction", "init", "trained"]


class Cell(Dim):
    """The image's p x p cells, the encoder's sequence."""


class Pixel(Dim):
    """The values a token reads: its cell and the context around it."""


class Value(Dim):
    """The p x p values of u a token answers for."""


class Token(Dim):
    """The encoder's features."""


class TokenHidden(Dim):
    """The encoder MLP's hidden features."""


@dataclass(frozen=True)
class ViTConfig:
    """The architecture of a ``ViTToFunction`` (hashable: static metadata of the model)."""

    grid: int = 85
    """g: the model reads the coefficient at the g x g points of the benchmark's grid at s = g."""
    patch: int = 5
    """p: cells of p x p values, (g / p)^2 tokens; p must divide g."""
    context: int = 5
    """Pixels of the neighbouring cells a token also reads on each side."""
    width: int = 128
    hidden: int = 256
    mixers: str = "kakaka"
    """One letter a layer: "a" self-attention, "k" a learned kernel integral over the cells; each then an MLP."""
    heads: int = 4
    n: int = 32
    """Chebyshev coefficients of the output per axis."""
    low: float = 3.0
    high: float = 12.0
    """The coefficient's two values, read as -1 and 1."""
    solver_nodes: int = 0
    """0: the answer is u. n >= 4: a correction added to the recipe's solver on the image (``recipes.solver_part``)."""

    def __post_init__(self) -> None:
        check_image_config(self, ("grid", "patch", "width", "hidden", "heads", "n"))
        if self.context < 0 or self.n > self.grid:
            raise ValueError(f"ViTConfig: context = {self.context} must be >= 0 and n = {self.n} at most the grid")
        if not self.mixers or set(self.mixers) - {"a", "k"}:
            raise ValueError(f"ViTConfig.mixers must be a non-empty string of 'a' and 'k', got {self.mixers!r}")

    @property
    def side(self) -> int:
        """Cells per axis, g / p."""
        return self.grid // self.patch

    @property
    def tokens(self) -> int:
        return self.side**2

    @property
    def window(self) -> int:
        """The side of the window a token reads, p + 2 context."""
        return self.patch + 2 * self.context


@functools.lru_cache(maxsize=16)
def _windows(g: int, p: int, context: int) -> np.ndarray:
    """(side, window) indices into the image zero-padded by ``context``: row k of cell i is i p + k."""
    return np.arange(g // p)[:, None] * p + np.arange(p + 2 * context)[None, :]


@functools.lru_cache(maxsize=16)
def _projection(g: int, n: int) -> np.ndarray:
    """(n, g) float64: the least-squares fit of an n-term Chebyshev series to values at the g grid points."""
    return np.linalg.pinv(vandermonde(2.0 * grid_points(g) - 1.0, n))


def windows(image: Array, config: ViTConfig) -> Array:
    """(tokens, window^2): the window of each cell of the (g, g) image, cells row by row (cell i side + j
    reads ``padded[i p : i p + w, j p : j p + w]``, the image zero-padded by ``context``)."""
    c = config.context
    padded = jnp.pad(image, c) if c else image
    rows = jnp.asarray(_windows(config.grid, config.patch, c))
    cut = padded[rows[:, None, :, None], rows[None, :, None, :]]  # (side, side, window, window)
    return cut.reshape(config.tokens, config.window**2)


def assemble(cells: Array, config: ViTConfig) -> Array:
    """(tokens, p^2) values of each cell -> the (g, g) image (``model.patches``' inverse)."""
    q, p = config.side, config.patch
    return cells.reshape(q, q, p, p).transpose(0, 2, 1, 3).reshape(config.grid, config.grid)


@record
class ViTToFunction:
    """coefficient image (s, s) -> the series (N, N) of u (of u minus the solver's part with
    ``config.solver_nodes``); ``jax.vmap`` it for a batch, ``model.values`` evaluates it."""

    encoder: Encoder[VecOf[Cell], VecOf[Pixel], VecOf[Token], VecOf[Value]]
    mean: Array
    """(g, g): the training targets' pointwise mean, in units of ``scale``."""
    std: Array
    """(g, g): their pointwise standard deviation."""
    config: ViTConfig = static()
    scale: float = static(default=1.0)

    def grid_values(self, a: ArrayLike) -> Array:
        """The (g, g) values of the answer at the model's grid, before the projection."""
        config = self.config
        image = image_of(a, config.grid, config.low, config.high, "ViTToFunction")  # zero-padded: 0 outside
        pixels = windows(image, config).astype(self.mean.dtype)
        out = assemble(to_array(self.encoder(Vec(Vec(pixels, Pixel, config.window**2), Cell, config.tokens))), config)
        mean, std = jax.lax.stop_gradient(self.mean), jax.lax.stop_gradient(self.std)
        return (mean + std * out) * self.scale

    def __call__(self, a: ArrayLike) -> Array:
        """One (s, s) coefficient image -> the (N, N) series: P U P^T of ``grid_values``."""
        u = self.grid_values(a)
        p = jnp.asarray(_projection(self.config.grid, self.config.n), u.dtype)
        return p @ u @ p.T


def trained(model: ViTToFunction) -> Any:
    """The pytree of bools, ``model``'s shape, that marks what the optimiser trains: all but ``mean`` and
    ``std`` (an AdamW ``mask``: no weight decay on the data's moments)."""
    fixed = {jax.tree_util.GetAttrKey("mean"), jax.tree_util.GetAttrKey("std")}
    return jax.tree_util.tree_map_with_path(lambda path, _: path[0] not in fixed, model)


def _sinusoids(config: ViTConfig) -> np.ndarray:
    """(tokens, width): sin and cos of pi k x and pi k y at each cell's centre, k = 1, ..., width / 4."""
    q, f = config.side, config.width // 4
    angle = np.pi * ((np.arange(q) + 0.5) / q)[:, None] * np.arange(1, f + 1)[None, :]
    x = np.concatenate([np.sin(angle), np.cos(angle)], axis=1)  # (q, 2f)
    table = np.concatenate([np.repeat(x, q, axis=0), np.tile(x, (q, 1))], axis=1)  # cell i q + j: x_i, y_j
    return np.pad(table, ((0, 0), (0, config.width - table.shape[1])))


def init(
    seed: int,
    config: ViTConfig = ViTConfig(),
    scale: float = 1.0,
    moments: tuple[ArrayLike, ArrayLike] | None = None,
    dtype: type = np.float32,
) -> ViTToFunction:
    """A ``ViTToFunction`` drawn from ``jax.random.key(seed)``: each mixing block and MLP by its initialiser,
    the projections into the residual stream scaled by 1 / sqrt(2 layers); the embedding and unembedding
    ``Linear.init``; positions the 2-D sinusoids; ``moments`` (mean, std) of the targets / scale at the g x g
    points (default 0 and 1)."""
    key = jax.random.key(seed)
    parts = (jax.random.fold_in(key, i) for i in itertools.count())

    def vec(tag: type[K], size: int) -> Vec[K, Array]:
        return Vec(jnp.zeros(size, dtype), tag, size)

    model, gain = vec(Token, config.width), 1.0 / np.sqrt(2.0 * len(config.mixers))
    options = AttentionOptions(
        heads=vec(Head, config.heads), model=model, head_features=vec(HeadChannel, config.width // config.heads),
        output_gain=gain,
    )  # fmt: skip
    cells, hidden = vec(Cell, config.tokens), vec(TokenHidden, config.hidden)
    layers: list[Layer[VecOf[Cell], VecOf[Token]]] = []
    for letter in config.mixers:
        mixer: Layer[VecOf[Cell], VecOf[Token]]
        if letter == "a":
            mixer = SelfAttentionBlock.init(next(parts), options)
        else:
            heads, features = options.heads, options.head_features
            mixer = KernelIntegral.init(
                next(parts), heads=heads, sequence=cells, model=model, value_features=features, output_gain=gain
            )
        mlp = FeedForward.init(next(parts), model=model, hidden=hidden, activation=jax.nn.gelu, output_gain=gain)
        layers += [mixer, mlp]
    positions = Vec(Vec(jnp.asarray(_sinusoids(config), dtype), Token, config.width), Cell, config.tokens)
    embed = Embedding(Linear.init(next(parts), vec(Pixel, config.window**2), model), positions, True)
    unembed = Linear.init(next(parts), model, vec(Value, config.patch**2))
    encoder = Encoder(embed, tuple(layers), LayerNorm.init(model), unembed)
    g = config.grid
    mean, std = (np.zeros((g, g)), np.ones((g, g))) if moments is None else moments
    return ViTToFunction(encoder, jnp.asarray(mean, dtype), jnp.asarray(std, dtype), config, scale)
