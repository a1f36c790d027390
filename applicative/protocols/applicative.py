"""Applicative: functors with a zip-like ``pair`` and a ``pure`` (the monoidal form).

``pair`` is the laxator ``F a x F b -> F (a, b)``; ``pure`` is taken relative
to an existing value (``x.pure(b)``: a Vec knows its length, a Tree's pure is
a leaf), since Python cannot dispatch on a return type. ``ap`` and
``lift_a2`` are derived:

    lift_a2(f, x, y) = fmap(uncurry f, pair(x, y))
    ap(fs, xs)       = fmap(uncurry ($), pair(fs, xs))

Laws (checked for every instance by ``applicative.laws``):

    naturality:     pair(fmap(f, x), fmap(g, y)) = fmap(f x g, pair(x, y))
    associativity:  fmap(assoc, pair(pair(x, y), z)) = pair(x, pair(y, z))
    left unit:      fmap(snd, pair(y.pure(u), y)) = y
    right unit:     fmap(fst, pair(y, y.pure(u))) = y
    pure natural:   fmap(f, y.pure(a)) = y.pure(f(a))
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import jax

from applicative.protocols.functor import Functor
from applicative.protocols.kinds import A_co, B, C, F

__all__ = [
    "Applicative",
    "ProductPairing",
    "Shaped",
    "ap",
    "associativity_law",
    "left_unit_law",
    "lift_a2",
    "naturality_law",
    "pure_naturality_law",
    "right_unit_law",
]

D = TypeVar("D")


class Applicative(Functor[F, A_co]):
    """A functor with ``pair`` (zip elements) and ``pure`` (a constant shaped like ``self``)."""

    @abstractmethod
    def fmap(self, f: Callable[[A_co], B]) -> Applicative[F, B]:
        """Apply ``f`` to every element, keeping the shape."""

    @abstractmethod
    def pair(self, other: Applicative[F, B]) -> Applicative[F, tuple[A_co, B]]:
        """Zip two structures of the same brand into one of pairs."""

    @abstractmethod
    def pure(self, b: B) -> Applicative[F, B]:
        """The constant structure with value ``b``, shaped as the unit of ``pair`` with ``self``."""


class Shaped:
    """Marks a structure whose pytree holds more than its elements' coordinates: its shape is data (a
    ``DenseTree``'s layout arrays) or its ``pair`` is not a zip (a distribution's outcomes and
    weights). Shape is never an element: a structure that holds such structures (a Cheb whose values
    are trees, a Vec of distributions) never adds, scales, transforms or sums their leaves. It reaches
    them through their own operations: ``fmap`` and ``pair`` (ordinary arithmetic adds and scales
    them through these, as ``Pointwise`` does), ``restack`` for a linear map along a stack of them
    (``applicative.stacked.along``: a Chebyshev transform of tree values), and the hooks through which
    ``applicative.stacked`` stacks them (``stacked_from``) and maps them (``unstacked``, ``stacking``)
    keeping what a stack of them shares."""

    def restack(self, f: Callable[[Any], Any], what: str) -> Any:
        """This structure, or this stack of structures (a leading axis on every leaf), holding
        ``f(elements)``: ``f`` maps the stacked elements' leading axes (adds, removes or transforms
        them: a pad, an evaluation, a DCT) and keeps their element axes. Defined only where every
        structure of the stack has one shape, which the result keeps; ``what`` names the operation
        in errors. The default refuses, naming the structure: its leaves are not coordinates."""
        raise TypeError(
            f"{what}: the elements are {type(self).__name__}s, whose leaves are not coordinates; a linear map "
            "along the structure (a Chebyshev transform, a sum of leaves) cannot combine them"
        )

    def element(self, i: int) -> Any:
        """The i-th structure of this stack of structures (``applicative.stacked.element``: a Vec's i-th
        tree), keeping what the stack knows of its structures (trees of one shape: that shape). The
        default takes every leaf's i-th row."""
        return jax.tree_util.tree_map(lambda leaf: leaf[i], self)

    def unstacked(self) -> tuple[Any, Callable[[Any], Any]] | None:
        """For ``applicative.stacked.vmap`` mapping along this stack's leading axis: what varies along it (a
        pytree with that axis in front of every leaf) and how to build one structure of the stack from a
        slice of it, on what every structure of the stack shares (a stack of trees of one shape: that
        shape, not a slice of it). None, the default: every leaf varies, sliced as ``jax.vmap`` slices it."""
        return None

    def stacking(self, varies: Callable[[Any], bool]) -> tuple[Any, Callable[[Any, int], Any]] | None:
        """For ``applicative.stacked.vmap``, this structure as the mapped function's output: what varies
        along the map (``varies(leaf)`` tells, at trace time, whether a leaf does) and how to build the
        stack of ``n`` such structures from it stacked, on what they all share (trees that all hold one
        layout: a stack of that shape, which knows it). None, the default: every leaf stacked, as
        ``jax.vmap`` stacks it."""
        return None

    def stacked_from(self, elements: Sequence[Any], what: str) -> Any:
        """The stack of ``elements`` (this structure first: the structures at one place of the elements
        ``applicative.stacked.stack`` stacks), built by the structure where it knows what they provably
        share: trees stack as a stack that records their one shape, or how far each of them was one
        shape (a stack of sequences of trees), whatever each claimed. None, the default: every leaf
        stacked, as ``jax.numpy.stack`` stacks it (the elements must then be one pytree structure);
        ``what`` names the caller in errors."""
        return None


