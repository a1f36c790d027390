"""``DenseTree[A]``: binary trees with their shape as data, so one compiled function serves every shape.

The same piecewise-constant functions on [0, 1] as ``Tree`` (its specification:
they convert into each other and agree on every operation, tests/applicative/test_dense_tree.py),
stored as a ``Vec`` stores its elements. The leaves' values are stacked along
one axis of ``capacity`` slots, leaves first, left to right, then padding; the
shape is a ``dyadic.Layout``, arrays of each leaf's depth and start on the
dyadic grid. A padding slot has measure zero and holds a copy of the first
leaf's value, so that equal functions are equal pytrees. Trees of any shape up
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
layout arrays (and origin), and trees stacked inside another structure (the rows of a score
matrix, a tree per attention head) remember the one layout they all have
(``origin``, static pytree metadata). ``pair`` zips two trees whose layout (or
origin) is the same object and merges any others; the linear algebra contracts trees of
the same layout by its dense formula and takes the generic definition (which
refines) for any others. Correct either way, fast where it matters. Trees built
on the host of one shape and capacity hold one layout object (layouts are
interned by value), so they zip and meet too; inside a trace, give a second
tree a known shape by building it on the first: ``tree.with_elements(values)``.
The origin is recorded where values are transformed apart from their layout (a
``vmap`` of the values alone), kept through ``jit``, ``vmap`` and ``grad``
within one trace, and dropped where it cannot be vouched for (outside the trace
that made it); a tree and what ``fmap`` and ``pair`` make of it have one pytree
structure, as ``lax.scan``, ``lax.cond`` and ``lax.fori_loop`` require.

Why this layout. The shapes a user meets are deep and unbalanced: the binarised
syntax trees of Python's standard library (``python bench/trees.py --shapes``)
reach depth 56 at 1,024 leaves and 61 at 4,096 (median 18 and 22). A
complete-tree (heap) layout would need 2^depth slots; a parent/child pointer
layout, depth-many sequential passes for every counit and pair. Depths and
starts need one slot per leaf, every operation is one vectorised pass (the
counit a weighted sum, pair one sort), and the starts need 60 exact bits, two
int32 words (docs/trees.md measures the speed).

Trees with the same capacity but different shapes are the same pytree
structure, so they ``stack`` into a batch (``applicative.stacked.stack``) and
``vmap`` over it. Elements must be pytrees of arrays (a ``Vec`` per leaf, a
score row per query): a DenseTree's pytree leaves are its values and its
layout's int32 arrays, so map values with ``fmap``, never ``jax.tree_util.tree_map``.

Built with ``DenseTree.from_nested(obj, capacity)`` (nested pairs or a
``Tree``), ``DenseTree.of(shape, leaves, capacity)`` (a list of leaf values),
``DenseTree.stack(shape, leaves, capacity)`` (values already stacked) and
``DenseTree.from_shape(shape, value, capacity)``; read with ``to_nested()``,
``to_tree()``, ``leaves()``, ``depths()``, ``shape`` (on the host: they need
concrete values), ``valid()`` and ``weights()`` (traceable). Rejected, naming
the tree and the capacity: a tree with more leaves than its capacity, a leaf
deeper than ``dyadic.MAX_DEPTH``, malformed nesting; and, where a tree is built
or JAX rebuilds one (eagerly and under ``jit``, at trace time), a layout that
is not integer arrays of its slots: what another structure's ``tree_map`` over
every leaf leaves of it (a transform, a cast, a sum over the slots).

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

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar, cast

import jax
import jax.numpy as jnp
import numpy as np

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
    """A binary tree of at most ``capacity`` leaves with values of type ``A``, its shape as arrays.

    ``DenseTree(data, layout, capacity)`` itself is unchecked (JAX rebuilds trees through it); use
    the constructors below."""

    data: A_co
    """The values, stacked: the element pytree with a leading axis of ``capacity`` slots on every leaf."""
    layout: Layout
    """The shape (``dyadic.Layout``), arrays of ``capacity`` slots."""
    capacity: int
    origin: Layout | None = None
    """The one layout shared by every tree of a stack (rows of a score matrix), when known; static."""

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
            stacks = jnp.shape(self.layout.depth)[:-1], jnp.shape(other.layout.depth)[:-1]
            if stacks[0] != stacks[1]:
                raise ValueError(
                    f"DenseTree.pair: a stack of trees of shape {stacks[0]} paired with one of shape {stacks[1]}; "
                    "stacks pair tree by tree, so they need as many trees"
                )
            return _each_tree(lambda a, b: a.pair(b), self, other)
        self._single("pair")
        other._single("pair")
        if _same(self._shape("pair"), other._shape("pair")):
            return _tree((self.data, other.data), self.layout, self.capacity, self.origin)
        fine, in_self, in_other = dyadic.refine(self.layout, other.layout)
        return _tree((_take(self.data, in_self), _take(other.data, in_other)), fine, fine.depth.shape[0])

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
        shape = _canonical(self._one_shape(what))
        before, data = jax.tree_util.tree_leaves(self.data), f(self.data)
        after = jax.tree_util.tree_leaves(data)
        if not before:
            return _tree(data, self.layout, self.capacity, self.origin)
        # The element axes (after the slots) are kept; the new stack axes are those in front of the slots.
        stack_axes = after[0].shape[: jnp.ndim(after[0]) - (jnp.ndim(before[0]) - jnp.ndim(self.layout.depth)) - 1]
        layout = jax.tree_util.tree_map(lambda a: jnp.broadcast_to(a, (*stack_axes, self.capacity)), shape)
        return _tree(data, layout, self.capacity, shape)

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
        if shapes and all(_same(s, shapes[0]) or _equal(s, shapes[0]) for s in shapes):  # (stops at the first
            return _tree(self.data, self.layout, self.capacity, _canonical(shapes[0]))  # that differs)
        return self

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
        return jnp.asarray(self.layout.depth) >= 0

    def weights(self) -> jax.Array:
        """The measure of each slot, 2^-depth (0 on padding): the Gram matrix's diagonal."""
        return dyadic.weights(self.layout)

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
        depth = self._concrete("depths")
        return [int(d) for d in depth if d >= 0]

    @property
    def shape(self) -> Shape:
        """The nested shape: ``None`` for a leaf, ``(left, right)`` for a node (host-side)."""
        return dyadic.shape_of(self._concrete("shape"))

    def leaves(self) -> list[A_co]:
        """The leaf values, left to right (host-side)."""
        return [element(self.data, i) for i in range(self.count())]

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
        """The one layout of this tree (its own, or the origin of a stack of trees that share one)."""
        if self.origin is not None:
            return self.origin
        if jnp.ndim(self.layout.depth) == 1:
            return self.layout
        if op is None:
            return None  # type: ignore[return-value]
        raise ValueError(
            f"DenseTree.{op}: a stack of trees of different shapes (layout {jnp.shape(self.layout.depth)}); "
            "map over the stack"
        )

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
        return jnp.ndim(self.layout.depth) > 1

    def _single(self, op: str) -> None:
        """The tree is one tree, not a stack (its operations run under the stack's fmap)."""
        if jnp.ndim(self.layout.depth) != 1:
            raise ValueError(
                f"DenseTree.{op}: a stack of trees (layout of shape {jnp.shape(self.layout.depth)}), not one tree; "
                "map over the stack"
            )
        check_stacked(self.data, self.capacity, f"DenseTree.{op}")

    def _concrete(self, op: str) -> np.ndarray:
        self._single(op)
        if isinstance(self.layout.depth, jax.core.Tracer):
            raise ValueError(f"DenseTree.{op}: needs a concrete tree (read it outside jit, vmap and grad)")
        return np.asarray(self.layout.depth)


