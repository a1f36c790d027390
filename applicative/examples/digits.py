"""Train a Vec transformer to reverse a sequence of digits.

The task: given 8 random digits (vocabulary 10), output them in reverse
order, ``y[i] = x[7 - i]``. Every output position depends on the whole input,
so an unmasked encoder with learned positions suffices: each position learns
to attend to its mirror image. The model is the generic ``applicative.nn``
encoder instantiated on ``Vec``; it is a pytree, so ``jax.jit``, ``jax.grad``,
``jax.vmap`` and optax (AdamW on a warmup + cosine schedule, with gradient
clipping) apply to it directly.

Run ``python -m applicative.examples.digits``. With the defaults (one layer,
width 64, 4 heads, 300 steps of 128 fresh sequences) it reached a test token
accuracy of 1.000 on 2048 held-out sequences (above 0.99 from step 100 on),
in 12-13 s of wall time on a 2-core CPU (up to 29 s while other jobs loaded
it), jit compilation included (most of that time is compilation). Chance is
0.1 accuracy, a cross entropy of ln 10 = 2.30.
"""

from __future__ import annotations

import argparse
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import NamedTuple, TypeVar

import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax import Array

from applicative import Dim, Vec, VecOf, one_hot, sinusoidal_positions, to_array
from applicative.nn import AttentionOptions, Encoder, init_encoder
from applicative.training import warmup_cosine

__all__ = ["Config", "DigitModel", "Result", "accuracy", "init_model", "main", "train"]

LENGTH = 8
VOCABULARY = 10


class Seq(Dim):
    """A position in the digit sequence."""


class Vocab(Dim):
    """A digit: a one-hot input feature or an output logit."""


class Model(Dim):
    """A feature of the model's states."""


class Hidden(Dim):
    """A feature inside the MLP."""


class Head(Dim):
    """An attention head."""


class HeadFeature(Dim):
    """A query, key or value feature of one head."""


N = TypeVar("N", bound=Dim)

DigitModel = Encoder[VecOf[Seq], VecOf[Vocab], VecOf[Model], VecOf[Vocab]]


@dataclass(frozen=True)
class Config:
    """Model size and optimiser settings."""

    width: int = 64
    hidden: int = 128
    heads: int = 4
    head_features: int = 16
    layers: int = 1
    batch: int = 128
    learning_rate: float = 3e-3
    warmup: int = 100
    weight_decay: float = 1e-2
    clip: float = 1.0
    test_size: int = 2048


class Result(NamedTuple):
    """What a training run achieved."""

    initial_loss: float
    final_loss: float
    test_accuracy: float
    seconds: float


def _template(size: int, tag: type[N]) -> Vec[N, Array]:
    # float32 templates give float32 parameters, also under jax_enable_x64.
    return Vec.from_array(np.zeros(size, np.float32), tag)


def init_model(key: Array, config: Config) -> DigitModel:
    """An encoder over ``LENGTH`` positions, its learned positions started from the sinusoidal table."""
    options = AttentionOptions(
        heads=_template(config.heads, Head),
        model=_template(config.width, Model),
        head_features=_template(config.head_features, HeadFeature),
    )
    model: DigitModel = init_encoder(
        key,
        options,
        inputs=_template(VOCABULARY, Vocab),
        hidden=_template(config.hidden, Hidden),
        layers=config.layers,
        outputs=_template(VOCABULARY, Vocab),
        positions=sinusoidal_positions(LENGTH, Seq, config.width, Model, jnp.float32),
        learned_positions=True,
    )
    return model


def logits(model: DigitModel, tokens: Array) -> Array:
    """The (LENGTH, VOCABULARY) logits for one sequence of ``LENGTH`` digits."""
    return to_array(model(one_hot(tokens, Seq, VOCABULARY, Vocab, jnp.float32)))


def batch_logits(model: DigitModel, tokens: Array) -> Array:
    """Logits for a (batch, LENGTH) array of digits: the model sees one sequence, vmap adds the batch."""
    return jax.vmap(logits, in_axes=(None, 0))(model, tokens)


def sample(key: Array, size: int) -> tuple[Array, Array]:
    """``size`` random digit sequences and their reversals."""
    tokens = jax.random.randint(key, (size, LENGTH), 0, VOCABULARY)
    return tokens, tokens[:, ::-1]


def loss(model: DigitModel, tokens: Array, targets: Array) -> Array:
    """Mean cross entropy per token."""
    per_token: Array = optax.softmax_cross_entropy_with_integer_labels(batch_logits(model, tokens), targets)
    return per_token.mean()


def accuracy(model: DigitModel, tokens: Array, targets: Array) -> Array:
    """The fraction of output tokens predicted exactly."""
    return (batch_logits(model, tokens).argmax(-1) == targets).mean()


def optimiser(config: Config, steps: int) -> optax.GradientTransformation:
    """AdamW on a warmup + cosine schedule, with gradient clipping."""
    return warmup_cosine(
        steps, config.learning_rate, warmup=config.warmup, clip=config.clip, weight_decay=config.weight_decay
    )


def train(
    steps: int,
    seed: int = 0,
    config: Config = Config(),
    log_every: int = 100,
    log: Callable[[str], None] = print,
) -> Result:
    """Train on ``steps`` batches of fresh sequences, then test on sequences from an independent key."""
    start = time.perf_counter()
    model_key, data_key, test_key = jax.random.split(jax.random.PRNGKey(seed), 3)
    test_tokens, test_targets = sample(test_key, config.test_size)
    model = init_model(model_key, config)
    tx = optimiser(config, steps)
    state = tx.init(model)

    @jax.jit
    def step(model: DigitModel, state: optax.OptState, key: Array) -> tuple[DigitModel, optax.OptState, Array]:
        # Sampling inside the jitted step keeps the data out of the Python loop.
        tokens, targets = sample(key, config.batch)
        value, grads = jax.value_and_grad(loss)(model, tokens, targets)
        updates, state = tx.update(grads, state, model)
        return optax.apply_updates(model, updates), state, value

    evaluate = jax.jit(accuracy)

    def test(trained: DigitModel, i: int, value: Array) -> float:
        result = float(evaluate(trained, test_tokens, test_targets))
        log(f"step {i:4d}  loss {float(value):.4f}  test token accuracy {result:.3f}")
        return result

    losses = []  # each step's loss is taken before its update: the first is the untrained model's
    for i, key in enumerate(jax.random.split(data_key, steps), start=1):
        model, state, value = step(model, state, key)
        losses.append(value)
        if i % log_every == 0 and i < steps:
            test(model, i, value)
    test_accuracy = test(model, steps, losses[-1])
    return Result(float(losses[0]), float(losses[-1]), test_accuracy, time.perf_counter() - start)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Train a Vec transformer to reverse digit sequences.")
    parser.add_argument("--steps", type=int, default=300, help="training steps (default: %(default)s)")
    parser.add_argument("--seed", type=int, default=0, help="random seed (default: %(default)s)")
    args = parser.parse_args(argv)
    result = train(args.steps, args.seed)
    print(f"loss {result.initial_loss:.3f} -> {result.final_loss:.4f} (chance ln 10 = {math.log(VOCABULARY):.3f})")
    print(f"test token accuracy: {result.test_accuracy:.3f} in {result.seconds:.1f} s")


if __name__ == "__main__":
    main()
