"""The optimisers every model of the project trains with: one factory, two named schedules.

    warmup_cosine   Adam (AdamW with a weight decay) on a linear warm-up and a cosine decay to 1% of the
                    peak (or another ``floor``), after clipping the gradient's global norm: the
                    transformers' recipe
    step_decay      the FNO paper's: torch's Adam with an L2 weight decay (added to the gradient before the
                    moments, not AdamW's decoupled one) on StepLR, the rate times ``gamma`` every ``every``
                    epochs

Both count optimiser updates (optax's ``count``), so a run resumed from its optimiser state continues on
the same schedule.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import optax
from jax.typing import ArrayLike

__all__ = ["step_decay", "warmup_cosine"]


def warmup_cosine(
    steps: int,
    learning_rate: float,
    *,
    warmup: int = 100,
    clip: float = 1.0,
    weight_decay: float = 0.0,
    mask: Callable[[Any], Any] | None = None,
    floor: float = 0.01,
) -> optax.GradientTransformation:
    """Adam (AdamW when ``weight_decay`` > 0) on a linear warm-up from 0 over ``min(warmup, steps // 10)``
    updates (a shortened run keeps most of its steps) and a cosine decay to ``floor * learning_rate`` (by
    default a hundredth) at update ``steps``, after clipping the gradient's global norm to ``clip`` (which
    tames the large gradients of the first steps). ``mask`` (AdamW's): a function of the parameters giving a pytree of
    bools, True where the weight decay applies (default: everywhere)."""
    schedule = optax.warmup_cosine_decay_schedule(
        init_value=0.0,
        peak_value=learning_rate,
        warmup_steps=min(warmup, steps // 10),
        decay_steps=steps,
        end_value=floor * learning_rate,
    )
    adam = optax.adamw(schedule, weight_decay=weight_decay, mask=mask) if weight_decay else optax.adam(schedule)
    return optax.chain(optax.clip_by_global_norm(clip), adam)


def step_decay(
    steps_per_epoch: int, learning_rate: float, *, every: int, gamma: float = 0.5, weight_decay: float = 0.0
) -> optax.GradientTransformation:
    """The FNO paper's optimiser: torch's ``Adam(weight_decay=...)``, ``weight_decay * parameter`` added to
    the gradient before the moments (``chain(add_decayed_weights, adam)``), on torch's ``StepLR`` stepped
    once an epoch: update k (0-based) of epoch ``k // steps_per_epoch`` takes
    ``learning_rate * gamma ** (epoch // every)``."""

    def rate(count: ArrayLike) -> jax.Array:
        reductions = jnp.asarray(count) // steps_per_epoch // every
        return learning_rate * gamma**reductions  # weakly typed: the updates' dtype

    return optax.chain(optax.add_decayed_weights(weight_decay), optax.adam(rate))
