"""How JAX sees a structure whose shape is a layout leaf (``_layouts.Layouts``): its pytree registration, and
the checks on what JAX rebuilds of it.

    register(cls)          the pytree registration: leaves (data, layout), metadata a ``_Meta`` (the static
                           fields and ``_one_axes``); a rebuilt layout is checked (``_check_layout``), and so
                           is a rebuilt claim (``_layouts``' docstring): on the host where it is concrete,
                           at run time where it is traced (``_checked``)
    _checked(data, ...)    the run-time check that a traced stack is one shape where it is said to be
    _check_layout(cls, ...)   a layout's type and slots, before it is read as a shape
"""

from __future__ import annotations

import functools
import math
from typing import Any, TypeVar, cast

import jax
import jax.numpy as jnp
import numpy as np

from applicative.instances._layouts import Layout, Layouts, _alike_axes

T = TypeVar("T")


def _checked(data: T, layout: Layout, axes: int, what: str, element: str, why: str | None = None) -> T:
    """``data``, whose stack's layout (traced) is claimed one shape along its ``axes`` innermost stack axes,
    where every row is its block's first; else, at run time, a ValueError naming ``what`` (and ``why``, or
    the claim; through ``jax.debug.callback``) and NaN in every floating value, so that no structure is read
    with another's shape."""
    words = jax.random.key_data(layout)
    blocks = words.reshape(-1, math.prod(jnp.shape(layout)[-1 - axes : -1]), *words.shape[-2:])
    alike = jnp.all(blocks == blocks[:, :1])

    def refuse(ok: np.ndarray) -> None:
        if not np.all(ok):
            raise ValueError(
                f"{what}: "
                + (
                    why
                    or f"a stack of {element}s said to be one shape along its last {axes} stack axes holds "
                    f"{element}s of several shapes there (a map that mixed the rows of two stacks: a where, a "
                    "concatenation, a vmap along an inner axis); stack them with applicative.stacked.stack, or "
                    f"build them on one {element}"
                )
            )

    jax.debug.callback(refuse, alike)

    def poison(leaf: Any) -> Any:
        if isinstance(leaf, jax.Array) and jnp.issubdtype(leaf.dtype, jnp.inexact):
            return jnp.where(alike, leaf, jnp.nan)
        return leaf

    return cast(T, jax.tree_util.tree_map(poison, data))


def _check_layout(cls: type[Layouts], layout: object, slots: int, what: str) -> None:
    """A ValueError naming ``what`` unless ``layout`` can be a layout of ``slots`` slots of ``cls``: an array of
    its layout type (or float0: a tangent's) whose shape ends in the slots. Trace-time Python on the dtype
    and shape; JAX's placeholders (axis specs, None) are not arrays and pass. What a map over every leaf that
    JAX lets through leaves of a layout (a slice, a reduction over the slots: JAX refuses every arithmetic
    on the dtype itself) is stopped here, before it is read as a shape."""
    if not isinstance(layout, jax.Array | np.ndarray):
        return
    kind = cls._is_layout(layout) or layout.dtype == jax.dtypes.float0
    if kind and jnp.ndim(layout) >= 1 and jnp.shape(layout)[-1] == slots:
        return
    raise ValueError(
        f"{what}: a {cls.ELEMENT}'s layout is an array of {cls.LAYOUT_NAME} of its {slots} slots, got "
        f"{layout.dtype}{list(jnp.shape(layout))}. A {cls.ELEMENT}'s shape is never an element: a structure "
        f"holding {cls.ELEMENT}s must map their values only, along its own axis with applicative.stacked.along "
        f"(which reaches a {cls.ELEMENT} through {cls.NAME}.restack), never with jax.tree_util.tree_map over "
        "every leaf, which maps the layout too (docs/new_structure.md)"
    )


# The pytree registration: the leaves are the values and the layout; the metadata the static fields and along
# how many innermost stack axes the structures are one shape, which JAX compares.


class _Meta:
    """A structure's static pytree metadata, compared by JAX as a whole: its static fields (``STATIC``) and
    ``one``, along how many innermost stack axes its structures are one shape (0 for one structure)."""

    __slots__ = ("cls", "one", "static")

    def __init__(self, cls: type[Layouts], static: tuple[Any, ...], one: int) -> None:
        self.cls, self.static, self.one = cls, static, one

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Meta) and (self.static, self.one) == (other.static, other.one)

    def __hash__(self) -> int:
        return hash((self.static, self.one))

    def __repr__(self) -> str:
        fields = ", ".join(f"{name} {value}" for name, value in zip(self.cls.STATIC, self.static, strict=True))
        one = f", {self.cls.ELEMENT}s of one shape along the last {self.one} stack axes" if self.one else ""
        return f"({fields}{one})"


def _flatten(t: Layouts) -> tuple[tuple[tuple[Any, Any], ...], _Meta]:
    children = ((jax.tree_util.GetAttrKey("data"), t.data), (jax.tree_util.GetAttrKey("layout"), t.layout))
    return children, _Meta(type(t), t._static(), t._one_axes())


def _unflatten(cls: type[Layouts], meta: _Meta, children: Any) -> Any:
    data, layout = children
    what = f"{cls.NAME} (rebuilt from its pytree leaves)"
    t = cls._rebuilt(meta.static, data, layout)
    _check_layout(cls, layout, t._slots(), what)
    one = meta.one  # (placeholders, a tangent's float0: kept as given, so that they flatten back alike)
    if cls._is_layout(layout) and one:
        one = min(one, jnp.ndim(layout) - 1)
        if not isinstance(layout, jax.core.Tracer):
            one = one if _alike_axes(layout) >= one else 0  # (a claim its rows contradict is dropped)
        elif one:
            object.__setattr__(t, "data", _checked(data, layout, one, what, cls.ELEMENT))
    object.__setattr__(t, "_one", one)
    return t


def register(cls: type[T]) -> type[T]:
    """Register ``cls`` (a ``Layouts`` subclass) as a pytree: leaves its values and its layout, metadata its
    static fields and its claim (``_Meta``); a class decorator."""
    jax.tree_util.register_pytree_with_keys(cls, _flatten, functools.partial(_unflatten, cls))  # type: ignore[arg-type]
    return cls
