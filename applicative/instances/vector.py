"""``Vec[N, A]``: fixed-length vectors, stored stacked as a JAX pytree.

A ``Vec`` of ``size`` elements stores the element pytree once, with an extra
leading axis of length ``size`` on every leaf (a Vec of Vecs of scalars holds
one 2-D array). Then

    fmap f   = vmap f                     pair x y = (x, y) leafwise
    pure b   = b broadcast to size        counit x = sum over the leading axis

The dimension tag ``N`` is a ``Dim`` subclass, a type to mypy and a value at
run time: pairing vectors of different tags or sizes raises an error naming
both. As a ``Dense`` structure a Vec is one axis with the identity Gram
matrix (the counting measure), so the linear algebra's dense formulas are
exactly its generic definitions, computed as matmuls. ``f + g``, ``f - g``, ``-f``, ``r * f`` and
``f / r`` are the pointwise Module (``applicative.protocols.operators``): vectors of one tag and size.

Built with ``Vec.from_array(x, *tags)`` (one tag per leading axis),
``Vec.of(elements, tag)`` (a list of equal-shaped structures: a Vec of
functions, of trees) or ``Vec.stack(elements, tag)`` (already stacked); read with ``v[i]`` and ``to_array(v)``.
Elements keep their dtype (bool masks and integer token ids are Vecs too). Rejected, with an error
naming the constructor: data that is not numbers (object or string dtypes, ragged lists), a tag that
is not a proper subclass of ``Dim``, one tag too many or too few. An empty Vec (size 0) is
legitimate: its counit is zero. ``Vec(data, tag, size)`` itself is unchecked (JAX rebuilds Vecs
through it); an operation on a Vec whose data does not have ``size`` elements raises.

>>> import numpy as np
>>> from applicative import Dim, dot, to_array
>>> class Seq(Dim): ...
>>> class Model(Dim): ...
>>> float(dot(Vec.from_array(np.array([1.0, 2.0]), Seq), Vec.from_array(np.array([3.0, 4.0]), Seq)))
11.0
>>> to_array(Vec.from_array(np.arange(6.0).reshape(2, 3), Seq, Model)[1]).tolist()
[3.0, 4.0, 5.0]
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Generic, overload

import jax
import jax.numpy as jnp
import numpy as np
from jax.typing import ArrayLike

from applicative.protocols.algebra import Module, arithmetic
from applicative.protocols.applicative import Applicative
from applicative.protocols.dense import Axis, Dense
from applicative.protocols.integration import Counit
from applicative.protocols.kinds import A_co, B, Dim, K, M, Measured, N, check_tag
from applicative.protocols.operators import VectorSpace
from applicative.records import record, static
from applicative.stacked import check_stacked, element, nested, numeric, stack, stacked_size, vmap, weighted_sum

__all__ = ["Vec", "VecOf", "as_vec"]


class VecOf(Measured, Generic[N]):
    """Brand of ``Vec`` with tag ``N``: ``Vec[N, A]`` is an ``Applicative[VecOf[N], A]``."""


@record
class Vec(Dense[VecOf[N], A_co], Counit[VecOf[N], A_co], VectorSpace):
    """``size`` elements of type ``A`` along the dimension ``tag``."""

    data: A_co
    """The element pytree with an extra leading axis of length ``size`` on every leaf."""
    tag: type[N] = static()
    size: int = static()

    # Construction

    @staticmethod
    def stack(elements: B, tag: type[M]) -> Vec[M, B]:
        """The Vec whose elements are ``elements`` sliced along the leading axis of every leaf."""
        check_tag(tag, "Vec.stack")
        what = f"Vec.stack[{tag.__name__}]"
        data = jax.tree_util.tree_map(lambda leaf: numeric(leaf, what), elements)
        return Vec(data, tag, stacked_size(data, what))

    @staticmethod
    def of(elements: Sequence[B], tag: type[M]) -> Vec[M, B]:
        """The Vec of ``elements``, a list of equal-shaped structures or arrays (``Vec.of([f, g], Seq)``:
        a sequence of two functions), stacked for you (``applicative.stacked.stack``)."""
        check_tag(tag, "Vec.of")
        return Vec.stack(stack(elements, f"Vec.of[{tag.__name__}]"), tag)

    @overload
    @staticmethod
    def from_array(x: ArrayLike, t1: type[M], /) -> Vec[M, jax.Array]: ...
    @overload
    @staticmethod
    def from_array(x: ArrayLike, t1: type[M], t2: type[N], /) -> Vec[M, Vec[N, jax.Array]]: ...
    @overload
    @staticmethod
    def from_array(x: ArrayLike, t1: type[M], t2: type[N], t3: type[K], /) -> Vec[M, Vec[N, Vec[K, jax.Array]]]: ...
    @staticmethod
    def from_array(x: ArrayLike, *tags: type[Dim]) -> Any:
        """The nested Vec of an array with one tag per axis: ``Vec.from_array(x, Row, Column)[i]`` is row i."""
        return nested("Vec.from_array", numeric(x, "Vec.from_array"), tags, Vec)

    # Functor, Applicative, Counit

    def fmap(self, f: Callable[[A_co], B]) -> Vec[N, B]:
        check_stacked(self.data, self.size, f"Vec[{self.tag.__name__}].fmap")
        return Vec(vmap(f, self.data, size=self.size), self.tag, self.size)

    def pair(self, other: Applicative[VecOf[N], B]) -> Vec[N, tuple[A_co, B]]:
        if not isinstance(other, Vec):
            raise TypeError(f"pair: Vec[{self.tag.__name__}] paired with {type(other).__name__}")
        if other.tag is not self.tag or other.size != self.size:
            raise ValueError(f"pair: dimension mismatch: {self.axes()[0]} vs {other.axes()[0]}")
        return Vec((self.data, other.data), self.tag, self.size)

    def pure(self, b: B) -> Vec[N, B]:
        def broadcast(leaf: ArrayLike) -> jax.Array:
            return jnp.broadcast_to(leaf, (self.size, *jnp.shape(leaf)))

        return Vec(jax.tree_util.tree_map(broadcast, b), self.tag, self.size)

    def counit(self, module: Module[A_co] | None = None) -> A_co:
        """sum_i x_i (the counting measure)."""
        check_stacked(self.data, self.size, f"Vec[{self.tag.__name__}].counit")
        return weighted_sum(module if module is not None else arithmetic(), None, self.data, self.size)

    # Dense: one nodal axis, the standard basis (identity Gram matrix). The dense formulas are the
    # generic definitions exactly.

    def axes(self) -> tuple[Axis]:
        return (Axis("Vec", self.tag, self.size, nodal=True),)

    def elements(self) -> A_co:
        return self.data

    def with_elements(self, elements: B) -> Vec[N, B]:
        return Vec(elements, self.tag, self.size)

    # Access

    def __getitem__(self, i: int) -> A_co:
        """The ``i``-th element (``i`` in [-size, size): JAX would clamp any other index silently)."""
        if isinstance(i, int | np.integer) and not -self.size <= i < self.size:
            raise IndexError(f"Vec[{self.tag.__name__}]: index {i} is out of range for size {self.size}")
        check_stacked(self.data, self.size, f"Vec[{self.tag.__name__}][{i}]")
        return element(self.data, i)

    def __repr__(self) -> str:
        return f"Vec[{self.tag.__name__}](size={self.size}, data={self.data!r})"


def as_vec(x: Applicative[VecOf[N], B]) -> Vec[N, B]:
    """The Vec behind a generic result whose brand says it is one (checked): ``as_vec(model(x))[0]``."""
    if not isinstance(x, Vec):
        raise TypeError(f"as_vec: expected a Vec, got {type(x).__name__}")
    return x
