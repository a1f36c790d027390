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
    stacked_from  ``Shaped``'s hook for ``stacked.stack``: trees of one shape stacked record it
    a stack   met as a value (the coefficients of a function whose values are trees, added by
              ordinary arithmetic), ``fmap`` maps every tree and ``pair`` pairs two stacks of as
              many trees tree by tree
    f + g     the pointwise Module through ``pair`` (``applicative.protocols.operators``; also
              ``f - g``, ``-f``, ``r * f``, ``f / r``): trees of different shapes add on their common
              refinement, at its capacity n + m - 1

Sharing a shape. Attention pairs a tree's projections with each other, and
contracts scores with values over the keys' tree: those trees all have one
shape, and they must pair and contract for free. A shape is data, so it cannot
be compared at trace time; its *provenance* can. Trees made from one tree
(``fmap``, ``pure``, a zip, the linear algebra's results) hold the very same
layout array (and origin), and trees stacked inside another structure (the
rows of a score matrix, a tree per attention head) remember the one layout they
all have (``origin``). ``pair`` zips two trees whose layout (or origin) is the
same object and merges any others; the linear algebra contracts trees of the
same layout by its dense formula and takes the generic definition (which
refines) for any others. Correct either way, fast where it matters. Trees built
on the host of one shape and capacity hold one layout object (layouts are
interned by value), so they zip and meet too; inside a trace, give a second
tree a known shape by building it on the first: ``tree.with_elements(values)``.

What JAX compares of a tree's pytree metadata (its jit cache, a vjp's
cotangents, a scan's carry, ``tree_map`` of two structures) is its capacity
and whether a stack of trees is one shape, never the provenance, so a tree is
one pytree structure inside and outside every trace. The provenance rides
along uncompared: a vmap of values traced apart from their layout builds a
stack whose rows are that layout, and a tangent knows its tree's shape. Where
it cannot be vouched for (a trace that has finished, or a concrete shape seen
inside a jit, which will serve other values) a stack known to be one shape
reads its shape off its first row.

Gradients. A layout's element type is not a float, so JAX gives it a float0
tangent: ``jax.jvp`` and ``jax.vjp`` of functions of trees run, their tangents
and cotangents are trees whose layout leaf is float0 and whose shape is the
primal's (``origin``); ``jax.grad`` with respect to a tree takes
``allow_int=True``, JAX's rule for any pytree with a non-float leaf (a PRNG
key, an integer), and returns such a tree. ``jax.linear_transpose`` admits
float leaves only: transpose a function of the values, the tree closed over
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

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar, cast

import jax
import jax.numpy as jnp
import numpy as np
from jax._src.interpreters import partial_eval

from applicative.instances import dyadic
from applicative.instances.dyadic import Layout
from applicative.instances.tree import Leaf, Nested, Node, Shape, Tree
from applicative.protocols.algebra import Module, arithmetic
from applicative.protocols.applicative import Applicative, Shaped
from applicative.protocols.dense import Axis, Dense
from applicative.protocols.integration import Counit
from applicative.protocols.kinds import A_co, B, Measured
from applicative.protocols.operators import VectorSpace
from applicative.stacked import ProductPairing, check_stacked, element, largest, numeric, stack, weighted_sum

__all__ = ["DenseTree", "DenseTreeOf", "as_dense_tree"]

T = TypeVar("T")


class DenseTreeOf(Measured):
    """Brand of ``DenseTree``: ``DenseTree[A]`` is an ``Applicative[DenseTreeOf, A]``."""


