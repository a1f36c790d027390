"""``Vec[N, A]``: fixed-length vectors, stored stacked as a JAX pytree.

A ``Vec`` of ``size`` elements stores the element pytree once, with an extra
leading axis of length ``size`` on every leaf (``matrix(x, R, C)`` keeps ``x``
as it is). Then

    fmap f   = vmap f                     pair x y = (x, y) leafwise
    pure b   = b broadcast to size        counit x = sum over the leading axis

The dimension tag ``N`` is a ``Dim`` subclass, a type to mypy and a value at
run time: pairing vectors of different tags or sizes raises an error naming
both. Under ordinary arithmetic the derived linear algebra uses matmul.

>>> import numpy as np
>>> from applicative import Dim, vector, dot
>>> class Seq(Dim): ...
>>> float(dot(vector(np.array([1.0, 2.0]), Seq), vector(np.array([3.0, 4.0]), Seq)))
11.0
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic

import jax
import jax.numpy as jnp
from jax.typing import ArrayLike

from applicative.linalg import FastLinalg
from applicative.protocols.algebra import Module, arithmetic
from applicative.protocols.applicative import Applicative
from applicative.protocols.counit import Counit
from applicative.protocols.kinds import A_co, B, Dim, M, N, check_tag
from applicative.protocols.stacked import element, stacked_size, weighted_sum


class VecOf(Generic[N]):
    """Brand of ``Vec`` with tag ``N``: ``Vec[N, A]`` is an ``Applicative[VecOf[N], A]``."""


@jax.tree_util.register_pytree_node_class
@dataclass(frozen=True, eq=False)
class Vec(Applicative[VecOf[N], A_co], Counit[VecOf[N], A_co], FastLinalg):
    """``size`` elements of type ``A`` along the dimension ``tag``."""

    data: A_co
    """The element pytree with an extra leading axis of length ``size`` on every leaf."""
    tag: type[N]
    size: int

    @staticmethod
    def stack(data: B, tag: type[M]) -> Vec[M, B]:
        """The Vec whose elements are ``data`` sliced along the leading axis of every leaf."""
        check_tag(tag, "Vec.stack")
        return Vec(data, tag, stacked_size(data, f"Vec.stack[{tag.__name__}]"))

    # Functor, Applicative, Counit

    def fmap(self, f: Callable[[A_co], B]) -> Vec[N, B]:
        return Vec(jax.vmap(f, axis_size=self.size)(self.data), self.tag, self.size)

    def pair(self, other: Applicative[VecOf[N], B]) -> Vec[N, tuple[A_co, B]]:
        if not isinstance(other, Vec):
            raise TypeError(f"pair: Vec[{self.tag.__name__}] paired with {type(other).__name__}")
        _check_same_dim("pair", (self.tag, self.size), (other.tag, other.size))
        return Vec((self.data, other.data), self.tag, self.size)

    def pure(self, b: B) -> Vec[N, B]:
        def broadcast(leaf: ArrayLike) -> jax.Array:
            return jnp.broadcast_to(leaf, (self.size, *jnp.shape(leaf)))

        return Vec(jax.tree_util.tree_map(broadcast, b), self.tag, self.size)

    def counit(self, module: Module[A_co] | None = None) -> A_co:
        """sum_i x_i (the counting measure)."""
        return weighted_sum(module if module is not None else arithmetic(), None, self.data, self.size)

    def __getitem__(self, i: int) -> A_co:
        """The ``i``-th element."""
        return element(self.data, i)

    def to_array(self) -> jax.Array:
        """The stacked array of a Vec (of Vecs ...) of arrays: ``matrix(x, R, C).to_array()`` is x."""
        leaves = jax.tree_util.tree_leaves(self.data)
        if len(leaves) != 1:
            raise ValueError(f"to_array: Vec[{self.tag.__name__}] holds {len(leaves)} arrays, not one")
        return jnp.asarray(leaves[0])

    def __repr__(self) -> str:
        return f"Vec[{self.tag.__name__}](size={self.size}, data={self.data!r})"

    # Pytree

    def tree_flatten(self) -> tuple[tuple[A_co], tuple[type[N], int]]:
        return (self.data,), (self.tag, self.size)

    @classmethod
    def tree_unflatten(cls, aux: tuple[type[N], int], children: tuple[A_co]) -> Vec[N, A_co]:
        return cls(children[0], *aux)

    # Fast paths under ordinary arithmetic (each tested against the generic
    # definition): a Vec of scalars is a 1-D array, a Vec of Vecs of scalars a
    # 2-D array, and the derived operations are matmuls.

    def fast_dot(self, b: object) -> jax.Array | None:
        if (x := _dense1(self)) is None or (y := _dense1(b)) is None:
            return None
        _check_same_dim("dot", x[1], y[1])
        return jnp.dot(x[0], y[0])

    def fast_outer(self, b: object) -> Vec[Dim, Vec[Dim, jax.Array]] | None:
        if (x := _dense1(self)) is None or (y := _dense1(b)) is None:
            return None
        return _vec2(jnp.outer(x[0], y[0]), x[1], y[1])

    def fast_mul_mv(self, v: object) -> Vec[Dim, jax.Array] | None:
        if (m := _dense2(self)) is None or (x := _dense1(v)) is None:
            return None
        _check_same_dim("mul_mv", m[2], x[1])
        # Contract x's axis with W's columns (x W^T, no transpose op): under vmap
        # the batched operand is then on the left and its axes come out first.
        return Vec(jnp.tensordot(x[0], m[0], axes=(0, 1)), *m[1])

    def fast_mul_vm(self, m: object) -> Vec[Dim, jax.Array] | None:
        if (x := _dense1(self)) is None or (w := _dense2(m)) is None:
            return None
        _check_same_dim("mul_vm", x[1], w[1])
        return Vec(x[0] @ w[0], *w[2])

    def fast_mul_mm(self, b: object) -> Vec[Dim, Vec[Dim, jax.Array]] | None:
        if (x := _dense2(self)) is None or (w := _dense2(b)) is None:
            return None
        _check_same_dim("mul_mm", x[2], w[1])
        return _vec2(x[0] @ w[0], x[1], w[2])

    def fast_mul_mmt(self, b: object) -> Vec[Dim, Vec[Dim, jax.Array]] | None:
        if (x := _dense2(self)) is None or (w := _dense2(b)) is None:
            return None
        _check_same_dim("mul_mmt", x[2], w[2])
        return _vec2(jnp.tensordot(w[0], x[0], axes=(1, 1)), w[1], x[1])

    def fast_sum_mul_mmt(self, b: object) -> Vec[Dim, Vec[Dim, jax.Array]] | None:
        if (x := _dense3(self)) is None or (w := _dense3(b)) is None:
            return None
        _check_same_dim("sum_mul_mmt", x[1], w[1])
        _check_same_dim("sum_mul_mmt", x[3], w[3])
        return _vec2(jnp.tensordot(w[0], x[0], axes=((0, 2), (0, 2))), w[2], x[2])


Axis = tuple[type, int]
"""A dimension at run time: its tag and size."""


def _check_same_dim(op: str, axis: Axis, other: Axis) -> None:
    (tag, size), (other_tag, other_size) = axis, other
    if tag is not other_tag or size != other_size:
        raise ValueError(
            f"{op}: dimension mismatch: Vec[{tag.__name__}] of size {size} "
            f"vs Vec[{other_tag.__name__}] of size {other_size}"
        )


def _dense1(v: object) -> tuple[jax.Array, Axis] | None:
    """A Vec of scalars as (1-D array, axis), else None."""
    if isinstance(v, Vec) and isinstance(v.data, jax.Array) and v.data.ndim == 1:
        return v.data, (v.tag, v.size)
    return None


def _dense2(m: object) -> tuple[jax.Array, Axis, Axis] | None:
    """A Vec of Vecs of scalars as (2-D array, row axis, column axis), else None."""
    if isinstance(m, Vec) and isinstance(m.data, Vec) and isinstance(m.data.data, jax.Array) and m.data.data.ndim == 2:
        return m.data.data, (m.tag, m.size), (m.data.tag, m.data.size)
    return None


def _dense3(t: object) -> tuple[jax.Array, Axis, Axis, Axis] | None:
    """A Vec of Vecs of Vecs of scalars as (3-D array, its three axes), else None."""
    if not (isinstance(t, Vec) and isinstance(t.data, Vec) and isinstance(u := t.data.data, Vec)):
        return None
    if isinstance(u.data, jax.Array) and u.data.ndim == 3:
        return u.data, (t.tag, t.size), (t.data.tag, t.data.size), (u.tag, u.size)
    return None


def _vec2(x: jax.Array, rows: Axis, cols: Axis) -> Vec[Dim, Vec[Dim, jax.Array]]:
    return Vec(Vec(x, *cols), *rows)


def as_vec(x: Applicative[VecOf[N], B]) -> Vec[N, B]:
    """The Vec behind a generic result whose brand says it is one (checked): ``as_vec(model(x)).to_array()``."""
    if not isinstance(x, Vec):
        raise TypeError(f"as_vec: expected a Vec, got {type(x).__name__}")
    return x


def vector(x: ArrayLike, tag: type[N]) -> Vec[N, jax.Array]:
    """The Vec of the entries of a 1-D array along dimension ``tag``."""
    check_tag(tag, "vector")
    x = jnp.asarray(x)
    if x.ndim != 1:
        raise ValueError(f"vector({tag.__name__}) needs a 1-D array, got shape {x.shape}")
    return Vec(x, tag, x.shape[0])


def matrix(x: ArrayLike, rows: type[N], cols: type[M]) -> Vec[N, Vec[M, jax.Array]]:
    """The Vec of rows of a 2-D array: ``matrix(x, R, C)[i]`` is row i along ``C``."""
    check_tag(rows, "matrix")
    check_tag(cols, "matrix")
    x = jnp.asarray(x)
    if x.ndim != 2:
        raise ValueError(f"matrix({rows.__name__}, {cols.__name__}) needs a 2-D array, got shape {x.shape}")
    return Vec(Vec(x, cols, x.shape[1]), rows, x.shape[0])