def as_dense_tree(x: Applicative[DenseTreeOf, B]) -> DenseTree[B]:
    """The DenseTree behind a generic result whose brand says it is one (checked):
    ``as_dense_tree(model(t)).to_nested()``."""
    if not isinstance(x, DenseTree):
        raise TypeError(f"as_dense_tree: expected a DenseTree, got {type(x).__name__}")
    return x


def _tree(data: T, layout: Layout, capacity: int, origin: Layout | None = None) -> DenseTree[T]:
    """A tree; an origin that is its own layout is dropped (the layout speaks for itself)."""
    if origin is not None and _same(origin, layout):
        origin = None
    return DenseTree(data, layout, capacity, origin)


def _first(p: tuple[T, object]) -> T:
    return p[0]


def _take(data: T, index: jax.Array | np.ndarray) -> T:
    """The stacked values at these slots. Gathered on the host for numpy data, and for concrete device
    data at a host index (``_build``'s: a device array is copied to the host): a device gather from n
    slots would compile once per leaf count n. Traced data, or a device index (``pair``'s), gather on
    the device."""

    def one(leaf: Any) -> Any:
        if isinstance(leaf, np.ndarray) or (isinstance(index, np.ndarray) and not isinstance(leaf, jax.core.Tracer)):
            return jnp.asarray(np.take(np.asarray(leaf), index, 0))
        return jnp.take(leaf, index, 0)

    return cast(T, jax.tree_util.tree_map(one, data))


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
    return DenseTree(_shared(data), _canonical(lay), capacity)  # trees of one shape built apart zip and meet


