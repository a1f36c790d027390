"""What every example shares: the dimension tags of a transformer's insides, a parameter template, and the
optimiser's settings.

    Model, Hidden, Head, HeadFeature   a state's features, the MLP's, the heads, a head's query/key/value features
    template(size, tag)                a float32 Vec of zeros along ``tag``: the shape an initialiser reads
    Optimisation                       AdamW on a warm-up and a cosine decay after clipping
                                       (``applicative.training.warmup_cosine``): its four settings

An example's own tags (its positions, its vocabulary, its labels) stay with it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypeVar

import jax
import numpy as np
import optax

from applicative import Dim, Vec
from applicative.training import warmup_cosine

__all__ = ["Head", "HeadFeature", "Hidden", "Model", "Optimisation", "template"]

N = TypeVar("N", bound=Dim)


class Model(Dim):
    """A feature of the model's states."""


class Hidden(Dim):
    """A feature inside the MLP."""


class Head(Dim):
    """An attention head."""


class HeadFeature(Dim):
    """A query, key or value feature of one head."""


def template(size: int, tag: type[N]) -> Vec[N, jax.Array]:
    """``size`` float32 zeros along ``tag``: float32 templates give float32 parameters, also under
    ``jax_enable_x64``."""
    return Vec.from_array(np.zeros(size, np.float32), tag)


@dataclass(frozen=True)
class Optimisation:
    """AdamW's settings: the peak rate, its linear warm-up in steps, the decoupled weight decay and the clip of the
    gradient's global norm."""

    learning_rate: float = 1e-2
    warmup: int = 100
    weight_decay: float = 1e-2
    clip: float = 1.0

    def optimiser(self, steps: int) -> optax.GradientTransformation:
        """``warmup_cosine`` over ``steps`` updates with these settings."""
        return warmup_cosine(
            steps, self.learning_rate, warmup=self.warmup, clip=self.clip, weight_decay=self.weight_decay
        )
