"""Initialisation written against the protocols (models are ``applicative.records.record``s).

Initialisers never build a structure themselves: they receive *templates*
(a structure of the right shape, e.g. ``vector(np.zeros(128), Model)``) and
fill a copy of one with random leaves, so one initialiser serves every
instance.

The **variance rule** (``variance=``) is a parameter of every initialiser that draws: a weight
reading the inputs ``x`` is drawn N(0, gain^2 / fan) with fan = ``variance(x)``; ``by_measure`` (the
default) counts the total measure of ``x`` (a Vec's size, a Cheb's integral 2), ``fan_in`` its
coordinates (N C for C channels of N-coefficient functions).

Every initialiser takes a PRNG key (``jax.random.key(0)``) and draws from ``jax.random`` alone,
deterministically in the key, by one rule:

- an initialiser asks, in the order its docstring gives, for its weights and for the keys of the parts
  that other initialisers build; its i-th request gets the key ``fold_in(key, i)`` (``Draws``);
- a weight drawn from a key is ``normal_like(key, template, std)``: leaf l of the template (pytree
  order), of n scalars, is the first n of the standard normals
  ``normal(fold_in(fold_in(key, l), j), (BLOCK,), dtype)``, j = 0, 1, ..., in the leaf's dtype,
  reshaped, times the standard deviation ``Std`` (gain / sqrt(fan summed)) rounded to that dtype;
- the elements of a ``Dense`` structure of parts (the heads of an attention or a kernel integral)
  are drawn together: each weight of a head is one draw for every head, the heads' axes in front.

Why blocks of one size: XLA:CPU compiles a threefry draw in about a second, once for each shape it
draws (the default Funcformer's 53 weights, one ``jax.random.normal`` each: 53 s of compiling here
eagerly, 41 s under one ``jit``, JAX 0.9 on a 2-core CPU). Drawn eagerly in blocks of ``BLOCK``
scalars, every weight of every model reuses the one compiled draw of its dtype: a process compiles
for about a second once, and then the default Funcformer initialises in 0.1 to 0.2 s
(docs/design.md, "Initialisation", has the table). Initialisers run eagerly; they also run under
``jit``, ``vmap`` and ``eval_shape`` (the same weights), but a ``jit`` compiles each block it draws.

>>> import numpy as np
>>> from applicative import Dim, Vec
>>> class Model(Dim): ...
>>> x = Vec.from_array(np.zeros(3), Model)
>>> float(by_measure(x)), fan_in(x)
(3.0, 3)
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

import jax
import jax.numpy as jnp
import numpy as np

from applicative.protocols.applicative import Applicative
from applicative.protocols.dense import Dense
from applicative.protocols.integration import counit
from applicative.protocols.kinds import F, G, Summed

T = TypeVar("T")

__all__ = [
    "BLOCK",
    "Matrix",
    "Std",
    "Variance",
    "by_measure",
    "fan_in",
    "init_each",
    "keys_like",
    "measure",
    "normal_like",
]

Matrix = Applicative[F, Applicative[G, jax.Array]]
"""A structure of structures of scalars: a sequence of feature vectors, scores, a mask."""

BLOCK = 16384
"""The standard normals of a weight are drawn ``BLOCK`` at a time, so that one compiled draw serves
every shape (see the module docstring)."""


def measure(x: Applicative[Summed, Any]) -> jax.Array:
    """The total measure of a structure, counit(fmap(const 1) x): a Vec's size.

    In the float type of ``x``'s leaves, so that float32 models stay float32 under x64.
    """
    dtype = jnp.result_type(*(v for v in jax.tree_util.tree_leaves(x) if not _shape_leaf(v)))
    one = jnp.ones((), dtype if jnp.issubdtype(dtype, jnp.floating) else jnp.result_type(float))
    return jnp.asarray(counit(x.fmap(lambda _: one)))


def _shape_leaf(leaf: object) -> bool:
    """A leaf of an extended dtype: a structure's shape (a tree's layout), not a value."""
    return isinstance(leaf, jax.Array) and jnp.issubdtype(leaf.dtype, jax.dtypes.extended)


def normal_like(key: jax.Array, template: T, std: float | jax.Array = 1.0) -> T:
    """A copy of ``template`` whose leaves are independent N(0, std^2) draws from ``key``.

    Leaf l (pytree order) of n scalars holds the first n standard normals of
    ``jax.random.normal(fold_in(fold_in(key, l), j), (BLOCK,), dtype)``, j = 0, 1, ..., in the leaf's
    dtype, times ``std`` rounded to it: drawn eagerly, every shape reuses one compiled draw (the
    module docstring). Deterministic in the key; works under ``jit``, ``vmap`` and ``eval_shape``. The
    template's leaves give the dtype, so they must be floating (an integer or bool template would
    truncate the draws); they may be ``ShapeDtypeStruct``s."""
    floating_template("normal_like", "the", template)
    return _normal(key, template, std, ())


def _normal(key: jax.Array, template: T, std: float | jax.Array, batch: tuple[int, ...]) -> T:
    """``normal_like`` with ``batch`` axes in front of every leaf (the elements drawn together)."""
    leaves, treedef = jax.tree_util.tree_flatten(template)
    drawn = [
        _standard_normals(jax.random.fold_in(key, index), (*batch, *jnp.shape(leaf)), jnp.result_type(leaf), std)
        for index, leaf in enumerate(leaves)
    ]
    return jax.tree_util.tree_unflatten(treedef, drawn)  # type: ignore[no-any-return]


def _standard_normals(key: jax.Array, shape: tuple[int, ...], dtype: Any, std: float | jax.Array) -> jax.Array:
    """The first prod(shape) standard normals of ``key``'s blocks, reshaped, times ``std`` in ``dtype``."""
    n = math.prod(shape)
    blocks = [jax.random.normal(jax.random.fold_in(key, j), (BLOCK,), dtype) for j in range(-(-n // BLOCK))]
    if any(isinstance(x, jax.core.Tracer) for x in (*blocks, std)):  # under a transformation: traced
        z = jnp.concatenate(blocks)[:n] if blocks else jnp.zeros(0, dtype)
        return z.reshape(shape) * jnp.asarray(std, dtype)
    # Eagerly, the cutting and scaling run on the host: no operation of its own to compile.
    host = np.concatenate([np.asarray(block) for block in blocks])[:n] if blocks else np.zeros(0, dtype)
    return jnp.asarray(host.reshape(shape) * np.asarray(std, dtype))


def floating_template(op: str, name: str, template: object) -> None:
    """Raise, naming ``op`` and the template, unless its leaves are floating: they give the dtype of
    the weights drawn from it (integer or bool weights would truncate the draws)."""
    for leaf in jax.tree_util.tree_leaves(template):
        if not jnp.issubdtype(dtype := jnp.result_type(leaf), jnp.inexact):
            raise TypeError(f"{op}: {name} template's leaves must be floating (the weights' dtype), got {dtype}")


class Variance(Protocol):
    """A variance rule: the ``fan`` of a weight drawn N(0, gain^2 / fan), counted on the template of
    the inputs it reads (and of the terms its outputs are summed over: a head's output projection)."""

    def __call__(self, template: Applicative[Any, Any], /) -> float | jax.Array: ...


def by_measure(template: Applicative[Any, Any]) -> jax.Array:
    """The default rule: the template's total ``measure`` (a Vec's size, a Cheb's integral 2)."""
    return measure(template)


def fan_in(template: Applicative[Any, Any]) -> int:
    """The number of scalars in the template, its coordinates: N C for C channels of N-coefficient
    functions (the usual fan-in, counting each coefficient as an input)."""
    return sum(math.prod(jnp.shape(leaf)) for leaf in jax.tree_util.tree_leaves(template))


@dataclass(frozen=True)
class Std:
    """The standard deviation gain / sqrt(fan summed) of a weight that reads ``fan`` inputs (as a
    ``Variance`` counts them) and whose outputs are summed over ``summed`` terms (the heads)."""

    fan: float | jax.Array
    summed: float | jax.Array = 1
    gain: float = 1.0

    @property
    def value(self) -> jax.Array:
        """gain / sqrt(fan summed)."""
        return self.gain / jnp.sqrt(jnp.multiply(self.fan, self.summed))


class Draws:
    """The draws of one initialiser from its key, in the order it asks: the i-th request, a weight
    (``normal``), a key for a part another initialiser builds (``key``) or for a user's score
    (``keyed``), gets ``fold_in(key, i)``. Zeros (biases) are no request.

    ``each`` draws the elements of a ``Dense`` structure together, through a view of these draws with
    the structure's axes as ``batch``: the axes in front of every weight, one request a weight for
    every element."""

    def __init__(self, key: jax.Array, batch: tuple[int, ...] = (), requests: Iterator[int] | None = None) -> None:
        self.root = key
        self.batch = batch
        self.requests = itertools.count() if requests is None else requests

    def key(self) -> jax.Array:
        """The key of the next request."""
        return jax.random.fold_in(self.root, next(self.requests))

    def normal(self, template: T, std: Std) -> T:
        """A copy of ``template`` (of floating leaves) of N(0, std^2) draws, ``batch`` axes in front."""
        floating_template("Draws.normal", "the", template)
        return _normal(self.key(), template, std.value, self.batch)

    def zeros(self, template: T) -> T:
        """Zeros shaped like ``template`` (a bias), ``batch`` axes in front; no request."""

        def zeros(leaf: Any) -> jax.Array:
            return jnp.asarray(np.zeros((*self.batch, *jnp.shape(leaf)), jnp.result_type(leaf)))

        return jax.tree_util.tree_map(zeros, template)  # type: ignore[no-any-return]

    def each(self, template: Applicative[F, Any], init: Callable[[Draws], T]) -> Applicative[F, T]:
        """A structure shaped like ``template`` of independently drawn elements (heads): for a ``Dense``
        template, ``init`` run once on these draws with its axes as ``batch``; for another (a Tree of
        heads, outside any batch), ``init`` run on each element's own key (``init_each``)."""
        if not isinstance(template, Dense) or (axes := template.axes()) is None:
            if self.batch:
                kind = type(template).__name__
                raise TypeError(f"Draws.each: elements of elements must be a Dense structure, got a {kind}")
            return init_each(self.key(), template, lambda k: init(Draws(k)))
        return template.with_elements(
            init(Draws(self.root, (*self.batch, *(axis.size for axis in axes)), self.requests))
        )

    def keyed(self, init: Callable[[jax.Array], T]) -> T:
        """``init`` run on the key of the next request: a part that draws from keys only (a user's
        score); with ``batch`` axes, on one key per element (``fold_in`` of it by the element's index),
        vmapped."""
        key = self.key()
        if not self.batch:
            return init(key)
        keys = jnp.stack([jax.random.fold_in(key, e) for e in range(math.prod(self.batch))])
        keys = keys.reshape(*self.batch, *keys.shape[1:])  # a raw uint32 key keeps its last axis
        run = init
        for _ in self.batch:
            run = jax.vmap(run)
        return run(keys)


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