def _shared(data: T) -> T:
    """Stacked values in which every tree of a stack of trees has one shape know it (a tree of trees
    whose rows share their shape, as a matrix's do): such rows then meet in the dense formulas."""

    def share(x: Any) -> Any:
        if not isinstance(x, DenseTree) or x.origin is not None or (row := _alike_rows(x.layout)) is None:
            return x
        return DenseTree(x.data, x.layout, x.capacity, row)

    return cast(T, jax.tree_util.tree_map(share, data, is_leaf=lambda x: isinstance(x, DenseTree)))


def _each_tree(f: Callable[..., DenseTree[Any]], *stacks: DenseTree[Any]) -> DenseTree[Any]:
    """``f`` on every tree of stacks of as many trees (one ``vmap`` per stack axis), the results stacked."""
    for _ in range(jnp.ndim(stacks[0].layout.depth) - 1):
        f = jax.vmap(f)
    return f(*stacks)


def _check_layout(layout: Layout, capacity: int, what: str) -> None:
    """A ValueError naming ``what`` unless ``layout``'s arrays can be a layout of ``capacity`` slots: integers
    (or float0, the tangents of integers) of one shape that ends in the slots. Trace-time Python on dtypes
    and shapes; JAX's placeholders (axis specs, None) are not arrays and pass. A structure that maps a
    tree's layout as if it were values (a ``jax.tree_util.tree_map`` over every leaf: a transform, a
    pad, a cast) is stopped here, before any of its numbers is read as a shape."""
    arrays = {"depth": layout.depth, "hi": layout.hi, "lo": layout.lo}
    named = {name: a for name, a in arrays.items() if isinstance(a, jax.Array | np.ndarray)}
    shapes = {jnp.shape(a) for a in named.values()}
    integers = all(jnp.issubdtype(a.dtype, jnp.integer) or a.dtype == jax.dtypes.float0 for a in named.values())
    if integers and len(shapes) <= 1 and all(len(shape) >= 1 and shape[-1] == capacity for shape in shapes):
        return
    got = ", ".join(f"{name} {a.dtype}{list(jnp.shape(a))}" for name, a in named.items())
    raise ValueError(
        f"{what}: a tree's layout holds integer arrays of its {capacity} slots, got {got}. A tree's shape is never "
        "an element: a structure holding trees must map their values only, along its own axis with "
        "applicative.stacked.along (which reaches a tree through DenseTree.restack), never with "
        "jax.tree_util.tree_map over every leaf, which transforms the layout too (docs/new_structure.md)"
    )


def _alike_rows(layout: Layout) -> Layout | None:
    """The one layout of a concrete stack of layouts whose every row is the same (``_canonical``);
    None for a single layout, a traced one, or rows that differ."""
    arrays = [layout.depth, layout.hi, layout.lo]
    if jnp.ndim(arrays[0]) < 2 or any(isinstance(a, jax.core.Tracer) for a in arrays):
        return None
    rows = [np.asarray(a).reshape(-1, np.shape(a)[-1]) for a in arrays]
    if not all((r == r[:1]).all() for r in rows):
        return None
    return _canonical(Layout(*(r[0] for r in rows)))


def _canonical(layout: Layout) -> Layout:
    """One layout object for every concrete layout of these values (a traced one is itself): the origin
    of stacks of trees of one shape, so that two such stacks built apart (two functions whose values
    are trees of that shape) are one pytree structure, stack together and meet in the dense formulas."""
    if any(isinstance(a, jax.core.Tracer) for a in (layout.depth, layout.hi, layout.lo)):
        return layout
    return _interned(*(np.asarray(a, np.int32).tobytes() for a in (layout.depth, layout.hi, layout.lo)))