class ProductPairing(Shaped):
    """Marks a structure whose ``pair`` is not a zip of two equal shapes (a distribution's is the
    independent product, a tree's the common refinement): a pointwise sum of two such structures is
    not a sum of their leaves, so ordinary arithmetic sums them through ``pair``."""


def lift_a2(f: Callable[[B, C], D], x: Applicative[F, B], y: Applicative[F, C]) -> Applicative[F, D]:
    """liftA2 f x y = fmap (uncurry f) (pair x y)."""
    return x.pair(y).fmap(lambda p: f(p[0], p[1]))


def ap(fs: Applicative[F, Callable[[B], C]], xs: Applicative[F, B]) -> Applicative[F, C]:
    """fs <*> xs = fmap (uncurry ($)) (pair fs xs).

    Elements of a stacked structure must be pytrees, so a structure of functions
    holds pytree functions such as ``jax.tree_util.Partial``.
    """
    return fs.pair(xs).fmap(lambda p: p[0](p[1]))


# The laws, each as (left side, right side) of an equation.


def naturality_law(
    x: Applicative[F, B], y: Applicative[F, B], f: Callable[[B], C], g: Callable[[B], C]
) -> tuple[Applicative[F, tuple[C, C]], Applicative[F, tuple[C, C]]]:
    """pair(fmap(f, x), fmap(g, y)) = fmap(f x g, pair(x, y))."""
    return x.fmap(f).pair(y.fmap(g)), x.pair(y).fmap(lambda p: (f(p[0]), g(p[1])))


def associativity_law(
    x: Applicative[F, B], y: Applicative[F, C], z: Applicative[F, D]
) -> tuple[Applicative[F, tuple[B, tuple[C, D]]], Applicative[F, tuple[B, tuple[C, D]]]]:
    """fmap(assoc, pair(pair(x, y), z)) = pair(x, pair(y, z))."""
    return x.pair(y).pair(z).fmap(lambda p: (p[0][0], (p[0][1], p[1]))), x.pair(y.pair(z))


def left_unit_law(y: Applicative[F, B], u: C) -> tuple[Applicative[F, B], Applicative[F, B]]:
    """fmap(snd, pair(y.pure(u), y)) = y."""
    return y.pure(u).pair(y).fmap(lambda p: p[1]), y


def right_unit_law(y: Applicative[F, B], u: C) -> tuple[Applicative[F, B], Applicative[F, B]]:
    """fmap(fst, pair(y, y.pure(u))) = y."""
    return y.pair(y.pure(u)).fmap(lambda p: p[0]), y


def pure_naturality_law(y: Applicative[F, B], a: C, f: Callable[[C], D]) -> tuple[Applicative[F, D], Applicative[F, D]]:
    """fmap(f, y.pure(a)) = y.pure(f(a))."""
    return y.pure(a).fmap(f), y.pure(f(a))
