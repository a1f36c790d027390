"""The digit sequences: minibatches drawn afresh each step, and a test set from a key of their own.

    keys(seed)                         (model, data, test): the three keys a run of ``seed`` draws from
    sample(key, size)                  ``size`` random sequences of ``LENGTH`` digits and their reversals
    source(batch, steps, per_epoch)    the training minibatches (``applicative.training.Drawn``)
    test_set(seed, size)               the held-out sequences: never trained on (an independent key)

Step s of a run of ``steps`` steps trains on ``sample(k_s, batch)``, k_s the s-th key of
``jax.random.split(data_key, steps)``, as the example's hand-written loop drew it inside its jitted step. With
JAX's partitionable threefry (its default) k_s does not depend on the step count, without it k_s does; the
schedule does either way, so a run's ``steps`` are part of its settings (config.json), and a resumed run draws
what the uninterrupted one would.
"""

from __future__ import annotations

import functools

import jax
import numpy as np
from jax import Array

from applicative.examples.digits.model import LENGTH, VOCABULARY
from applicative.training import Drawn

__all__ = ["keys", "sample", "source", "test_set"]


def keys(seed: int) -> tuple[Array, Array, Array]:
    """The keys of a run of ``seed``: the model's initialisation, the training data's and the test set's."""
    model, data, test = jax.random.split(jax.random.PRNGKey(seed), 3)
    return model, data, test


@functools.partial(jax.jit, static_argnums=1)
def sample(key: Array, size: int) -> tuple[Array, Array]:
    """``size`` random digit sequences, (size, LENGTH) integers in 0 ... VOCABULARY - 1, and their reversals."""
    tokens = jax.random.randint(key, (size, LENGTH), 0, VOCABULARY)
    return tokens, tokens[:, ::-1]


@functools.lru_cache(maxsize=4)
def _step_keys(seed: int, steps: int) -> Array:
    """The ``steps`` keys of the training minibatches, one a step, split from the data key once a run."""
    return jax.random.split(keys(seed)[1], steps)


def source(batch: int, steps: int, per_epoch: int) -> Drawn[np.ndarray, np.ndarray]:
    """The minibatches of a run of ``steps`` steps: ``draw(seed, s)`` is (tokens, reversals), ``batch`` sequences
    drawn with the s-th of ``steps`` keys split from ``keys(seed)``'s data key, as numpy arrays; an epoch is
    ``per_epoch`` steps. ValueError: a step outside 0 ... steps - 1."""

    def draw(seed: int, step: int) -> tuple[np.ndarray, np.ndarray]:
        if not 0 <= step < steps:
            raise ValueError(f"digits: step {step} is outside the run's {steps} steps")
        tokens, targets = sample(_step_keys(seed, steps)[step], batch)
        return np.asarray(tokens), np.asarray(targets)

    return Drawn(draw, per_epoch)


def test_set(seed: int, size: int) -> tuple[Array, Array]:
    """``size`` held-out sequences and their reversals, drawn from ``keys(seed)``'s test key."""
    tokens, targets = sample(keys(seed)[2], size)
    return tokens, targets
