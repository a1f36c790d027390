"""The digit reverser: a ``Vec`` transformer and its settings.

    Config                             the run's settings (the model's size, the optimiser's, the minibatch,
                                       the test set, the steps an epoch): a run's config.json
    init_model(key, config)            an unmasked encoder over ``LENGTH`` positions with learned positions
    logits, batch_logits               the (LENGTH, VOCABULARY) logits of a sequence, of a batch of them
    loss, predict, accuracy            the mean cross entropy per token, the predicted digits, their accuracy

The model is the generic ``applicative.nn`` encoder instantiated on ``Vec``: every output position depends
on the whole input, so each position learns to attend to its mirror image. It is a pytree, so ``jax.jit``,
``jax.grad``, ``jax.vmap`` and optax apply to it directly.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import jax
import jax.numpy as jnp
import optax
from jax import Array

from applicative import Dim, VecOf, one_hot, sinusoidal_positions, to_array
from applicative.examples.common import Head, HeadFeature, Hidden, Model, Optimisation, template
from applicative.nn import AttentionOptions, Encoder, init_encoder

__all__ = [
    "LENGTH",
    "VOCABULARY",
    "Config",
    "DigitModel",
    "Seq",
    "Vocab",
    "accuracy",
    "batch_logits",
    "init_model",
    "logits",
    "loss",
    "predict",
]

LENGTH = 8
VOCABULARY = 10


class Seq(Dim):
    """A position in the digit sequence."""


class Vocab(Dim):
    """A digit: a one-hot input feature or an output logit."""


DigitModel = Encoder[VecOf[Seq], VecOf[Vocab], VecOf[Model], VecOf[Vocab]]


@dataclass(frozen=True)
class Config:
    """A run's settings: the model's size, the optimiser's settings, the minibatch (fresh sequences each step),
    the test set's size (sequences from a key of their own) and the steps an epoch (a line, a held-out error, a
    checkpoint)."""

    width: int = 64
    hidden: int = 128
    heads: int = 4
    head_features: int = 16
    layers: int = 1
    batch: int = 128
    optimisation: Optimisation = field(default_factory=lambda: Optimisation(learning_rate=3e-3))
    test_size: int = 2048
    per_epoch: int = 100

    def __post_init__(self) -> None:
        sizes = ("width", "hidden", "heads", "head_features", "layers", "batch", "test_size", "per_epoch")
        for name in sizes:
            value = getattr(self, name)
            if not (isinstance(value, int) and value >= 1):
                raise ValueError(f"Config.{name} = {value!r} must be a positive integer")


def init_model(key: Array, config: Config) -> DigitModel:
    """An encoder over ``LENGTH`` positions, its learned positions started from the sinusoidal table."""
    options = AttentionOptions(
        heads=template(config.heads, Head),
        model=template(config.width, Model),
        head_features=template(config.head_features, HeadFeature),
    )
    model: DigitModel = init_encoder(
        key,
        options,
        inputs=template(VOCABULARY, Vocab),
        hidden=template(config.hidden, Hidden),
        layers=config.layers,
        outputs=template(VOCABULARY, Vocab),
        positions=sinusoidal_positions(LENGTH, Seq, config.width, Model, jnp.float32),
        learned_positions=True,
    )
    return model


def logits(model: DigitModel, tokens: Array) -> Array:
    """The (LENGTH, VOCABULARY) logits for one sequence of ``LENGTH`` digits, in the parameters' dtype (bfloat16
    under ``training.bfloat16``)."""
    dtype = jax.tree_util.tree_leaves(model)[0].dtype
    return to_array(model(one_hot(tokens, Seq, VOCABULARY, Vocab, dtype)))


def batch_logits(model: DigitModel, tokens: Array) -> Array:
    """Logits for a (batch, LENGTH) array of digits: the model sees one sequence, vmap adds the batch."""
    return jax.vmap(logits, in_axes=(None, 0))(model, tokens)


def loss(model: DigitModel, tokens: Array, targets: Array) -> Array:
    """Mean cross entropy per token."""
    per_token: Array = optax.softmax_cross_entropy_with_integer_labels(batch_logits(model, tokens), targets)
    return per_token.mean()


def predict(model: DigitModel, tokens: Array) -> Array:
    """The (batch, LENGTH) predicted digits: the most likely at each position."""
    return batch_logits(model, tokens).argmax(-1)


def accuracy(model: DigitModel, tokens: Array, targets: Array) -> Array:
    """The fraction of output tokens predicted exactly."""
    return (predict(model, tokens) == targets).mean()
