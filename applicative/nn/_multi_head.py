"""Multi-head attention: heads held as a structure, each attending, projected back and summed.

    MultiHeadAttention(x, source) = sum over heads h of W_o^h attention(W_q^h x, W_k^h s, W_v^h s) + b

with ``s`` the ``source`` (cross attention) or ``x`` itself (self-attention): ``x`` is ``I (D a)``,
``source`` ``F (E a)``, the mask ``I (F bool)`` and the result ``I (D a)``; a head's query/key features
are ``Hk``, its value features ``Hv``. ``MultiHeadAttention`` holds its heads as a structure (a ``Vec``
over a head dimension) of ``AttentionHead``s: every head's queries, keys and values are projected in one
contraction each (``each_mul_mmt``), each head attends (``nn._attention``), and the heads are projected
back to the model features and summed in one contraction (``sum_mul_mmt``), ``W_o concat(heads)``.
``MultiHeadAttention.init`` draws every head's weights from an ``AttentionOptions`` (``nn._options``).

Built, a head checks that its maps meet (a ValueError naming ``AttentionHead`` and both parts), and
multi-head attention that its bias is a structure of scalars on the heads' output structure (a TypeError
or ValueError naming ``MultiHeadAttention``: ``nn._parts``). ``features_of`` reads the structures an
attention reads its queries and its keys from, for the blocks' and the models' construction checks.
"""

from __future__ import annotations

from typing import Any, Generic, TypeVar

import jax
from jax import Array

from applicative.linalg import add, outer, sum_mul_mmt
from applicative.nn._attention import attention
from applicative.nn._base import Draws, Matrix, Std
from applicative.nn._linear import Linear, draw_linear, each_of, inputs_of, outputs_of
from applicative.nn._normalisations import SOFTMAX, Normalisation
from applicative.nn._options import AttentionOptions
from applicative.nn._parts import Level, agree, level, nested, stacked
from applicative.nn._scores import Score
from applicative.protocols.applicative import Applicative, lift_a2
from applicative.protocols.kinds import Measured
from applicative.records import record, static

__all__ = ["AttentionHead", "MultiHeadAttention"]

# Brands. Those that attention sums over (keys, heads, and the inputs of linear maps) are bound to
# Measured: mypy rejects a structure with no counit there.
I = TypeVar("I")  # noqa: E741  (the queries' structure)
F = TypeVar("F", bound=Measured)  # the keys' and values' structure
D = TypeVar("D", bound=Measured)  # features of the queries' source (the model)
E = TypeVar("E", bound=Measured)  # features of the keys' and values' source
Hk = TypeVar("Hk", bound=Measured)  # query/key features of a head
Hv = TypeVar("Hv", bound=Measured)  # value features of a head
Heads = TypeVar("Heads", bound=Measured)  # the structure of heads


@record
class AttentionHead(Generic[D, E, Hk, Hv]):
    """One head: project queries (from D) and keys/values (from E) and attend; ``output``
    (D from Hv) projects its result back to the model features.

    Built, it checks that its maps meet: query and key map into one structure (Hk), key and value
    from one (E), the output projection from the value's outputs (Hv) into the query's inputs (D);
    else a ValueError naming ``AttentionHead`` and both parts."""

    query: Linear[D, Hk]
    key: Linear[E, Hk]
    value: Linear[E, Hv]
    output: Matrix[D, Hv]
    score: Score[Hk]

    def __post_init__(self) -> None:
        query, key, value, output = self.query, self.key, self.value, self.output
        module = "AttentionHead"
        nested(module, ("output", output, 2))
        query_out, key_out, value_out = outputs_of(query), outputs_of(key), outputs_of(value)
        query_in, key_in, value_in = inputs_of(query), inputs_of(key), inputs_of(value)
        agree(module, ("the query's outputs are", query_out), ("the key's outputs are", key_out))
        agree(module, ("the key's inputs are", key_in), ("the value's inputs are", value_in))
        agree(module, ("the value's outputs are", value_out), ("the output's inputs are", level(output, 1)))
        agree(module, ("the query's inputs are", query_in), ("the output's outputs are", level(output)))


