"""The provenance of a ``DenseTree``'s shape: which trees provably share one layout, and the pytree
metadata that carries it through JAX's transformations.

A shape is data, so it cannot be compared at trace time; its provenance can
(``applicative.instances.dense_tree``, "Sharing a shape"). A tree knows its one layout as its own (a
single tree's ``layout``), as its ``origin`` (the one layout of every tree of a stack, or the primal's
of a tangent), or, for a stack known to be one shape (``_claimed``), as its first row, read once per
trace that asks (``_first_row``). JAX rebuilds a tree from its two pytree leaves, its values and its
layout, and its static metadata (``_Meta``), which it compares by the capacity and, for a stack, whether
it is one shape: never by the provenance, so a tree is one pytree structure inside and outside every
trace. The layout a tree records rides along uncompared, and a rebuilt tree takes it back only where it
can be vouched for (``_visible``): a concrete layout where no leaf is staged (a jit, a scan's body: a
computation that will serve other values), a traced one where a leaf runs in its trace.

    _Provenance            ``DenseTree``'s base. ``_shape(op)``: the one layout (own, origin, or a
                           claimed stack's first row); None (``op`` None) or a ValueError naming ``op``
                           for a stack of trees of different shapes or a tangent of no known shape.
                           ``_one_shape(what)``: the same, or a concrete stack's alike rows. ``_slots()``:
                           every slot's layout (a tangent's tree's). ``_single(op)``, ``_concrete(op)``:
                           a ValueError naming ``op`` unless one tree (concrete); ``_stacked()``
    _check_layout(layout, capacity, what)   a ValueError naming ``what`` unless ``layout`` is an array
                           of ``dyadic.LAYOUT`` (or float0: a tangent's) whose shape ends in the
                           ``capacity`` slots; JAX's placeholders (not arrays) pass
    _alike_rows(layout)    the one canonical layout of a concrete stack whose rows are all equal; None
                           for a single layout, a traced one, a tangent's, or rows that differ
    _equal(a, b)           equal concrete layouts (read on the host); False where either is traced
    _Shared(layout)        a layout as an ``Axis.shape``: equal only to the same array object
    _flatten, _unflatten   the pytree registration: leaves (data, layout), metadata a ``_Meta``; a
                           rebuilt layout is checked (``_check_layout``), naming the rebuilt tree

This module never imports ``dense_tree``, which imports it: ``_unflatten`` is given the class it rebuilds.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, TypeVar, cast

import jax
import jax.numpy as jnp
import numpy as np
from jax._src.interpreters import partial_eval

from applicative.instances import dyadic
from applicative.instances.dyadic import Layout
from applicative.stacked import check_stacked

T = TypeVar("T")


class _Provenance:
    """``DenseTree``'s base: the reading of its one layout from its provenance (``_shape``, ``_one_shape``,
    ``_slots``) and the checks, run first by its operations, that it is one tree, a stack or concrete. The
    fields are ``DenseTree``'s, named here for the type checker."""

    data: Any
    layout: Layout
    capacity: int
    origin: Layout | None

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


def _claimed(t: _Provenance) -> bool:
    """Whether ``t`` is a stack known to be one shape, whose shape is read off its first row."""
    return getattr(t, "_one", False)


def _first_row(t: _Provenance) -> Layout:
    """The first row of a stack's layout (canonical where concrete), read once per trace that asks: a row
    read inside a trace that has since finished (a vmap's, an inner jit's) is read again."""
    if (row := _read_row(t)) is None:
        row = dyadic.canonical(t.layout[(0,) * (jnp.ndim(t.layout) - 1)])
        object.__setattr__(t, "_row", row)
    return row


def _host_row(t: _Provenance) -> Layout | None:
    """A concrete stack's first row, read where JAX flattens it; None where no computation may run there
    (JAX 0.12 flattens a transformation's outputs outside any trace). A traced stack's is never read there:
    its trace may not be the one running."""
    try:
        return _first_row(t)
    except AttributeError:  # (no trace to run the read in: "'NoneType' object has no attribute ...")
        return None


def _read_row(t: _Provenance) -> Layout | None:
    """The first row ``_first_row`` read, if it still can be used (its trace has not finished)."""
    row: Any = getattr(t, "_row", None)
    trace: Any = getattr(row, "_trace", None)  # (a traced row's)
    return None if trace is not None and not trace.is_valid() else row


def _flatten(t: _Provenance) -> tuple[tuple[tuple[Any, Any], ...], _Meta]:
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


def _unflatten(cls: type[T], meta: _Meta, children: Any) -> T:
    data, layout = children
    _check_layout(layout, meta.capacity, "DenseTree (rebuilt from its pytree leaves)")
    tree = object.__new__(cls)
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
