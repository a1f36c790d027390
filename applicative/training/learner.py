"""``Learner``: a model as the learning layer trains it, a small value of three functions.

    init(seed) -> P                        the parameters (any pytree: a record, a dict of arrays)
    loss(P, inputs, targets) -> scalar     on a minibatch, (B, ...) arrays; differentiable in P
    predict(P, inputs) -> outputs          on a batch (what a metric reads)
    augment(key, inputs, targets)          optional: a random transformation of each minibatch that the task's
                                           answers respect (``symmetry.dihedral``); its key is drawn from
                                           (seed, step), so a resumed run still repeats an uninterrupted one

The Funcformer (``steps.funcformer_learner``), ``funcformer.fno_darcy``'s image-to-function model and its
FNO, and a user's own model (docs/learning.md) are all trained by ``loop.fit`` through this one value.
Whatever a model needs from its training data (a normaliser, an output unit) is computed before and
closed over: ``Learner`` values are built by a task's function of its settings and data.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

import jax

__all__ = ["Learner"]

P = TypeVar("P")


@dataclass(frozen=True)
class Learner(Generic[P]):
    """A model to train: its parameters from a seed, its loss on a minibatch, its prediction on a batch, and
    optionally the augmentation of its minibatches."""

    init: Callable[[int], P]
    loss: Callable[[P, jax.Array, jax.Array], jax.Array]
    predict: Callable[[P, jax.Array], jax.Array]
    augment: Callable[[jax.Array, jax.Array, jax.Array], tuple[jax.Array, jax.Array]] | None = None
