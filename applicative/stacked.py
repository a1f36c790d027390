"""The stacked storage convention, for authors of structures (``Vec``, ``Cheb`` and the finite
distributions use it).

A structure of n elements stores them as one element pytree with a leading
axis of length n on every leaf: a Vec of 3 scalars holds one array of shape
(3,), a Vec of 3 Vecs of 4 scalars one of shape (3, 4), a Vec of 3 pairs a
pair of arrays. Then

    fmap f    = jax.vmap(f) on the stacked elements
    pair      = the tuple of the two stacked pytrees
    pure b    = b broadcast along a new leading axis
    counit    = weighted_sum(module, weights, data, n)

``weighted_sum`` is one tensordot per leaf where the Module allows it
(ordinary arithmetic, lifted pointwise or not: ``sums_leafwise``), or else a
fold of the Module's ``scale`` and ``add`` over the elements (``element(data,
i)``), so a counit written with it is right for every Module it receives.
A structure whose ``pair`` is not a zip (a distribution's is a product)
subclasses ``ProductPairing``, so that sums of it are never taken leaf by leaf.

Nested inputs need no knowledge of this layout: ``stack(elements)`` stacks a
list of equal-shaped elements (structures, arrays, numbers) into the stacked
pytree, so ``Vec.of([f, g], Seq)`` is a Vec of two functions and a user's
structure is built as ``Periodic(stack(elements), X, len(elements))``; a
structure of Vecs comes from a constructor that samples a function returning
Vecs (``fmap`` and ``from_function`` vmap it).

>>> import jax.numpy as jnp
>>> from applicative import arithmetic
>>> float(weighted_sum(arithmetic(), jnp.array([0.5, 0.25]), jnp.array([2.0, 4.0]), 2))
2.0
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any, TypeVar, cast

__all__ = ["ProductPairing", "element", "nested", "stack", "stacked_size", "sums_leafwise", "weighted_sum"]

import jax
import jax.numpy as jnp

from applicative.protocols.algebra import Arithmetic, Module, Pointwise
from applicative.protocols.kinds import Dim, check_tag

T = TypeVar("T")


class ProductPairing:
    """Marks a structure whose ``pair`` is not a zip of two equal shapes (a distribution's is the
    independent product): a pointwise sum of such structures is not a sum of their leaves."""


def stacked_size(data: object, what: str) -> int:
    """The common length of the leading axes of ``data``'s leaves; a clear error if there is none."""
    sizes = {jnp.shape(leaf)[0] if jnp.ndim(leaf) else None for leaf in jax.tree_util.tree_leaves(data)}
    if len(sizes) != 1 or None in sizes:
        raise ValueError(f"{what}: leaves need one common leading axis, got lengths {sizes}")
    return cast(int, sizes.pop())


def nested(
    what: str, array: jax.Array, tags: tuple[type[Dim], ...], shell: Callable[[Any, type[Dim], int], Any]
) -> Any:
    """The structure of structures holding ``array``, one tag per axis: ``shell(data, tag, size)``
    builds each level, from the innermost axis out (every level's leaves carry the outer axes too)."""
    for tag in tags:
        check_tag(tag, what)
    if not tags or array.ndim != len(tags):
        names = ", ".join(t.__name__ for t in tags)
        raise ValueError(f"{what}({names}): a {array.ndim}-D array needs {array.ndim} tags, one per axis")
    out: Any = array
    for axis in reversed(range(len(tags))):
        out = shell(out, tags[axis], array.shape[axis])
    return out


def stack(elements: Sequence[T], what: str = "stack") -> T:
    """The stacked pytree of ``elements`` (the inverse of ``element``): every leaf gains a leading axis
    of length len(elements). The elements must have one pytree structure (tags and sizes included)
    and equal leaf shapes; a clear error names the first that differs."""
    if isinstance(elements, jax.Array | str) or not isinstance(elements, Sequence):
        raise ValueError(f"{what}: needs a list of elements, got {type(elements).__name__}")
    if not elements:
        raise ValueError(f"{what}: needs at least one element, got an empty list")
    first = jax.tree_util.tree_structure(elements[0])
    shapes = [jnp.shape(leaf) for leaf in jax.tree_util.tree_leaves(elements[0])]
    for i, x in enumerate(elements[1:], start=1):
        if str(structure := jax.tree_util.tree_structure(x)) != str(first):
            raise ValueError(f"{what}: element {i} is {structure}, element 0 is {first}")
        if (other := [jnp.shape(leaf) for leaf in jax.tree_util.tree_leaves(x)]) != shapes:
            raise ValueError(f"{what}: element {i} has leaf shapes {other}, element 0 has {shapes}")
    return cast(T, jax.tree_util.tree_map(lambda *leaves: jnp.stack(leaves), *elements))


def element(data: T, i: int) -> T:
    """The i-th element of stacked ``data``."""
    return cast(T, jax.tree_util.tree_map(lambda leaf: leaf[i], data))


def _leafwise(module: Module[T]) -> bool:
    # Ordinary arithmetic adds and scales leaf by leaf, and so does its pointwise lifting to
    # structures that zip; any other Module is folded element by element.
    if isinstance(module, Pointwise):
        return _leafwise(module.inner)
    return isinstance(module, Arithmetic)


def sums_leafwise(module: Module[T], data: object) -> bool:
    """Whether stacked elements may be summed leaf by leaf in ``module``: it is ordinary arithmetic
    (lifted pointwise or not) and the elements hold no structure whose ``pair`` is a product."""
    if not _leafwise(module):
        return False
    nodes = jax.tree_util.tree_leaves(data, is_leaf=lambda x: isinstance(x, ProductPairing))
    return not any(isinstance(node, ProductPairing) for node in nodes)


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
