"""Initialisation written against the protocols (models are ``applicative.records.record``s).

Initialisers never build a structure themselves: they receive *templates*
(a structure of the right shape, e.g. ``vector(np.zeros(128), Model)``) and
fill a copy of one with random leaves, so one initialiser serves every
instance.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, Concatenate, ParamSpec, TypeVar

import jax
import jax.numpy as jnp
import numpy as np

from applicative.protocols.applicative import Applicative
from applicative.protocols.integration import counit
from applicative.protocols.kinds import F, G, Summed

T = TypeVar("T")
P = ParamSpec("P")

__all__ = ["Matrix", "compiled_init", "init_each", "keys_like", "measure", "normal_like"]

Matrix = Applicative[F, Applicative[G, jax.Array]]
"""A structure of structures of scalars: a sequence of feature vectors, scores, a mask."""


def measure(x: Applicative[Summed, Any]) -> jax.Array:
    """The total measure of a structure, counit(fmap(const 1) x): a Vec's size.

    In the float type of ``x``'s leaves, so that float32 models stay float32 under x64.
    """
    dtype = jnp.result_type(*jax.tree_util.tree_leaves(x))
    one = jnp.ones((), dtype if jnp.issubdtype(dtype, jnp.floating) else jnp.result_type(float))
    return jnp.asarray(counit(x.fmap(lambda _: one)))


def normal_like(key: jax.Array, template: T, scale: float | jax.Array = 1.0) -> T:
    """A copy of ``template`` whose leaves are independent N(0, scale^2) draws.

    The draws come from numpy's PCG64 seeded with the key's data, through a
    host callback: XLA:CPU takes about 1.3 s to compile each threefry draw
    (a transformer's initialiser would compile for minutes), a callback none.
    Deterministic in the key; works under ``jit`` and ``vmap``. The template's leaves give the
    dtype, so they must be floating (an integer or bool template would truncate the draws).
    """
    floating_template("normal_like", "the", template)
    leaves, treedef = jax.tree_util.tree_flatten(template)
    shapes = [jax.ShapeDtypeStruct(jnp.shape(leaf), jnp.result_type(leaf)) for leaf in leaves]  # type: ignore[no-untyped-call]

    def draw(seed: np.ndarray) -> list[np.ndarray]:
        rng = np.random.default_rng(np.asarray(seed))
        return [rng.standard_normal(s.shape).astype(s.dtype) for s in shapes]

    drawn = jax.pure_callback(draw, shapes, jax.random.key_data(key), vmap_method="sequential")
    return jax.tree_util.tree_unflatten(treedef, [scale * d for d in drawn])  # type: ignore[no-any-return]


def floating_template(op: str, name: str, template: object) -> None:
    """Raise, naming ``op`` and the template, unless its leaves are floating: they give the dtype of
    the weights drawn from it (integer or bool weights would truncate the draws)."""
    for leaf in jax.tree_util.tree_leaves(template):
        if not jnp.issubdtype(dtype := jnp.result_type(leaf), jnp.inexact):
            raise TypeError(f"{op}: {name} template's leaves must be floating (the weights' dtype), got {dtype}")


def keys_like(key: jax.Array, template: Applicative[F, Any]) -> Applicative[F, jax.Array]:
    """A structure shaped like ``template`` holding independent PRNG keys, for ``fmap``-ing an initialiser."""
    slots = template.fmap(lambda _: jnp.zeros((), jnp.uint32))
    leaves, treedef = jax.tree_util.tree_flatten(slots)
    keys = [
        jax.random.split(k, jnp.shape(leaf)) for k, leaf in zip(jax.random.split(key, len(leaves)), leaves, strict=True)
    ]
    return jax.tree_util.tree_unflatten(treedef, keys)  # type: ignore[no-any-return]


def init_each(key: jax.Array, template: Applicative[F, Any], init: Callable[[jax.Array], T]) -> Applicative[F, T]:
    """A structure of independently initialised elements (heads, layers): fmap init (keys_like key template)."""
    return keys_like(key, template).fmap(init)


def compiled_init(init: Callable[Concatenate[jax.Array, P], T]) -> Callable[Concatenate[jax.Array, P], T]:
    """Run an initialiser as one jitted computation of its key: run eagerly, its many
    small vmapped ops would each be compiled on first use (seconds for a transformer)."""

    @functools.wraps(init)
    def run(key: jax.Array, *args: P.args, **kwargs: P.kwargs) -> T:
        compiled: Callable[[jax.Array], T] = jax.jit(lambda k: init(k, *args, **kwargs))
        return compiled(key)

    return run  # type: ignore[return-value]
