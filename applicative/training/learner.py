"""``Learner``: a model as the learning layer trains it, a small value of three functions.

    init(seed) -> P                        the parameters (any pytree: a record, a dict of arrays)
    loss(P, inputs, targets) -> scalar     on a minibatch (pytrees of (B, ...) leaves); differentiable in P
    predict(P, inputs) -> outputs          on a batch (what a metric reads)
    augment(key, inputs, targets)          optional: a random transformation of each minibatch that the task's
                                           answers respect (``symmetry.dihedral``); its key is drawn from
                                           (seed, step), so a resumed run still repeats an uninterrupted one

The Funcformer (``funcformer.learning.steps.funcformer_learner``), ``funcformer.fno_darcy``'s
image-to-function model and its FNO, the examples and a user's own model (the guide "Training your own
model") are all trained by ``loop.fit`` through this one value.
Whatever a model needs from its training data (a normaliser, an output unit) is computed before and
closed over: ``Learner`` values are built by a task's function of its settings and data.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic

import jax
from typing_extensions import TypeVar

__all__ = ["Learner"]

P = TypeVar("P")
I = TypeVar("I", default=jax.Array)  # noqa: E741  (the inputs' type, as T is the targets' and O the outputs')
T = TypeVar("T", default=jax.Array)
O = TypeVar("O", default=jax.Array)  # noqa: E741


@dataclass(frozen=True)
class Learner(Generic[P, I, T, O]):
    r"""A model to train: its parameters from a seed, its loss on a minibatch, its prediction on a batch, and
    optionally the augmentation of its minibatches. Generic in the parameters P, the inputs I and targets T of a
    minibatch (any pytrees: arrays by default, a batch of ``DenseTree``\ s, a dict) and the outputs O of a
    prediction, so that mypy checks that the functions agree."""

    init: Callable[[int], P]
    loss: Callable[[P, I, T], jax.Array]
    predict: Callable[[P, I], O]
    augment: Callable[[jax.Array, I, T], tuple[I, T]] | None = None
