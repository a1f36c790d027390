"""``Compose[F, G, A]``: the composite of two applicatives is an applicative.

"Functions with C channels" is ``Compose`` of a function axis and a Vec,
built rather than written:

    fmap f (Compose x)               = Compose (fmap (fmap f) x)
    pair (Compose x) (Compose y)     = Compose (fmap (uncurry pair) (pair x y))
    (Compose x).pure b               = Compose (fmap (\\g -> g.pure b) x)
    counit (Compose x)               = counit (fmap counit x)     (the product measure)

``f + g``, ``f - g``, ``-f``, ``r * f`` and ``f / r`` (``applicative.protocols.operators``) are the
outer structure's, whose elements, the inner structures, use theirs: Compose(x) + Compose(y) =
Compose(x + y), which is fmap(add) . pair by naturality; both parts must have operators.

``Compose(outer)`` takes a structure of structures; its operations raise a TypeError naming them
if ``outer`` is not one (an array, or a structure of scalars, as far as a ``Dense`` outer shows).

When both parts are ``Dense`` so is the composite: its axes are the outer
ones followed by the inner ones (the product basis, whose Gram matrix is the
Kronecker product of theirs), and the linear algebra contracts both.

Fast paths. When the outer structure is ``Dense`` its elements are stacked
inner structures, and ``pair``, ``pure`` and ``counit`` act on them at once
instead of through the outer ``fmap`` (which, on a ``Cheb``, samples and
transforms back even for these linear maps: exact, but two DCTs each). The
counit then sums in the other order (Fubini: the inner structures summed over
the outer measure, then that one summed), equal for every Module that sums
stacked elements leaf by leaf. Each is tested against its definition above
(tests/applicative/test_compose.py).

>>> import numpy as np
>>> from applicative import Dim, Vec
>>> class Row(Dim): ...
>>> class Col(Dim): ...
>>> grid = Compose(Vec.from_array(np.arange(6.0).reshape(2, 3), Row, Col))
>>> float(grid.counit()), [str(axis) for axis in grid.axes()]
(15.0, ['Vec[Row] of size 2', 'Vec[Col] of size 3'])
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Generic, Self, TypeGuard, TypeVar, cast

import jax

from applicative import stacked
from applicative.protocols.algebra import Module, Pointwise, arithmetic
from applicative.protocols.applicative import Applicative
from applicative.protocols.dense import Axis, Dense, nest
from applicative.protocols.integration import Counit, counit
from applicative.protocols.kinds import A_co, B, Measured
from applicative.protocols.operators import VectorSpace
from applicative.records import record
from applicative.stacked import sums_leafwise

__all__ = ["Compose", "ComposeOf"]

# The composite's counit sums the inner structures and then the outer one: both need a counit.
F = TypeVar("F", bound=Measured)
G = TypeVar("G", bound=Measured)


class ComposeOf(Measured, Generic[F, G]):
    """Brand of ``Compose`` of brands ``F`` (outer) and ``G`` (inner)."""


@record
class Compose(Dense[ComposeOf[F, G], A_co], Counit[ComposeOf[F, G], A_co], VectorSpace):
    """An ``F``-structure of ``G``-structures, seen as one structure of ``A``."""

    outer: Applicative[F, Applicative[G, A_co]]

    def fmap(self, f: Callable[[A_co], B]) -> Compose[F, G, B]:
        self._check("fmap")
        return Compose(self.outer.fmap(lambda g: g.fmap(f)))

    def pair(self, other: Applicative[ComposeOf[F, G], B]) -> Compose[F, G, tuple[A_co, B]]:
        if not isinstance(other, Compose):
            raise TypeError(f"pair: Compose paired with {type(other).__name__}")
        self._check("pair")
        outer = self.outer.pair(other.outer)
        if _stacked(outer):  # fast path: pair the stacked inner structures at once
            inner, other_inner = outer.elements()
            return Compose(outer.with_elements(inner.pair(other_inner)))
        return Compose(outer.fmap(lambda p: p[0].pair(p[1])))

    def pure(self, b: B) -> Compose[F, G, B]:
        self._check("pure")
        if _stacked(self.outer):  # fast path: the stacked inner structures know their shape
            return Compose(self.outer.pure(self.outer.elements().pure(b)))
        return Compose(self.outer.fmap(lambda g: g.pure(b)))

    def counit(self, module: Module[A_co] | None = None) -> A_co:
        self._check("counit")
        m = module if module is not None else arithmetic()
        lifted: Pointwise[G, A_co] = Pointwise(m)
        stacked = isinstance(self.outer, Dense) and sums_leafwise(lifted, self.outer.elements())
        if stacked:  # fast path (Fubini): sum the inner structures over the outer measure, then that sum
            return counit(counit(self.outer, lifted), m)
        return counit(self.outer.fmap(lambda g: counit(g, m)), m)

    def largest(self) -> jax.Array:
        """The largest value of a structure of scalars (a softmax's shift: ``applicative.nn.Sampled``): the
        outer structure's largest of each inner structure's largest (``stacked.largest``), each level read
        as itself (a series at its sample points, a tree over its leaves)."""
        self._check("largest")
        return stacked.largest(self.outer.fmap(stacked.largest))

    # VectorSpace: the outer structure's operators, whose elements, the inner structures, add and
    # scale by theirs: Compose(x) + Compose(y) = Compose(x + y) = fmap(add) . pair (naturality of pair).

    def _zip_with(self, op: str, fn: Callable[[Any, Any], Any], other: Applicative[Any, Any]) -> Self:
        if not isinstance(other, Compose):
            raise TypeError(f"pair: Compose paired with {type(other).__name__}")
        return cast(Self, Compose(fn(self._outer_space(op), other.outer)))

    def _map_with(self, op: str, fn: Callable[[Any], Any]) -> Self:
        return cast(Self, Compose(fn(self._outer_space(op))))

    def _outer_space(self, op: str) -> VectorSpace:
        self._check(_DUNDER[op])
        if not isinstance(self.outer, VectorSpace):
            raise TypeError(
                f"Compose.{_DUNDER[op]}: the outer structure is a {type(self.outer).__name__}, which has no arithmetic "
                "operators (its pair is not a zip, so the pointwise Module is not a vector space on it)"
            )
        return self.outer

    # Dense when both parts are: the outer axes, then the inner ones.

    def _check(self, op: str) -> None:
        """``outer`` is a structure, of structures where a Dense outer shows its elements (Python only)."""
        outer: object = self.outer
        if isinstance(outer, Dense) and outer.axes() is not None:
            outer = outer.elements()
        if not isinstance(outer, Applicative):
            what = type(self.outer).__name__ if outer is self.outer else f"{type(self.outer).__name__} of scalars"
            raise TypeError(f"Compose.{op}: the outer structure is a {what}; expected a structure of structures")

    def _parts(self) -> tuple[Dense[F, Any], Dense[G, A_co]] | None:
        self._check("axes")
        outer = self.outer
        if isinstance(outer, Dense) and isinstance(inner := outer.elements(), Dense):
            return outer, inner
        return None

    def axes(self) -> tuple[Axis, ...] | None:
        parts = self._parts()
        if parts is None or (outer := parts[0].axes()) is None or (inner := parts[1].axes()) is None:
            return None
        return outer + inner

    def elements(self) -> A_co:
        parts = self._parts()
        if parts is None:
            raise TypeError("Compose.elements: the parts are not Dense structures")
        return parts[1].elements()

    def with_elements(self, elements: B) -> Compose[F, G, B]:
        parts = self._parts()
        if parts is None:
            raise TypeError("Compose.with_elements: the parts are not Dense structures")
        return Compose(nest(parts, elements))


_DUNDER = {"+": "__add__", "-": "__sub__", "-x": "__neg__", "*": "__mul__", "/": "__truediv__"}
"""The method an operator's check names (``Compose.__add__: the outer structure is ...``)."""


def _stacked(outer: object) -> TypeGuard[Dense[Any, Any]]:
    """Whether ``outer``'s elements are stacked inner structures that pair and add as a whole: a Dense
    outer structure holding structures whose ``pair`` is a zip (trees of different shapes refine one
    by one, distributions multiply)."""
    return isinstance(outer, Dense) and sums_leafwise(arithmetic(), outer.elements())
