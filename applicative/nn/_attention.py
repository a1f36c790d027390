"""Attention written once: a score, a normalisation of the whole score structure, values.

    attention(q, k, v) = mul_mm(normalise(score(q, k), mask, d_k), v)

with queries ``I (H a)``, keys ``F (H a)``, values ``F (G a)`` and result
``I (G a)``: queries may live on another structure than keys and values
(cross attention). The scores ``I (F a)`` hold one row per query, over the
keys (the reference's ``queries mulMMT keys`` is transposed; we use
``mul_mmt(keys, queries)``). ``d_k`` is the measure of the key features.

Scores: ``DotProduct`` q.k; ``Multiplicative`` q^T W k; ``Additive``
u^T tanh(W1 k + W2 q); a user's own is any ``Score`` (a call from queries and
keys to scores), and ``AttentionOptions.score`` takes any ``ScoreInit``
(an object, usually the score's class, whose ``init(key, features)`` builds
one). Normalisations (applied to each row, masked keys
excluded; a user's own is any hashable ``Normalisation``): ``Softmax`` softmax(s / sqrt(d_k)) (standard, the default),
``ReferenceSoftmax`` e^s / (sqrt(d_k) sum e^s) (the reference text's, as
written: rows sum to 1/sqrt(d_k)), ``ReluAttention`` relu(s / sqrt(d_k)) /
measure(keys) (a ReLU attention module is a cubic spline; docs/design.md),
and, for Chebyshev functions, ``CoefficientSoftmax``, the reference's softmax
over coefficients. Linear maps of queries, keys and values are linear algebra
(``Linear.each``), and the scalings of the softmax are ``scale``, so that on a
``Cheb`` sequence only the exponential samples the functions.

``MultiHeadAttention`` holds its heads as a structure (a ``Vec`` over a head
dimension): every head's queries, keys and values are projected in one contraction
each (``each_mul_mmt``), each head attends, and the heads are projected back to the
model features and summed in one contraction (``sum_mul_mmt``), ``W_o concat(heads)``.
``AttentionOptions`` holds what every attention initialiser takes: the heads,
the widths, the norm, the score, the normalisation, the variance rule and the
output gain.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, Literal, Protocol, TypeVar, cast, runtime_checkable

import jax
import jax.numpy as jnp
from jax import Array

from applicative.linalg import add, dot, mul_mm, mul_mmt, outer, scale, sum_mul_mmt
from applicative.nn._base import Draws, Matrix, Std, Variance, by_measure, floating_template, measure
from applicative.nn._dense_attention import dense_attention
from applicative.nn._linear import Linear, draw_linear, each_of, inputs_of, outputs_of
from applicative.nn._parts import Level, agree, level, nested, stacked
from applicative.operands import check_nesting, describe, nesting
from applicative.protocols.algebra import ARITHMETIC, Pointwise
from applicative.protocols.applicative import Applicative, lift_a2
from applicative.protocols.integration import counit
from applicative.protocols.kinds import Measured
from applicative.records import record, static
from applicative.stacked import largest

__all__ = [
    "Additive",
    "AttentionHead",
    "AttentionOptions",
    "CoefficientSoftmax",
    "DotProduct",
    "MultiHeadAttention",
    "Multiplicative",
    "Normalisation",
    "ReferenceSoftmax",
    "ReluAttention",
    "Sampled",
    "Score",
    "ScoreInit",
    "Softmax",
    "attention",
]

# Brands. Those that attention sums over (keys, key features, heads, and the inputs of linear maps)
# are bound to Measured: mypy rejects a structure with no counit there.
I = TypeVar("I")  # noqa: E741  (the queries' structure)
F = TypeVar("F", bound=Measured)  # the keys' and values' structure
H = TypeVar("H", bound=Measured)  # query/key features (of the score)
G = TypeVar("G")  # value features (of attention)
D = TypeVar("D", bound=Measured)  # features of the queries' source (the model)
E = TypeVar("E", bound=Measured)  # features of the keys' and values' source
Hk = TypeVar("Hk", bound=Measured)  # query/key features of a head
Hv = TypeVar("Hv", bound=Measured)  # value features of a head
Heads = TypeVar("Heads", bound=Measured)  # the structure of heads


# Scores


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


# Normalisations


class Normalisation(Protocol):
    """(scores I (F a), mask I (F bool) or None, d_k) -> weights I (F a), acting on the whole
    score structure; hashable (it is static metadata of a model)."""

    def __call__(self, scores: Matrix[I, F], mask: Matrix[I, F] | None, d_k: jax.Array) -> Matrix[I, F]: ...


def _rowwise(scores: Matrix[I, F], mask: Matrix[I, F] | None, f: Callable[[Any, Any], Any]) -> Matrix[I, F]:
    if mask is None:
        return scores.fmap(lambda row: f(row, None))
    return scores.pair(mask).fmap(lambda p: f(p[0], p[1]))


@runtime_checkable
class Sampled(Protocol):
    """A structure whose ``fmap`` applies functions at sample points (a ``Cheb``: its Chebyshev
    points; a ``DenseTree``: its leaves, not its padding), and can say the largest value there.

    The softmax subtracts the largest score of each row before ``exp`` (any shift gives the same
    softmax; this one keeps ``exp`` in range): ``applicative.stacked.largest`` of the row. For a
    structure of values the largest leaf entry serves (a tree's values, never its layout); for a
    coefficient structure (Chebyshev, Legendre, Fourier series) the coefficients are not the
    values, and a function's values can be far larger than its coefficients, so such a structure
    implements ``largest`` (structurally: no base class to inherit), as ``Compose`` does from its
    parts'."""

    def largest(self) -> jax.Array:
        """The largest value of this structure of scalars at the points where ``fmap`` evaluates it,
        a 0-d array (its gradient is never taken: the softmax stops it)."""
        ...


def _softmax_row(row: Applicative[F, jax.Array], keep: Applicative[F, jax.Array] | None) -> Applicative[F, jax.Array]:
    """e^s / counit(e^s) over the kept entries; an all-masked row gives zeros."""
    if keep is not None:
        row = row.pair(keep).fmap(lambda p: jnp.where(p[1], p[0], -jnp.inf))
    # Any constant shift gives the same softmax; the largest score keeps exp bounded.
    shift = jax.lax.stop_gradient(largest(row))
    e = row.fmap(lambda s: jnp.exp(s - jnp.where(jnp.isfinite(shift), shift, 0.0)))
    total = counit(e)
    return scale(1.0 / jnp.where(total > 0, total, 1.0), e)


CHUNK = 128
"""How many rows of queries a chunk of ``Softmax(chunk="auto")`` holds (docs/trees.md measures it)."""

CHUNK_ABOVE = 1024 * 1024
"""The most scores of one sequence and head (queries x keys) that ``Softmax(chunk="auto")`` holds at
once: there chunks cost 1.05x the materialised step, and beyond it a batch's materialised scores soon
outgrow the memory (docs/trees.md)."""


@dataclass(frozen=True)
class Softmax:
    """softmax(s / sqrt(d_k)) over each row (the standard normalisation).

    Where keys and queries are values at positions (a Vec, a DenseTree: ``nodal`` axes) and the score
    is ``DotProduct``, ``attention`` computes it on coordinates, the measure a bias on each key, and
    holds ``chunk`` rows of queries' scores at a time: memory linear in the keys, forward and backward
    (``applicative.nn._dense_attention``). ``chunk="auto"`` (the default) holds 128 rows at a time
    where a sequence has more than 1,024 x 1,024 scores (``CHUNK``, ``CHUNK_ABOVE``: measured in
    docs/trees.md); None never chunks; a positive integer always does.
    Anything else is a TypeError or ValueError naming ``Softmax``."""

    chunk: int | Literal["auto"] | None = "auto"

    def __post_init__(self) -> None:
        chunk = self.chunk
        if chunk is None or chunk == "auto":
            return
        if not isinstance(chunk, int) or isinstance(chunk, bool):
            raise TypeError(f'Softmax: chunk must be a positive integer, "auto" or None, got {chunk!r}')
        if chunk < 1:
            raise ValueError(f"Softmax: chunk must be a positive number of queries, got {chunk}")

    def __call__(self, scores: Matrix[I, F], mask: Matrix[I, F] | None, d_k: jax.Array) -> Matrix[I, F]:
        factor = 1.0 / jnp.sqrt(d_k)
        return _rowwise(scores, mask, lambda row, keep: _softmax_row(scale(factor, row), keep))

    def rows_per_chunk(self, queries: int, keys: int) -> int | None:
        """The rows of queries a chunk holds for ``queries`` x ``keys`` scores (None: all)."""
        if self.chunk == "auto":
            return CHUNK if queries * keys > CHUNK_ABOVE else None
        return self.chunk


@dataclass(frozen=True)
class ReferenceSoftmax:
    """e^s / (sqrt(d_k) sum e^s): the reference text's scaled softmax as written (rows sum to 1/sqrt(d_k))."""

    def __call__(self, scores: Matrix[I, F], mask: Matrix[I, F] | None, d_k: jax.Array) -> Matrix[I, F]:
        factor = 1.0 / jnp.sqrt(d_k)
        return _rowwise(scores, mask, lambda row, keep: scale(factor, _softmax_row(row, keep)))


@dataclass(frozen=True)
class ReluAttention:
    """relu(s / sqrt(d_k)) / measure(keys): masked entries are 0 (a ReLU transformer is a spline)."""

    def __call__(self, scores: Matrix[I, F], mask: Matrix[I, F] | None, d_k: jax.Array) -> Matrix[I, F]:
        factor = 1.0 / jnp.sqrt(d_k)

        def row_relu(row: Applicative[F, jax.Array], keep: Applicative[F, jax.Array] | None) -> Any:
            per_key = factor / measure(row)
            out = row.fmap(lambda s: jax.nn.relu(s) * per_key)
            return out if keep is None else out.pair(keep).fmap(lambda p: jnp.where(p[1], p[0], 0.0))

        return _rowwise(scores, mask, row_relu)


@dataclass(frozen=True)
class CoefficientSoftmax:
    """The reference text's Funcformer normalisation: softmax(s / sqrt(d_k)) over each score row's
    Chebyshev *coefficients* (rows are ``Cheb`` functions of the key). It depends on the resolution
    (zero-padded coefficients still get weight); ``Softmax`` normalises values, exp(s) / integral exp(s)."""

    def __call__(self, scores: Matrix[I, F], mask: Matrix[I, F] | None, d_k: jax.Array) -> Matrix[I, F]:
        if mask is not None:
            raise ValueError("CoefficientSoftmax: masks have no meaning for coefficients")
        factor = 1.0 / jnp.sqrt(d_k)
        return scores.fmap(lambda row: jax.tree_util.tree_map(lambda leaf: jax.nn.softmax(leaf * factor, axis=0), row))


SOFTMAX = Softmax()


def attention(
    queries: Matrix[I, H],
    keys: Matrix[F, H],
    values: Matrix[F, G],
    *,
    score: Score[H] = DOT_PRODUCT,
    normalise: Normalisation = SOFTMAX,
    mask: Matrix[I, F] | None = None,
) -> Matrix[I, G]:
    """mul_mm(normalise(score(queries, keys), mask, d_k), values); ``mask`` is True where a query may see a key.

    With ``DotProduct`` and ``Softmax`` on structures whose measure is a weight per position, the dense
    formula (``applicative.nn._dense_attention``) computes the same, without the whole score matrix.

    A shape mistake is attention's: operands that are not structures of structures, keys and values on
    two structures, queries and keys of other features, a mask that is not one row per query over the
    keys (as far as their ``Dense`` levels show), or any mismatch the linear algebra meets inside, is a
    TypeError or ValueError that names ``attention`` and describes the queries, keys and values."""
    _check_operands(queries, keys, values, mask)
    try:
        d_k = measure(counit(keys, Pointwise(ARITHMETIC)))
        if type(score) is DotProduct and type(normalise) is Softmax:
            fast = dense_attention(queries, keys, values, mask, d_k, normalise.rows_per_chunk)
            if fast is not None:
                return cast(Matrix[I, G], fast)
        weights: Matrix[I, F] = normalise(score(queries, keys), mask, d_k)
        return mul_mm(weights, values)
    except (TypeError, ValueError) as error:
        if type(error) not in (TypeError, ValueError) or str(error).startswith("attention"):
            raise
        raise type(error)(f"attention: {error} ({_operands(queries, keys, values)})") from error


_SIGNATURE = "queries I (H a), keys F (H a), values F (G a), a mask I (F bool)"


def _operands(queries: object, keys: object, values: object) -> str:
    return f"the queries are {nesting(queries)}, the keys {nesting(keys)}, the values {nesting(values)}"


def _check_operands(queries: object, keys: object, values: object, mask: object | None) -> None:
    """attention's operands against its signature, as far as their ``Dense`` levels show (trace-time
    Python on static structure); a TypeError or ValueError naming attention and the three otherwise."""
    try:
        check_nesting("attention", None, ("queries", queries, 2), ("keys", keys, 2), ("values", values, 2))
    except TypeError as error:
        raise TypeError(f"{error} ({_SIGNATURE})") from None
    pairs = [
        (("the keys are on", level(keys)), ("the values on", level(values))),
        (("the queries' features are", level(queries, 1)), ("the keys' features", level(keys, 1))),
    ]
    if mask is not None:
        pairs += [
            (("the mask's rows are", level(mask)), ("the queries", level(queries))),
            (("the mask's columns are", level(mask, 1)), ("the keys", level(keys))),
        ]
    for (first, a), (second, b) in pairs:
        if a is not None and b is not None and not _one_structure(a, b):
            raise ValueError(
                f"attention: {first} a {describe(a)} but {second} a {describe(b)} ({_SIGNATURE}; "
                f"{_operands(queries, keys, values)})"
            )


def _one_structure(a: Level, b: Level) -> bool:
    """The same kind, tag and size of each axis; a measure that is data (trees) may differ in size: the
    generic definitions refine two trees of other capacities."""
    if len(a) != len(b):
        return False
    pairs = zip(a, b, strict=True)
    return all(x.kind == y.kind and x.tag == y.tag and (x.size == y.size or x.shape is not None) for x, y in pairs)


# Heads


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


@dataclass(frozen=True, eq=False)
class AttentionOptions(Generic[Heads, D, Hk]):
    """The options of attention and of the transformer family's initialisers (``MultiHeadAttention``,
    the attention blocks, ``init_encoder``, ``init_decoder``): the templates of the heads, the model
    features and a head's query/key features, and the choices every attention layer is built with.
    A new option is one field here.

    Built, it checks its templates: ``heads`` a structure (its elements unused), ``model`` and
    ``head_features`` structures of floating scalars (the weights' dtype); else a TypeError naming
    ``AttentionOptions`` and the template. ``dataclasses.replace`` gives a variant.

    >>> import numpy as np
    >>> from applicative import Dim, Vec
    >>> class Head(Dim): ...
    >>> class Model(Dim): ...
    >>> class Key(Dim): ...
    >>> options = AttentionOptions(heads=Vec.from_array(np.zeros(2), Head),
    ...                            model=Vec.from_array(np.zeros(8), Model),
    ...                            head_features=Vec.from_array(np.zeros(4), Key), layer_norm=False)
    >>> options.score is DotProduct and options.normalise == Softmax()
    True
    """

    heads: Applicative[Heads, Any]
    """The structure of heads (e.g. a Vec over a head dimension); its elements are unused."""
    model: Applicative[D, Array]
    """The model's features."""
    head_features: Applicative[Hk, Array]
    """A head's query and key features (and its value features, in the blocks)."""
    layer_norm: bool = True
    """A pre-norm ``LayerNorm`` in every block and after the last layer (the blocks' and layers')."""
    score: ScoreInit = DotProduct
    """The score of the (self-)attention; a user's own is any ``ScoreInit``."""
    normalise: Normalisation = SOFTMAX
    """The normalisation of the scores; a user's own is any hashable ``Normalisation``."""
    variance: Variance = by_measure
    """The variance rule of every weight (``by_measure`` or ``fan_in``)."""
    output_gain: float = 1.0
    """The gain of the projections back into the model features (a head's output, the MLP's output)."""

    def __post_init__(self) -> None:
        check_templates("AttentionOptions", heads=self.heads, model=self.model, head_features=self.head_features)


def check_templates(op: str, **templates: object) -> None:
    """A TypeError naming ``op`` and the template unless ``heads`` is a structure and every other
    template a structure of floating scalars (the dtype of the weights drawn from it); None is skipped."""
    given = {name: t for name, t in templates.items() if t is not None}
    check_nesting(op, None, *((name, t, 1) for name, t in given.items() if name == "heads"))
    check_nesting(op, ARITHMETIC, *((name, t, 1) for name, t in given.items() if name != "heads"))
    for name, t in given.items():
        if name != "heads":
            floating_template(op, name, t)


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
