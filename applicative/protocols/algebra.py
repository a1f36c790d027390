"""Algebras on elements: ``Module`` (add, scale by a real, zero) and ``Ring`` (add, mul).

A counit is a weighted sum, so it needs a Module on the element type; the
derived linear algebra (``dot``, ``mul_mm``, ...) needs a Ring on the scalars.

Module laws:  add is associative and commutative with unit ``zero(like)``;
              scale(r, add(a, b)) = add(scale(r, a), scale(r, b));
              scale(r, scale(s, a)) = scale(r * s, a);  scale(1, a) = a.
Ring laws:    a Module whose ``mul`` is associative and distributes over add,
              with zero(like) * a = zero(like).

``ARITHMETIC`` is ordinary ``+`` and ``*``, leafwise on any pytree: it is the
Ring of Python floats, complex numbers and JAX arrays (any float dtype, kept),
and the Module of any structure of them (a structure whose leaves are not all
coordinates, a ``Shaped`` one such as a tree or a distribution, is added
through ``pair`` as ``Pointwise`` does). ``Pointwise(m)`` lifts a Module on
``A`` to one on ``Applicative[F, A]``, through ``fmap`` and ``pair``.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, Generic, TypeVar, cast

import jax
import jax.numpy as jnp

from applicative.protocols.applicative import Applicative, Shaped
from applicative.protocols.kinds import A, F, R

__all__ = [
    "ARITHMETIC",
    "Arithmetic",
    "Module",
    "Pointwise",
    "Real",
    "Ring",
    "add_associativity_law",
    "add_commutativity_law",
    "arithmetic",
    "mul_associativity_law",
    "mul_distributivity_law",
    "scale_compatibility_law",
    "scale_distributivity_law",
    "zero_unit_law",
]

T = TypeVar("T")

Real = float | jax.Array
"""A real scale factor (a weight of a measure, a learning rate)."""


class Module(ABC, Generic[T]):
    """A real vector space on ``T``: ``add``, ``scale`` by a real, and ``zero`` shaped like an element."""

    @abstractmethod
    def zero(self, like: T) -> T:
        """The additive unit, shaped like ``like``."""

    @abstractmethod
    def add(self, a: T, b: T) -> T:
        """a + b."""

    @abstractmethod
    def scale(self, r: Real, a: T) -> T:
        """r a."""


class Ring(Module[T]):
    """A Module with an associative multiplication distributing over ``add``."""

    @abstractmethod
    def mul(self, a: T, b: T) -> T:
        """a * b."""


def _zero_leaf(leaf: T) -> T:
    # Python scalars stay Python scalars; arrays keep their dtype and shape.
    if isinstance(leaf, (int, float, complex)):
        return cast(T, type(leaf)(0))
    return cast(T, jnp.zeros_like(cast(jax.Array, leaf)))


def _paired(x: object) -> bool:
    return isinstance(x, Shaped)


class Arithmetic(Ring[T]):
    """Ordinary ``+`` and ``*``, applied leafwise to pytrees (structures whose ``pair`` is not a zip
    through their ``pair`` and ``fmap``: their leaves are not coordinates)."""

    def zero(self, like: T) -> T:
        def zero(x: Any) -> Any:
            return x.fmap(self.zero) if _paired(x) else _zero_leaf(x)

        return cast(T, jax.tree_util.tree_map(zero, like, is_leaf=_paired))

    def add(self, a: T, b: T) -> T:
        def add(x: Any, y: Any) -> Any:
            return Pointwise(self).add(x, y) if _paired(x) else x + y

        return cast(T, jax.tree_util.tree_map(add, a, b, is_leaf=_paired))

    def scale(self, r: Real, a: T) -> T:
        def scale(x: Any) -> Any:
            return x.fmap(lambda e: self.scale(r, e)) if _paired(x) else r * x

        return cast(T, jax.tree_util.tree_map(scale, a, is_leaf=_paired))

    def mul(self, a: T, b: T) -> T:
        return cast(T, a * b)  # type: ignore[operator]

    def __repr__(self) -> str:
        return "ARITHMETIC"


ARITHMETIC: Arithmetic[Any] = Arithmetic()
"""The default algebra: ordinary arithmetic, leafwise, at any element type (hence ``Any``: a value
cannot carry a type variable), so ``module or ARITHMETIC`` and ``Pointwise(ARITHMETIC)`` type-check;
``arithmetic()`` gives it at a named element type."""


def ordinary(module: object) -> bool:
    """Whether ``module`` is ordinary arithmetic itself, whose operations act leaf by leaf: an
    ``Arithmetic``, not a subclass that overrides one of them (which only the generic definitions,
    through its own ``add``, ``scale`` and ``mul``, respect)."""
    return type(module) is Arithmetic


def arithmetic() -> Ring[T]:
    """ARITHMETIC at any element type (floats, complex numbers, JAX arrays, pytrees)."""
    return cast(Ring[T], ARITHMETIC)


@dataclass(frozen=True)
class Pointwise(Module[Applicative[F, A]]):
    """The Module on structures lifted from one on elements:
    add = fmap(add) . pair, scale r = fmap(scale r), zero = fmap(zero).

    The structure's brand F is not in the argument, so mypy needs it named where it cannot come from
    the context: ``lifted: Pointwise[VecOf[X], Array] = Pointwise(ARITHMETIC)``."""

    inner: Module[A]

    def zero(self, like: Applicative[F, A]) -> Applicative[F, A]:
        return like.fmap(self.inner.zero)

    def add(self, a: Applicative[F, A], b: Applicative[F, A]) -> Applicative[F, A]:
        return a.pair(b).fmap(lambda p: self.inner.add(p[0], p[1]))

    def scale(self, r: Real, a: Applicative[F, A]) -> Applicative[F, A]:
        return a.fmap(lambda x: self.inner.scale(r, x))


# The laws, each as (left side, right side) of an equation.


def add_associativity_law(m: Module[T], a: T, b: T, c: T) -> tuple[T, T]:
    """(a + b) + c = a + (b + c)."""
    return m.add(m.add(a, b), c), m.add(a, m.add(b, c))


def add_commutativity_law(m: Module[T], a: T, b: T) -> tuple[T, T]:
    """a + b = b + a."""
    return m.add(a, b), m.add(b, a)


def zero_unit_law(m: Module[T], a: T) -> tuple[T, T]:
    """zero + a = a."""
    return m.add(m.zero(a), a), a


def scale_distributivity_law(m: Module[T], r: Real, a: T, b: T) -> tuple[T, T]:
    """r (a + b) = r a + r b."""
    return m.scale(r, m.add(a, b)), m.add(m.scale(r, a), m.scale(r, b))


def scale_compatibility_law(m: Module[T], r: Real, s: Real, a: T) -> tuple[T, T]:
    """r (s a) = (r s) a."""
    return m.scale(r, m.scale(s, a)), m.scale(r * s, a)


def mul_associativity_law(ring: Ring[R], a: R, b: R, c: R) -> tuple[R, R]:
    """(a b) c = a (b c)."""
    return ring.mul(ring.mul(a, b), c), ring.mul(a, ring.mul(b, c))


def mul_distributivity_law(ring: Ring[R], a: R, b: R, c: R) -> tuple[R, R]:
    """a (b + c) = a b + a c."""
    return ring.mul(a, ring.add(b, c)), ring.add(ring.mul(a, b), ring.mul(a, c))
