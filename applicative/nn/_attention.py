"""Attention written once: a score, a normalisation of the whole score structure, values.

    attention(q, k, v) = mul_mm(normalise(score(q, k), mask, d_k), v)

with queries ``I (H a)``, keys ``F (H a)``, values ``F (G a)`` and result
``I (G a)``: queries may live on another structure than keys and values
(cross attention). The scores ``I (F a)`` hold one row per query, over the
keys (``nn._scores``: ``DotProduct``, the default, ``Multiplicative``, ``Additive``, or a user's
own ``Score``); the normalisation (``nn._normalisations``: ``Softmax``, the default,
``ReferenceSoftmax``, ``ReluAttention``, ``CoefficientSoftmax``, or a user's own ``Normalisation``)
applies to each row, masked keys excluded. ``d_k`` is the measure of the key features. With
``DotProduct`` and ``Softmax`` on structures whose measure is a weight per position, the dense formula
(``applicative.nn._dense_attention``) computes the same, without the whole score matrix.

A shape mistake is attention's: operands that are not structures of structures, keys and values on
two structures, queries and keys of other features, a mask that is not one row per query over the keys
(as far as their ``Dense`` levels show), or any mismatch the linear algebra meets inside, is a TypeError
or ValueError that names ``attention`` and describes the queries, keys and values. Linear maps of
queries, keys and values are linear algebra (``Linear.each``), in the heads of ``nn._multi_head``.
"""

from __future__ import annotations

from typing import TypeVar, cast

from applicative.fast_paths import USE_FAST_PATHS
from applicative.linalg import mul_mm
from applicative.nn._base import Matrix, measure
from applicative.nn._dense_attention import dense_attention
from applicative.nn._normalisations import SOFTMAX, Normalisation, Softmax
from applicative.nn._parts import Level, level
from applicative.nn._scores import DOT_PRODUCT, DotProduct, Score
from applicative.nn._sparse_attention import sparse_attention
from applicative.operands import check_nesting, describe, nesting
from applicative.protocols.algebra import ARITHMETIC, Pointwise
from applicative.protocols.integration import counit
from applicative.protocols.kinds import Measured
from applicative.protocols.sparse import SparseMask

__all__ = ["attention"]

# Brands. Those that attention sums over (keys, key features) are bound to Measured: mypy rejects a
# structure with no counit there.
I = TypeVar("I")  # noqa: E741  (the queries' structure)
F = TypeVar("F", bound=Measured)  # the keys' and values' structure
H = TypeVar("H", bound=Measured)  # query/key features (of the score)
G = TypeVar("G")  # value features (of attention)


def attention(
    queries: Matrix[I, H],
    keys: Matrix[F, H],
    values: Matrix[F, G],
    *,
    score: Score[H] = DOT_PRODUCT,
    normalise: Normalisation = SOFTMAX,
    mask: Matrix[I, F] | SparseMask | None = None,
) -> Matrix[I, G]:
    """mul_mm(normalise(score(queries, keys), mask, d_k), values); ``mask`` is True where a query may see a key
    (a ``SparseMask``, a graph's edges, is its pairs: over nodal structures attention runs on them alone,
    ``applicative.nn._sparse_attention``; otherwise on its dense form).

    With ``DotProduct`` and ``Softmax`` on structures whose measure is a weight per position, the dense
    formula (``applicative.nn._dense_attention``) computes the same, without the whole score matrix.

    A shape mistake is attention's: operands that are not structures of structures, keys and values on
    two structures, queries and keys of other features, a mask that is not one row per query over the
    keys (as far as their ``Dense`` levels show), or any mismatch the linear algebra meets inside, is a
    TypeError or ValueError that names ``attention`` and describes the queries, keys and values."""
    formula = USE_FAST_PATHS.get() and type(score) is DotProduct and type(normalise) is Softmax
    sparse = mask if isinstance(mask, SparseMask) else None
    dense = cast(Matrix[I, F] | None, mask.dense() if isinstance(mask, SparseMask) and not formula else mask)
    _check_operands(queries, keys, values, None if sparse is not None and formula else dense)
    try:
        d_k = measure(counit(keys, Pointwise(ARITHMETIC)))
        if formula and isinstance(normalise, Softmax):
            if sparse is not None:
                fast = sparse_attention(queries, keys, values, sparse, d_k)
                if fast is not None:
                    return cast(Matrix[I, G], fast)
                dense = sparse.dense()
            fast = dense_attention(queries, keys, values, dense, d_k, normalise.rows_per_chunk)
            if fast is not None:
                return cast(Matrix[I, G], fast)
        weights: Matrix[I, F] = normalise(score(queries, keys), dense, d_k)
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
