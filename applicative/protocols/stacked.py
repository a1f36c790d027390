"""Stacked storage, shared by ``Vec``, ``Cheb`` and ``Distribution``.

These containers store their n elements as one element pytree with a leading
axis of length n on every leaf. A weighted sum of the elements (their counit)
is then one tensordot per leaf, when the Module allows it, or else a fold of
the Module's ``scale`` and ``add`` over the elements.
"""

from __future__ import annotations

import functools
from typing import TypeVar, cast

import jax
import jax.numpy as jnp

from applicative.protocols.algebra import Module
from applicative.protocols.applicative import Applicative

T = TypeVar("T")


def stacked_size(data: object, what: str) -> int:
    """The common length of the leading axes of ``data``'s leaves; a clear error if there is none."""
    sizes = {jnp.shape(leaf)[0] if jnp.ndim(leaf) else None for leaf in jax.tree_util.tree_leaves(data)}
    if len(sizes) != 1 or None in sizes:
        raise ValueError(f"{what}: leaves need one common leading axis, got lengths {sizes}")
    return cast(int, sizes.pop())


def element(data: T, i: int) -> T:
    """The i-th element of stacked ``data``."""
    return cast(T, jax.tree_util.tree_map(lambda leaf: leaf[i], data))


def sums_leafwise(module: Module[T], data: object) -> bool:
    """Whether stacked elements may be summed leaf by leaf in ``module``: the module is leafwise
    and the elements contain no structure whose ``pair`` is not a zip (a Distribution's is a product)."""
    if not module.leafwise:
        return False
    nodes = jax.tree_util.tree_leaves(data, is_leaf=lambda x: isinstance(x, Applicative) and not x.zips)
    return not any(isinstance(node, Applicative) for node in nodes)


def weighted_sum(module: Module[T], weights: jax.Array | None, data: T, n: int) -> T:
    """sum_i w_i x_i over the n stacked elements x_i of ``data`` (w_i = 1 when ``weights`` is None)."""
    if sums_leafwise(module, data):
        if weights is None:
            return cast(T, jax.tree_util.tree_map(lambda leaf: jnp.sum(leaf, axis=0), data))
        return cast(T, jax.tree_util.tree_map(lambda leaf: jnp.tensordot(_like(weights, leaf), leaf, 1), data))
    if weights is None:
        return functools.reduce(module.add, (element(data, i) for i in range(n)))
    return functools.reduce(module.add, (module.scale(weights[i], element(data, i)) for i in range(n)))


def _like(weights: jax.Array, leaf: jax.Array) -> jax.Array:
    # Float elements keep their dtype (float32 stays float32); integer elements are promoted.
    return weights.astype(leaf.dtype) if jnp.issubdtype(leaf.dtype, jnp.inexact) else weights
