"""Linear algebra written once (the reference's Part 3), for any applicative with a counit.

Each operation is defined from ``fmap``, ``pair`` and ``counit`` alone; that
definition is the specification. Under ordinary arithmetic an instance may
supply a fast path (``FastLinalg``, e.g. einsum for ``Vec``); every fast path
is tested against the generic definition, which ``generic_only()`` forces.

With matrices as structures of rows (``matrix(x, R, C)`` is ``Vec[R, Vec[C, _]]``):

    dot(a, b)      = counit (fmap (uncurry mul) (pair a b))        a . b
    outer(a, b)    = fmap (\\x -> fmap (x *) b) a                    a b^T
    mul_mv(m, v)   = fmap (`dot` v) m                              m v
    mul_vm(v, m)   = counit (fmap (\\(x, row) -> fmap (x *) row) (pair v m))   v^T m
    mul_mm(a, b)   = fmap (`mul_vm` b) a                           a b
    mul_mmt(a, b)  = fmap (mul_mv a) b                             b a^T  (apply a to each row of b)
    sum_mul_mmt(a, b) = counit (fmap (uncurry mul_mmt) (pair a b))  sum_f b_f a_f^T
    linear(w, c, x) = add(c, mul_mv(w, x))                        W x + c
    add(a, b)      = fmap (uncurry add) (pair a b)                 a + b

``mul_mmt`` follows the reference (``mulMMT = fmap . mulMV``): the second
argument gives the outer structure, so attention scores are
``mul_mmt(keys, queries)``, one row per query.

>>> import numpy as np
>>> from applicative import Dim, matrix, mul_mm
>>> class Seq(Dim): ...
>>> class Model(Dim): ...
>>> class Hidden(Dim): ...
>>> x, w = np.ones((2, 3)), np.ones((3, 4))
>>> mul_mm(matrix(x, Seq, Model), matrix(w, Model, Hidden)).to_array().shape
(2, 4)
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from typing import TYPE_CHECKING, TypeVar, cast, overload

from applicative.protocols.algebra import Arithmetic, Module, Pointwise, Ring, arithmetic
from applicative.protocols.applicative import Applicative
from applicative.protocols.counit import counit
from applicative.protocols.kinds import F, G, H, I, K, L, M, N, R

if TYPE_CHECKING:
    from applicative.instances.vector import Vec

T = TypeVar("T")


class FastLinalg:
    """Optional fast paths of an instance, used under ordinary arithmetic only.

    Each method receives the remaining operands of the operation whose name it
    carries (``self`` is the first) and returns the result, or ``None`` where it
    does not apply (other element types), so that the generic definition runs.
    A fast path must raise the same dimension errors as the generic one.
    """

    def fast_dot(self, b: object) -> object | None:
        return None

    def fast_outer(self, b: object) -> object | None:
        return None

    def fast_mul_mv(self, v: object) -> object | None:
        return None

    def fast_mul_vm(self, m: object) -> object | None:
        return None

    def fast_mul_mm(self, b: object) -> object | None:
        return None

    def fast_mul_mmt(self, b: object) -> object | None:
        return None

    def fast_sum_mul_mmt(self, b: object) -> object | None:
        return None


_use_fast_paths: ContextVar[bool] = ContextVar("use_fast_paths", default=True)


@contextlib.contextmanager
def generic_only() -> Iterator[None]:
    """Within this block (at trace time, under ``jit``) every operation runs its generic definition."""
    token = _use_fast_paths.set(False)
    try:
        yield
    finally:
        _use_fast_paths.reset(token)


def _fast(ring: Ring[R], a: object, call: Callable[[FastLinalg], object | None]) -> object | None:
    if _use_fast_paths.get() and isinstance(ring, Arithmetic) and isinstance(a, FastLinalg):
        return call(a)
    return None


def _ring(ring: Ring[R] | None) -> Ring[R]:
    return ring if ring is not None else arithmetic()


@overload
def add(a: Vec[N, T], b: Vec[N, T], module: Module[T] | None = None) -> Vec[N, T]: ...
@overload
def add(a: Applicative[F, T], b: Applicative[F, T], module: Module[T] | None = None) -> Applicative[F, T]: ...
def add(a: Applicative[F, T], b: Applicative[F, T], module: Module[T] | None = None) -> Applicative[F, T]:
    """The pointwise sum of two structures (of scalars, or of anything ``module`` adds)."""
    m = module if module is not None else arithmetic()
    return a.pair(b).fmap(lambda p: m.add(p[0], p[1]))


def dot(a: Applicative[F, R], b: Applicative[F, R], ring: Ring[R] | None = None) -> R:
    """The inner product sum_i a_i b_i (the integral of a b for functions)."""
    r = _ring(ring)
    fast = _fast(r, a, lambda f: f.fast_dot(b))
    if fast is not None:
        return cast(R, fast)
    return counit(a.pair(b).fmap(lambda p: r.mul(p[0], p[1])), r)


@overload
def outer(a: Vec[N, R], b: Vec[M, R], ring: Ring[R] | None = None) -> Vec[N, Vec[M, R]]: ...
@overload
def outer(
    a: Applicative[F, R], b: Applicative[G, R], ring: Ring[R] | None = None
) -> Applicative[F, Applicative[G, R]]: ...
def outer(a: Applicative[F, R], b: Applicative[G, R], ring: Ring[R] | None = None) -> Applicative[F, Applicative[G, R]]:
    """The outer product (a b^T)_ij = a_i b_j."""
    r = _ring(ring)
    fast = _fast(r, a, lambda f: f.fast_outer(b))
    if fast is not None:
        return cast(Applicative[F, Applicative[G, R]], fast)
    return a.fmap(lambda x: b.fmap(lambda y: r.mul(x, y)))


@overload
def mul_mv(m: Vec[N, Vec[M, R]], v: Vec[M, R], ring: Ring[R] | None = None) -> Vec[N, R]: ...
@overload
def mul_mv(
    m: Applicative[F, Applicative[G, R]], v: Applicative[G, R], ring: Ring[R] | None = None
) -> Applicative[F, R]: ...
def mul_mv(
    m: Applicative[F, Applicative[G, R]], v: Applicative[G, R], ring: Ring[R] | None = None
) -> Applicative[F, R]:
    """Matrix times vector: (m v)_i = dot(m_i, v)."""
    r = _ring(ring)
    fast = _fast(r, m, lambda f: f.fast_mul_mv(v))
    if fast is not None:
        return cast(Applicative[F, R], fast)
    return m.fmap(lambda row: dot(row, v, r))


@overload
def mul_vm(v: Vec[N, R], m: Vec[N, Vec[M, R]], ring: Ring[R] | None = None) -> Vec[M, R]: ...
@overload
def mul_vm(
    v: Applicative[F, R], m: Applicative[F, Applicative[G, R]], ring: Ring[R] | None = None
) -> Applicative[G, R]: ...
def mul_vm(
    v: Applicative[F, R], m: Applicative[F, Applicative[G, R]], ring: Ring[R] | None = None
) -> Applicative[G, R]:
    """Vector times matrix: v^T m = sum_i v_i m_i, a counit over the rows."""
    r = _ring(ring)
    fast = _fast(r, v, lambda f: f.fast_mul_vm(m))
    if fast is not None:
        return cast(Applicative[G, R], fast)
    scaled_rows = v.pair(m).fmap(lambda p: p[1].fmap(lambda x: r.mul(p[0], x)))
    return counit(scaled_rows, Pointwise(r))


@overload
def mul_mm(a: Vec[N, Vec[M, R]], b: Vec[M, Vec[K, R]], ring: Ring[R] | None = None) -> Vec[N, Vec[K, R]]: ...
@overload
def mul_mm(
    a: Applicative[F, Applicative[G, R]],
    b: Applicative[G, Applicative[H, R]],
    ring: Ring[R] | None = None,
) -> Applicative[F, Applicative[H, R]]: ...
def mul_mm(
    a: Applicative[F, Applicative[G, R]],
    b: Applicative[G, Applicative[H, R]],
    ring: Ring[R] | None = None,
) -> Applicative[F, Applicative[H, R]]:
    """Matrix product: (a b)_i = mul_vm(a_i, b)."""
    r = _ring(ring)
    fast = _fast(r, a, lambda f: f.fast_mul_mm(b))
    if fast is not None:
        return cast(Applicative[F, Applicative[H, R]], fast)
    return a.fmap(lambda row: mul_vm(row, b, r))


@overload
def mul_mmt(a: Vec[N, Vec[M, R]], b: Vec[K, Vec[M, R]], ring: Ring[R] | None = None) -> Vec[K, Vec[N, R]]: ...
@overload
def mul_mmt(
    a: Applicative[F, Applicative[G, R]],
    b: Applicative[H, Applicative[G, R]],
    ring: Ring[R] | None = None,
) -> Applicative[H, Applicative[F, R]]: ...
def mul_mmt(
    a: Applicative[F, Applicative[G, R]],
    b: Applicative[H, Applicative[G, R]],
    ring: Ring[R] | None = None,
) -> Applicative[H, Applicative[F, R]]:
    """Apply ``a`` to each row of ``b``: mul_mmt(a, b)_j = mul_mv(a, b_j), i.e. b a^T."""
    r = _ring(ring)
    fast = _fast(r, a, lambda f: f.fast_mul_mmt(b))
    if fast is not None:
        return cast(Applicative[H, Applicative[F, R]], fast)
    return b.fmap(lambda row: mul_mv(a, row, r))


@overload
def sum_mul_mmt(
    a: Vec[N, Vec[M, Vec[K, R]]], b: Vec[N, Vec[L, Vec[K, R]]], ring: Ring[R] | None = None
) -> Vec[L, Vec[M, R]]: ...
@overload
def sum_mul_mmt(
    a: Applicative[F, Applicative[G, Applicative[H, R]]],
    b: Applicative[F, Applicative[I, Applicative[H, R]]],
    ring: Ring[R] | None = None,
) -> Applicative[I, Applicative[G, R]]: ...
def sum_mul_mmt(
    a: Applicative[F, Applicative[G, Applicative[H, R]]],
    b: Applicative[F, Applicative[I, Applicative[H, R]]],
    ring: Ring[R] | None = None,
) -> Applicative[I, Applicative[G, R]]:
    """sum_f mul_mmt(a_f, b_f): contract over the outer structure and the innermost one.

    Multi-head attention's output projection, sum over heads of W_h o_h (W_o times the
    concatenated heads): written as one contraction, it is one matmul for a Vec.
    """
    r = _ring(ring)
    fast = _fast(r, a, lambda f: f.fast_sum_mul_mmt(b))
    if fast is not None:
        return cast(Applicative[I, Applicative[G, R]], fast)
    products = a.pair(b).fmap(lambda p: mul_mmt(p[0], p[1], r))
    lifted: Pointwise[I, Applicative[G, R]] = Pointwise(Pointwise(r))
    return counit(products, lifted)


@overload
def linear(w: Vec[N, Vec[M, R]], c: Vec[N, R], x: Vec[M, R], ring: Ring[R] | None = None) -> Vec[N, R]: ...
@overload
def linear(
    w: Applicative[G, Applicative[F, R]],
    c: Applicative[G, R],
    x: Applicative[F, R],
    ring: Ring[R] | None = None,
) -> Applicative[G, R]: ...
def linear(
    w: Applicative[G, Applicative[F, R]],
    c: Applicative[G, R],
    x: Applicative[F, R],
    ring: Ring[R] | None = None,
) -> Applicative[G, R]:
    """The affine map x -> W x + c (weights indexed [out][in], as in the reference)."""
    r = _ring(ring)
    return add(c, mul_mv(w, x, r), r)
