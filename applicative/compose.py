"""``Compose[F, G, A]``: the composite of two applicatives is an applicative.

"Functions with C channels" is ``Compose`` of a function axis and a Vec,
built rather than written:

    fmap f (Compose x)               = Compose (fmap (fmap f) x)
    pair (Compose x) (Compose y)     = Compose (fmap (uncurry pair) (pair x y))
    (Compose x).pure b               = Compose (fmap (\\g -> g.pure b) x)
    counit (Compose x)               = counit (fmap counit x)     (the product measure)

>>> import numpy as np
>>> from applicative import Dim, matrix
>>> class Row(Dim): ...
>>> class Col(Dim): ...
>>> grid = Compose(matrix(np.arange(6.0).reshape(2, 3), Row, Col))
>>> float(grid.counit())
15.0
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic

import jax

from applicative.protocols.algebra import Module, arithmetic
from applicative.protocols.applicative import Applicative
from applicative.protocols.counit import Counit, counit
from applicative.protocols.kinds import A_co, B, F, G


class ComposeOf(Generic[F, G]):
    """Brand of ``Compose`` of brands ``F`` (outer) and ``G`` (inner)."""


@jax.tree_util.register_pytree_node_class
@dataclass(frozen=True, eq=False)
class Compose(Applicative[ComposeOf[F, G], A_co], Counit[ComposeOf[F, G], A_co]):
    """An ``F``-structure of ``G``-structures, seen as one structure of ``A``."""

    outer: Applicative[F, Applicative[G, A_co]]

    def fmap(self, f: Callable[[A_co], B]) -> Compose[F, G, B]:
        return Compose(self.outer.fmap(lambda g: g.fmap(f)))

    def pair(self, other: Applicative[ComposeOf[F, G], B]) -> Compose[F, G, tuple[A_co, B]]:
        if not isinstance(other, Compose):
            raise TypeError(f"pair: Compose paired with {type(other).__name__}")
        return Compose(self.outer.pair(other.outer).fmap(lambda p: p[0].pair(p[1])))

    def pure(self, b: B) -> Compose[F, G, B]:
        return Compose(self.outer.fmap(lambda g: g.pure(b)))

    def counit(self, module: Module[A_co] | None = None) -> A_co:
        m = module if module is not None else arithmetic()
        return counit(self.outer.fmap(lambda g: counit(g, m)), m)

    def tree_flatten(self) -> tuple[tuple[Applicative[F, Applicative[G, A_co]]], None]:
        return (self.outer,), None

    @classmethod
    def tree_unflatten(cls, aux: None, children: tuple[Applicative[F, Applicative[G, A_co]]]) -> Compose[F, G, A_co]:
        return cls(children[0])