@record
class MultiHeadAttention(Generic[Heads, D, E, Hk, Hv]):
    """sum over heads of W_o^h attention(W_q^h x, W_k^h source, W_v^h source), plus a bias (W_o times
    the concatenated heads).

    Built, it checks that the bias is a structure of scalars on the heads' output structure (D);
    else a TypeError or ValueError naming ``MultiHeadAttention``."""

    heads: Applicative[Heads, AttentionHead[D, E, Hk, Hv]]
    bias: Applicative[D, Array]
    normalise: Normalisation = static(default=SOFTMAX)

    def __post_init__(self) -> None:
        heads, bias = self.heads, self.bias
        nested("MultiHeadAttention", ("bias", bias, 1))
        head = _stacked_head(heads)
        outputs = None if head is None else level(head.output)
        agree("MultiHeadAttention", ("the bias is", level(bias)), ("the heads' outputs are", outputs))

    def __call__(
        self, x: Matrix[I, D], source: Matrix[F, E] | None = None, mask: Matrix[I, F] | None = None
    ) -> Matrix[I, D]:
        """Self-attention over ``x``, or cross attention from ``x`` to ``source``."""
        kv: Any = x if source is None else source
        heads = self.heads
        # Every head's queries, keys and values in one contraction each, not one per head.
        queries = each_of(heads.fmap(lambda head: head.query), x)
        keys = each_of(heads.fmap(lambda head: head.key), kv)
        values = each_of(heads.fmap(lambda head: head.value), kv)

        def attend(head: AttentionHead[D, E, Hk, Hv], qkv: Any) -> Matrix[I, Hv]:
            q, (k, v) = qkv
            return attention(q, k, v, score=head.score, normalise=self.normalise, mask=mask)

        attended = lift_a2(attend, heads, queries.pair(keys.pair(values)))
        # One contraction over heads and value features, not a sum of per-head products.
        projected = sum_mul_mmt(heads.fmap(lambda head: head.output), attended)
        return add(projected, projected.pure(self.bias))

    @staticmethod
    def init(
        key: jax.Array,
        options: AttentionOptions[Heads, D, Hk],
        *,
        value_features: Applicative[Hv, Array] | None = None,
        source: Applicative[E, Array] | None = None,
    ) -> MultiHeadAttention[Heads, D, E, Hk, Hv]:
        """``options`` give the heads, the model features and a head's query/key features, the score,
        the normalisation, the variance rule and the output gain (its ``layer_norm`` is the blocks'); a
        head's value features default to its query/key features, the source's features (cross
        attention) to the model's.

        Every head draws its own weights: queries, keys and values ``Linear.init`` (N(0, 1 / variance(the
        model's or the source's features)), zero bias); the output projections N(0, output_gain^2 /
        (variance(value features) variance(heads))), since the heads' outputs are summed; a zero output
        bias. The default ``by_measure`` counts each as a measure (1 / d_in, d_in a Vec's size: LeCun's).
        The requests of ``key``, each for every head at once: queries, keys, values, output
        projections, the score's key."""
        model, head_features, variance = options.model, options.head_features, options.variance
        values: Any = head_features if value_features is None else value_features
        src: Any = model if source is None else source
        # The heads' outputs are summed: scale their projections by 1/sqrt(variance(heads)).
        out_std = Std(variance(values), variance(options.heads), options.output_gain)

        def one_head(draw: Draws) -> AttentionHead[D, E, Hk, Hv]:
            return AttentionHead(
                draw_linear(draw, model, head_features, variance=variance),
                draw_linear(draw, src, head_features, variance=variance),
                draw_linear(draw, src, values, variance=variance),
                draw.normal(jax.eval_shape(outer, model, values), out_std),
                draw.keyed(lambda k: options.score.init(k, head_features)),
            )

        draw = Draws(key)
        return MultiHeadAttention(draw.each(options.heads, one_head), draw.zeros(model), options.normalise)


def _stacked_head(heads: object) -> AttentionHead[Any, Any, Any, Any] | None:
    """The heads of a ``Dense`` structure of heads (a Vec over a head dimension), stacked in one
    ``AttentionHead``; None where that does not show."""
    head = stacked(heads)
    return head if isinstance(head, AttentionHead) else None


def features_of(attention: object) -> tuple[Level | None, Level | None]:
    """The structures a ``MultiHeadAttention`` reads its queries from (the model's, D, its bias's) and
    its keys and values from (the source's, E); None where one does not show."""
    if not isinstance(attention, MultiHeadAttention):
        return None, None
    head = _stacked_head(attention.heads)
    return level(attention.bias), None if head is None else inputs_of(head.key)
