"""A ``DenseTree``'s values in its slots: read off nested pairs, and gathered at slot indices.

A tree stores its leaves' values stacked along one axis of ``capacity`` slots, built leaves first, left
to right, then padding (``applicative.instances.dense_tree``). Two steps put values there, both without
compiling anything per tree size:

    _walk(obj, what)     the leaf values and depths of nested pairs (``(a, (b, c))``) or a ``Tree``, left
                         to right, on the host and without recursion; a tuple or list of any other length
                         than two, or a None leaf, is a ValueError naming ``what`` and the position
                         (``[1][0]``: the left child of the right child)
    _take(data, index)   the stacked values at these slots (``index``, an integer array): a gather along
                         the leading axis of every leaf of ``data``; on the host for numpy data and for
                         concrete device data at a host index, on the device for traced data or at a
                         device index (the values are the same either way)
"""

from __future__ import annotations

from typing import Any, TypeVar, cast

import jax
import jax.numpy as jnp
import numpy as np

from applicative.instances.tree import Leaf, Nested, Node

T = TypeVar("T")


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
