"""``DenseTree[A]``: binary trees with their shape as data, so one compiled function serves every shape.

The same piecewise-constant functions on [0, 1] as ``Tree`` (its specification:
they convert into each other and agree on every operation, tests/applicative/test_dense_tree.py),
stored as a ``Vec`` stores its elements. The leaves' values are stacked along
one axis of ``capacity`` slots (built leaves first, left to right, then padding);
the shape is a ``dyadic.Layout``, an array of each slot's dyadic interval, whose
element type no arithmetic accepts. A padding slot has measure zero and holds a
copy of the first leaf's value, so that equal functions are equal pytrees. Trees of any shape up
to the capacity are one pytree structure: ``jit`` compiles once for all of
them, and ``vmap`` maps over a batch of trees of different shapes.

    fmap f    one ``vmap`` over the slots
    pair      the common refinement: one sort of both trees' breakpoints and a gather
              (``dyadic.refine``), at capacity n + m - 1; a zip when both trees are known to
              share their shape (below)
    pure b    b in every slot of this tree's shape (the constant function, ``Leaf(b)`` refined)
    counit    the dyadic integral, sum_i 2^-depth_i x_i: one weighted sum
    Dense     one axis whose Gram matrix is diagonal and data: diag(2^-depth), 0 on padding.
              The dense formulas are the generic definitions exactly (a tree's coordinates are
              its values), and they run where the contracted trees share their shape.
    restack   ``Shaped``'s hook: a map along a stack of trees of one shape (a Cheb's DCT of a
              function whose values are trees) maps their values and keeps the one layout;
              a stack of trees of different shapes is refused, never transformed as numbers
    stacked_from  ``Shaped``'s hook for ``stacked.stack``: trees of one shape stack knowing it
    unstacked, stacking   ``Shaped``'s hooks for ``stacked.vmap``: a stack of one shape is mapped tree
              by tree on that shape, and trees that all hold one layout stack knowing it (these
              hooks, and the reading of which trees share a shape, are ``_layouts``')
    a stack   met as a value (the coefficients of a function whose values are trees, added by
              ordinary arithmetic), ``fmap`` maps every tree and ``pair`` pairs two stacks of as
              many trees tree by tree
    f + g     the pointwise Module through ``pair`` (``applicative.protocols.operators``; also
              ``f - g``, ``-f``, ``r * f``, ``f / r``): trees of different shapes add on their common
              refinement, at its capacity n + m - 1

Sharing a shape. Attention pairs a tree's projections with each other, and
contracts scores with values over the keys' tree: those trees all have one
shape, and they must pair and contract for free. A shape is data, so it cannot
be compared at trace time; its identity can. Trees made from one tree
(``fmap``, ``pure``, a zip, the linear algebra's results) hold the very same
layout array; concrete layouts of one value are one object (``dyadic.canonical``);
and a stack the library builds knowing its trees share one layout (the rows of
a score matrix, a tree per attention head: ``stacked.vmap``'s output, which is
every structure's ``fmap``; ``stacked.stack`` of trees of one shape) holds it
as ``origin``. ``pair`` zips two trees of one shape and merges any others; the
linear algebra contracts trees of one shape by its dense formula and takes the
generic definition (which refines) for any others. Correct either way, fast
where it matters. Inside a trace, give a second tree a known shape by building
it on the first: ``tree.with_elements(values)``.

What crosses JAX's transformations is what JAX moves with the values: the
layout leaf, and a stack's pytree metadata, which JAX compares: its capacity
and along how many inner stack axes its trees are one shape (``_layouts``).
No shape is ever lent by one value's metadata to another's leaves (a ``cond``,
a ``where``, a ``tree_map`` of two, a ``scan``'s carry): a claim JAX rebuilds
around other leaves is checked, on the host or at run time, and a tangent
(whose layout is float0) is read on its tree. Pickle (and ``copy.deepcopy``)
keeps a tree whole, its layout as its words.

Gradients. A layout's element type is not a float, so JAX gives it a float0
tangent: ``jax.jvp`` and ``jax.vjp`` of functions of trees run, their tangents
and cotangents are trees whose layout leaf is float0, read on their tree
(``tree.with_elements(tangent.data)``); ``jax.grad`` with respect to a tree takes
``allow_int=True``, JAX's rule for any pytree with a non-float leaf (a PRNG
key, an integer), and returns such a tree. ``jax.linear_transpose`` and
``jax.jacrev`` take a function of the values, the tree closed over
(``lambda v: f(t.with_elements(v))``).

Why this layout. The shapes a user meets are deep and unbalanced: the binarised
syntax trees of Python's standard library (``python bench/trees.py --shapes``)
reach depth 56 at 1,024 leaves and 61 at 4,096 (median 18 and 22). A
complete-tree (heap) layout would need 2^depth slots; a parent/child pointer
layout, depth-many sequential passes for every counit and pair. Depths and
starts need one slot per leaf, every operation is one vectorised pass (the
counit a weighted sum, pair one sort), and the starts need 60 exact bits, two
32-bit words (docs/trees.md measures the speed).

Trees with the same capacity but different shapes are the same pytree
structure, so they ``stack`` into a batch (``applicative.stacked.stack``) and
``vmap`` over it. Elements must be pytrees of arrays (a ``Vec`` per leaf, a
score row per query): a DenseTree's pytree leaves are its values and its
layout, so map values with ``fmap`` (or, from another structure,
``stacked.along``). A map over every leaf (``jax.tree_util.tree_map``) reaches
the layout too: JAX refuses any that computes with it (an arithmetic, a cast,
numpy), naming the rule in the dtype's name, and what it lets through moves or
copies whole slots, a slot's interval with its value where every leaf moves
alike (no operation reads the slots' order); a fill (``zeros_like``) is the
constant function (docs/design.md says why this holds for every map).

Built with ``DenseTree.from_nested(obj, capacity)`` (nested pairs or a
``Tree``), ``DenseTree.of(shape, leaves, capacity)`` (a list of leaf values),
``DenseTree.stack(shape, leaves, capacity)`` (values already stacked) and
``DenseTree.from_shape(shape, value, capacity)``; read with ``to_nested()``,
``to_tree()``, ``leaves()``, ``depths()``, ``shape`` (on the host: they need
concrete values), ``valid()`` and ``weights()`` (traceable). Rejected, naming
the tree and the capacity: a tree with more leaves than its capacity, a leaf
deeper than ``dyadic.MAX_DEPTH``, malformed nesting; and, where a tree is built
or JAX rebuilds one (eagerly and under ``jit``, at trace time), a layout that
is not an array of ``dyadic.LAYOUT`` (or float0) ending in its slots: what a
``tree_map`` over every leaf that JAX lets through leaves of it (a slice of the
slots, a layout put in its place).

Laws (checked by ``applicative.laws`` on ``applicative.strategies.dense_tree_triples()``,
random shapes of up to 8 leaves, and of up to 64 in tests/applicative/test_dense_tree.py): every
functor, applicative and counit law, exactly as for ``Tree``.

>>> from applicative import dot
>>> t = DenseTree.from_nested((1.0, (2.0, 4.0)), capacity=4)
>>> t.depths(), float(t.counit())                # 1/2 * 1 + 1/4 * 2 + 1/4 * 4
([1, 2, 2], 2.0)
>>> s = DenseTree.from_nested(((1.0, 1.0), 1.0))
>>> t.pair(s).shape                              # the common refinement
((None, None), (None, None))
>>> float(dot(t, s)), float(dot(t, t))           # integrals of products over [0, 1]
(2.0, 5.5)
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import jax
import jax.numpy as jnp
import numpy as np

from applicative.instances import dyadic
from applicative.instances._layout_pytree import _check_layout, register
from applicative.instances._layouts import Layouts, _Shared, each
from applicative.instances._tree_slots import _take, _walk
from applicative.instances.dyadic import Layout
from applicative.instances.tree import Leaf, Nested, Node, Shape, Tree
from applicative.protocols.algebra import Module, arithmetic
from applicative.protocols.applicative import Applicative, Shaped
from applicative.protocols.dense import Axis, Dense
from applicative.protocols.integration import Counit
from applicative.protocols.kinds import A_co, B, Measured
from applicative.protocols.operators import VectorSpace
from applicative.stacked import ProductPairing, check_stacked, element, numeric, stack, vmap, weighted_sum

__all__ = ["DenseTree", "DenseTreeOf", "as_dense_tree"]

T = TypeVar("T")


class DenseTreeOf(Measured):
    """Brand of ``DenseTree``: ``DenseTree[A]`` is an ``Applicative[DenseTreeOf, A]``."""


@register
@dataclass(frozen=True, eq=False)
class DenseTree(Layouts, Dense[DenseTreeOf, A_co], Counit[DenseTreeOf, A_co], ProductPairing, VectorSpace):
    """A binary tree of at most ``capacity`` leaves with values of type ``A``, its shape as an array.

    ``DenseTree(data, layout, capacity)`` itself is unchecked but for its layout's type and size (JAX
    rebuilds trees through it); use the constructors below."""

    data: A_co
    """The values, stacked: the element pytree with a leading axis of ``capacity`` slots on every leaf."""
    layout: Layout
    """The shape: a ``dyadic.Layout`` of ``capacity`` slots (float0 in a tangent: see the module docstring)."""
    capacity: int
    origin: Layout | None = None
    """The one layout of every tree of a stack (the rows of a score matrix), where the library built the
    stack knowing it; else None (a tree's shape is its layout, and a shape read off a stack's concrete rows
    is kept apart: it is never declared). Never pytree metadata: a tree JAX rebuilds from its leaves knows
    its shape only from them (``_layouts``)."""

    NAME, ELEMENT, STATIC, LAYOUT_NAME = "DenseTree", "tree", ("capacity",), "dyadic.LAYOUT"

    def __post_init__(self) -> None:
        _check_layout(DenseTree, self.layout, self.capacity, "DenseTree")

    @staticmethod
    def _is_layout(x: object) -> bool:
        return dyadic.is_layout(x)

    @staticmethod
    def _canonical(layout: Layout) -> Layout:
        return dyadic.canonical(layout)

    @staticmethod
    def _from_words(words: np.ndarray) -> Layout:
        return dyadic.from_words(words)

    def _slots(self) -> int:
        return self.capacity

    # Construction

    @staticmethod
    def from_nested(obj: Nested[T], capacity: int | None = None) -> DenseTree[T]:
        """The tree of nested pairs (``(a, (b, c))``) or of a ``Tree``, in ``capacity`` slots (default:
        its leaf count). Leaf values must be alike (one structure and shape: they are stacked); a
        tuple or list of any other length than two, a None leaf, more leaves than ``capacity`` or a
        leaf deeper than ``dyadic.MAX_DEPTH`` raises, naming the tree's position or size."""
        values, depths = _walk(obj, "DenseTree.from_nested")
        return _build("DenseTree.from_nested", values, depths, capacity)

    @staticmethod
    def of(shape: Shape, leaves: Sequence[T], capacity: int | None = None) -> DenseTree[T]:
        """The tree of ``shape`` whose leaves, left to right, hold ``leaves``, a list of alike values."""
        depths = dyadic.depths_of(shape, "DenseTree.of")
        return _build("DenseTree.of", list(leaves), depths, capacity)

    @staticmethod
    def stack(shape: Shape, leaves: T, capacity: int | None = None) -> DenseTree[T]:
        """The tree of ``shape`` whose leaves hold ``leaves`` sliced along the leading axis of every
        leaf of that pytree (an array of shape (leaves, ...), or the data of a Vec of elements)."""
        depths = dyadic.depths_of(shape, "DenseTree.stack")
        check_stacked(leaves, len(depths), f"DenseTree.stack (a shape of {len(depths)} leaves)")
        return _build("DenseTree.stack", leaves, depths, capacity)

    @staticmethod
    def from_shape(shape: Shape, value: T, capacity: int | None = None) -> DenseTree[T]:
        """The tree of ``shape`` with ``value`` at every leaf."""
        what = "DenseTree.from_shape"
        depths = dyadic.depths_of(shape, what)

        def shaped(x: object) -> bool:
            return isinstance(x, Shaped)

        if any(shaped(x) for x in jax.tree_util.tree_leaves(value, is_leaf=shaped)):
            return _build(what, [value] * len(depths), depths, capacity)  # (stacked as one: trees of one shape)

        def repeated(leaf: Any) -> Any:  # one value per leaf, as a broadcast view: no copy per leaf
            x = numeric(leaf, what, host=True)
            return (np.broadcast_to if isinstance(x, np.ndarray) else jnp.broadcast_to)(x, (len(depths), *x.shape))

        return _build(what, jax.tree_util.tree_map(repeated, value), depths, capacity)

    # Functor, Applicative, Counit

    def fmap(self, f: Callable[[A_co], B]) -> DenseTree[B]:
        """Map every slot's value: one ``vmap`` (on a stack of trees, every tree's: one more per stack axis)."""
        if self._stacked():
            return each(lambda t: t.fmap(f), self)
        self._single("fmap")
        return _tree(vmap(f, self.data, size=self.capacity), self.layout, self.capacity)

    def pair(self, other: Applicative[DenseTreeOf, B]) -> DenseTree[tuple[A_co, B]]:
        """The common refinement, values paired: a zip if both trees have one known layout. Two stacks of as
        many trees (the coefficients of two functions whose values are trees) pair tree by tree."""
        if not isinstance(other, DenseTree):
            raise TypeError(f"pair: DenseTree paired with {type(other).__name__}")
        if self._stacked() or other._stacked():
            stacks = jnp.shape(self.layout)[:-1], jnp.shape(other.layout)[:-1]
            if stacks[0] != stacks[1]:
                raise ValueError(
                    f"DenseTree.pair: a stack of trees of shape {stacks[0]} paired with one of shape {stacks[1]}; "
                    "stacks pair tree by tree, so they need as many trees"
                )
            return each(lambda a, b: a.pair(b), self, other)
        self._single("pair")
        other._single("pair")
        mine, theirs = self._shape("pair"), other._shape("pair")
        if mine is theirs:
            return _tree((self.data, other.data), self.layout, self.capacity)
        fine, in_self, in_other = dyadic.refine(mine, theirs)
        fine = dyadic.canonical(fine)  # (a concrete layout is the one object of its value: rows read off it meet)
        return _tree((_take(self.data, in_self), _take(other.data, in_other)), fine, jnp.shape(fine)[0])

    def pure(self, b: B) -> DenseTree[B]:
        """``b`` in every slot of this tree's shape: the constant function b."""
        shape = self._shape("pure")

        def broadcast(leaf: Any) -> jax.Array:
            return jnp.broadcast_to(leaf, (self.capacity, *jnp.shape(leaf)))

        return _tree(jax.tree_util.tree_map(broadcast, b), shape, self.capacity)

    def counit(self, module: Module[A_co] | None = None) -> A_co:
        """The integral over [0, 1]: sum over leaves of 2^-depth value (``module``'s add and scale)."""
        self._single("counit")
        m = module if module is not None else arithmetic()
        return weighted_sum(m, self.weights(), self.data, self.capacity)

    def plain_sum(self, module: Module[A_co] | None = None) -> A_co:
        """The reference's counit, the plain sum of the leaf values (not refinement invariant: see ``Tree``)."""
        self._single("plain_sum")
        m = module if module is not None else arithmetic()
        return weighted_sum(m, self.valid().astype(jnp.result_type(float)), self.data, self.capacity)

    def refine(self, other: DenseTree[object]) -> DenseTree[A_co]:
        """The same function on the common refinement of both shapes: fmap(fst, pair(self, other))."""
        return self.pair(other).fmap(_first)

    # Dense: one nodal axis, the indicator functions of the leaves; their Gram matrix is diagonal, the
    # leaves' measures 2^-depth, and data. Trees meet in a product only when they share a layout.

    def axes(self) -> tuple[Axis] | None:
        if (shape := self._shape(None)) is None:
            return None  # a stack of trees of different shapes (or not known to be one): no one axis
        return (Axis("DenseTree", None, self.capacity, dyadic.weights(shape), _Shared(shape), nodal=True),)

    def elements(self) -> A_co:
        return self.data

    def with_elements(self, elements: B) -> DenseTree[B]:
        return _tree(elements, self._shape("with_elements"), self.capacity)

    # Access and conversion

    def valid(self) -> jax.Array:
        """Which slots hold leaves (bool, ``capacity``): False on padding."""
        return dyadic.intervals(self._own("valid")).depth >= 0

    def weights(self) -> jax.Array:
        """The measure of each slot, 2^-depth (0 on padding): the Gram matrix's diagonal."""
        return dyadic.weights(self._own("weights"))

    def count(self) -> int:
        """The number of leaves."""
        return len(self.depths())

    def depths(self) -> list[int]:
        """The depth of every leaf, left to right (host-side)."""
        return dyadic.depths(self._concrete("depths"))

    @property
    def shape(self) -> Shape:
        """The nested shape: ``None`` for a leaf, ``(left, right)`` for a node (host-side)."""
        return dyadic.shape_of(self.depths())

    def leaves(self) -> list[A_co]:
        """The leaf values, left to right (host-side)."""
        return [element(self.data, int(i)) for i in dyadic.slots(self._concrete("leaves"))]

    def to_tree(self) -> Tree[A_co]:
        """The recursive ``Tree`` of the same function (host-side)."""
        leaves = iter(self.leaves())

        def build(shape: Shape) -> Tree[A_co]:
            return Leaf(next(leaves)) if shape is None else Node(build(shape[0]), build(shape[1]))

        return build(self.shape)

    def to_nested(self) -> Nested[A_co]:
        """The nested pairs of ``from_nested`` (a leaf holding a tuple, list or tree stays a ``Leaf``)."""
        return self.to_tree().to_nested()

    def __repr__(self) -> str:
        return f"DenseTree(capacity={self.capacity}, data={self.data!r})"


