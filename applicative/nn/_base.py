"""Initialisation written against the protocols (models are ``applicative.records.record``s).

Initialisers never build a structure themselves: they receive *templates*
(a structure of the right shape, e.g. ``vector(np.zeros(128), Model)``) and
fill a copy of one with random leaves, so one initialiser serves every
instance.

Two choices are parameters of every initialiser that draws:

- the **variance rule** (``variance=``): a weight reading the inputs ``x`` is drawn
  N(0, gain^2 / fan) with fan = ``variance(x)``; ``by_measure`` (the default) counts the
  total measure of ``x`` (a Vec's size, a Cheb's integral 2), ``fan_in`` its coordinates
  (N C for C channels of N-coefficient functions);
- the **draw** (the ``key`` argument): a PRNG key draws through ``KeyDraw`` (numpy's PCG64
  seeded from each key, compiled into the initialiser), a ``NumpyDraw`` from one numpy
  generator in the order the initialisers ask (nothing to compile).

>>> import numpy as np
>>> from applicative import Dim, Vec
>>> class Model(Dim): ...
>>> x = Vec.from_array(np.zeros(3), Model)
>>> float(by_measure(x)), fan_in(x)
(3.0, 3)
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Concatenate, ParamSpec, Protocol, TypeVar

import jax
import jax.numpy as jnp
import numpy as np

from applicative.protocols.algebra import ARITHMETIC
from applicative.protocols.applicative import Applicative
from applicative.protocols.dense import Dense
from applicative.protocols.integration import counit
from applicative.protocols.kinds import F, G, Summed

T = TypeVar("T")
P = ParamSpec("P")

__all__ = [
    "Draw",
    "KeyDraw",
    "Matrix",
    "NumpyDraw",
    "Std",
    "Variance",
    "as_draw",
    "by_measure",
    "compiled_init",
    "fan_in",
    "init_each",
    "keys_like",
    "measure",
    "normal_like",
]

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
    ``Variance`` counts them) and whose outputs are summed over ``summed`` terms (the heads).

    Kept in its parts, which each ``Draw`` combines in its own arithmetic, the one its weights have
    always had (so they stay the same to the bit): ``KeyDraw`` gain (1 / sqrt(fan summed)) in the
    weights' dtype, ``NumpyDraw`` z (gain / sqrt(summed)) / sqrt(fan) in float64."""

    fan: float | jax.Array
    summed: float | jax.Array = 1
    gain: float = 1.0


class Draw(Protocol):
    """Where an initialiser's random weights come from (``KeyDraw``, ``NumpyDraw``)."""

    def normal(self, template: T, std: Std, /) -> T:
        """A copy of ``template`` whose (floating) leaves are independent N(0, std^2) draws."""
        ...

    def zeros(self, template: T, /) -> T:
        """Zeros shaped like ``template`` (a bias)."""
        ...

    def split(self, n: int, /) -> tuple[Draw, ...]:
        """``n`` draws for ``n`` parts, drawn independently."""
        ...

    def each(self, template: Applicative[F, Any], init: Callable[[Draw], T], /) -> Applicative[F, T]:
        """A structure shaped like ``template`` of independently initialised elements (heads)."""
        ...

    def keyed(self, init: Callable[[jax.Array], T], /) -> T:
        """``init`` run on a PRNG key of this draw's: a part that draws from keys only (a user's score)."""
        ...


@dataclass(frozen=True)
class KeyDraw:
    """Draws from a PRNG key: ``normal_like`` (numpy's PCG64 seeded with the key, through a host
    callback), ``jax.random.split`` for parts, ``init_each`` for the elements of a structure. The
    draw an initialiser given a bare key uses; it runs compiled (``compiled_init``)."""

    key: jax.Array

    def normal(self, template: T, std: Std) -> T:
        return normal_like(self.key, template, std.gain * (1.0 / jnp.sqrt(std.fan * std.summed)))

    def zeros(self, template: T) -> T:
        zeros: T = ARITHMETIC.zero(template)
        return zeros

    def split(self, n: int) -> tuple[KeyDraw, ...]:
        return tuple(KeyDraw(k) for k in jax.random.split(self.key, n))

    def each(self, template: Applicative[F, Any], init: Callable[[Draw], T]) -> Applicative[F, T]:
        return init_each(self.key, template, lambda k: init(KeyDraw(k)))

    def keyed(self, init: Callable[[jax.Array], T]) -> T:
        return init(self.key)


