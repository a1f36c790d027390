"""A score or normalisation of the wrong shape is rejected where it is passed."""

import jax
import numpy as np

from applicative import Dim, Vec
from applicative.nn import AttentionOptions, Matrix, attention


class NotAScore:
    """Its init builds no score (it returns the features' size)."""

    @staticmethod
    def init(key: jax.Array, features: object) -> int:
        return 0


class RowsOnly:
    """A normalisation that forgets the mask argument."""

    def __call__(self, scores: Matrix[Dim, Dim]) -> Matrix[Dim, Dim]:
        return scores


class Seq(Dim): ...


class Model(Dim): ...


x = Vec.from_array(np.ones((3, 4)), Seq, Model)
t = Vec.from_array(np.zeros(4), Model)
AttentionOptions(heads=t, model=t, head_features=t, score=NotAScore)  # E: Argument "score" to "AttentionOptions" has incompatible type
attention(x, x, x, normalise=RowsOnly())  # E: Argument "normalise" to "attention" has incompatible type "RowsOnly"
