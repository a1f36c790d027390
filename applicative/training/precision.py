"""Mixed precision: a ``Learner`` that computes in bfloat16 while the loop keeps float32 parameters.

    bfloat16(learner)   the same model, its loss and prediction computed in bfloat16

Keras's ``mixed_bfloat16`` policy and Lightning's ``precision="bf16-mixed"`` in one function of a ``Learner``:
the parameters, their gradients and the optimiser's state stay float32 (an update too small for bfloat16's 8
bits of mantissa still counts), and each call of the loss or the prediction casts the float32 leaves of the
parameters and of the inputs to bfloat16 at its start (leaves of other dtypes, integer tokens or a tree's
layout, pass as they are), computes in bfloat16, and returns the loss and the outputs' floating leaves as
float32. The gradient flows back through the casts to the float32 parameters. No loss scaling: bfloat16 has
float32's exponent range, so gradients do not underflow as float16's do.

What it buys depends on the device: on a GPU or TPU with bfloat16 matrix units, the products run on them and
the activations take half the memory; a CPU without them converts to float32 for each product and is slower
(``bench/precision.py`` measures both, side by side, and the error it costs).
"""

from __future__ import annotations

from typing import Any, TypeVar

import jax
import jax.numpy as jnp

from applicative.training.learner import Learner

__all__ = ["bfloat16"]

P = TypeVar("P")
I = TypeVar("I")  # noqa: E741
T = TypeVar("T")
O = TypeVar("O")  # noqa: E741


def _cast(tree: Any, source: Any, target: Any) -> Any:
    """``tree`` with its leaves of dtype ``source`` cast to ``target``; every other leaf as it is."""
    return jax.tree_util.tree_map(lambda a: a.astype(target) if getattr(a, "dtype", None) == source else a, tree)


def bfloat16(learner: Learner[P, I, T, O]) -> Learner[P, I, T, O]:
    """``learner`` computing in bfloat16: its loss and prediction take the float32 leaves of the parameters and
    inputs as bfloat16, and give the loss and the outputs' bfloat16 leaves as float32 (the module docstring);
    ``init`` and ``augment`` are ``learner``'s, so the loop's parameters and optimiser state stay float32."""

    def loss(params: P, inputs: I, targets: T) -> jax.Array:
        low = learner.loss(_cast(params, jnp.float32, jnp.bfloat16), _cast(inputs, jnp.float32, jnp.bfloat16), targets)
        return low.astype(jnp.float32)

    def predict(params: P, inputs: I) -> O:
        out = learner.predict(_cast(params, jnp.float32, jnp.bfloat16), _cast(inputs, jnp.float32, jnp.bfloat16))
        widened: O = _cast(out, jnp.bfloat16, jnp.float32)
        return widened

    return Learner(learner.init, loss, predict, learner.augment)