@dataclass(frozen=True)
class NumpyDraw:
    """Draws from one numpy ``Generator``, in the order the initialisers ask: z N(0, 1) in float64,
    scaled there, z gain / sqrt(summed) / sqrt(fan), then rounded to the template's dtype. The
    elements of a structure (heads) are drawn together, each weight for all of them in one call
    (``batch``: their axes, in front of every leaf). Host work only: nothing is compiled.

    >>> import numpy as np
    >>> from applicative import Dim, Vec
    >>> class Model(Dim): ...
    >>> w = NumpyDraw(np.random.default_rng(0)).normal(Vec.from_array(np.zeros(3), Model), Std(fan=4))
    >>> bool(np.allclose(w.data, np.random.default_rng(0).standard_normal(3) / 2))
    True
    """

    rng: np.random.Generator
    batch: tuple[int, ...] = ()

    def normal(self, template: T, std: Std) -> T:
        floating_template("NumpyDraw.normal", "the", template)
        scale = std.gain / np.sqrt(std.summed)

        def draw(leaf: Any) -> jax.Array:
            z = self.rng.standard_normal((*self.batch, *jnp.shape(leaf)))
            return jnp.asarray(z * scale / np.sqrt(std.fan), jnp.result_type(leaf))

        return jax.tree_util.tree_map(draw, template)  # type: ignore[no-any-return]

    def zeros(self, template: T) -> T:
        def zeros(leaf: Any) -> jax.Array:
            return jnp.zeros((*self.batch, *jnp.shape(leaf)), jnp.result_type(leaf))

        return jax.tree_util.tree_map(zeros, template)  # type: ignore[no-any-return]

    def split(self, n: int) -> tuple[NumpyDraw, ...]:
        return (self,) * n  # one stream: the parts draw in turn

    def each(self, template: Applicative[F, Any], init: Callable[[Draw], T]) -> Applicative[F, T]:
        axes = template.axes() if isinstance(template, Dense) else None
        if axes is None or not isinstance(template, Dense):
            kind = type(template).__name__
            raise TypeError(f"NumpyDraw.each: expected a Dense template (a Vec of heads), got a {kind}")
        stacked = init(NumpyDraw(self.rng, (*self.batch, *(axis.size for axis in axes))))
        return template.with_elements(stacked)

    def keyed(self, init: Callable[[jax.Array], T]) -> T:
        # Child generators (Generator.spawn) leave this draw's own stream where it was.
        children = self.rng.spawn(math.prod(self.batch))
        data = np.stack([child.integers(2**32, size=2, dtype=np.uint32) for child in children])
        keys = jax.random.wrap_key_data(jnp.asarray(data.reshape(*self.batch, 2)))
        run = init
        for _ in self.batch:
            run = jax.vmap(run)
        return run(keys)


def as_draw(key: jax.Array | Draw) -> Draw:
    """The draw of an initialiser's ``key`` argument: a PRNG key draws through ``KeyDraw``."""
    return KeyDraw(key) if isinstance(key, jax.Array) else key


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


def compiled_init(init: Callable[Concatenate[jax.Array | Draw, P], T]) -> Callable[Concatenate[jax.Array | Draw, P], T]:
    """Run an initialiser as one jitted computation of its key: run eagerly, its many
    small vmapped ops would each be compiled on first use (seconds for a transformer).
    Given a draw other than a key's (a ``NumpyDraw``: host work), it runs eagerly."""

    @functools.wraps(init)
    def run(key: jax.Array | Draw, *args: P.args, **kwargs: P.kwargs) -> T:
        key = key.key if isinstance(key, KeyDraw) else key
        if not isinstance(key, jax.Array):
            return init(key, *args, **kwargs)
        compiled: Callable[[jax.Array], T] = jax.jit(lambda k: init(k, *args, **kwargs))
        return compiled(key)

    return run  # type: ignore[return-value]
