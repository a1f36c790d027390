"""Where ``loop.fit`` takes its minibatches from: a training set held whole, or minibatches drawn afresh.

    Arrays(inputs, targets, batch)   a training set on the devices: pytrees (arrays, a dict of them, a ``Vec``,
                                     a batch of ``DenseTree``\\ s) whose leaves share a leading count axis;
                                     epoch e visits the samples in the order ``steps.epoch_order(seed, e)``
    Drawn(draw, per_epoch)           ``draw(seed, step) -> (inputs, targets)``, a minibatch made on the host
                                     from (seed, step) alone: data drawn afresh (trees, digits), or grouped by
                                     shape (a band of lengths, a bucket: one compilation a shape); an
                                     "epoch" is ``per_epoch`` steps (a line, a checkpoint, the budget's check)

Either way a step's minibatch depends only on (seed, step), so a run resumed from a checkpoint repeats an
uninterrupted one bit for bit.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import jax

__all__ = ["Arrays", "Drawn", "Source", "count"]

I = TypeVar("I")  # noqa: E741  (the inputs' type, as T is the targets')
T = TypeVar("T")


def count(tree: Any, what: str) -> int:
    """The leading axis shared by every leaf of ``tree``; ValueError naming the leaf (its path) that differs,
    or saying ``what`` has no array at all."""
    leaves = jax.tree_util.tree_leaves_with_path(tree)
    if not leaves:
        raise ValueError(f"{what} holds no array")
    sizes = {}
    for path, leaf in leaves:
        shape = getattr(leaf, "shape", ())
        if not shape:
            raise ValueError(f"{what}{jax.tree_util.keystr(path)} is a scalar: every leaf needs a leading sample axis")
        sizes[jax.tree_util.keystr(path)] = shape[0]
    first, size = next(iter(sizes.items()))
    for name, other in sizes.items():
        if other != size:
            raise ValueError(f"{what}{first} has {size} samples but {what}{name} has {other}")
    return int(size)


@dataclass(frozen=True)
class Arrays(Generic[I, T]):
    """A training set held whole, placed on the devices once: ``inputs`` and ``targets`` are pytrees whose
    leaves share the leading axis (``count``), and each step takes ``batch`` of them (an epoch is
    ``count // batch`` steps; the last partial minibatch is dropped). ValueError: inputs and targets of
    different counts (naming the leaves), a batch outside 1 ... count."""

    inputs: I
    targets: T
    batch: int

    def __post_init__(self) -> None:
        n, m = count(self.inputs, "inputs"), count(self.targets, "targets")
        if n != m:
            raise ValueError(f"fit: {n} inputs but {m} targets")
        if not 1 <= self.batch <= n:
            raise ValueError(f"fit: batch = {self.batch} must be between 1 and the {n} training samples")

    @functools.cached_property
    def count(self) -> int:
        """The training samples (read once: the loop asks every step)."""
        return count(self.inputs, "inputs")

    @functools.cached_property
    def per_epoch(self) -> int:
        return self.count // self.batch


@dataclass(frozen=True)
class Drawn(Generic[I, T]):
    """Minibatches made on the host, ``draw(seed, step) -> (inputs, targets)``: pytrees whose leaves share a
    leading batch axis (any size; minibatches of one shape share one compilation), a function of (seed,
    step) alone, so that a resumed run draws what an uninterrupted one would. ``per_epoch`` steps make an
    "epoch": a line, a checkpoint by default, the budget's check."""

    draw: Callable[[int, int], tuple[I, T]]
    per_epoch: int

    def __post_init__(self) -> None:
        if self.per_epoch < 1:
            raise ValueError(f"fit: Drawn.per_epoch = {self.per_epoch} must be positive")


Source = Arrays[Any, Any] | Drawn[Any, Any]
"""What ``fit`` trains on."""
