"""The operand checks of the linear algebra (``applicative.linalg``), which ``applicative.nn``'s modules use too.

Trace-time Python on shapes: nothing reaches a compiled function. ``check_nesting`` raises a TypeError
naming the operation and the argument for an operand nested less deeply than the operation takes it (an
array where a Vec belongs, a vector where a matrix belongs) or, under ordinary arithmetic, more deeply
(a matrix where a vector of scalars belongs), as far as its ``Dense`` levels show; ``alike`` refuses two
elements about to be added under ordinary arithmetic whose pytrees or leaf shapes differ; ``scalars``
refuses structures where ordinary arithmetic multiplies scalars (the elements of ``dot``'s generic
definition), pointing to ``Compose``; ``describe`` names a structure level as these messages do
("Vec[Seq] of size 3"), as do the dimension mismatches of ``applicative.fast_paths``, and ``nesting`` a
whole structure ("a Vec[Seq] of size 3 of Vec[Model] of size 4 holding scalars").

>>> import numpy as np
>>> check_nesting("dot", None, ("a", np.ones(3), 1))
Traceback (most recent call last):
...
TypeError: dot: argument a is a ndarray; expected a structure (a vector)
"""

from __future__ import annotations

from typing import Any, TypeVar

import jax
import jax.numpy as jnp
import numpy as np

from applicative.protocols.algebra import Arithmetic, Module, Ring
from applicative.protocols.applicative import Applicative, Shaped
from applicative.protocols.dense import Axis, Dense

__all__ = ["alike", "check_nesting", "describe", "nesting", "scalars"]

T = TypeVar("T")

_NESTING = {
    1: "a structure (a vector)",
    2: "a structure of structures (rows of columns)",
    3: "a structure of structures of structures (a stack of matrices)",
}


def check_nesting(op: str, ring: Ring[Any] | None, *operands: tuple[str, object, int]) -> None:
    """Raise a TypeError naming ``op`` unless each operand is nested as deep as its count of structure
    levels says, as far as its ``Dense`` levels show without computing; under ordinary arithmetic
    (``ring``), the elements below those levels must not be structures either (``*`` cannot multiply
    them). Structures whose elements are hidden are checked as the generic definition meets them."""
    for name, x, levels in operands:
        seen = x
        for depth in range(levels):
            if not isinstance(seen, Applicative):
                got = f"a {type(x).__name__}" if depth == 0 else nesting(x)
                raise TypeError(f"{op}: argument {name} is {got}; expected {_NESTING[levels]}")
            if not isinstance(seen, Dense) or seen.axes() is None:
                break
            seen = seen.elements()
        else:
            if isinstance(ring, Arithmetic) and isinstance(seen, Applicative):
                raise TypeError(
                    f"{op}: argument {name} is {nesting(x)}; expected {_NESTING[levels]} of scalars{_COMPOSE}"
                )


_COMPOSE = " (to take a structure of structures as one structure, over the product measure, wrap it: Compose(x))"


def scalars(op: str, ring: Ring[Any], a: object, b: object) -> None:
    """A TypeError naming ``op`` if ordinary arithmetic is about to multiply structures (elements that the
    operands' levels did not show: a structure of structures of one's own), pointing to ``Compose``."""
    if isinstance(ring, Arithmetic) and (isinstance(a, Applicative) or isinstance(b, Applicative)):
        held = type(a if isinstance(a, Applicative) else b).__name__
        raise TypeError(
            f"{op}: an element is a {held}, a structure, not a scalar; ordinary arithmetic multiplies scalars{_COMPOSE}"
        )


def nesting(x: object) -> str:
    """A structure described by its visible levels: "a Vec[Seq] of size 3 holding scalars"."""
    names, axes = [], 0
    while isinstance(x, Dense) and (level := x.axes()) is not None:
        names.append(describe(level))
        axes += len(level)
        x = x.elements()
    if not names:
        return f"a {type(x).__name__}"
    if isinstance(x, jax.Array | np.ndarray):
        held = "scalars" if x.ndim == axes else f"arrays of shape {x.shape[axes:]}"
    else:
        held = f"{type(x).__name__} elements"
    return f"a {' of '.join(names)} holding {held}"


def alike(op: str, module: Module[Any], x: T, y: T) -> tuple[T, T]:
    """Two elements about to be added, checked under ordinary arithmetic (which adds leaf by leaf) to
    have one pytree structure and leaves that broadcast together."""
    if not isinstance(module, Arithmetic) or _one_kind(x, y):
        return x, y
    raise TypeError(f"{op}: the arguments hold different elements, {_what(x)} and {_what(y)}; expected one shape")


def _one_kind(x: object, y: object) -> bool:
    """One pytree structure and leaves that broadcast together; a ``Shaped`` structure (a tree) counts
    as one leaf, matched by its type alone: ordinary arithmetic adds it through its own ``pair``."""
    structure: jax.tree_util.PyTreeDef = jax.tree_util.tree_structure(x, is_leaf=_is_shaped)
    if structure != jax.tree_util.tree_structure(y, is_leaf=_is_shaped):
        return False
    for u, w in zip(*(jax.tree_util.tree_leaves(e, is_leaf=_is_shaped) for e in (x, y)), strict=True):
        if _is_shaped(u) or _is_shaped(w):
            if type(u) is not type(w):
                return False
            continue
        try:
            jnp.broadcast_shapes(jnp.shape(u), jnp.shape(w))
        except ValueError:
            return False
    return True


def _is_shaped(x: object) -> bool:
    return isinstance(x, Shaped)


def _what(x: object) -> str:
    if isinstance(x, Applicative) or not hasattr(x, "shape"):
        return f"a {type(x).__name__}"
    return f"an array of shape {jnp.shape(x)}"


def describe(level: tuple[Axis, ...]) -> str:
    """A structure level (its axes: a Compose has two) as the messages name it: "Vec[Seq] of size 3"."""
    return " x ".join(str(axis) for axis in level)
