"""How the image-to-function model is trained and asked, on the benchmark's arrays.

    Recipe             the model's architecture and its training budget (hashable, one value a run)
    train_image        a Recipe's model trained on (a, u) at one resolution (``fit``, resumable)
    solve_image        its series of u for coefficients at any of the benchmark's grids
    predict_image      its solutions at any of the benchmark's grids, from coefficients at any of them
    at_grid            a series at a grid's points

The loss is the benchmark's metric, the mean relative L2 error over the grid points of the training
resolution, of the model's series evaluated there (``model.values``) against the solutions. AdamW with a
linear warm-up and a cosine decay to 1% of the peak, after clipping the gradient's global norm. The
model's outputs are in units of the training solutions' root mean square (``ImageToFunction.scale``).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import optax

from funcformer._fields import check_fields
from funcformer.fno_darcy.fit import Fitted, fit, relative_l2_loss
from funcformer.fno_darcy.model import (
    ImageConfig,
    ImageToFunction,
    grid_points,
    grid_vandermonde,
    init,
    sampler,
    values,
)

__all__ = ["Recipe", "at_grid", "predict_image", "solve_image", "train_image"]


@dataclass(frozen=True)
class Recipe:
    """An image-to-function run: the architecture and the budget."""

    model: ImageConfig = field(default_factory=ImageConfig)
    epochs: int = 40
    batch: int = 20
    learning_rate: float = 1e-3
    warmup: int = 100
    """Steps of linear warm-up."""
    weight_decay: float = 1e-4
    clip: float = 1.0
    seed: int = 0

    def __post_init__(self) -> None:
        check_fields(self)
        for name in ("epochs", "batch"):
            if getattr(self, name) < 1:
                raise ValueError(f"Recipe.{name} must be positive, got {getattr(self, name)}")
        if not self.learning_rate > 0:
            raise ValueError(f"Recipe.learning_rate must be positive, got {self.learning_rate}")

    def optimiser(self, count: int) -> optax.GradientTransformation:
        """AdamW on the warm-up and cosine schedule of ``epochs`` epochs of ``count`` samples."""
        steps = self.epochs * (count // self.batch)
        schedule = optax.warmup_cosine_decay_schedule(
            0.0, self.learning_rate, min(self.warmup, steps // 10), steps, self.learning_rate / 100
        )
        return optax.chain(optax.clip_by_global_norm(self.clip), optax.adamw(schedule, weight_decay=self.weight_decay))

    def describe(self) -> str:
        """The recipe as text (a checkpoint's description)."""
        return repr(dataclasses.asdict(self))


def train_image(
    recipe: Recipe,
    a: np.ndarray,
    u: np.ndarray,
    *,
    checkpoint: Path | str | None = None,
    progress: bool = False,
) -> Fitted[ImageToFunction]:
    """The recipe's model trained on coefficients ``a`` and solutions ``u``, (count, s, s) at one of the
    benchmark's grids (the loss is taken there); resumes from ``checkpoint`` if it exists (``fit``)."""
    a, u = np.asarray(a), np.asarray(u)
    if a.ndim != 3 or a.shape != u.shape:
        raise ValueError(f"train_image: expected a and u of one shape (count, s, s), got {a.shape} and {u.shape}")
    s = a.shape[-1]
    grid_points(s)  # refuses a grid the benchmark has not
    scale = float(np.sqrt(np.mean(u**2)))
    model = init(recipe.seed, recipe.model, scale=scale)

    def loss(model: ImageToFunction, a: jax.Array, u: jax.Array) -> jax.Array:
        return relative_l2_loss(values(jax.vmap(model)(a), s), u)

    fitted: Fitted[ImageToFunction] = fit(
        model, loss, recipe.optimiser(len(a)), a, u, epochs=recipe.epochs, batch=recipe.batch, seed=recipe.seed,
        checkpoint=checkpoint, description=recipe.describe() + f" scale={scale!r}", progress=progress,
    )  # fmt: skip
    return fitted


_series = jax.jit(jax.vmap(ImageToFunction.__call__, in_axes=(None, 0)))
"""A batch of images (B, g, g) -> the series (B, N, N): one compilation per model configuration and batch."""


def solve_image(model: ImageToFunction, a: np.ndarray, batch: int = 50) -> np.ndarray:
    """(count, N, N) float64: the model's series of u for coefficients ``a`` (count, s, s), s any of the
    benchmark's grids: each image is read at the model's points (``model.sampler``) first, so that one
    compilation serves every s; ``batch`` images a call (the last batch padded to ``batch``)."""
    a = np.asarray(a)
    if a.ndim != 3 or a.shape[1] != a.shape[2]:
        raise ValueError(f"solve_image: expected coefficients of shape (count, s, s), got {a.shape}")
    index = sampler(a.shape[-1], model.config.grid)
    images = a[:, index][:, :, index]
    dtype = jax.tree_util.tree_leaves(model)[0].dtype
    batch = min(batch, len(images))
    padded = np.concatenate([images, np.repeat(images[-1:], -len(images) % batch, axis=0)])
    out = [np.asarray(_series(model, jnp.asarray(padded[i : i + batch], dtype))) for i in range(0, len(padded), batch)]
    return np.concatenate(out)[: len(images)].astype(np.float64)


def predict_image(model: ImageToFunction, a: np.ndarray, s: int | None = None, batch: int = 50) -> np.ndarray:
    """(count, s, s) float64: the model's solutions at the s x s grid points (s = None: the input's grid)
    for coefficients ``a`` (count, s_in, s_in), s_in any of the benchmark's grids (``solve_image``)."""
    return at_grid(solve_image(model, a, batch), np.shape(a)[-1] if s is None else s)


def at_grid(series: np.ndarray, s: int) -> np.ndarray:
    """(count, s, s) float64: series (count, N, N) at the s x s grid points, V C V^T (``model.values`` in numpy)."""
    v = grid_vandermonde(s, np.shape(series)[-1])
    out: np.ndarray = v @ np.asarray(series, np.float64) @ v.T
    return out