@dataclass(frozen=True, eq=False)
class DenseTree(Dense[DenseTreeOf, A_co], Counit[DenseTreeOf, A_co], ProductPairing, VectorSpace):
    """A binary tree of at most ``capacity`` leaves with values of type ``A``, its shape as an array.

    ``DenseTree(data, layout, capacity)`` itself is unchecked but for its layout's type and size (JAX
    rebuilds trees through it); use the constructors below."""

    data: A_co
    """The values, stacked: the element pytree with a leading axis of ``capacity`` slots on every leaf."""
    layout: Layout
    """The shape: a ``dyadic.Layout`` of ``capacity`` slots (float0 in a tangent: see the module docstring)."""
    capacity: int
    origin: Layout | None = None
    """The one layout of every tree of a stack (rows of a score matrix), or of the tree a tangent is of,
    when known; static."""

    def __post_init__(self) -> None:
        _check_layout(self.layout, self.capacity, "DenseTree")

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

        def repeated(leaf: Any) -> Any:  # one value per leaf, as a broadcast view: no copy per leaf
            x = numeric(leaf, what, host=True)
            return (np.broadcast_to if isinstance(x, np.ndarray) else jnp.broadcast_to)(x, (len(depths), *x.shape))

        return _build(what, jax.tree_util.tree_map(repeated, value), depths, capacity)

    # Functor, Applicative, Counit

    def fmap(self, f: Callable[[A_co], B]) -> DenseTree[B]:
        """Map every slot's value: one ``vmap`` (on a stack of trees, every tree's: one more per stack axis)."""
        if self._stacked():
            return _each_tree(lambda t: t.fmap(f), self)
        self._single("fmap")
        return _tree(jax.vmap(f, axis_size=self.capacity)(self.data), self.layout, self.capacity, self.origin)

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
            return _each_tree(lambda a, b: a.pair(b), self, other)
        self._single("pair")
        other._single("pair")
        mine, theirs = self._shape("pair"), other._shape("pair")
        if mine is theirs:
            return _tree((self.data, other.data), self.layout, self.capacity, self.origin)
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

    def restack(self, f: Callable[[Any], Any], what: str) -> DenseTree[Any]:
        """This tree or stack of trees holding ``f(data)`` (``f`` maps the stack's leading axes: a
        Chebyshev transform of a function whose values are trees), on the one layout every tree of
        the stack has: its values are mapped, never its layout. A stack whose trees differ in shape,
        or cannot be shown to share one (traced, of no known origin), is a ValueError naming ``what``."""
        shape = self._one_shape(what)
        before, data = jax.tree_util.tree_leaves(self.data), f(self.data)
        after = jax.tree_util.tree_leaves(data)
        if not before:
            return _tree(data, self.layout, self.capacity, self.origin)
        # The element axes (after the slots) are kept; the new stack axes are those in front of the slots.
        stack_axes = after[0].shape[: jnp.ndim(after[0]) - (jnp.ndim(before[0]) - jnp.ndim(self.layout)) - 1]
        return _tree(data, jnp.broadcast_to(shape, (*stack_axes, self.capacity)), self.capacity, shape)

    def stacked_from(self, elements: Sequence[Any]) -> DenseTree[A_co]:
        """``Shaped``'s hook for ``applicative.stacked.stack``: this stack, built from the trees ``elements``,
        records their one shape if they provably have one (one layout object, or equal concrete layouts),
        so that it is one shape inside ``jit`` too; else it is left a stack of trees of any shapes."""
        if self.origin is not None or not self._stacked():
            return self
        shapes: list[Layout] = []
        for e in elements:
            if not isinstance(e, DenseTree) or (shape := e._shape(None)) is None:
                return self  # (a stack of trees of different shapes among the elements)
            shapes.append(shape)
        if shapes and all(s is shapes[0] or _equal(s, shapes[0]) for s in shapes):  # (stops at the first
            return _tree(self.data, self.layout, self.capacity, dyadic.canonical(shapes[0]))  # that differs)
        return self

    def element(self, i: int) -> DenseTree[A_co]:
        """``Shaped``'s hook for ``applicative.stacked.element``: the i-th tree of this stack of trees, which
        knows the stack's one shape where the stack does (the rows of one stack then pair as a zip)."""
        if not self._stacked():
            raise ValueError(f"DenseTree.element: one tree (layout of shape {jnp.shape(self.layout)}), not a stack")
        return _tree(element(self.data, i), self.layout[i], self.capacity, self._shape(None))

    def refine(self, other: DenseTree[object]) -> DenseTree[A_co]:
        """The same function on the common refinement of both shapes: fmap(fst, pair(self, other))."""
        return self.pair(other).fmap(_first)

    # Dense: one nodal axis, the indicator functions of the leaves; their Gram matrix is diagonal, the
    # leaves' measures 2^-depth, and data. Trees meet in a product only when they share a layout.

    def axes(self) -> tuple[Axis] | None:
        shape = self._shape(None)
        if shape is None and (shape := _alike_rows(self.layout)) is None:
            return None  # a stack of trees of different shapes (or not known to be one): no one axis
        return (Axis("DenseTree", None, self.capacity, dyadic.weights(shape), _Shared(shape), nodal=True),)

    def elements(self) -> A_co:
        return self.data

    def with_elements(self, elements: B) -> DenseTree[B]:
        return _tree(elements, self._shape("with_elements"), self.capacity)

    # Access and conversion

    def valid(self) -> jax.Array:
        """Which slots hold leaves (bool, ``capacity``): False on padding."""
        return dyadic.intervals(self._slots()).depth >= 0

    def weights(self) -> jax.Array:
        """The measure of each slot, 2^-depth (0 on padding): the Gram matrix's diagonal."""
        return dyadic.weights(self._slots())

    def largest(self) -> jax.Array:
        """The largest value over the leaves, padding excluded (a softmax's shift: ``nn.Sampled``), of every
        tree of a stack; values that are trees answer by their own ``largest`` (``stacked.largest``)."""
        keep = self.valid()

        def top(leaf: Any) -> jax.Array:
            if isinstance(leaf, Shaped):
                return largest(leaf)
            mask = jnp.reshape(keep, jnp.shape(keep) + (1,) * (jnp.ndim(leaf) - jnp.ndim(keep)))
            return jnp.max(jnp.where(mask, leaf, -jnp.inf))

        values = jax.tree_util.tree_leaves(self.data, is_leaf=lambda x: isinstance(x, Shaped))
        return jnp.max(jnp.stack([top(leaf) for leaf in values]))

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

    # Checks

    def _shape(self, op: str | None) -> Layout:
        """The one layout of this tree (its own; the origin of a stack of trees that share one, read off
        its first row if only that is known; the primal's of a tangent); None (``op`` None) or a
        ValueError naming ``op`` for a stack of trees of different shapes or a tangent of no known shape."""
        if self.origin is not None:
            return self.origin
        if jnp.ndim(self.layout) == 1 and dyadic.is_layout(self.layout):
            return self.layout
        if _claimed(self) and dyadic.is_layout(self.layout):
            return _first_row(self)
        if op is None:
            return None  # type: ignore[return-value]
        if not dyadic.is_layout(self.layout):
            raise ValueError(
                f"DenseTree.{op}: a tangent of a tree whose shape is not known here (a jit's output holds no shape "
                "but its leaves, and a tangent's layout is float0); read it on its tree: "
                "tree.with_elements(tangent.data)"
            )
        raise ValueError(
            f"DenseTree.{op}: a stack of trees of different shapes (layout {jnp.shape(self.layout)}); map over "
            "the stack"
        )

    def _slots(self) -> Layout:
        """The layout of every slot: this tree's or stack's own, or that of the tree it is a tangent of."""
        if dyadic.is_layout(self.layout):
            return self.layout
        return jnp.broadcast_to(self._shape("weights"), jnp.shape(self.layout))

    def _one_shape(self, what: str) -> Layout:
        """The one layout of this tree, or of every tree of this stack (its origin, or its rows when
        concrete and all alike); a ValueError naming ``what`` otherwise."""
        if (shape := self._shape(None)) is not None:
            return shape
        if (shape := _alike_rows(self.layout)) is not None:
            return shape
        raise ValueError(
            f"{what}: a stack of trees of different shapes (or, inside jit, of shapes not known to be one); "
            "a map along the stack combines their values, so they need one shape: build them on one tree "
            "(tree.with_elements(values)) or refine them to one first"
        )

    def _stacked(self) -> bool:
        """Whether this is a stack of trees (its layout has axes in front of the slots)."""
        return jnp.ndim(self.layout) > 1

    def _single(self, op: str) -> None:
        """The tree is one tree, not a stack (its operations run under the stack's fmap)."""
        if jnp.ndim(self.layout) != 1:
            raise ValueError(
                f"DenseTree.{op}: a stack of trees (layout of shape {jnp.shape(self.layout)}), not one tree; "
                "map over the stack"
            )
        check_stacked(self.data, self.capacity, f"DenseTree.{op}")

    def _concrete(self, op: str) -> Layout:
        self._single(op)
        shape = self._shape(op)
        if isinstance(shape, jax.core.Tracer):
            raise ValueError(f"DenseTree.{op}: needs a concrete tree (read it outside jit, vmap and grad)")
        return shape


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


