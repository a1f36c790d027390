"""Must type-check: a user's own score and normalisation are accepted wherever the built-in ones are."""

from dataclasses import dataclass
from typing import TypeVar

import jax
import numpy as np

from applicative import Applicative, Dim, Measured, Vec, VecOf, mul_mmt, record
from applicative.nn import AttentionOptions, Matrix, MultiHeadAttention, Score, attention, init_decoder, init_encoder

I = TypeVar("I")  # noqa: E741
F = TypeVar("F", bound=Measured)
H = TypeVar("H", bound=Measured)


@record
class Scaled:
    """s_ij = 2 q_i . k_j."""

    def __call__(self, queries: Matrix[I, H], keys: Matrix[F, H]) -> Matrix[I, F]:
        return mul_mmt(keys, queries).fmap(lambda row: row.fmap(lambda s: 2.0 * s))

    @staticmethod
    def init(key: jax.Array, features: Applicative[H, jax.Array]) -> "Scaled":
        return Scaled()


@dataclass(frozen=True)
class Identity:
    """The raw scores as weights."""

    def __call__(self, scores: Matrix[I, F], mask: Matrix[I, F] | None, d_k: jax.Array) -> Matrix[I, F]:
        return scores


class Seq(Dim): ...


class Model(Dim): ...


class Head(Dim): ...


class Key(Dim): ...


def template(n: int, tag: type[Dim]) -> Vec[Dim, jax.Array]:
    return Vec.from_array(np.zeros(n), tag)


x = Vec.from_array(np.ones((3, 4)), Seq, Model)
score: Score[VecOf[Model]] = Scaled()
attention(x, x, x, score=Scaled(), normalise=Identity())
options = AttentionOptions(heads=template(2, Head), model=template(4, Model), head_features=template(2, Key),
                           score=Scaled, normalise=Identity())  # fmt: skip
MultiHeadAttention.init(jax.random.key(0), options)
init_encoder(jax.random.key(0), options, inputs=template(4, Model), outputs=None, hidden=template(8, Model), layers=1)
init_decoder(jax.random.key(0), options, inputs=template(4, Model), outputs=template(4, Model),
             hidden=template(8, Model), layers=1, source=template(4, Model), cross_score=Scaled)  # fmt: skip
