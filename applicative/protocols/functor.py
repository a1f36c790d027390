"""Functor: structures whose elements can be mapped over.

Laws (checked for every instance by ``applicative.laws``):

    identity:     fmap(id, x)      = x
    composition:  fmap(g . f, x)   = fmap(g, fmap(f, x))
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import ClassVar, Generic

from applicative.protocols.kinds import A_co, B, C, F

__all__ = ["Functor", "composition_law", "identity_law"]


class Functor(ABC, Generic[F, A_co]):
    """A structure of brand ``F`` holding elements of type ``A``; ``fmap`` maps them."""

    laws_claimed: ClassVar[frozenset[str] | None] = None
    """The laws this instance claims, named as in ``applicative.laws.LAWS``; None (the default): every
    law of every abstraction it implements. The law suite checks exactly these."""

    @abstractmethod
    def fmap(self, f: Callable[[A_co], B]) -> Functor[F, B]:
        """Apply ``f`` to every element, keeping the shape."""


# The laws, each as (left side, right side) of an equation.


def identity_law(x: Functor[F, B]) -> tuple[Functor[F, B], Functor[F, B]]:
    """fmap(id, x) = x."""
    return x.fmap(lambda a: a), x


def composition_law(x: Functor[F, B], f: Callable[[B], C], g: Callable[[C], C]) -> tuple[Functor[F, C], Functor[F, C]]:
    """fmap(g . f, x) = fmap(g, fmap(f, x))."""
    return x.fmap(lambda a: g(f(a))), x.fmap(f).fmap(g)
