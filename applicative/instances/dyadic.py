"""Dyadic layouts: the shape of a binary tree as arrays, and the common refinement of two shapes.

The functional core of ``DenseTree`` (``applicative.instances.dense_tree``), as
``chebyshev`` is ``Cheb``'s. A binary tree whose nodes halve their interval is
a partition of [0, 1) into dyadic intervals [s, s + 2^-d), one per leaf, left
to right. A ``Layout`` stores that partition at a static capacity, one slot per
leaf and the rest padding:

    depth    int32   each leaf's depth d (its interval has length 2^-d); -1 in a padding slot
    hi, lo   int32   each leaf's start s = (hi 2^30 + lo) 2^-60, two 30-bit words: exact to depth 60;
                     a padding slot starts at 1 (hi = 2^30, lo = 0), after every leaf

Leaves come first, left to right, then padding. The words are integers because
a breakpoint of depth 60 needs 60 exact bits, which neither float32 nor JAX's
default 32-bit integers hold; two words are compared in order (``jax.lax.sort``
with two keys). Every array may carry leading axes (a stack of layouts).

    weights(layout)    the dyadic measure of each slot: 2^-depth, 0 on padding (its bits: exact everywhere)
    refine(a, b)       the common refinement: the sorted union of the two trees' breakpoints, at
                       capacity n + m - 1 (enough for any two trees), with the slot of each refined
                       leaf in a and in b (a gather then moves values onto it); no recursion, one sort
    layout(depths, c)  the layout of a tree given its leaves' depths (numpy, on the host), checked
    depths_of(shape), shape_of(depths)   between nested shapes ((None, (None, None))) and depths

A tree deeper than ``MAX_DEPTH`` cannot be laid out (its breakpoints would need
more bits): ``layout`` refuses it, naming the depth, rather than merging leaves.

>>> lay = layout([1, 2, 2], 4)                    # the tree (., (., .)) in 4 slots
>>> lay.depth.tolist(), weights(lay).tolist()
([1, 2, 2, -1], [0.5, 0.25, 0.25, 0.0])
>>> fine, in_a, in_b = refine(lay, layout([2, 2, 1], 3))
>>> shape_of(np.asarray(fine.depth)), np.asarray(in_a).tolist(), np.asarray(in_b).tolist()
(((None, None), (None, None)), [0, 0, 1, 2, 0, 0], [0, 1, 2, 2, 0, 0])
"""

from __future__ import annotations

from collections.abc import Sequence

import jax
import jax.numpy as jnp
import numpy as np

from applicative.instances.tree import Shape
from applicative.records import record

__all__ = ["MAX_DEPTH", "Layout", "depths_of", "layout", "refine", "shape_of", "weights"]

MAX_DEPTH = 60
"""The deepest leaf a layout holds: its start needs ``MAX_DEPTH`` exact bits (two 30-bit words)."""

_WORD = 30
_END = 1 << _WORD  # hi of the breakpoint 1, where padding starts


@record
class Layout:
    """A tree's partition of [0, 1) at a static capacity: ``depth``, ``hi``, ``lo`` (int32, one slot
    per leaf, then padding; see the module docstring). Leading axes, if any, stack layouts."""

    depth: jax.Array | np.ndarray
    hi: jax.Array | np.ndarray
    lo: jax.Array | np.ndarray


def layout(depths: Sequence[int] | np.ndarray, capacity: int, what: str = "layout") -> Layout:
    """The layout of the tree whose leaves, left to right, have these depths, in ``capacity`` slots.

    Raises a TypeError naming ``what`` if ``capacity`` is not an int (a bool is not one), and a
    ValueError if a depth exceeds ``MAX_DEPTH``, the tree has more leaves than ``capacity``, or the
    depths are not those of a binary tree (intervals that do not tile [0, 1) in order)."""
    if isinstance(capacity, bool) or not isinstance(capacity, int | np.integer):
        raise TypeError(
            f"{what}: the capacity must be a positive int (not a bool), got {capacity!r} of type "
            f"{type(capacity).__name__}"
        )
    d = np.asarray(depths)
    if d.ndim != 1 or d.size == 0 or not np.issubdtype(d.dtype, np.integer):
        raise ValueError(f"{what}: leaf depths must be a non-empty list of integers, got {depths!r}")
    if (deepest := int(d.max())) > MAX_DEPTH:
        raise ValueError(
            f"{what}: a leaf at depth {deepest}, deeper than the {MAX_DEPTH} a layout holds (its breakpoints "
            f"have {MAX_DEPTH} bits); such a tree cannot be laid out without merging leaves"
        )
    if d.min() < 0:
        raise ValueError(f"{what}: negative leaf depth {int(d.min())}")
    if capacity < d.size:
        raise ValueError(f"{what}: a tree of {d.size} leaves does not fit in capacity {capacity!r}")
    lengths = np.left_shift(np.int64(1), MAX_DEPTH - d.astype(np.int64))
    starts = np.concatenate([[0], np.cumsum(lengths)[:-1]])
    if starts[-1] + lengths[-1] != 1 << MAX_DEPTH or np.any(starts % lengths):
        raise ValueError(
            f"{what}: leaf depths {d.tolist()} are not those of a binary tree (dyadic intervals tiling [0, 1))"
        )
    pad = capacity - d.size
    return Layout(
        np.concatenate([d, np.full(pad, -1)]).astype(np.int32),
        np.concatenate([starts >> _WORD, np.full(pad, _END)]).astype(np.int32),
        np.concatenate([starts & (_END - 1), np.zeros(pad, np.int64)]).astype(np.int32),
    )


