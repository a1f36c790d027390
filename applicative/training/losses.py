"""Losses any model can train on: functions of a minibatch's predictions and targets, differentiable in both.

values_relative_l2(p, u)   (B,): each sample's ||p - u||_2 / ||u||_2 over all its values
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

__all__ = ["values_relative_l2"]


def values_relative_l2(predicted: jax.Array, target: jax.Array) -> jax.Array:
    """(B,): each sample's ||p - u||_2 / ||u||_2 over its values (the float64 numpy metric of the operator tasks,
    ``funcformer.learning.metric.values_relative_l2``, in JAX, as a loss)."""
    axes = tuple(range(1, jnp.ndim(target)))
    difference = jnp.sqrt(jnp.sum((predicted - target) ** 2, axis=axes))
    return difference / jnp.sqrt(jnp.sum(target**2, axis=axes))
