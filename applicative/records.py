"""Frozen records that are JAX pytrees: the one helper behind every structure and every model.

``@record`` makes a class a frozen dataclass registered as a pytree whose
children are its fields, except those declared with ``static()`` (tags,
sizes, functions, flags), which are hashable metadata. A record then passes
through ``jit``, ``grad``, ``vmap`` and optax, as the reference's Haskell
records (``SelfAttention {queryMat, keyMat, ...}``) pass through its code.

Constructing a record runs its ``__init__`` and ``__post_init__``; JAX
rebuilding one (unflattening: every output of a ``jit``, a ``tree_map``, a
``grad``, around tracers, ``None``, ``object()`` placeholders or ``vmap``'s
axis numbers) runs neither: it makes the object with ``object.__new__`` and
sets its fields, as Equinox does. So a check in ``__post_init__`` runs when
a user builds a record, and never when JAX rebuilds one from another
(whatever its leaves are), and it costs a training step nothing.

>>> import jax.numpy as jnp
>>> @record
... class Affine:
...     weight: jax.Array
...     bias: jax.Array
...     name: str = static(default="affine")
...     def __post_init__(self) -> None:
...         if jnp.shape(self.weight) != jnp.shape(self.bias):
...             raise ValueError("Affine: weight and bias differ in shape")
>>> affine = Affine(jnp.ones(2), jnp.zeros(2))
>>> [leaf.tolist() for leaf in jax.tree_util.tree_leaves(affine)]
[[1.0, 1.0], [0.0, 0.0]]
>>> jax.tree_util.tree_map(lambda _: object(), affine).name  # rebuilt: not checked
'affine'
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable
from typing import Any, TypeVar, dataclass_transform

import jax

T = TypeVar("T")

__all__ = ["record", "static"]


def static(*, default: Any = dataclasses.MISSING) -> Any:
    """A record field kept as pytree metadata (hashable, not differentiated, not traced):
    ``tag: type[N] = static()``, ``eps: float = static(default=1e-5)``."""
    return dataclasses.field(default=default, metadata={"static": True})


@dataclass_transform(frozen_default=True, eq_default=False, field_specifiers=(static, dataclasses.field))
def record(cls: type[T]) -> type[T]:
    """Make ``cls`` a frozen dataclass (compared by identity) and a pytree of its non-static fields,
    which JAX rebuilds without running ``__init__`` or ``__post_init__``.

    A class that defines its own ``__init__`` keeps it (a validating constructor)."""
    cls = dataclasses.dataclass(frozen=True, eq=False)(cls)
    fields = dataclasses.fields(cls)  # type: ignore[arg-type]
    children = tuple(f.name for f in fields if not f.metadata.get("static"))
    metadata = tuple(f.name for f in fields if f.metadata.get("static"))
    keys = tuple(jax.tree_util.GetAttrKey(name) for name in children)
    flatten, unflatten = _compiled(cls, children, metadata)

    def flatten_with_keys(x: T) -> tuple[tuple[tuple[jax.tree_util.GetAttrKey, Any], ...], tuple[Any, ...]]:
        values, aux = flatten(x)
        return tuple(zip(keys, values, strict=True)), aux

    jax.tree_util.register_pytree_with_keys(cls, flatten_with_keys, unflatten, flatten)
    return cls


def _compiled(
    cls: type[T], children: tuple[str, ...], metadata: tuple[str, ...]
) -> tuple[Callable[[T], tuple[tuple[Any, ...], tuple[Any, ...]]], Callable[[tuple[Any, ...], Iterable[Any]], T]]:
    """The flatten and unflatten functions of a record with these fields, written out for its fields
    (as ``dataclasses`` writes ``__init__``): a training step flattens and rebuilds its model and
    optimiser state every step, and a loop over field names costs twice as much.

    Unflatten makes the object with ``object.__new__`` and fills its ``__dict__``: no ``__init__``,
    no ``__post_init__``, no frozen ``__setattr__``."""

    def items(names: tuple[str, ...]) -> str:
        return "".join(f"fields[{name!r}], " for name in names)

    def unpack(names: tuple[str, ...], source: str) -> str:
        return f"    ({items(names)}) = {source}\n" if names else ""

    source = (
        "def flatten(x):\n"
        "    fields = x.__dict__\n"
        f"    return ({items(children)}), ({items(metadata)})\n"
        "def unflatten(aux, values):\n"
        "    x = new(cls)\n"
        "    fields = x.__dict__\n"
        f"{unpack(children, 'values')}{unpack(metadata, 'aux')}"
        "    return x\n"
    )
    namespace: dict[str, Any] = {"new": object.__new__, "cls": cls}
    exec(source, namespace)  # field names only: identifiers of the class
    return namespace["flatten"], namespace["unflatten"]
