"""Dyadic layouts: the shape of a binary tree as an array of intervals, and the common refinement of two shapes.

The functional core of ``DenseTree`` (``applicative.instances.dense_tree``), as
``chebyshev`` is ``Cheb``'s. A binary tree whose nodes halve their interval is
a partition of [0, 1) into dyadic intervals [s, s + 2^-d), one per leaf, left
to right. A ``Layout`` stores that partition at a static capacity, one slot per
leaf and the rest padding (measure zero). Every array may carry leading axes (a
stack of layouts).

A layout's element type is ``LAYOUT``, a JAX extended dtype (as PRNG keys are:
``jax.extend.random.define_prng_impl``, whose keys are the one extended dtype
JAX lets a library define): each element is one slot's interval, three 32-bit
words. No arithmetic, comparison, reduction or cast accepts it and numpy
cannot convert it, so a function mapped over every leaf of a structure holding
trees (``jax.tree_util.tree_map(lambda x: 2 * x, ...)``) is refused by JAX, at
trace time, with the dtype's name, which states the rule: a tree's shape is
never an element (docs/design.md, "A shape is never an element"). What JAX
does allow on it moves or copies whole slots (indexing, reshapes, ``where``,
``zeros_like``).

    intervals(layout)  the slots' depth d (-1 on padding) and start s = (hi 2^30 + lo) 2^-60 (two
                       30-bit words: exact to depth 60; a padding slot starts at 1, after every leaf)
    weights(layout)    the dyadic measure of each slot: 2^-depth, 0 on padding (its bits: exact everywhere)
    refine(a, b)       the common refinement: the sorted union of the two trees' breakpoints, at
                       capacity n + m - 1 (enough for any two trees), with the slot of each refined
                       leaf in a and in b (a gather then moves values onto it); no recursion, one sort
    layout(depths, c)  the layout of a tree given its leaves' depths (on the host), checked; one
                       object per value (``canonical``), so trees built apart share it
    depths(layout), slots(layout)   the leaves' depths and slots, left to right (on the host)
    depths_of(shape), shape_of(depths)   between nested shapes ((None, (None, None))) and depths

Nothing depends on the order of the slots: a leaf is found by its start, not its
slot (``refine`` sorts, ``depths`` and ``slots`` read in order of starts), so a
map that moves every leaf's slots alike moves each interval with its value.
The words of a slot are stored as differences (``_encode``), so that the only
array JAX builds without reading a layout, a constant fill (``zeros_like``,
``ones_like``, ``full_like``), holds no leaf; a layout with no leaf reads as
the one-leaf tree, [0, 1) in its first slot: the constant function, which is
what such a map means. A tree deeper than ``MAX_DEPTH`` cannot be laid out
(its breakpoints would need more bits): ``layout`` refuses it, naming the
depth, rather than merging leaves.

>>> lay = layout([1, 2, 2], 4)                    # the tree (., (., .)) in 4 slots
>>> intervals(lay).depth.tolist(), weights(lay).tolist()
([1, 2, 2, -1], [0.5, 0.25, 0.25, 0.0])
>>> fine, in_a, in_b = refine(lay, layout([2, 2, 1], 3))
>>> shape_of(depths(fine)), np.asarray(in_a).tolist(), np.asarray(in_b).tolist()
(((None, None), (None, None)), [0, 0, 1, 2, 0, 0], [0, 1, 2, 2, 0, 0])
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any, NamedTuple, TypeAlias, cast

import jax
import jax.numpy as jnp
import numpy as np
from jax.extend import random as jax_random

from applicative.instances.tree import Shape

__all__ = [
    "LAYOUT",
    "MAX_DEPTH",
    "Intervals",
    "Layout",
    "canonical",
    "depths",
    "depths_of",
    "encode",
    "from_words",
    "host_words",
    "intervals",
    "is_layout",
    "layout",
    "refine",
    "shape_of",
    "slots",
    "weights",
]

MAX_DEPTH = 60
"""The deepest leaf a layout holds: its start needs ``MAX_DEPTH`` exact bits (two 30-bit words)."""

_WORD = 30
_END = 1 << _WORD  # hi of the breakpoint 1, where padding starts

Layout: TypeAlias = jax.Array
"""An array of ``LAYOUT`` elements, one a slot: shape (..., capacity)."""


def _not_a_key(*_: object) -> jax.Array:
    raise TypeError("a tree's layout is not a PRNG key: it cannot seed, split or draw random numbers")


_IMPL = jax_random.define_prng_impl(
    key_shape=(3,),
    seed=_not_a_key,
    split=_not_a_key,
    random_bits=_not_a_key,
    fold_in=_not_a_key,
    name="applicative.dyadic.layout",
    # The dtype's name is what JAX's refusals print ("multiply does not accept dtypes int32, key<...>"):
    tag="DenseTree layout: a tree's shape is never an element; map its values with fmap or "
    "applicative.stacked.along",
)
LAYOUT = jax.eval_shape(lambda: jax.random.wrap_key_data(jnp.zeros(3, jnp.uint32), impl=_IMPL)).dtype
"""The element type of a layout: one slot's dyadic interval (an extended dtype; see the module docstring)."""


