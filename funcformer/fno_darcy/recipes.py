"""How the image-to-function model is trained and asked, on the benchmark's arrays.

    Recipe             the model's architecture and its training budget (hashable, one value a run)
    train_image        a Recipe's model trained on (a, u) at one resolution (``fit``, resumable)
    image_loss         its loss
    solve_image        its series for coefficients at any of the benchmark's grids
    solver_part        the part of its prediction the recipe's solver gives (``ImageConfig.solver_nodes``; or 0)
    predict_image      its solutions at any of the benchmark's grids, from coefficients at any of them
    at_grid            a series at a grid's points

The loss is the benchmark's metric, the mean relative L2 error over the grid points of the training
resolution, of the model's prediction there (the solver's part plus the series, ``model.values``) against
the solutions. AdamW with a linear warm-up and a cosine decay to 1% of the peak, after clipping the
gradient's global norm. The model's series is in units of the root mean square of what it learns, u minus
the solver's part (``ImageToFunction.scale``).
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
from funcformer.fno_darcy.data import coarse_solution, grid_points
from funcformer.fno_darcy.fit import Fitted, fit, relative_l2_loss
from funcformer.fno_darcy.model import (
    ImageConfig,
    ImageToFunction,
    grid_vandermonde,
    init,
    sampler,
    values,
)

__all__ = ["Recipe", "at_grid", "image_loss", "predict_image", "solve_image", "solver_part", "train_image"]


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
    part = solver_part(recipe.model, a, s)
    scale = float(np.sqrt(np.mean((u - part) ** 2)))
    model = init(recipe.seed, recipe.model, scale=scale)

    def loss(model: ImageToFunction, a: jax.Array, targets: jax.Array) -> jax.Array:
        return image_loss(model, a, targets, s)

    fitted: Fitted[ImageToFunction] = fit(
        model, loss, recipe.optimiser(len(a)), a, np.stack([u, part], axis=1), epochs=recipe.epochs,
        batch=recipe.batch, seed=recipe.seed, checkpoint=checkpoint,
        description=recipe.describe() + f" scale={scale!r}", progress=progress,
    )  # fmt: skip
    return fitted


def image_loss(model: ImageToFunction, a: jax.Array, targets: jax.Array, s: int) -> jax.Array:
    """The training loss: the benchmark's metric at the s x s grid points of the prediction for the images
    ``a`` (B, s, s), the solver's part plus the model's series, against the solutions; ``targets`` (B, 2, s, s)
    holds the solutions and the solver's parts (``solver_part``)."""
    return relative_l2_loss(targets[:, 1] + values(jax.vmap(model)(a), s), targets[:, 0])


_series = jax.jit(jax.vmap(ImageToFunction.__call__, in_axes=(None, 0)))
"""A batch of images (B, g, g) -> the series (B, N, N): one compilation per model configuration and batch."""


def solve_image(model: ImageToFunction, a: np.ndarray, batch: int = 50) -> np.ndarray:
    """(count, N, N) float64: the model's series (of u, or of its correction: ``solver_part``) for coefficients
    ``a`` (count, s, s), s any of the benchmark's grids: each image is read at the model's points
    (``model.sampler``) first, so that one compilation serves every s; ``batch`` images a call (the last batch
    padded to ``batch``)."""
    images = _images(model.config, a, "solve_image")
    dtype = jax.tree_util.tree_leaves(model)[0].dtype
    batch = min(batch, len(images))
    padded = np.concatenate([images, np.repeat(images[-1:], -len(images) % batch, axis=0)])
    out = [np.asarray(_series(model, jnp.asarray(padded[i : i + batch], dtype))) for i in range(0, len(padded), batch)]
    return np.concatenate(out)[: len(images)].astype(np.float64)


def _images(config: ImageConfig, a: np.ndarray, what: str) -> np.ndarray:
    """Coefficients (count, s, s), s any of the benchmark's grids, read at the model's g x g points (``sampler``)."""
    a = np.asarray(a)
    if a.ndim != 3 or a.shape[1] != a.shape[2]:
        raise ValueError(f"{what}: expected coefficients of shape (count, s, s), got {a.shape}")
    index = sampler(a.shape[-1], config.grid)
    images: np.ndarray = a[:, index][:, :, index]
    return images


def solver_part(config: ImageConfig, a: np.ndarray, s: int) -> np.ndarray:
    """(count, s, s) float64: the part of the model's prediction at the s x s grid points that the recipe's
    solver gives for coefficients ``a`` (count, s_in, s_in): ``data.coarse_solution`` of each image as the
    model reads it (g x g) at ``config.solver_nodes`` nodes; zeros if that is 0 (the series is all of u)."""
    images = _images(config, a, "solver_part")
    if not config.solver_nodes:
        return np.zeros((len(images), s, s))
    return np.stack([coarse_solution(image, config.solver_nodes, s) for image in images])


def predict_image(model: ImageToFunction, a: np.ndarray, s: int | None = None, batch: int = 50) -> np.ndarray:
    """(count, s, s) float64: the model's solutions at the s x s grid points (s = None: the input's grid)
    for coefficients ``a`` (count, s_in, s_in), s_in any of the benchmark's grids: the solver's part
    (``solver_part``) plus the series (``solve_image``) there."""
    s = np.shape(a)[-1] if s is None else s
    predicted: np.ndarray = solver_part(model.config, a, s) + at_grid(solve_image(model, a, batch), s)
    return predicted


def at_grid(series: np.ndarray, s: int) -> np.ndarray:
    """(count, s, s) float64: series (count, N, N) at the s x s grid points, V C V^T (``model.values`` in numpy)."""
    v = grid_vandermonde(s, np.shape(series)[-1])
    out: np.ndarray = v @ np.asarray(series, np.float64) @ v.T
    return out
