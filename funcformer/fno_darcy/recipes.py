"""How the image-to-function model is trained and asked, on the benchmark's arrays.

    Recipe             the model's architecture and its training budget (hashable, one value a run)
    train_image        a Recipe's model trained on (a, u) at one resolution into a run directory
                       (``applicative.training.fit``, resumable)
    image_learner      the model as the loop trains it (``applicative.training.Learner``); image_loss, its loss
    solve_image        its series for coefficients at any of the benchmark's grids
    solver_part        the part of its prediction the recipe's solver gives (``ImageConfig.solver_nodes``; or 0)
    predict_image      its solutions at any of the benchmark's grids, from coefficients at any of them

The loss is the benchmark's metric, the mean relative L2 error over the grid points of the training
resolution, of the model's prediction there (the solver's part plus the series, ``model.values``) against
the solutions. AdamW with a linear warm-up and a cosine decay to 1% of the peak, after clipping the
gradient's global norm. The model's series is in units of the root mean square of what it learns, u minus
the solver's part (``ImageToFunction.scale``).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeAlias

import jax
import jax.numpy as jnp
import numpy as np
import optax

from applicative.instances.collocation import evaluate_grid
from applicative.training import Arrays, Learner, State, dihedral, fit, symmetrised, values_relative_l2, warmup_cosine
from funcformer._fields import check_fields
from funcformer.fno_darcy import model as attending
from funcformer.fno_darcy import vit
from funcformer.fno_darcy.data import coarse_solution, grid_points
from funcformer.fno_darcy.model import ImageConfig, ImageToFunction, sampler, values
from funcformer.fno_darcy.vit import ViTConfig, ViTToFunction

__all__ = [
    "IMAGE", "Recipe", "image_learner", "image_loss", "predict_image", "solve_image", "solver_part", "train_image",
]  # fmt: skip


@dataclass(frozen=True)
class Recipe:
    """An image-to-function run: the architecture and the budget. The defaults are the best learned model
    (docs/fno_darcy.md): the ViT of ``funcformer.fno_darcy.vit`` with the square's symmetries, 50 epochs of
    minibatches of 10, an hour on a 2-core CPU (``IMAGE`` is the first, attending model's recipe)."""

    model: ImageConfig | ViTConfig = field(default_factory=ViTConfig)
    epochs: int = 50
    batch: int = 10
    learning_rate: float = 1e-3
    warmup: int = 100
    """Steps of linear warm-up."""
    weight_decay: float = 1e-4
    clip: float = 1.0
    seed: int = 0
    augment: bool = True
    """Each minibatch moved by the square's symmetries (``applicative.training.symmetry.dihedral``): exact ones of
    the data, under which the solution map commutes (docs/fno_darcy.md)."""

    def __post_init__(self) -> None:
        check_fields(self)
        for name in ("epochs", "batch"):
            if getattr(self, name) < 1:
                raise ValueError(f"Recipe.{name} must be positive, got {getattr(self, name)}")
        if not self.learning_rate > 0:
            raise ValueError(f"Recipe.learning_rate must be positive, got {self.learning_rate}")

    def optimiser(self, count: int) -> optax.GradientTransformation:
        """AdamW on the warm-up and cosine schedule of ``epochs`` epochs of ``count`` samples
        (``applicative.training.warmup_cosine``)."""
        steps = self.epochs * (count // self.batch)
        mask = vit.trained if isinstance(self.model, ViTConfig) else None  # the data's moments are not decayed
        return warmup_cosine(
            steps, self.learning_rate, warmup=self.warmup, clip=self.clip, weight_decay=self.weight_decay, mask=mask
        )

    def describe(self, count: int, s: int, scale: float) -> str:
        """A run's config.json: the recipe, the training samples, their grid and the output unit."""
        model = "vit" if isinstance(self.model, ViTConfig) else "image"
        fields = {"model": model, "recipe": dataclasses.asdict(self), "train": count, "s": s, "scale": scale}
        return json.dumps(fields, indent=2, sort_keys=True)


IMAGE = Recipe(model=ImageConfig(), epochs=40, batch=20, augment=False)
"""The attending model's recipe (``funcformer.fno_darcy.model``: Chebyshev queries attending to patches), the
first one: the base of the models that correct the solver."""


def train_image(
    recipe: Recipe,
    a: np.ndarray,
    u: np.ndarray,
    directory: Path | str,
    *,
    resume: bool = False,
    progress: bool = False,
    log: bool = False,
    validate: Callable[[ImageModel], float] | None = None,
    validate_every: int = 1,
    seconds: float | None = None,
) -> State[ImageModel]:
    """The recipe's model trained on coefficients ``a`` and solutions ``u``, (count, s, s) at one of the
    benchmark's grids (the loss is taken there), into the run directory ``directory``
    (``applicative.training.fit``: an epoch a jitted call, a checkpoint every epoch; ``resume`` continues it;
    ``log``: a line an epoch,
    with ``validate(model)`` every ``validate_every`` epochs). ValueError: a and u of other shapes, a grid the
    benchmark has not, coefficients outside the model's [low, high]."""
    a, u = np.asarray(a), np.asarray(u)
    if a.ndim != 3 or a.shape != u.shape:
        raise ValueError(f"train_image: expected a and u of one shape (count, s, s), got {a.shape} and {u.shape}")
    config = recipe.model
    if a.min() < config.low or a.max() > config.high:
        raise ValueError(
            f"train_image: the coefficients span [{a.min():g}, {a.max():g}], outside the model's "
            f"[low, high] = [{config.low:g}, {config.high:g}]: set ImageConfig.low and high to the data's two values"
        )
    s = a.shape[-1]
    grid_points(s)  # refuses a grid the benchmark has not
    part = solver_part(config, a, s)
    scale = float(np.sqrt(np.mean((u - part) ** 2)))
    index = sampler(s, config.grid)
    at_model = ((u - part) / scale)[:, index][:, :, index]  # what the model learns, at its g x g points
    mean, std = at_model.mean(axis=0), at_model.std(axis=0)
    if recipe.augment:  # the moments of the augmented set, whose law is the symmetric one
        mean, square = symmetrised(mean), symmetrised(std**2 + mean**2)
        std = np.sqrt(np.maximum(square - mean**2, 0.0))
    moments = (mean, std + 1e-5)
    dtype = np.float32
    state: State[ImageModel] = fit(
        image_learner(config, s, scale, moments, augment=recipe.augment), recipe.optimiser(len(a)),
        Arrays(a.astype(dtype), np.stack([u, part], axis=1).astype(dtype), recipe.batch), directory,
        description=recipe.describe(len(a), s, scale), steps=recipe.epochs * (len(a) // recipe.batch),
        seed=recipe.seed, scale=scale,
        resume=resume, progress=progress, log=log, validate=validate, validate_every=validate_every, seconds=seconds,
        block=len(a) // recipe.batch,
    )  # fmt: skip
    return state


def image_learner(
    config: ImageConfig | ViTConfig,
    s: int,
    scale: float,
    moments: tuple[np.ndarray, np.ndarray] | None = None,
    *,
    augment: bool = False,
) -> Learner[ImageModel]:
    """The model of ``config`` with output unit ``scale`` as ``funcformer.learning`` trains it at the s x s grid:
    ``init`` (a ``ViTToFunction`` with the targets' pointwise ``moments`` at its grid), ``image_loss``, the
    batched series; with ``augment``, each minibatch moved by the square's symmetries (``dihedral``)."""

    def loss(model: ImageModel, a: jax.Array, targets: jax.Array) -> jax.Array:
        return image_loss(model, a, targets, s)

    def init(seed: int) -> ImageModel:
        if isinstance(config, ViTConfig):
            return vit.init(seed, config, scale, moments)
        return attending.init(seed, config, scale)

    return Learner(init, loss, _series, dihedral if augment else None)


def image_loss(model: ImageModel, a: jax.Array, targets: jax.Array, s: int) -> jax.Array:
    """The training loss: the benchmark's metric at the s x s grid points of the prediction for the images
    ``a`` (B, s, s), the solver's part plus the model's series, against the solutions; ``targets`` (B, 2, s, s)
    holds the solutions and the solver's parts (``solver_part``)."""
    return jnp.mean(values_relative_l2(targets[:, 1] + values(jax.vmap(model)(a), s), targets[:, 0]))


ImageModel: TypeAlias = ImageToFunction | ViTToFunction
"""The two image-to-function models: attending from Chebyshev queries (``model``), or a ViT per cell (``vit``)."""


def _apply(model: ImageModel, a: jax.Array) -> jax.Array:
    return model(a)


_series = jax.jit(jax.vmap(_apply, in_axes=(None, 0)))
"""A batch of images (B, g, g) -> the series (B, N, N): one compilation per model configuration and batch."""


def solve_image(model: ImageModel, a: np.ndarray, batch: int = 50) -> np.ndarray:
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


def _images(config: ImageConfig | ViTConfig, a: np.ndarray, what: str) -> np.ndarray:
    """Coefficients (count, s, s), s any of the benchmark's grids, read at the model's g x g points (``sampler``)."""
    a = np.asarray(a)
    if a.ndim != 3 or a.shape[1] != a.shape[2]:
        raise ValueError(f"{what}: expected coefficients of shape (count, s, s), got {a.shape}")
    index = sampler(a.shape[-1], config.grid)
    images: np.ndarray = a[:, index][:, :, index]
    return images


def solver_part(config: ImageConfig | ViTConfig, a: np.ndarray, s: int) -> np.ndarray:
    """(count, s, s) float64: the part of the model's prediction at the s x s grid points that the recipe's
    solver gives for coefficients ``a`` (count, s_in, s_in): ``data.coarse_solution`` of each image as the
    model reads it (g x g) at ``config.solver_nodes`` nodes; zeros if that is 0 (the series is all of u)."""
    images = _images(config, a, "solver_part")
    if not config.solver_nodes:
        return np.zeros((len(images), s, s))
    return np.stack([coarse_solution(image, config.solver_nodes, s) for image in images])


def predict_image(model: ImageModel, a: np.ndarray, s: int | None = None, batch: int = 50) -> np.ndarray:
    """(count, s, s) float64: the model's solutions at the s x s grid points (s = None: the input's grid)
    for coefficients ``a`` (count, s_in, s_in), s_in any of the benchmark's grids: the solver's part
    (``solver_part``) plus the series (``solve_image``) there."""
    s = np.shape(a)[-1] if s is None else s
    x = 2.0 * grid_points(s) - 1.0
    predicted: np.ndarray = solver_part(model.config, a, s) + evaluate_grid(solve_image(model, a, batch), x, x)
    return predicted
