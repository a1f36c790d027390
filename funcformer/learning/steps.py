"""The Funcformer's pure functions of training: its loss, its optimiser and its ``Learner``; the step and the
loop are every model's (``applicative.training``).

The loss is the mean relative L2 error, in the exact L2 norm on [-1, 1]^2 of the Chebyshev series
(the library's ``dot`` on the 2-D series), of the model's n x n prediction against its target
(``data.training_arrays``).
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import optax

from applicative import Cheb, Compose, dot
from applicative.training import Learner, warmup_cosine
from applicative.training.steps import epoch_order
from funcformer.learning.settings import RunConfig
from funcformer.model import Funcformer, ModelConfig, X, Y, init

__all__ = ["batch_indices", "funcformer_learner", "l2_norm", "loss", "optimiser", "series_relative_l2"]


def l2_norm(c: jax.Array) -> jax.Array:
    """Per-sample L2 norm on [-1, 1]^2 of (B, n, n) coefficient arrays: sqrt(dot(f, f)) for the 2-D
    series f as one structure (``Compose``), exact through the Gram matrices."""

    def norm(a: jax.Array) -> jax.Array:
        f = Compose(Cheb.from_array(a, X, Y))
        return jnp.sqrt(dot(f, f))

    return jax.vmap(norm)(c)


def series_relative_l2(predicted: jax.Array, target: jax.Array) -> jax.Array:
    """Per-sample ||p - u|| / ||u|| in the exact L2 norm on [-1, 1]^2 of the series (the training loss;
    ``metric.relative_l2``, the metric, takes it on the uniform grid against the fine solution)."""
    return l2_norm(predicted - target) / l2_norm(target)


def loss(model: Funcformer, x: jax.Array, t: jax.Array) -> jax.Array:
    """The mean of ``series_relative_l2`` of the model's predictions for inputs x against targets t."""
    return jnp.mean(series_relative_l2(jax.vmap(model)(x), t))


@functools.lru_cache(maxsize=4)
def optimiser(run: RunConfig) -> optax.GradientTransformation:
    """``applicative.training.warmup_cosine`` of the run's settings: Adam on a linear warm-up and a cosine decay
    to 1% of the peak, after clipping the global norm (built once per run configuration: ``train`` and the
    step share it)."""
    return warmup_cosine(run.steps, run.learning_rate, warmup=run.warmup, clip=run.clip)


def batch_indices(run: RunConfig, step: int) -> np.ndarray:
    """The training samples of ``step``: the i-th ``run.batch`` entries of its epoch's order."""
    epoch, i = divmod(step, run.train_size // run.batch)
    return epoch_order(run.seed, epoch, run.train_size)[i * run.batch : (i + 1) * run.batch]


@functools.lru_cache(maxsize=4)
def funcformer_learner(config: ModelConfig) -> Learner[Funcformer]:
    """The Funcformer of ``config`` as the loop trains it: ``init``, ``loss``, the batched model (one value
    per configuration, so that the jitted step is built once)."""
    return Learner(functools.partial(init, config=config), loss, jax.vmap(Funcformer.__call__))
