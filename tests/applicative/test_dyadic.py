"""``applicative.instances.dyadic`` against exact integer arithmetic: a leaf's start is a sum of lengths
2^(60 - depth), a Python int, so the layout's two words, the weights and the common refinement (the sorted
union of two trees' breakpoints, each refined leaf in the leaf of either tree that starts last at or before
it) have references that share nothing with the module's numpy and JAX code. Each bound is tested where it
is reached exactly: a leaf at depth 60, a tree that fills its capacity, breakpoints that differ only in their
low word (below 2^-30), padding after the last leaf."""

import math
from bisect import bisect_right
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from applicative import DenseTree
from applicative.examples.trees import random_shape
from applicative.instances import dyadic
from applicative.instances.tree import Shape

BITS = 60  # dyadic.MAX_DEPTH, written out: a start is exact in units of 2^-60
ONE = 1 << BITS  # the breakpoint 1, where padding starts


def starts(depths: list[int]) -> list[int]:
    """Each leaf's start in units of 2^-60: the lengths 2^(60 - d) of the leaves before it, summed."""
    out, at = [], 0
    for d in depths:
        out.append(at)
        at += 1 << (BITS - d)
    assert at == ONE, "the depths tile [0, 1)"
    return out


def words(lay: dyadic.Layout) -> list[int]:
    """The starts a layout's words hold, hi 2^30 + lo, with each word checked to be a 30-bit one."""
    slots = dyadic.intervals(lay)
    hi, lo = np.asarray(slots.hi).tolist(), np.asarray(slots.lo).tolist()
    assert all(0 <= w < 1 << 30 for w in lo)
    assert all(0 <= w <= 1 << 30 for w in hi)
    return [(h << 30) + w for h, w in zip(hi, lo, strict=True)]


def reference_refinement(a: list[int], b: list[int]) -> tuple[list[int], list[int], list[int]]:
    """(depths, slots in a, slots in b) of the common refinement of two trees, by integer arithmetic: its
    breakpoints are the union of the two trees', a refined leaf runs to the next breakpoint (its length
    2^(60 - d) gives its depth d) and lies in the leaf of each tree that starts last at or before it."""
    sa, sb = starts(a), starts(b)
    points = sorted(set(sa) | set(sb))
    lengths = [end - start for start, end in zip(points, [*points[1:], ONE], strict=True)]
    depths = [BITS - (length.bit_length() - 1) for length in lengths]
    assert all(length == 1 << (BITS - d) for length, d in zip(lengths, depths, strict=True))
    return depths, [bisect_right(sa, p) - 1 for p in points], [bisect_right(sb, p) - 1 for p in points]


def comb(deepest: int) -> list[int]:
    """Depths [1, 2, ..., deepest, deepest]: the right comb, its breakpoints 1/2, 3/4, ..., 1 - 2^-deepest."""
    return [*range(1, deepest + 1), deepest]


RNG = np.random.default_rng(8)
RANDOM_A, RANDOM_B = (dyadic.depths_of(random_shape(RNG, n)) for n in (40, 17))

PAIRS = [
    ([0], 0, [0], 0),  # the root with itself: capacity 1, no padding
    ([0], 2, [1, 1], 0),  # a padded root
    ([1, 2, 2], 1, [2, 2, 1], 0),  # the module's doctest: the breakpoint 1/2 shared, 1/4 and 3/4 not
    (comb(45), 3, comb(45)[::-1], 2),  # breakpoints below 2^-30 apart: equal high words, low words differ
    (comb(60), 0, [1, 1], 5),  # a leaf at depth 60, the deepest a layout holds
    (RANDOM_A, 4, RANDOM_B, 0),
]


@pytest.mark.parametrize(
    ("a", "spare_a", "b", "spare_b"), PAIRS, ids=["root", "padded root", "doctest", "low words", "depth 60", "random"]
)
def test_refine_is_the_sorted_union_of_the_breakpoints_computed_exactly(
    a: list[int], spare_a: int, b: list[int], spare_b: int
) -> None:
    n, m = len(a) + spare_a, len(b) + spare_b
    fine, in_a, in_b = dyadic.refine(dyadic.layout(a, n), dyadic.layout(b, m))
    depths, slots_a, slots_b = reference_refinement(a, b)
    pad = n + m - 1 - len(depths)  # the documented capacity n + m - 1: enough for any two trees
    assert pad >= 0
    assert np.asarray(dyadic.intervals(fine).depth).tolist() == depths + [-1] * pad
    assert words(fine) == starts(depths) + [ONE] * pad  # padding starts at 1, after every leaf
    # each refined leaf's slot in a and in b; 0 on padding, so that a gather fills it with the first leaf
    assert np.asarray(in_a).tolist() == slots_a + [0] * pad
    assert np.asarray(in_b).tolist() == slots_b + [0] * pad
    # the refinement's measure is [0, 1)'s, leaf by leaf: 2^-d exactly, 0 on padding
    weights = np.asarray(dyadic.weights(fine, np.dtype(np.float64)))
    np.testing.assert_array_equal(weights, [2.0**-d for d in depths] + [0.0] * pad)
    assert weights.sum() == 1.0