def _take(data: T, index: jax.Array | np.ndarray) -> T:
    """The stacked values at these slots. Gathered on the host for numpy data, and for concrete device
    data at a host index (``_build``'s: a device array is copied to the host): a device gather from n
    slots would compile once per leaf count n. Traced data, or a device index (``pair``'s), gather on
    the device."""

    def one(leaf: Any) -> Any:
        if isinstance(leaf, np.ndarray) or (isinstance(index, np.ndarray) and not _device_only(leaf)):
            return jnp.asarray(np.take(np.asarray(leaf), index, 0))
        return jnp.take(leaf, index, 0)

    return cast(T, jax.tree_util.tree_map(one, data))


def _device_only(leaf: Any) -> bool:
    """A traced leaf, or one numpy cannot hold (a tree's layout, among the values of a tree of trees)."""
    return isinstance(leaf, jax.core.Tracer) or jnp.issubdtype(leaf.dtype, jax.dtypes.extended)


# Construction from nested pairs and depths (on the host)


def _walk(obj: Nested[T], what: str) -> tuple[list[T], list[int]]:
    """The leaf values and depths of nested pairs or a Tree, left to right, without recursion."""
    values: list[T] = []
    depths: list[int] = []
    stack: list[tuple[Any, int, str]] = [(obj, 0, "")]
    while stack:
        x, depth, at = stack.pop()
        if isinstance(x, Node):
            stack += [(x.right, depth + 1, f"{at}[1]"), (x.left, depth + 1, f"{at}[0]")]
        elif isinstance(x, Leaf):
            values.append(x.value)
            depths.append(depth)
        elif isinstance(x, tuple | list):
            if len(x) != 2:
                raise ValueError(
                    f"{what}: a {type(x).__name__} of length {len(x)} at {at or 'the root'}; a node is a pair "
                    f"(left, right), and a leaf holding a {type(x).__name__} is written Leaf(value)"
                )
            stack += [(x[1], depth + 1, f"{at}[1]"), (x[0], depth + 1, f"{at}[0]")]
        elif x is None:
            raise ValueError(f"{what}: the leaf at {at or 'the root'} is None; every leaf needs a value")
        else:
            values.append(x)
            depths.append(depth)
    return values, depths


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
    return DenseTree(_shared(data), lay, capacity)  # (trees of one shape built apart share ``lay``)


