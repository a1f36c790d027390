"""Which trees provably share one layout, read only off what JAX moves with their values.

A shape is data, so it cannot be compared at trace time; three facts about it can
(``applicative.instances.dense_tree``, "Sharing a shape"):

- identity: two trees that hold the very same layout array (the same tracer inside a trace, the same
  concrete array outside) have one shape. A JAX transformation that rebuilds a tree from its leaves
  (``cond``, ``where``, ``tree_map``, ``scan``) gives it a new array, which shares nothing;
- value: concrete layouts are compared on the host (``dyadic.canonical``: one object per value);
- construction: a stack the library built knowing that its trees share one layout (``stacked.vmap``'s
  output whose trees all held one, a Chebyshev transform's, ``stacked.stack`` of trees of one shape)
  holds it as ``origin``, a Python attribute of that object, never pytree metadata.

What crosses JAX's transformations is one number, a stack's pytree metadata beside its capacity:
along how many of its innermost stack axes its trees are one shape (``_one_axes``: all of them for a
sequence of trees of one shape, one for a batch of such sequences of different shapes). JAX compares
it, so it never mixes a stack of one shape with one of several (a ``cond``, a ``tree_map`` of two, a
``scan``'s carry), and a ``jit`` compiles once for the first kind and once for the second. It is about
the stack's own rows: the shape is always read off them, never lent by another value. A stack JAX
rebuilds with such a claim is checked: on the host where its layout is concrete (a claim its rows
contradict, as after a ``where`` that picks rows of two stacks, is dropped), and at run time where it
is traced (``_checked``: a ValueError naming it, and NaN values, where a row differs from its block's
first), so that a transformation that mixes rows within a block (a per-row ``where``, a
concatenation, a ``vmap`` along an inner axis) is never read with the wrong shape.

    _Provenance            ``DenseTree``'s base. ``_shape(op)``: the one layout of the tree (its own) or
                           of the stack (its origin, or its first row where it is one shape along every
                           axis); None (``op`` None) or a ValueError naming ``op`` otherwise (a stack of
                           several shapes, a tangent). ``_one_axes()``: the count above. ``_single(op)``,
                           ``_concrete(op)``: a ValueError naming ``op`` unless one tree (concrete).
                           ``Shaped``'s hooks for ``applicative.stacked``: ``stacked_from`` (a stack of
                           trees knows what they provably share), ``element``, ``unstacked`` and
                           ``stacking`` (``stacked.vmap`` maps a stack of one shape on that shape, and
                           stacks trees that all hold one layout knowing it); ``__reduce__`` (pickle)
    _check_layout(layout, capacity, what)   a ValueError naming ``what`` unless ``layout`` is an array
                           of ``dyadic.LAYOUT`` (or float0: a tangent's) whose shape ends in the
                           ``capacity`` slots; JAX's placeholders (not arrays) pass
    _alike_axes(layout)    along how many innermost stack axes a concrete stack's rows are alike
    _equal(a, b)           equal concrete layouts (read on the host); False where either is traced
    _Shared(layout)        a layout as an ``Axis.shape``: equal only to the same array object
    _flatten, _unflatten   the pytree registration: leaves (data, layout), metadata a ``_Meta`` (the
                           capacity and ``_one_axes``); a rebuilt layout is checked (``_check_layout``),
                           and so is a rebuilt claim (above)

This module never imports ``dense_tree``, which imports it: ``_unflatten`` is given the class it rebuilds.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any, TypeVar, cast

import jax
import jax.numpy as jnp
import numpy as np

from applicative import stacked
from applicative.instances import dyadic
from applicative.instances.dyadic import Layout
from applicative.stacked import check_stacked

T = TypeVar("T")


class _Provenance:
    """``DenseTree``'s base: the reading of its one layout (``_shape``, ``_one_axes``) and the checks,
    run first by its operations, that it is one tree, a stack or concrete. The fields are
    ``DenseTree``'s, named here for the type checker."""

    data: Any
    layout: Layout
    capacity: int
    origin: Layout | None

    def _shape(self, op: str | None) -> Layout:
        """The one layout of this tree (its own) or of this stack (its origin; its first row where it is
        declared one shape along every stack axis; its rows where they are concrete and alike), canonical
        where concrete (``dyadic.canonical``: the one object of its value); None (``op`` None) or a
        ValueError naming ``op`` for a stack of trees of several shapes, or a tangent (its layout float0).
        What is read off concrete values is kept apart from the declared (``_one_axes``), so that it never
        changes the pytree metadata: a batch whose trees happen to share a shape is the same kind of value."""
        if self.origin is not None:
            return self.origin
        if (seen := getattr(self, "_seen", None)) is not None:
            return cast(Layout, seen)
        if dyadic.is_layout(self.layout):
            axes, traced = jnp.ndim(self.layout) - 1, isinstance(self.layout, jax.core.Tracer)
            if axes == 0 and traced:
                return self.layout
            if axes == 0 or (axes == self._one_axes() and not traced):
                with jax.ensure_compile_time_eval():  # (a constant, even inside a trace)
                    row = dyadic.canonical(self.layout[(0,) * axes])
                object.__setattr__(self, "_seen", row)  # (one object per value: trees built or read apart meet)
                return row
            if axes == self._one_axes():
                object.__setattr__(self, "_seen", row := self.layout[(0,) * axes])  # (read once: its rows meet)
                return row
            if not traced and _alike_axes(self.layout) == axes:
                with jax.ensure_compile_time_eval():
                    row = dyadic.canonical(self.layout[(0,) * axes])
                object.__setattr__(self, "_seen", row)
                return row
        if op is None:
            return None  # type: ignore[return-value]
        if not dyadic.is_layout(self.layout):
            raise ValueError(
                f"DenseTree.{op}: a tangent of a tree (its layout is float0, JAX's tangent of a shape, which holds "
                "none); read it on its tree: tree.with_elements(tangent.data)"
            )
        raise ValueError(
            f"DenseTree.{op}: a stack of trees of different shapes (layout {jnp.shape(self.layout)}), or, inside "
            "jit, of shapes not known to be one (a stack JAX built, as jax.vmap or lax.scan do: "
            "applicative.stacked.vmap keeps its trees' one shape); map over the stack"
        )

    def _one_axes(self) -> int:
        """Along how many of its innermost stack axes this stack's trees are declared one shape (0 for one
        tree): all where it has an origin; as the library built it or JAX rebuilt it (checked there); never
        read off its values, so that it is pytree metadata a batch of trees holds whatever their shapes."""
        if self.origin is not None:
            return max(jnp.ndim(self.layout) - 1, 0)
        return int(getattr(self, "_one", 0))

    def _own(self, op: str) -> Layout:
        """The layout of every slot, this tree's or stack's own; a ValueError naming ``op`` for a tangent."""
        if dyadic.is_layout(self.layout):
            return self.layout
        return self._shape(op)  # (a tangent's message)

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

    # A stack of trees as the library stacks, maps and pickles it (``Shaped``'s hooks): what its trees provably
    # share is kept, never lent.

    def _new(self, data: Any, layout: Layout, origin: Layout | None = None) -> Any:
        """A tree (or stack) of this class and capacity: ``DenseTree(data, layout, capacity, origin)``."""
        return type(self)(data, layout, self.capacity, origin)  # type: ignore[call-arg]

    def stacked_from(self, elements: Sequence[Any], what: str) -> Any:
        """``Shaped``'s hook for ``applicative.stacked.stack``: the stack of the trees (or stacks of trees)
        ``elements``, which records their one shape where they provably have one (one layout object, or
        equal concrete layouts), else how many inner axes every element is one shape along."""
        for i, e in enumerate(elements):
            if not isinstance(e, type(self)) or e.capacity != self.capacity or e.layout.shape != self.layout.shape:
                kind = f"a DenseTree of layout {e.layout.shape}" if isinstance(e, type(self)) else type(e).__name__
                raise ValueError(f"{what}: element {i} is {kind}, element 0 a DenseTree of layout {self.layout.shape}")
        data, layout = stacked.stack([e.data for e in elements], what), jnp.stack([e.layout for e in elements])
        shapes = [e._shape(None) for e in elements]
        if all(s is not None and (s is shapes[0] or _equal(s, shapes[0])) for s in shapes):  # (stops at the first
            return self._new(data, layout, dyadic.canonical(shapes[0]))  # that differs)
        return _claimed(self._new(data, layout), min(e._one_axes() for e in elements))

    def element(self, i: int) -> Any:
        """``Shaped``'s hook for ``applicative.stacked.element``: the i-th tree of this stack of trees, on the
        stack's one shape where the stack knows it (the rows of one stack then pair as a zip)."""
        if not self._stacked():
            raise ValueError(f"DenseTree.element: one tree (layout of shape {jnp.shape(self.layout)}), not a stack")
        return self._row(stacked.element(self.data, i), lambda: self.layout[i])

    def unstacked(self) -> tuple[Any, Callable[[Any], Any]] | None:
        """``Shaped``'s hook for ``applicative.stacked.vmap``: a stack of one known shape varies in its values
        only, each tree built on that shape; a stack of one shape along some inner axes keeps that for its
        rows; any other varies in every leaf (None: JAX's slicing)."""
        if not self._stacked() or not self._one_axes():
            return None
        if self._shape(None) is not None:
            return self.data, lambda data: self._row(data, None)
        return (self.data, self.layout), lambda rows: self._row(rows[0], lambda: rows[1])

    def stacking(self, varies: Callable[[Any], bool]) -> tuple[Any, Callable[[Any, int], Any]] | None:
        """``Shaped``'s hook for ``applicative.stacked.vmap``: trees that all hold this one layout (it does not
        vary along the map) stack into a stack of that shape, which knows it; stacks of one shape along
        some inner axes into a stack that keeps that; others as JAX stacks them (None)."""
        if not dyadic.is_layout(self.layout) or (varies(self.layout) and not self._one_axes()):
            return None
        one, shape, layout = self._one_axes(), self._shape(None), self.layout
        if varies(self.layout):
            return (self.data, self.layout), lambda rows, n: _claimed(self._new(rows[0], rows[1]), one)

        def build(data: Any, n: int) -> Any:
            copies = jnp.broadcast_to(layout, (n, *jnp.shape(layout)))
            return self._new(data, copies, shape) if shape is not None else _claimed(self._new(data, copies), one)

        return self.data, build

    def _row(self, data: Any, sliced: Callable[[], Layout] | None) -> Any:
        """A tree (or stack) of this stack holding ``data``: on its one shape where it knows it, else on its
        own row of the stack's layout (``sliced()``), one shape along as many inner axes as the stack is."""
        shape, rest = self._shape(None), jnp.shape(self.layout)[1:]
        if shape is None:
            assert sliced is not None
            return _claimed(self._new(data, sliced()), min(self._one_axes(), len(rest) - 1))
        if len(rest) == 1:
            return self._new(data, shape)
        return self._new(data, jnp.broadcast_to(shape, rest), shape)

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickled (and deep-copied) by value: the layout, whose element type no pickle knows, as its stored
        words, read back as the one layout object of its value, so that an unpickled tree pairs with trees
        of its shape as a zip (a tangent's float0 layout as it is). A traced tree is not picklable."""
        layout = dyadic.host_words(self.layout) if dyadic.is_layout(self.layout) else np.asarray(self.layout)
        return _unpickled, (type(self), self.data, layout, self.capacity, self._one_axes())


def _claimed(t: T, one: int) -> T:
    """``t``, a stack the library built from one whose trees are one shape along ``one`` innermost stack axes
    (its rows, or a stack of such stacks): so is it."""
    object.__setattr__(t, "_one", one)
    return t


def _unpickled(cls: type[T], data: Any, layout: np.ndarray, capacity: int, one: int) -> T:
    """``_Provenance.__reduce__``'s inverse: the tree, declared one shape along as many axes as it was where its
    rows show it (as JAX's rebuilding checks it)."""
    words = dyadic.from_words(layout) if layout.dtype == np.uint32 else cast(Layout, layout)
    tree = cls(data, words, capacity)  # type: ignore[call-arg]
    if not dyadic.is_layout(words) or (one and _alike_axes(words) >= one):
        _claimed(tree, one)
    return tree


def _checked(data: T, layout: Layout, axes: int, what: str) -> T:
    """``data``, whose stack's layout (traced) is claimed one shape along its ``axes`` innermost stack axes,
    where every row is its block's first; else, at run time, a ValueError naming ``what`` (through
    ``jax.debug.callback``) and NaN in every floating value, so that no tree is read with another's shape."""
    words = jax.random.key_data(layout)
    blocks = words.reshape(-1, math.prod(jnp.shape(layout)[-1 - axes : -1]), *words.shape[-2:])
    alike = jnp.all(blocks == blocks[:, :1])

    def refuse(ok: np.ndarray) -> None:
        if not np.all(ok):
            raise ValueError(
                f"{what}: a stack of trees said to be one shape along its last {axes} stack axes holds trees of "
                "several shapes there (a map that mixed the rows of two stacks: a where, a concatenation, a vmap "
                "along an inner axis); stack them with applicative.stacked.stack, or build them on one tree"
            )

    jax.debug.callback(refuse, alike)

    def poison(leaf: Any) -> Any:
        if isinstance(leaf, jax.Array) and jnp.issubdtype(leaf.dtype, jnp.inexact):
            return jnp.where(alike, leaf, jnp.nan)
        return leaf

    return cast(T, jax.tree_util.tree_map(poison, data))


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


def _alike_axes(layout: Layout) -> int:
    """Along how many innermost stack axes the rows of a concrete stack of layouts are alike: the largest k
    such that, for every index of the other axes, the rows over the last k are one layout."""
    words = dyadic.host_words(layout)
    stack = words.shape[:-2]
    for k in range(len(stack), 0, -1):
        blocks = words.reshape(-1, math.prod(stack[len(stack) - k :]), *words.shape[-2:])
        if (blocks == blocks[:, :1]).all():
            return k
    return 0


def _equal(a: Layout, b: Layout) -> bool:
    """Equal concrete layouts (values, read on the host); False where either is traced."""
    if isinstance(a, jax.core.Tracer) or isinstance(b, jax.core.Tracer) or jnp.shape(a) != jnp.shape(b):
        return False
    return bool(np.array_equal(dyadic.host_words(a), dyadic.host_words(b)))


class _Shared:
    """A layout as an ``Axis.shape``: equal only to itself (the same array, decidable at trace time)."""

    __slots__ = ("layout",)

    def __init__(self, layout: Layout) -> None:
        self.layout = layout

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Shared) and self.layout is other.layout

    def __hash__(self) -> int:
        return id(self.layout)


