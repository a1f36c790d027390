"""Frozen records that are JAX pytrees: the one helper behind every structure and every model.

``@record`` makes a class a frozen dataclass registered as a pytree whose
children are its fields, except those declared with ``static()`` (tags,
sizes, functions, flags), which are hashable metadata. A record then passes
through ``jit``, ``grad``, ``vmap`` and optax, as the reference's Haskell
records (``SelfAttention {queryMat, keyMat, ...}``) pass through its code.

JAX rebuilds records around tracers, ``None`` or axis numbers. A record is
rebuilt by its dataclass ``__init__`` (JAX's C++ path: flattening a model and
its optimiser state costs microseconds, not a millisecond), so a
``__post_init__`` must accept such leaves; a record that defines a validating
``__init__`` of its own is rebuilt without calling it (as Equinox does).

>>> import jax.numpy as jnp
>>> @record
... class Affine:
...     weight: jax.Array
...     bias: jax.Array
...     name: str = static(default="affine")
>>> [leaf.tolist() for leaf in jax.tree_util.tree_leaves(Affine(jnp.ones(2), jnp.zeros(2)))]
[[1.0, 1.0], [0.0, 0.0]]
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
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
    """Make ``cls`` a frozen dataclass (compared by identity) and a pytree of its non-static fields.

    A class that defines its own ``__init__`` keeps it (a validating constructor)."""
    own_init = "__init__" in cls.__dict__
    cls = dataclasses.dataclass(frozen=True, eq=False)(cls)
    fields = dataclasses.fields(cls)  # type: ignore[arg-type]
    children = tuple(f.name for f in fields if not f.metadata.get("static"))
    metadata = tuple(f.name for f in fields if f.metadata.get("static"))
    if not own_init:
        return jax.tree_util.register_dataclass(cls, data_fields=list(children), meta_fields=list(metadata))

    def flatten(x: T) -> tuple[tuple[tuple[jax.tree_util.GetAttrKey, Any], ...], tuple[Any, ...]]:
        keyed = tuple((jax.tree_util.GetAttrKey(name), getattr(x, name)) for name in children)
        return keyed, tuple(getattr(x, name) for name in metadata)

    def unflatten(aux: tuple[Any, ...], values: Iterable[Any]) -> T:
        x = object.__new__(cls)
        for name, value in (*zip(children, values, strict=True), *zip(metadata, aux, strict=True)):
            object.__setattr__(x, name, value)
        return x

    jax.tree_util.register_pytree_with_keys(cls, flatten, unflatten)
    return cls