class Intervals(NamedTuple):
    """A layout's slots read as integers (int32 arrays of its shape): each leaf's depth (-1 on padding)
    and start, (hi 2^30 + lo) 2^-60 (padding starts at 1: hi = 2^30, lo = 0)."""

    depth: jax.Array
    hi: jax.Array
    lo: jax.Array


def is_layout(x: object) -> bool:
    """Whether ``x`` is an array (or tracer) of ``LAYOUT`` elements."""
    return isinstance(x, jax.Array) and x.dtype == LAYOUT


def encode(depth: np.ndarray, hi: np.ndarray, lo: np.ndarray) -> Layout:
    """The layout of slots of these depths (-1: padding) and start words, as they are (unchecked: a layout
    that is no tree is the caller's; ``layout`` builds a checked one)."""
    return _wrap(_encode(np, np.asarray(depth), np.asarray(hi), np.asarray(lo)))


def _encode(xp: Any, depth: Any, hi: Any, lo: Any) -> Any:
    """The depth code (depth + 1; 0 on padding) and the two start words, each stored as its difference with
    the next word (``xp``: numpy or jax.numpy), so that three equal words (a constant fill) are a slot of
    code 0: padding."""
    code = xp.where(depth >= 0, depth + 1, 0).astype(xp.uint32)
    w2 = xp.asarray(lo).astype(xp.uint32)
    w1 = xp.asarray(hi).astype(xp.uint32) ^ w2
    return xp.stack([code ^ w1, w1, w2], axis=-1)


def intervals(lay: Layout) -> Intervals:
    """The depth and start of every slot (the inverse of ``encode``). A layout with no leaf (a constant
    fill of one: every word equal) is the one-leaf tree, [0, 1) in its first slot."""
    return cast(Intervals, _intervals(lay))


@jax.jit  # one computation eagerly (its small ops would each dispatch); fused under jit
def _intervals(lay: Layout) -> Intervals:
    words = jax.random.key_data(lay)
    code = (words[..., 0] ^ words[..., 1]).astype(jnp.int32)
    root = jnp.all(code == 0, axis=-1, keepdims=True) & (jnp.arange(code.shape[-1]) == 0)
    padding = (code == 0) & ~root
    hi = jnp.where(root, 0, jnp.where(padding, _END, (words[..., 1] ^ words[..., 2]).astype(jnp.int32)))
    lo = jnp.where(root | padding, 0, words[..., 2].astype(jnp.int32))
    return Intervals(jnp.where(root, 0, code - 1), hi, lo)


def _wrap(words: np.ndarray) -> Layout:
    with jax.ensure_compile_time_eval():  # a concrete array, even when first asked for inside a trace
        keys: Layout = jax.random.wrap_key_data(jnp.asarray(words, jnp.uint32), impl=_IMPL)
    return keys


@functools.lru_cache(maxsize=4096)
def _interned(words: bytes, shape: tuple[int, ...]) -> Layout:
    return _wrap(np.frombuffer(words, np.uint32).reshape(shape))


def canonical(lay: Layout) -> Layout:
    """One layout object for every concrete layout of these words (a traced one is itself): layouts built
    apart (two trees of one shape, two stacks of them) are then the same object, which the dense formulas
    and ``pair`` recognise at trace time."""
    if isinstance(lay, jax.core.Tracer):
        return lay
    words = host_words(lay)
    return _interned(words.tobytes(), words.shape)


def from_words(words: np.ndarray) -> Layout:
    """The layout of these stored words (``host_words``' inverse: uint32, shape (..., capacity, 3)), the one
    object of its value (``canonical``). Unchecked, as ``encode``: words read off a layout."""
    words = np.ascontiguousarray(words, np.uint32)
    return _interned(words.tobytes(), words.shape)


def host_words(lay: Layout) -> np.ndarray:
    """The stored words of a concrete layout (uint32, its shape and 3), on the host: read even inside a trace,
    where a concrete layout is a constant (any operation on it there would be staged)."""
    with jax.ensure_compile_time_eval():
        words: np.ndarray = np.asarray(jax.random.key_data(lay), np.uint32)
    return words


