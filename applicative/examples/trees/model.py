"""The trees example's settings, model and loss: a one-layer encoder over ``DenseTree``\\ s that tells, leaf by
leaf, whether the leaf's value lies above the tree's dyadic mean.

    Config                       the model's size, the data's and the optimiser's settings (a run's description)
    init_model(key, config)      the encoder, no positional encodings, one input feature and CLASSES logits a leaf
    with_values, targets         a stack of trees holding values, and each slot's answer
    logits, loss, predict        a tree's logits; the batch's cross entropy over its leaves; its predicted classes
    baseline                     the shape-blind rule (above the plain mean of the leaves), in numpy
    learner(config)              the model as ``applicative.training.fit`` trains it

The model never sees a depth: the shape enters only through ``counit``, which normalises attention, so the
softmax is taken against the dyadic measure and a uniform attention head computes exactly the integral.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Literal

import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax import Array

from applicative import DenseTree, DenseTreeOf, Dim, Vec, VecOf, to_array
from applicative.examples.common import Head, HeadFeature, Hidden, Model, Optimisation, template
from applicative.nn import AttentionOptions, Encoder, Softmax, init_encoder
from applicative.training import Learner

__all__ = [
    "CLASSES",
    "Config",
    "Feature",
    "Logit",
    "TreeModel",
    "baseline",
    "init_model",
    "learner",
    "logits",
    "loss",
    "optimiser",
    "predict",
    "targets",
    "with_values",
]

CLASSES = 2  # below or above the dyadic mean
OPTIMISATION = Optimisation(warmup=20)  # AdamW at 1e-2, 20 steps of warm-up


class Feature(Dim):
    """An input feature of a leaf (its value)."""


class Logit(Dim):
    """An output logit of a leaf: below, above."""


TreeModel = Encoder[DenseTreeOf, VecOf[Feature], VecOf[Model], VecOf[Logit]]


@dataclass(frozen=True)
class Config:
    """Model size, data and optimiser settings: with the steps, the seed and the epoch, a run's description
    (``training.describe``), so that a run is resumed with the settings it started with."""

    width: int = 32
    hidden: int = 64
    heads: int = 4
    head_features: int = 8
    layers: int = 1
    chunk: int | Literal["auto"] | None = "auto"  # rows of queries at a time (``Softmax``)
    batch: int = 32
    optimisation: Optimisation = OPTIMISATION
    capacity: int = 4096
    min_leaves: int = 64
    max_leaves: int = 4096
    train_trees: int = 4096  # syntax trees of the training files: the pool batches are drawn from
    test_bands: tuple[tuple[int, int], ...] = ((64, 1024), (1025, 4096))  # leaves of the held-out test sets
    test_trees: int = 256  # held-out syntax trees in each band (all of them if fewer)
    random_trees: int = 256  # random shapes of min_leaves to max_leaves
    test_batch: int = 32


def init_model(key: Array, config: Config) -> TreeModel:
    """A ``config.layers``-layer encoder over trees, without positional encodings."""
    options = AttentionOptions(
        heads=template(config.heads, Head),
        model=template(config.width, Model),
        head_features=template(config.head_features, HeadFeature),
        normalise=Softmax(config.chunk),
    )
    model: TreeModel = init_encoder(
        key,
        options,
        inputs=template(1, Feature),
        hidden=template(config.hidden, Hidden),
        layers=config.layers,
        outputs=template(CLASSES, Logit),
    )
    return model


def with_values(trees: DenseTree[Array], values: Array) -> DenseTree[Vec[Feature, Array]]:
    """A batch of trees (a stack) holding ``values`` (batch, capacity) as one-feature leaves."""

    def one(tree: DenseTree[Array], v: Array) -> DenseTree[Vec[Feature, Array]]:
        return tree.with_elements(jax.vmap(lambda x: Vec.from_array(x[None], Feature))(v))

    batch: DenseTree[Vec[Feature, Array]] = jax.vmap(one)(trees, values)
    return batch


def targets(trees: DenseTree[Array], values: Array) -> Array:
    """Whether each slot's value lies above its tree's dyadic mean (batch, capacity)."""
    weights = jax.vmap(lambda t: t.weights())(trees).astype(values.dtype)
    mean = jnp.sum(weights * values, axis=-1, keepdims=True)
    return (values > mean).astype(jnp.int32)


def logits(model: TreeModel, tree: DenseTree[Vec[Feature, Array]]) -> Array:
    """The (capacity, CLASSES) logits of one tree (padding slots included)."""
    out = model(tree)
    if not isinstance(out, DenseTree):
        raise TypeError(f"logits: the model of a tree returned a {type(out).__name__}")
    return to_array(out)


def loss(model: TreeModel, trees: DenseTree[Vec[Feature, Array]], labels: Array) -> Array:
    """Mean cross entropy over the leaves of a batch of trees (padding excluded)."""
    per_slot = optax.softmax_cross_entropy_with_integer_labels(jax.vmap(logits, (None, 0))(model, trees), labels)
    valid = jax.vmap(lambda t: t.valid())(trees)
    return jnp.sum(jnp.where(valid, per_slot, 0.0)) / jnp.sum(valid)


def predict(model: TreeModel, trees: DenseTree[Vec[Feature, Array]]) -> Array:
    """The predicted class of every slot of a batch of trees (batch, capacity)."""
    return jax.vmap(logits, (None, 0))(model, trees).argmax(-1)


def baseline(values: np.ndarray, valid: np.ndarray) -> np.ndarray:
    """The shape-blind prediction: value above the plain mean of its tree's leaves."""
    mean = np.sum(np.where(valid, values, 0.0), axis=-1, keepdims=True) / valid.sum(-1, keepdims=True)
    above: np.ndarray = values > mean
    return above.astype(np.int32)


@functools.lru_cache(maxsize=8)
def optimiser(config: Config, steps: int) -> optax.GradientTransformation:
    """AdamW on a warmup + cosine schedule over ``steps`` updates, with gradient clipping
    (``config.optimisation``). One value for one (config, steps): a run and its resumption, in one process,
    share the training step's compilation."""
    return config.optimisation.optimiser(steps)


@functools.lru_cache(maxsize=8)
def learner(config: Config) -> Learner[TreeModel, DenseTree[Vec[Feature, Array]], Array]:
    """The model as ``applicative.training.fit`` trains it: ``init_model`` at the first of the three keys of the
    seed (the model's, the data's, the tests'), ``loss`` on a batch of trees holding their values against their
    ``targets``, and ``predict``. One value for one config, as ``optimiser``."""
    return Learner(lambda seed: init_model(jax.random.split(jax.random.PRNGKey(seed), 3)[0], config),
                   loss, predict)  # fmt: skip
