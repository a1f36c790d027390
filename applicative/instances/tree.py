"""``Tree[A]``: binary trees as an applicative, piecewise-constant functions on [0, 1].

A tree is a ``Leaf(value)`` or a ``Node(left, right)``; read it as a function on
[0, 1] that is constant on each leaf's interval, where every ``Node`` halves its
interval (left half, right half). Then

    fmap f    maps every leaf value, keeping the shape
    pair      the common refinement: Node/Node pairs the children, a Leaf against a
              Node is broadcast into the subtree (``fmap (x,)``), Leaf/Leaf pairs values
    pure b    ``Leaf(b)``, the unit of ``pair`` (it refines to any shape)
    counit    the integral over [0, 1] (the dyadic measure):
              counit(t) = sum over leaves of 2^-depth value,
              i.e. counit(Leaf x) = x, counit(Node l r) = (counit l + counit r) / 2

Laws (checked by ``applicative.laws`` on ``applicative.strategies.tree_triples()``, trees of different shapes):
the functor laws; pair naturality, associativity and unit (``Leaf(u)`` refines to the
other tree's shape, so fmap(snd, pair(Leaf u, y)) is y, structurally); counit
additivity, homogeneity and "counit respects pairing", counit(fmap(fst, pair(x, y))) =
counit(x): pairing only refines x, and refinement does not change an integral. The
Module laws of ``Pointwise(ARITHMETIC)`` hold too, with add on the common refinement, and
``f + g``, ``f - g``, ``-f``, ``r * f``, ``f / r`` are that Module (``applicative.protocols.operators``):
trees of different shapes add on their common refinement, as functions on [0, 1] do.

The reference's counit, the plain sum of the leaves (``plain_sum``), depends on
refinement: dot(Leaf 1, Leaf 1) = 1 but dot(Leaf 1, Node(Leaf 1, Leaf 1)) = 2,
breaking "counit respects pairing" (docs/design.md, correction 5); it is kept, not the default.

Every tree is a JAX pytree: its shape is the pytree structure and its leaf
values are the pytree leaves, so ``jit``, ``grad`` and ``vmap`` work and a tree
of one shape compiles once. The generic linear algebra works unchanged (no fast
paths): ``dot(a, b)`` is the integral of a b over [0, 1].

>>> from applicative import dot
>>> t = Tree.from_nested((1.0, (2.0, 4.0)))
>>> t
Node(Leaf(1.0), Node(Leaf(2.0), Leaf(4.0)))
>>> t.depths(), t.counit()                       # 1/2 * 1 + 1/4 * 2 + 1/4 * 4
([1, 2, 2], 2.0)
>>> dot(Leaf(1.0), Node(Leaf(1.0), Leaf(1.0)))   # refinement does not change an integral
1.0
>>> Leaf(1.0).pair(Node(Leaf(1.0), Leaf(1.0))).fmap(lambda p: p[0] * p[1]).plain_sum()
2.0
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Callable
from typing import TypeAlias, TypeVar, Union

from applicative.protocols.algebra import Module, arithmetic
from applicative.protocols.applicative import Applicative
from applicative.protocols.integration import Counit
from applicative.protocols.kinds import A_co, B, Measured
from applicative.protocols.operators import VectorSpace
from applicative.records import record

__all__ = ["Leaf", "Nested", "Node", "Shape", "Tree", "TreeOf", "as_tree"]

T = TypeVar("T")

Nested: TypeAlias = Union[T, "Tree[T]", tuple["Nested[T]", "Nested[T]"], list["Nested[T]"]]
"""A tree as nested Python pairs: a 2-tuple or 2-list is a node, a ``Tree`` is kept, anything else is a leaf value."""

Shape: TypeAlias = Union[tuple["Shape", "Shape"], None]  # noqa: UP007
"""The shape of a tree: ``None`` for a leaf, a pair of shapes for a node."""


class TreeOf(Measured):
    """Brand of ``Tree``: ``Tree[A]`` is an ``Applicative[TreeOf, A]``."""


class Tree(Applicative[TreeOf, A_co], Counit[TreeOf, A_co], VectorSpace):
    """A binary tree with values of type ``A`` at its leaves: ``Leaf(value)`` or ``Node(left, right)``."""

    # Functor, Applicative, Counit (each node kind implements fmap, pair and the two sums)

    @abstractmethod
    def fmap(self, f: Callable[[A_co], B]) -> Tree[B]:
        """Map every leaf value."""

    @abstractmethod
    def pair(self, other: Applicative[TreeOf, B]) -> Tree[tuple[A_co, B]]:
        """The common refinement of the two trees, with their values paired."""

    def pure(self, b: B) -> Leaf[B]:
        """``Leaf(b)``: the constant function b, the unit of ``pair`` with any tree."""
        return Leaf(b)

    @abstractmethod
    def counit(self, module: Module[A_co] | None = None) -> A_co:
        """The integral over [0, 1]: sum over leaves of 2^-depth value (``module``'s add and scale)."""

    @abstractmethod
    def plain_sum(self, module: Module[A_co] | None = None) -> A_co:
        """The reference's counit, the plain sum of the leaf values. It is *not* invariant under
        refinement (it breaks "counit respects pairing"); ``counit`` is the lawful one."""

    # Construction, access and conversion

    @staticmethod
    def from_nested(obj: Nested[T]) -> Tree[T]:
        """The tree of nested pairs: ``(a, (b, c))`` is ``Node(Leaf(a), Node(Leaf(b), Leaf(c)))``.

        A 2-tuple or 2-list is a node, a ``Tree`` is kept as a subtree, anything else is a
        leaf value (kept as it is: pass arrays, or ``fmap(jnp.asarray)`` afterwards). A leaf
        whose value is a tuple, or a tree, is written ``Leaf(value)``. Rejected, naming the
        position (``[1][0]``: the left child of the right child): a tuple or list that is not a
        pair, and ``None`` as a leaf value (a missing value, which nothing could sum).
        """
        return _from_nested(obj, "")

    @staticmethod
    def from_shape(shape: Shape, value: T) -> Tree[T]:
        """The tree of ``shape`` with ``value`` at every leaf (``None`` gives a template, whose shape
        and depths are read but which cannot be summed). A shape that is neither ``None`` nor a
        pair of shapes is rejected, naming its position."""
        return _from_shape(shape, value, "")

    @abstractmethod
    def to_nested(self) -> Nested[A_co]:
        """The nested pairs of ``from_nested``."""

    @abstractmethod
    def leaves(self) -> list[A_co]:
        """The leaf values, left to right."""

    @abstractmethod
    def depths(self) -> list[int]:
        """The depth of every leaf, left to right (a leaf at depth d covers an interval of length 2^-d)."""

    @property
    @abstractmethod
    def shape(self) -> Shape:
        """The shape: ``None`` for a leaf, ``(left.shape, right.shape)`` for a node."""

    def refine(self, other: Tree[object]) -> Tree[A_co]:
        """The same function on the common refinement of both shapes: fmap(fst, pair(self, other))."""
        return self.pair(other).fmap(_first)


def _from_nested(obj: Nested[T], at: str) -> Tree[T]:
    if isinstance(obj, Tree):
        return obj
    if isinstance(obj, tuple | list):
        if len(obj) != 2:
            raise ValueError(
                f"Tree.from_nested: a {type(obj).__name__} of length {len(obj)} at {at or 'the root'}; a node is "
                f"a pair (left, right), and a leaf holding a {type(obj).__name__} is written Leaf(value)"
            )
        return Node(_from_nested(obj[0], f"{at}[0]"), _from_nested(obj[1], f"{at}[1]"))
    if obj is None:
        raise ValueError(f"Tree.from_nested: the leaf at {at or 'the root'} is None; every leaf needs a value")
    return Leaf(obj)


def _from_shape(shape: Shape, value: T, at: str) -> Tree[T]:
    if shape is None:
        return Leaf(value)
    if not isinstance(shape, tuple | list) or len(shape) != 2:
        raise ValueError(
            f"Tree.from_shape: the shape at {at or 'the root'} is {shape!r}; a shape is None (a leaf) "
            "or a pair of shapes (a node)"
        )
    return Node(_from_shape(shape[0], value, f"{at}[0]"), _from_shape(shape[1], value, f"{at}[1]"))


def _first(p: tuple[T, object]) -> T:
    return p[0]


def _paired_with(y: B) -> Callable[[T], tuple[T, B]]:
    return lambda a: (a, y)


def _as_tree(op: str, other: Applicative[TreeOf, B]) -> Tree[B]:
    if not isinstance(other, Tree):
        raise TypeError(f"{op}: Tree paired with {type(other).__name__}")
    return other


@record
class Leaf(Tree[A_co]):
    """A leaf: the constant ``value`` on its interval."""

    value: A_co

    def fmap(self, f: Callable[[A_co], B]) -> Leaf[B]:
        return Leaf(f(self.value))

    def pair(self, other: Applicative[TreeOf, B]) -> Tree[tuple[A_co, B]]:
        # Leaf/Leaf pairs the values; Leaf/Node broadcasts the value into the node.
        x = self.value
        return _as_tree("pair", other).fmap(lambda b: (x, b))

    def counit(self, module: Module[A_co] | None = None) -> A_co:
        return self._summand("counit")

    def plain_sum(self, module: Module[A_co] | None = None) -> A_co:
        return self._summand("plain_sum")

    def _summand(self, op: str) -> A_co:
        if self.value is None:
            raise ValueError(f"Tree.{op}: a leaf holds None (a template from Tree.from_shape(shape, None)?)")
        return self.value

    def to_nested(self) -> Nested[A_co]:
        if isinstance(self.value, tuple | list | Tree):
            return self  # a pair (or a tree) as a value would read as a node
        return self.value

    def leaves(self) -> list[A_co]:
        return [self.value]

    def depths(self) -> list[int]:
        return [0]

    @property
    def shape(self) -> Shape:
        return None

    def __repr__(self) -> str:
        return f"Leaf({self.value!r})"


@record
class Node(Tree[A_co]):
    """A node: ``left`` on the left half of its interval, ``right`` on the right half."""

    left: Tree[A_co]
    right: Tree[A_co]

    def __post_init__(self) -> None:
        for name, child in (("left", self.left), ("right", self.right)):
            if not isinstance(child, Tree):
                raise TypeError(f"Node: {name} must be a Tree, got {type(child).__name__} (wrap values in Leaf)")

    def fmap(self, f: Callable[[A_co], B]) -> Node[B]:
        return Node(self.left.fmap(f), self.right.fmap(f))

    def pair(self, other: Applicative[TreeOf, B]) -> Tree[tuple[A_co, B]]:
        o = _as_tree("pair", other)
        if isinstance(o, Node):
            return Node(self.left.pair(o.left), self.right.pair(o.right))
        if isinstance(o, Leaf):
            return self.fmap(_paired_with(o.value))
        raise TypeError(f"pair: unknown tree node {type(o).__name__}")

    def counit(self, module: Module[A_co] | None = None) -> A_co:
        m = module if module is not None else arithmetic()
        return m.scale(0.5, m.add(self.left.counit(m), self.right.counit(m)))

    def plain_sum(self, module: Module[A_co] | None = None) -> A_co:
        m = module if module is not None else arithmetic()
        return m.add(self.left.plain_sum(m), self.right.plain_sum(m))

    def to_nested(self) -> Nested[A_co]:
        return (self.left.to_nested(), self.right.to_nested())

    def leaves(self) -> list[A_co]:
        return [*self.left.leaves(), *self.right.leaves()]

    def depths(self) -> list[int]:
        return [d + 1 for d in (*self.left.depths(), *self.right.depths())]

    @property
    def shape(self) -> Shape:
        return (self.left.shape, self.right.shape)

    def __repr__(self) -> str:
        return f"Node({self.left!r}, {self.right!r})"


def as_tree(x: Applicative[TreeOf, B]) -> Tree[B]:
    """The Tree behind a generic result whose brand says it is one (checked): ``as_tree(model(t)).leaves()``."""
    if not isinstance(x, Tree):
        raise TypeError(f"as_tree: expected a Tree, got {type(x).__name__}")
    return x