def layout(depths: Sequence[int] | np.ndarray, capacity: int, what: str = "layout") -> Layout:
    """The layout of the tree whose leaves, left to right, have these depths, in ``capacity`` slots (or, for
    a list of such lists, the stack of their layouts); the canonical object of its value.

    Raises a TypeError naming ``what`` if ``capacity`` is not an int (a bool is not one), and a
    ValueError if a depth exceeds ``MAX_DEPTH``, the tree has more leaves than ``capacity``, or the
    depths are not those of a binary tree (intervals that do not tile [0, 1) in order)."""
    if isinstance(capacity, bool) or not isinstance(capacity, int | np.integer):
        raise TypeError(
            f"{what}: the capacity must be a positive int (not a bool), got {capacity!r} of type "
            f"{type(capacity).__name__}"
        )
    if len(depths) and not np.isscalar(depths[0]):
        rows = np.stack([_words(np.asarray(d), capacity, what) for d in depths])
        return _interned(rows.tobytes(), rows.shape)
    words = _words(np.asarray(depths), capacity, what)
    return _interned(words.tobytes(), words.shape)


def _words(d: np.ndarray, capacity: int, what: str) -> np.ndarray:
    if d.ndim != 1 or d.size == 0 or not np.issubdtype(d.dtype, np.integer):
        raise ValueError(f"{what}: leaf depths must be a non-empty list of integers, got {d.tolist()!r}")
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
    words: np.ndarray = _encode(
        np,
        np.concatenate([d, np.full(pad, -1)]),
        np.concatenate([starts >> _WORD, np.full(pad, _END)]),
        np.concatenate([starts & (_END - 1), np.zeros(pad, np.int64)]),
    )
    return words


def weights(lay: Layout, dtype: jnp.dtype | None = None) -> jax.Array:
    """The dyadic measure of each slot, 2^-depth, and 0 for padding (in ``dtype``, default float): the
    float whose exponent field is bias - depth and whose mantissa is zero, so exact on every backend by
    construction (a GPU's float64 ``exp2``, through which ``jnp.ldexp`` goes there, gives
    0.031249999999999997 for 2^-5), and elementwise (no gather: the gradient of a tree model stays dense)."""
    depth = intervals(lay).depth
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
    gather fills padding with the first slot's value). The result's leaves come first, left to right.

    Every breakpoint of either tree starts a refined leaf; the refined leaf is the smaller of the two
    leaves that contain it (dyadic intervals are nested or disjoint), so its depth is the larger."""
    ia, ib = intervals(a), intervals(b)
    n, m = ia.depth.shape[0], ib.depth.shape[0]
    capacity = n + m - 1
    hi, lo, source, index = jax.lax.sort(
        (
            jnp.concatenate([ia.hi, ib.hi]),
            jnp.concatenate([ia.lo, ib.lo]),
            jnp.concatenate([jnp.zeros(n, jnp.int32), jnp.ones(m, jnp.int32)]),
            jnp.concatenate([jnp.arange(n, dtype=jnp.int32), jnp.arange(m, dtype=jnp.int32)]),
        ),
        num_keys=2,
    )
    # Each tree's leaf at a breakpoint: the last of its starts at or before it, in the sorted order (its
    # slots may be in any order).
    position = jnp.arange(n + m)
    in_a = index[jax.lax.cummax(jnp.where(source == 0, position, 0))]  # (both trees start at 0: every kept
    in_b = index[jax.lax.cummax(jnp.where(source == 1, position, 0))]  # breakpoint has seen a start of each)
    # One refined leaf per distinct breakpoint below 1, read at the last copy of it (where both
    # trees' starts at that breakpoint have been seen).
    last = jnp.append((hi[1:] != hi[:-1]) | (lo[1:] != lo[:-1]), True)
    keep = last & (hi < _END)
    slot = jnp.where(keep, jnp.cumsum(keep) - 1, capacity)  # out of range: dropped

    def place(values: jax.Array, fill: int) -> jax.Array:
        return jnp.full(capacity, fill, jnp.int32).at[slot].set(values, mode="drop")

    slot_a, slot_b = place(in_a, 0), place(in_b, 0)
    filled = jnp.arange(capacity) < jnp.sum(keep)
    depth = jnp.where(filled, jnp.maximum(ia.depth[slot_a], ib.depth[slot_b]), -1)
    fine = jax.random.wrap_key_data(_encode(jnp, depth, place(hi, _END), place(lo, 0)), impl=_IMPL)
    return fine, slot_a, slot_b


def slots(lay: Layout) -> np.ndarray:
    """The slots of a concrete 1-D layout's leaves, left to right (by their starts: a map that moved
    every leaf's slots alike does not change the tree), on the host."""
    depth, hi, lo = (np.asarray(a) for a in intervals(lay))
    leaves = np.flatnonzero(depth >= 0)
    return leaves[np.lexsort((lo[leaves], hi[leaves]))]


def depths(lay: Layout) -> list[int]:
    """The depths of a concrete 1-D layout's leaves, left to right (on the host)."""
    return [int(d) for d in np.asarray(intervals(lay).depth)[slots(lay)]]


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