def test_the_layouts_words_hold_each_start_exactly_down_to_depth_60() -> None:
    depths = comb(60)  # 61 leaves: breakpoints 1 - 2^-k, whose low words are not zero past depth 30
    lay = dyadic.layout(depths, len(depths) + 2)
    assert words(lay) == starts(depths) + [ONE] * 2
    slots = dyadic.intervals(lay)
    np.testing.assert_array_equal(
        [divmod(s, 1 << 30) for s in starts(depths)], np.stack([slots.hi, slots.lo], axis=1)[: len(depths)]
    )
    assert np.asarray(slots.depth).tolist() == [*depths, -1, -1]
    assert np.asarray(dyadic.weights(lay, np.dtype(np.float64))).tolist() == [2.0**-d for d in depths] + [0.0, 0.0]
    with pytest.raises(ValueError, match="a leaf at depth 61, deeper than the 60"):
        dyadic.layout(comb(61), 70)


@pytest.mark.parametrize("deepest", [31, 32, 45, 59, 60])
def test_a_deep_tree_keeps_its_leaves_order_and_shape(deepest: int) -> None:
    """Leaves deeper than 30 to the left of shallower ones (the left comb, and a random tree hung below it):
    their starts differ in the low word while the high word repeats, so the leaves read left to right only
    if the high word sorts first. Depths, leaf values and the nested shape round trip, with the slots in
    order and reversed (no operation reads the slots' order), up to the deepest a layout holds."""
    left: Shape = None
    for _ in range(deepest):
        left = (left, None)  # depths deepest, deepest, deepest - 1, ..., 1: deepest first
    shapes: list[Shape] = [left]
    if deepest < 60:
        hung: Shape = random_shape(RNG, 6)
        for _ in range(deepest - 5):
            hung = (hung, None)
        shapes.append((hung, random_shape(RNG, 5)))
    for shape in shapes:
        depths = dyadic.depths_of(shape)
        if max(depths) > 60:
            continue
        n = len(depths)
        tree = DenseTree.of(shape, list(jnp.arange(n, dtype=jnp.float32)), n + 3)
        reversed_slots = jax.tree_util.tree_map(lambda leaf: leaf[::-1], tree)
        for t in (tree, reversed_slots):
            assert t.depths() == depths
            assert np.asarray(t.leaves()).tolist() == list(range(n))
            assert t.shape == shape
            assert DenseTree.from_nested(t.to_nested(), n).depths() == depths
        assert dyadic.depths(dyadic.layout(depths, n)) == depths


def test_a_tree_that_fills_its_capacity_exactly_is_laid_out() -> None:
    for depths in ([0], [1, 1], [1, 2, 2], comb(60)):
        lay = dyadic.layout(depths, len(depths))  # no padding slot
        assert np.asarray(dyadic.intervals(lay).depth).tolist() == depths
        assert words(lay) == starts(depths)
        with pytest.raises(ValueError, match="does not fit"):
            dyadic.layout(depths, len(depths) - 1) if len(depths) > 1 else dyadic.layout([1, 1], 1)


def test_depths_and_shapes_correspond_left_to_right() -> None:
    assert dyadic.depths_of((None, (None, None))) == [1, 2, 2]
    assert dyadic.depths_of(((None, None), None)) == [2, 2, 1]
    assert dyadic.depths_of(None) == [0]
    assert dyadic.shape_of([2, 2, 1, -1]) == ((None, None), None)  # padding ignored
    for leaves in (1, 2, 9, 33):
        shape: Shape = random_shape(RNG, leaves)
        assert dyadic.shape_of(dyadic.depths_of(shape)) == shape
    for not_a_tree in ([1], [2, 2], [1, 1, 1], [1, 2]):  # [2, 2]: one subtree of depth 1, not the root
        with pytest.raises(ValueError, match="are not those of a binary tree"):
            dyadic.shape_of(not_a_tree)


@pytest.mark.parametrize("dtype", [jnp.float32, jnp.float64])
def test_weights_are_exact_powers_of_two_at_every_depth(dtype: Any) -> None:
    """2^-d bit for bit (Python's ``math.ldexp``) at every admitted depth, eagerly and under jit, 0 on padding:
    a measure of dyadic intervals is exact on every backend (a GPU's float64 exp2 is not)."""
    depths = np.arange(-1, dyadic.MAX_DEPTH + 1)
    zeros = np.zeros(len(depths), np.int32)  # (not a tree: every depth a layout holds, one a slot)
    lay = dyadic.encode(depths, zeros, zeros)
    expected = np.array([0.0] + [math.ldexp(1.0, -int(d)) for d in depths[1:]], dtype)
    for weights in (dyadic.weights(lay, dtype), jax.jit(dyadic.weights, static_argnums=1)(lay, dtype)):
        assert np.asarray(weights).dtype == np.dtype(dtype)
        np.testing.assert_array_equal(np.asarray(weights), expected)