def _shared(data: T) -> T:
    """Stacked values in which every tree of a stack of trees has one shape know it (a tree of trees
    whose rows share their shape, as a matrix's do): such rows then meet in the dense formulas."""

    def share(x: Any) -> Any:
        if not isinstance(x, DenseTree) or x.origin is not None or (row := _alike_rows(x.layout)) is None:
            return x
        return DenseTree(x.data, x.layout, x.capacity, row)

    return cast(T, jax.tree_util.tree_map(share, data, is_leaf=lambda x: isinstance(x, DenseTree)))


def _each_tree(f: Callable[..., DenseTree[Any]], *stacks: DenseTree[Any]) -> DenseTree[Any]:
    """``f`` on every tree of stacks of as many trees (one ``vmap`` per stack axis), the results stacked. A
    stack's one shape is read first, so that its trees know it (and two trees of one stack pair as a zip)."""
    for s in stacks:
        s._shape(None)
    for _ in range(jnp.ndim(stacks[0].layout) - 1):
        f = jax.vmap(f)
    return f(*stacks)


def _check_layout(layout: object, capacity: int, what: str) -> None:
    """A ValueError naming ``what`` unless ``layout`` can be a layout of ``capacity`` slots: an array of
    ``dyadic.LAYOUT`` (or float0: a tangent's) whose shape ends in the slots. Trace-time Python on the
    dtype and shape; JAX's placeholders (axis specs, None) are not arrays and pass. What a map over every
    leaf that JAX lets through leaves of a layout (a slice, a reduction over the slots: JAX refuses
    every arithmetic on the dtype itself) is stopped here, before it is read as a shape."""
    if not isinstance(layout, jax.Array | np.ndarray):
        return
    kind = layout.dtype == dyadic.LAYOUT or layout.dtype == jax.dtypes.float0
    if kind and jnp.ndim(layout) >= 1 and jnp.shape(layout)[-1] == capacity:
        return
    raise ValueError(
        f"{what}: a tree's layout is an array of dyadic.LAYOUT of its {capacity} slots, got "
        f"{layout.dtype}{list(jnp.shape(layout))}. A tree's shape is never an element: a structure holding "
        "trees must map their values only, along its own axis with applicative.stacked.along (which "
        "reaches a tree through DenseTree.restack), never with jax.tree_util.tree_map over every leaf, "
        "which maps the layout too (docs/new_structure.md)"
    )