def weights(lay: Layout, dtype: jnp.dtype | None = None) -> jax.Array:
    """The dyadic measure of each slot, 2^-depth, and 0 for padding (in ``dtype``, default float): the
    float whose exponent field is bias - depth and whose mantissa is zero, so exact on every backend by
    construction (a GPU's float64 ``exp2``, through which ``jnp.ldexp`` goes there, gives
    0.031249999999999997 for 2^-5), and elementwise (no gather: the gradient of a tree model stays dense)."""
    depth = jnp.asarray(lay.depth)
    kind = jnp.dtype(jnp.result_type(float) if dtype is None else dtype)
    info = np.finfo(kind)
    integer = jnp.dtype(f"int{kind.itemsize * 8}")
    exponent = (info.maxexp - 1 - jnp.clip(depth, 0, MAX_DEPTH)).astype(integer)  # the exponent's bias is maxexp - 1
    power = jax.lax.bitcast_convert_type(jnp.left_shift(exponent, integer.type(info.nmant)), kind)
    return jnp.where(depth >= 0, power, jnp.zeros((), kind))


@jax.jit  # one computation: called eagerly, its dozen small ops would each be compiled per shape
def refine(a: Layout, b: Layout) -> tuple[Layout, jax.Array, jax.Array]:
    """The common refinement of two 1-D layouts of capacities n and m, at capacity n + m - 1, and for
    each of its slots the slot of ``a`` and of ``b`` whose leaf contains it (0 for padding, so that a
    gather fills padding with the first leaf's value).

    Every breakpoint of either tree starts a refined leaf; the refined leaf is the smaller of the two
    leaves that contain it (dyadic intervals are nested or disjoint), so its depth is the larger."""
    n, m = jnp.shape(a.depth)[0], jnp.shape(b.depth)[0]
    capacity = n + m - 1
    hi, lo, source, index = jax.lax.sort(
        (
            jnp.concatenate([jnp.asarray(a.hi), jnp.asarray(b.hi)]),
            jnp.concatenate([jnp.asarray(a.lo), jnp.asarray(b.lo)]),
            jnp.concatenate([jnp.zeros(n, jnp.int32), jnp.ones(m, jnp.int32)]),
            jnp.concatenate([jnp.arange(n, dtype=jnp.int32), jnp.arange(m, dtype=jnp.int32)]),
        ),
        num_keys=2,
    )
    # Each tree's leaf at a breakpoint: the last of its starts at or before it (starts are sorted).
    in_a = jax.lax.cummax(jnp.where(source == 0, index, -1))
    in_b = jax.lax.cummax(jnp.where(source == 1, index, -1))
    # One refined leaf per distinct breakpoint below 1, read at the last copy of it (where both
    # trees' starts at that breakpoint have been seen).
    last = jnp.append((hi[1:] != hi[:-1]) | (lo[1:] != lo[:-1]), True)
    keep = last & (hi < _END)
    slot = jnp.where(keep, jnp.cumsum(keep) - 1, capacity)  # out of range: dropped

    def place(values: jax.Array, fill: int) -> jax.Array:
        return jnp.full(capacity, fill, jnp.int32).at[slot].set(values, mode="drop")

    slot_a, slot_b = place(in_a, 0), place(in_b, 0)
    filled = jnp.arange(capacity) < jnp.sum(keep)
    depth = jnp.where(filled, jnp.maximum(jnp.asarray(a.depth)[slot_a], jnp.asarray(b.depth)[slot_b]), -1)
    return Layout(depth.astype(jnp.int32), place(hi, _END), place(lo, 0)), slot_a, slot_b


def depths_of(shape: Shape, what: str = "depths_of") -> list[int]:
    """The depth of every leaf of a nested shape, left to right: ``(None, (None, None))`` -> [1, 2, 2].
    A shape that is neither None nor a pair of shapes is rejected, naming its position."""
    out: list[int] = []
    stack: list[tuple[Shape, int, str]] = [(shape, 0, "")]
    while stack:
        s, depth, at = stack.pop()
        if s is None:
            out.append(depth)
        elif isinstance(s, tuple | list) and len(s) == 2:
            stack += [(s[1], depth + 1, f"{at}[1]"), (s[0], depth + 1, f"{at}[0]")]
        else:
            raise ValueError(
                f"{what}: the shape at {at or 'the root'} is {s!r}; a shape is None (a leaf) or a pair of shapes"
            )
    return out


def shape_of(depths: Sequence[int] | np.ndarray) -> Shape:
    """The nested shape whose leaves have these depths (padding, negative depths, ignored)."""
    stack: list[tuple[int, Shape]] = []
    for d in (int(d) for d in depths if d >= 0):
        node: Shape = None
        while stack and stack[-1][0] == d:  # two siblings at depth d make their parent at d - 1
            node, d = (stack.pop()[1], node), d - 1
        stack.append((d, node))
    if len(stack) != 1 or stack[0][0] != 0:
        raise ValueError(f"shape_of: depths {list(depths)} are not those of a binary tree")
    return stack[0][1]
