"""Integration: ``Counit``, the weighted sum of a structure's elements, an integral against a measure.

    counit(x) = sum_i w_i x_i      (for Vec: w_i = 1, the counting measure)

It needs a ``Module`` on the elements (``ARITHMETIC`` by default); for nested
structures the Module is lifted pointwise (``Pointwise``). Generic code calls
the free function ``counit(x, module)``, which names the structure when it
has no counit.

A structure with a counit declares it twice: its class subclasses
``Counit[F, A]`` (the method), and its brand ``F`` subclasses ``Measured``
(``applicative.protocols.kinds``), so that mypy knows it where only the brand
is seen: ``counit``, ``dot`` and everything that sums take ``Applicative[Summed, A]``,
``Summed`` a type variable bound to ``Measured``.

Laws (checked for every instance by ``applicative.laws``):

    additive:          counit(x + y)  = counit(x) + counit(y)   (+ is fmap(add) . pair)
    homogeneous:       counit(r x)    = r counit(x)
    respects pairing:  counit(fmap(fst, pair(x, y))) = counit(x)

The last is the law the reference's Tree and Distribution break: pairing may
refine a structure, and refinement must not change the integral.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Generic, cast

from applicative.protocols.algebra import Module, Pointwise, Real, arithmetic
from applicative.protocols.applicative import Applicative
from applicative.protocols.kinds import A, A_co, B, Summed

__all__ = ["Counit", "additivity_law", "counit", "homogeneity_law", "pairing_law"]


class Counit(ABC, Generic[Summed, A_co]):
    """A structure whose elements can be summed against its measure; its brand is ``Measured``."""

    @abstractmethod
    def counit(self, module: Module[A_co] | None = None) -> A_co:
        """The weighted sum of the elements, in ``module`` (ordinary arithmetic by default).

        An instance sums only through ``module`` (its ``add``, ``scale``, ``zero``), never with ``+``
        on the elements: nested structures are summed in ``Pointwise(module)``, measures in
        ``MIXTURE``. ``applicative.stacked.weighted_sum`` does so for stacked storage."""


def counit(x: Applicative[Summed, A], module: Module[A] | None = None) -> A:
    """The weighted sum of the elements of ``x``; a clear error if ``x`` has no counit."""
    if not isinstance(x, Counit):
        raise TypeError(f"{type(x).__name__} has no Counit instance: it cannot sum its elements")
    return cast(A, x.counit(module if module is not None else arithmetic()))


# The laws, each as (left side, right side) of an equation; ``m`` is the element Module.


def additivity_law(m: Module[A], x: Applicative[Summed, A], y: Applicative[Summed, A]) -> tuple[A, A]:
    """counit(x + y) = counit(x) + counit(y)."""
    lifted: Pointwise[Summed, A] = Pointwise(m)
    return counit(lifted.add(x, y), m), m.add(counit(x, m), counit(y, m))


def homogeneity_law(m: Module[A], r: Real, x: Applicative[Summed, A]) -> tuple[A, A]:
    """counit(r x) = r counit(x)."""
    lifted: Pointwise[Summed, A] = Pointwise(m)
    return counit(lifted.scale(r, x), m), m.scale(r, counit(x, m))


def pairing_law(m: Module[A], x: Applicative[Summed, A], y: Applicative[Summed, B]) -> tuple[A, A]:
    """counit(fmap(fst, pair(x, y))) = counit(x)."""
    return counit(x.pair(y).fmap(lambda p: p[0]), m), counit(x, m)