# The pytree registration: the leaves are the values and the layout; the metadata the capacity and along
# how many innermost stack axes the trees are one shape, which JAX compares.


class _Meta:
    """A DenseTree's static pytree metadata, compared by JAX as a whole: its capacity and ``one``, along how
    many innermost stack axes its trees are one shape (0 for one tree)."""

    __slots__ = ("capacity", "one")

    def __init__(self, capacity: int, one: int) -> None:
        self.capacity, self.one = capacity, one

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Meta) and (self.capacity, self.one) == (other.capacity, other.one)

    def __hash__(self) -> int:
        return hash((self.capacity, self.one))

    def __repr__(self) -> str:
        one = f", trees of one shape along the last {self.one} stack axes" if self.one else ""
        return f"({self.capacity} slots{one})"


def _flatten(t: _Provenance) -> tuple[tuple[tuple[Any, Any], ...], _Meta]:
    children = ((jax.tree_util.GetAttrKey("data"), t.data), (jax.tree_util.GetAttrKey("layout"), t.layout))
    return children, _Meta(t.capacity, t._one_axes())


def _unflatten(cls: type[T], meta: _Meta, children: Any) -> T:
    data, layout = children
    what = "DenseTree (rebuilt from its pytree leaves)"
    _check_layout(layout, meta.capacity, what)
    one = meta.one  # (placeholders, a tangent's float0: kept as given, so that they flatten back alike)
    if dyadic.is_layout(layout) and one:
        one = min(one, jnp.ndim(layout) - 1)
        if not isinstance(layout, jax.core.Tracer):
            one = one if _alike_axes(layout) >= one else 0  # (a claim its rows contradict is dropped)
        elif one:
            data = _checked(data, layout, one, what)
    tree = object.__new__(cls)
    for name, value in (("data", data), ("layout", layout), ("capacity", meta.capacity), ("origin", None)):
        object.__setattr__(tree, name, value)
    object.__setattr__(tree, "_one", one)
    return tree
