"""The held-out curve, as the loop (``loop.fit``) reads it: named metrics, early stopping, the best so far.

    record(value, epoch, metrics) -> error   a validation's value: one error, or named metrics (the first the error)
    stalled(held_out, patience, min_delta)   Keras's ``EarlyStopping`` rule on the errors so far
    improved(held_out)                       whether the newest error is the lowest so far (``keep_best``)
    stopped_early(...)                       the line an early stop prints

``held_out`` is ``State.held_out``: (epoch, error) pairs, oldest first. Everything here is a function of the curve
alone, which the checkpoint keeps, so a resumed run decides as an uninterrupted one.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

__all__ = ["improved", "record", "stalled", "stopped_early"]

Curve = list[tuple[int, float]]


def record(value: float | Mapping[str, float], epoch: int, metrics: dict[str, Curve]) -> float:
    """A validation's value: one error, or named metrics appended to their curves in ``metrics`` (the same names
    each time); the error the loop watches (the first metric). ValueError naming the names where they change."""
    if not isinstance(value, Mapping):
        return float(value)
    if not value or (metrics and list(value) != list(metrics)):
        raise ValueError(f"fit: validate gave the metrics {list(value)} at epoch {epoch}, where it gave "
                         f"{list(metrics)} before: give the same named metrics each time")  # fmt: skip
    for name, number in value.items():
        metrics.setdefault(name, []).append((epoch, float(number)))
    return float(next(iter(value.values())))


def stalled(held_out: Curve, patience: int, min_delta: float = 0.0) -> bool:
    """Whether the last ``patience`` held-out errors each failed to improve on the best before them, an
    improvement being an error below it by more than ``min_delta`` (Keras's ``EarlyStopping``)."""
    best, waited = np.inf, 0
    for _, error in held_out:
        best, waited = (error, 0) if error < best - min_delta else (best, waited + 1)
    return waited >= patience


def improved(held_out: Curve) -> bool:
    """Whether the newest held-out error is below every one before it."""
    return bool(held_out) and held_out[-1][1] < min((e for _, e in held_out[:-1]), default=np.inf)


def stopped_early(held_out: Curve, patience: int | None, min_delta: float, epoch: int) -> str:
    """The line of a run stopped early after ``epoch``, naming the best error and its epoch."""
    epoch_best, best = min(held_out, key=lambda held: held[1])
    return (
        f"stopped early after epoch {epoch}: {patience} held-out errors with none below the best before by more "
        f"than {min_delta:g} (the best: {best:.4e}, epoch {epoch_best})"
    )
