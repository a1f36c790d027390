"""Attention's scores: from queries ``I (H a)`` and keys ``F (H a)`` to scores ``I (F a)``, one row per query.

    DotProduct      s_ij = q_i . k_j                  (the default)
    Multiplicative  s_ij = q_i^T W k_j                (Luong)
    Additive        s_ij = u^T tanh(W1 k_j + W2 q_i)  (Bahdanau)
    Biased          s_ij = score(q, k)_ij + b_ij      (a bias on each pair: a graph's edge values)

``H`` are the query/key features, summed over. The scores hold one row per query, over the keys (the
reference's ``queries mulMMT keys`` is transposed; we use ``mul_mmt(keys, queries)``). A user's own is any
``Score`` (a call from queries and keys to scores; a pytree, a ``@record``, when it holds parameters),
and ``AttentionOptions.score`` takes any ``ScoreInit`` (an object, usually the score's class, whose
``init(key, features)`` builds one over the structure of the template ``features``, drawing its weights
from ``key`` as its ``init`` says). A score computes, it checks nothing: queries and keys of other
features are ``attention``'s error, which names them.
"""

from __future__ import annotations

from typing import Any, Generic, Protocol, TypeVar

import jax
import jax.numpy as jnp
from jax import Array

from applicative.linalg import add, dot, mul_mmt, outer
from applicative.nn._base import Draws, Matrix, Std, measure
from applicative.nn._linear import Linear, draw_linear
from applicative.protocols.applicative import Applicative
from applicative.protocols.kinds import Measured
from applicative.records import record

__all__ = ["Additive", "Biased", "DotProduct", "Multiplicative", "Score", "ScoreInit"]

# Brands. Those that a score sums over (key features, the inputs of linear maps) are bound to Measured.
I = TypeVar("I")  # noqa: E741  (the queries' structure)
F = TypeVar("F", bound=Measured)  # the keys' structure
H = TypeVar("H", bound=Measured)  # query/key features (of the score)
Hk = TypeVar("Hk", bound=Measured)  # query/key features of a head


class Score(Protocol[H]):
    """A score over key features ``H``: (queries I (H a), keys F (H a)) -> scores I (F a), one row
    per query. A pytree (a ``@record``) when it holds parameters."""

    def __call__(self, queries: Matrix[I, H], keys: Matrix[F, H], /) -> Matrix[I, F]: ...


class ScoreInit(Protocol):
    """What ``score=`` takes: an object whose ``init(key, features)`` builds a ``Score`` over the
    structure of ``features`` (a template). A score class with a static ``init`` is one."""

    def init(self, key: jax.Array, features: Applicative[H, Array], /) -> Score[H]: ...


@record
class DotProduct:
    """s_ij = q_i . k_j."""

    def __call__(self, queries: Matrix[I, H], keys: Matrix[F, H]) -> Matrix[I, F]:
        return mul_mmt(keys, queries)

    @staticmethod
    def init(key: jax.Array, features: Applicative[H, Array]) -> DotProduct:
        return DOT_PRODUCT


DOT_PRODUCT = DotProduct()


@record
class Biased(Generic[H]):
    """s_ij = score(q, k)_ij + b_ij: another score with a bias on each (query, key) pair, ``bias`` a structure
    of the queries of structures of the keys of scalars (a graph's edge values, ``Graph.on_edges``, as
    Graphormer's edge encoding is). The normalisation scales it with the score (softmax((q.k + b) /
    sqrt(d_k))); a learned edge encoding is a function of edge features computed where the model runs."""

    bias: Matrix[Any, Any]
    score: Score[H] = DOT_PRODUCT

    def __call__(self, queries: Matrix[I, H], keys: Matrix[F, H]) -> Matrix[I, F]:
        return add(self.score(queries, keys), self.bias)


@record
class Multiplicative(Generic[H]):
    """s_ij = q_i^T W k_j (Luong)."""

    weight: Applicative[H, Applicative[H, Array]]

    def __call__(self, queries: Matrix[I, H], keys: Matrix[F, H]) -> Matrix[I, F]:
        return mul_mmt(mul_mmt(self.weight, keys), queries)

    @staticmethod
    def init(key: jax.Array, features: Applicative[Hk, Array]) -> Multiplicative[Hk]:
        """W N(0, 1 / measure(features)), drawn from ``key``."""
        return Multiplicative(Draws(key).normal(jax.eval_shape(outer, features, features), Std(measure(features))))


@record
class Additive(Generic[H]):
    """s_ij = u^T tanh(W1 k_j + W2 q_i) (Bahdanau)."""

    keys: Linear[H, H]
    queries: Linear[H, H]
    u: Applicative[H, Array]

    def __call__(self, queries: Matrix[I, H], keys: Matrix[F, H]) -> Matrix[I, F]:
        projected_keys = self.keys.each(keys)
        return self.queries.each(queries).fmap(
            lambda q: projected_keys.fmap(lambda k: dot(self.u, add(k, q).fmap(jnp.tanh)))
        )

    @staticmethod
    def init(key: jax.Array, features: Applicative[Hk, Array]) -> Additive[Hk]:
        """W1 (no bias), W2 as ``Linear.init`` draws them, u N(0, 1 / measure(features)): the requests of
        ``key``, in this order."""
        draw = Draws(key)
        keys = draw_linear(draw, features, features, bias=False)
        queries = draw_linear(draw, features, features)
        return Additive(keys, queries, draw.normal(features, Std(measure(features))))