@functools.lru_cache(maxsize=4096)
def _interned(depth: bytes, hi: bytes, lo: bytes) -> Layout:
    with jax.ensure_compile_time_eval():  # concrete arrays, even when first asked for inside a trace
        return Layout(*(jnp.asarray(np.frombuffer(words, np.int32)) for words in (depth, hi, lo)))


# Provenance: which trees provably share one layout (see the module docstring).


def _same(a: Layout, b: Layout) -> bool:
    """The same layout arrays (objects, not values: decidable at trace time)."""
    return a.depth is b.depth and a.hi is b.hi and a.lo is b.lo


def _equal(a: Layout, b: Layout) -> bool:
    """Equal concrete layouts (values, read on the host); False where either is traced."""
    pairs = ((a.depth, b.depth), (a.hi, b.hi), (a.lo, b.lo))
    if any(isinstance(x, jax.core.Tracer) for pair in pairs for x in pair):
        return False
    return all(np.array_equal(np.asarray(x), np.asarray(y)) for x, y in pairs)


class _Shared:
    """A layout as static pytree metadata, equal only to itself (the same arrays)."""

    __slots__ = ("layout",)

    def __init__(self, layout: Layout) -> None:
        self.layout = layout

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Shared) and _same(self.layout, other.layout)

    def __hash__(self) -> int:
        return id(self.layout.depth)

    def __repr__(self) -> str:
        return "shared"  # equal functions compare equal as pytrees whatever their provenance


def _apart(data: object, layout: Layout) -> bool:
    """Whether some value is traced by a transformation that the layout is not traced by (a ``vmap``
    or ``grad`` of the values alone, the layout closed over): whatever rebuilds the tree from that
    transformation's outputs (a stack of the vmapped trees) holds this one layout. Values and layout
    traced together (a ``jit``'s arguments, a ``scan``'s carry) record nothing, so a tree keeps one
    pytree structure through ``scan``, ``cond`` and ``fori_loop``."""
    own = layout.depth._trace if isinstance(layout.depth, jax.core.Tracer) else None
    return any(isinstance(leaf, jax.core.Tracer) and leaf._trace is not own for leaf in jax.tree_util.tree_leaves(data))


def _visible(origin: Layout, own: Layout) -> bool:
    """Whether an origin can be vouched for where a tree with the ``own`` layout lives: concrete, or
    traced by the trace of ``own`` or one it runs inside (a vmap within a jit sees the jit's values).
    An origin from a finished trace (a jit's output, the body of an inner jit or scan) is not."""
    o, x = origin.depth, own.depth
    if not isinstance(o, jax.core.Tracer):
        return True
    if not isinstance(x, jax.core.Tracer):
        return not isinstance(x, jax.Array | np.ndarray)  # placeholders (vmap's axis specs) keep it
    target: Any = o._trace
    trace: Any = x._trace
    while trace is not None:  # (JAX's traces: a vmap's or a grad's parent is the trace it runs in)
        if trace is target:
            return True
        trace = getattr(trace, "parent_trace", None)
    return False


def _flatten(t: DenseTree[Any]) -> tuple[tuple[tuple[Any, Any], ...], tuple[int, _Shared | None]]:
    origin = t.origin
    if origin is None and jnp.ndim(t.layout.depth) == 1 and _apart(t.data, t.layout):
        origin = t.layout
    children = ((jax.tree_util.GetAttrKey("data"), t.data), (jax.tree_util.GetAttrKey("layout"), t.layout))
    return children, (t.capacity, None if origin is None else _Shared(origin))


def _unflatten(aux: tuple[int, _Shared | None], children: Any) -> DenseTree[Any]:
    capacity, shared = aux
    data, layout = children
    _check_layout(layout, capacity, "DenseTree (rebuilt from its pytree leaves)")
    origin = None if shared is None or not _visible(shared.layout, layout) else shared.layout
    tree = object.__new__(DenseTree)
    for name, value in (("data", data), ("layout", layout), ("capacity", capacity)):
        object.__setattr__(tree, name, value)
    object.__setattr__(tree, "origin", None if origin is None or _same(origin, layout) else origin)
    return tree


jax.tree_util.register_pytree_with_keys(DenseTree, _flatten, _unflatten)
