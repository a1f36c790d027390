"""Relational attention: attention whose keys and values read a vector on every pair of positions, and which
updates those vectors (the Relational Transformer's, Diao and Loynd 2023), written once over any structure.

The pairs of a structure ``S`` are ``S`` composed with itself: an edge vector is an element of
``S (S (E a))``, one row per query over the keys, as a mask or a score is (a graph's edges, where an edge
runs from key j to query i; the absent ones are the mask's). With node vectors ``x : S (D a)`` and pair
vectors ``e : S (S (E a))``:

    q_i = W_q x_i,   k_ij = W_k x_j + W_ek e_ij,   v_ij = W_v x_j + W_ev e_ij
    a_ij = softmax_j((q_i . k_ij) / sqrt(d_k)), masked        (``Softmax``, the keys' measure)
    y_i  = W_o sum_j a_ij v_ij
    e'_ij = e_ij + W_2 relu(W_1 [x_i, x_j, e_ij])              (each part its own linear map, summed)

Generic code: the pair term of the score is a bias (``Biased``: q_i . W_ek e_ij, for every query a
structure over the keys), the pair term of the values a weighted sum of every row's pair vectors
(``mul_vm`` of a query's weights and its row), and the edge update an ``fmap`` over the pairs; the node
term is ``attention``'s own. So it runs on a ``Graph`` (``graph.on_edges`` gives pair vectors, zero
where no edge runs, and ``graph.mask()`` the mask), on a ``Vec`` (every pair), or on any structure that
pairs with itself. ``tests/applicative/test_relational.py`` checks it against float64 numpy.
"""

from __future__ import annotations

from typing import Any, Generic, TypeVar

import jax
import jax.numpy as jnp
from jax import Array

from applicative.linalg import add, dot, mul_mm, mul_mmt, mul_vm
from applicative.nn._base import Draws, Matrix, measure
from applicative.nn._linear import Linear, draw_linear
from applicative.nn._normalisations import SOFTMAX, Normalisation
from applicative.protocols.algebra import ARITHMETIC, Pointwise
from applicative.protocols.applicative import Applicative
from applicative.protocols.integration import counit
from applicative.protocols.kinds import Measured
from applicative.records import record

__all__ = ["RelationalAttention", "pair_messages"]

S = TypeVar("S", bound=Measured)  # the positions (a graph's nodes)
D = TypeVar("D", bound=Measured)  # node features
E = TypeVar("E", bound=Measured)  # pair (edge) features
H = TypeVar("H", bound=Measured)  # query/key features
Hidden = TypeVar("Hidden", bound=Measured)


@record
class RelationalAttention(Generic[D, E, H, Hidden]):
    """One relational attention: node vectors attend over pairs whose vectors enter the keys and values,
    and the pair vectors are updated (the module docstring's equations)."""

    query: Linear[D, H]
    key: Linear[D, H]
    value: Linear[D, D]
    edge_key: Linear[E, H]
    edge_value: Linear[E, D]
    out: Linear[D, D]
    receiver: Linear[D, Hidden]
    """W_1's part reading the query's node, x_i."""
    sender: Linear[D, Hidden]
    """W_1's part reading the key's node, x_j."""
    edge_in: Linear[E, Hidden]
    """W_1's part reading the pair, e_ij."""
    edge_out: Linear[Hidden, E]
    """W_2."""

    def __call__(
        self,
        x: Matrix[S, D],
        e: Applicative[S, Matrix[S, E]],
        mask: Matrix[S, S] | None = None,
        normalise: Normalisation = SOFTMAX,
    ) -> tuple[Matrix[S, D], Applicative[S, Matrix[S, E]]]:
        """(the nodes' new vectors, the pairs' new vectors)."""
        q, k, v = x.fmap(self.query), x.fmap(self.key), x.fmap(self.value)
        pair_keys = e.fmap(lambda row: row.fmap(self.edge_key))
        bias = q.pair(pair_keys).fmap(lambda p: p[1].fmap(lambda kk: dot(p[0], kk)))
        d_k = measure(counit(k, Pointwise(ARITHMETIC)))
        weights = normalise(add(mul_mmt(k, q), bias), mask, d_k)
        pair_values = e.fmap(lambda row: row.fmap(self.edge_value))
        mixed = add(mul_mm(weights, v), weights.pair(pair_values).fmap(lambda p: mul_vm(p[0], p[1])))
        y = mixed.fmap(self.out)
        hidden = pair_messages(self.receiver, self.sender, self.edge_in, x, e)
        update = hidden.fmap(lambda row: row.fmap(self.edge_out))
        return y, add(e, update)

    @staticmethod
    def init(
        key: jax.Array,
        model: Applicative[D, Array],
        edges: Applicative[E, Array],
        head: Applicative[H, Array],
        hidden: Applicative[Hidden, Array],
    ) -> RelationalAttention[D, E, H, Hidden]:
        """Weights N(0, 1 / measure(inputs)) each (``Linear.init``), drawn from ``key`` in field order."""
        draw = Draws(key)
        parts: dict[str, Any] = {}
        for name, inputs, outputs in (
            ("query", model, head), ("key", model, head), ("value", model, model), ("edge_key", edges, head),
            ("edge_value", edges, model), ("out", model, model), ("receiver", model, hidden),
            ("sender", model, hidden), ("edge_in", edges, hidden), ("edge_out", hidden, edges),
        ):  # fmt: skip
            parts[name] = draw_linear(draw, inputs, outputs)
        return RelationalAttention(**parts)


def pair_messages(
    receiver: Linear[D, Hidden],
    sender: Linear[D, Hidden],
    edge_in: Linear[E, Hidden],
    x: Matrix[S, D],
    e: Applicative[S, Matrix[S, E]],
) -> Applicative[S, Matrix[S, Hidden]]:
    """m_ij = relu(R x_i + S x_j + E e_ij) on every pair: row i holds query i's message from each key j (the
    relational attention's edge update reads them; a message-passing step may take their maximum)."""
    sent = x.fmap(sender)
    return (
        x.fmap(receiver)
        .pair(e)
        .fmap(lambda p: sent.pair(p[1]).fmap(lambda q: _relu(add(add(p[0], q[0]), edge_in(q[1])))))
    )


def _relu(x: Applicative[Any, Array]) -> Applicative[Any, Array]:
    return x.fmap(lambda a: jnp.maximum(a, 0.0))