def _alike_rows(layout: Layout) -> Layout | None:
    """The one layout of a concrete stack of layouts whose every row is the same (canonical); None for a
    single layout, a traced one, a tangent's, or rows that differ."""
    if jnp.ndim(layout) < 2 or isinstance(layout, jax.core.Tracer) or not dyadic.is_layout(layout):
        return None
    words = np.asarray(jax.random.key_data(layout))
    rows = words.reshape(-1, *words.shape[-2:])
    if not (rows == rows[:1]).all():
        return None
    return dyadic.canonical(layout[(0,) * (jnp.ndim(layout) - 1)])


def _equal(a: Layout, b: Layout) -> bool:
    """Equal concrete layouts (values, read on the host); False where either is traced."""
    if isinstance(a, jax.core.Tracer) or isinstance(b, jax.core.Tracer) or jnp.shape(a) != jnp.shape(b):
        return False
    return bool(np.array_equal(np.asarray(jax.random.key_data(a)), np.asarray(jax.random.key_data(b))))


class _Shared:
    """A layout as an ``Axis.shape``: equal only to itself (the same array, decidable at trace time)."""

    __slots__ = ("layout",)

    def __init__(self, layout: Layout) -> None:
        self.layout = layout

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Shared) and self.layout is other.layout

    def __hash__(self) -> int:
        return id(self.layout)


# Provenance: which trees provably share one layout, as static pytree metadata (see the module docstring).


class _Meta:
    """A DenseTree's static pytree metadata. JAX compares it (a jit's cache, the cotangents of a vjp, a
    scan's carry) by the capacity and, for a stack, ``one``: whether every tree of the stack is one shape.
    Carried, never compared (so never different inside and outside a trace): ``one`` of a single tree,
    whether every tree of a stack JAX builds from its leaves (a vmap's or scan's output) has its shape,
    and ``shape``, the layout that shape is where known (a single tree's own), from which a tangent or a
    row of the stack rebuilt from these leaves knows it."""

    __slots__ = ("capacity", "one", "shape", "stacked")

    def __init__(self, capacity: int, stacked: bool, one: bool, shape: Layout | None) -> None:
        self.capacity, self.stacked, self.one, self.shape = capacity, stacked, one, shape

    def _key(self) -> tuple[int, bool]:
        return self.capacity, self.stacked and self.one

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Meta) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        return f"({self.capacity}{', one shape' if self.stacked and self.one else ''})"


def _claimed(t: DenseTree[Any]) -> bool:
    """Whether ``t`` is a stack known to be one shape, whose shape is read off its first row."""
    return getattr(t, "_one", False)


def _first_row(t: DenseTree[Any]) -> Layout:
    """The first row of a stack's layout (canonical where concrete), read once per trace that asks: a row
    read inside a trace that has since finished (a vmap's, an inner jit's) is read again."""
    if (row := _read_row(t)) is None:
        row = dyadic.canonical(t.layout[(0,) * (jnp.ndim(t.layout) - 1)])
        object.__setattr__(t, "_row", row)
    return row


def _host_row(t: DenseTree[Any]) -> Layout | None:
    """A concrete stack's first row, read where JAX flattens it; None where no computation may run there
    (JAX 0.12 flattens a transformation's outputs outside any trace). A traced stack's is never read there:
    its trace may not be the one running."""
    try:
        return _first_row(t)
    except AttributeError:  # (no trace to run the read in: "'NoneType' object has no attribute ...")
        return None


def _read_row(t: DenseTree[Any]) -> Layout | None:
    """The first row ``_first_row`` read, if it still can be used (its trace has not finished)."""
    row: Any = getattr(t, "_row", None)
    trace: Any = getattr(row, "_trace", None)  # (a traced row's)
    return None if trace is not None and not trace.is_valid() else row


