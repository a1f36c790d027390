"""Attention's normalisations: (scores I (F a), mask I (F bool) or None, d_k) -> weights I (F a).

    Softmax             softmax(s / sqrt(d_k))               (standard, the default)
    ReferenceSoftmax    e^s / (sqrt(d_k) sum e^s)            (the reference text's, as written: rows sum to 1/sqrt(d_k))
    ReluAttention       relu(s / sqrt(d_k)) / measure(keys)  (a ReLU attention module is a cubic spline; docs/design.md)
    CoefficientSoftmax  softmax(s / sqrt(d_k)) over each row's Chebyshev coefficients (the reference's Funcformer)

Each acts on the whole score structure, applied to each row (one per query, over the keys ``F``), masked
keys excluded; ``d_k`` is the measure of the key features. A user's own is any hashable ``Normalisation``
(it is static metadata of a model). The sums are ``counit`` and the scalings ``scale``, so that on a
``Cheb`` sequence only the exponential samples the functions; the softmax subtracts the largest value of
each row at its sample points first (``Sampled``; no gradient through it), and an all-masked row gives
zeros. ``Softmax``'s ``chunk`` is how many rows of queries attention's dense formula holds at once
(``CHUNK``, ``CHUNK_ABOVE``); one that is not a positive integer, ``"auto"`` or None is a TypeError or
ValueError naming ``Softmax``. ``CoefficientSoftmax`` given a mask is a ValueError naming it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal, Protocol, TypeVar, runtime_checkable

import jax
import jax.numpy as jnp

from applicative.linalg import scale
from applicative.nn._base import Matrix, measure
from applicative.protocols.applicative import Applicative
from applicative.protocols.integration import counit
from applicative.protocols.kinds import Measured
from applicative.stacked import largest

__all__ = [
    "CoefficientSoftmax",
    "Normalisation",
    "ReferenceSoftmax",
    "ReluAttention",
    "Sampled",
    "Softmax",
]

# Brands. The keys, which a normalisation sums over, are bound to Measured.
I = TypeVar("I")  # noqa: E741  (the queries' structure)
F = TypeVar("F", bound=Measured)  # the keys' structure


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