def as_dense_tree(x: Applicative[DenseTreeOf, B]) -> DenseTree[B]:
    """The DenseTree behind a generic result whose brand says it is one (checked):
    ``as_dense_tree(model(t)).to_nested()``."""
    if not isinstance(x, DenseTree):
        raise TypeError(f"as_dense_tree: expected a DenseTree, got {type(x).__name__}")
    return x


def _tree(data: T, layout: Layout, capacity: int, origin: Layout | None = None) -> DenseTree[T]:
    return DenseTree(data, layout, capacity, origin)


def _first(p: tuple[T, object]) -> T:
    return p[0]


# Construction from nested pairs and depths (on the host)


def _build(what: str, values: Sequence[T] | T, depths: list[int], capacity: int | None) -> DenseTree[T]:
    """The tree of these leaf depths holding ``values`` (a list, or already stacked), its padding
    slots copies of the first value. A capacity too small or a leaf too deep is named before any
    value is read. Arrays are laid out at the capacity before they are stacked or gathered, so
    that building trees of many sizes compiles nothing per size."""
    n = len(depths)
    capacity = n if capacity is None else capacity
    lay = dyadic.layout(depths, capacity, f"{what} (a tree of {n} leaves, capacity {capacity})")
    slots = np.concatenate([np.arange(n), np.zeros(capacity - n, int)])
    if isinstance(values, list):
        if len(values) != n:
            raise ValueError(f"{what}: {len(values)} leaf values for a shape of {n} leaves")
        data: Any = stack([values[i] for i in slots], what)
    else:
        data = jax.tree_util.tree_map(lambda leaf: _take(numeric(leaf, what, host=True), slots), values)
    return DenseTree(data, lay, capacity)  # (trees of one shape built apart share ``lay``)