def _flatten(t: DenseTree[Any]) -> tuple[tuple[tuple[Any, Any], ...], _Meta]:
    children = ((jax.tree_util.GetAttrKey("data"), t.data), (jax.tree_util.GetAttrKey("layout"), t.layout))
    if (meta := getattr(t, "_meta", None)) is not None:  # (a placeholder tree: its metadata as JAX gave it)
        return children, meta
    if t._stacked():
        shape = t.origin if t.origin is not None else _read_row(t)
        if shape is None and _claimed(t) and dyadic.is_layout(t.layout) and not isinstance(t.layout, jax.core.Tracer):
            shape = _host_row(t)
        return children, _Meta(t.capacity, True, shape is not None or _claimed(t), shape)
    # One tree: a stack JAX builds of its values (a vmap's output) is one shape if it has an origin (a row
    # of a stack of one shape) or its values were traced apart from its layout (JAX broadcasts the layout).
    one = t.origin is not None or _apart(t.data, t.layout)
    return children, _Meta(t.capacity, False, one, t._shape(None))


def _unflatten(meta: _Meta, children: Any) -> DenseTree[Any]:
    data, layout = children
    _check_layout(layout, meta.capacity, "DenseTree (rebuilt from its pytree leaves)")
    tree = object.__new__(DenseTree)
    for name, value in (("data", data), ("layout", layout), ("capacity", meta.capacity)):
        object.__setattr__(tree, name, value)
    origin: Layout | None = None
    if not isinstance(layout, jax.Array | np.ndarray):
        object.__setattr__(tree, "_meta", meta)  # JAX's placeholders (axis specs): flattened back as they were
    else:
        stacked, tangent = jnp.ndim(layout) > 1, not dyadic.is_layout(layout)
        if meta.shape is not None and (tangent or meta.one) and _visible(meta.shape, (data, layout)):
            # A concrete stack reads its shape off its own first row (canonical: the recorded object where that
            # was canonical), as its structure may have been flattened from another value (JAX keeps a jit's
            # output structure from its first call's value).
            origin = None if stacked and not tangent and not isinstance(layout, jax.core.Tracer) else meta.shape
        if meta.one and origin is None and stacked:
            object.__setattr__(tree, "_one", True)  # (its one shape read off its first row when asked)
        elif meta.one and meta.stacked and origin is None and not tangent:
            origin = cast(Layout, layout)  # a row of a stack of one shape: stacks of its values are one too
    object.__setattr__(tree, "origin", origin)
    return tree


def _apart(data: object, layout: Layout) -> bool:
    """Whether some value is traced by a transformation that the layout is not traced by (a ``vmap``
    or ``grad`` of the values alone, the layout closed over): whatever rebuilds the tree from that
    transformation's outputs (a stack of the vmapped trees) holds this one layout. Values and layout
    traced together (a ``jit``'s arguments, a ``scan``'s carry) record nothing."""
    own = layout._trace if isinstance(layout, jax.core.Tracer) else None
    return any(isinstance(leaf, jax.core.Tracer) and leaf._trace is not own for leaf in jax.tree_util.tree_leaves(data))


def _visible(shape: Layout, leaves: object) -> bool:
    """Whether a recorded shape can be vouched for where a tree of these leaves is rebuilt: concrete where
    no leaf is staged (a jit, a scan's body: a computation that will serve other values, for which the
    shape of the value it was traced with would be wrong; an eager vmap, jvp or grad computes now), or
    traced by the trace of one of the traced leaves or one that trace runs inside (a vmap within a jit
    sees the jit's values). A shape from a finished trace (a jit's output, an inner jit's body) is not."""
    traced = [leaf for leaf in jax.tree_util.tree_leaves(leaves) if isinstance(leaf, jax.core.Tracer)]
    if not isinstance(shape, jax.core.Tracer):
        return not any(_staged(leaf) for leaf in traced)
    return any(trace is shape._trace for leaf in traced for trace in _traces(leaf))


def _staged(leaf: Any) -> bool:
    """Whether a tracer's computation is staged out to run again on other values (a jit, the body of a scan,
    cond or while, a checkpoint: a jaxpr's trace, which JAX does not export), not computed now."""
    return any(isinstance(trace, (partial_eval.DynamicJaxprTrace, partial_eval.JaxprTrace)) for trace in _traces(leaf))


def _traces(leaf: Any) -> Iterator[Any]:
    """The traces of a tracer: its own and those it runs inside (a vmap's or a grad's parent)."""
    trace: Any = leaf._trace
    while trace is not None:
        yield trace
        trace = getattr(trace, "parent_trace", None)


jax.tree_util.register_pytree_with_keys(DenseTree, _flatten, _unflatten)
