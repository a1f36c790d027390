"""Linear algebra written once (the reference's Part 3), for any applicative with a counit.

Each operation sums over one structure (two for ``sum_mul_mmt``); its type names that brand
``Summed``, a type variable bound to ``Measured``, so mypy rejects a structure with no counit there.

Each operation is defined here from ``fmap``, ``pair`` and ``counit`` alone. Under
ordinary arithmetic, when its operands are ``Dense`` structures of scalars
(``applicative.protocols.dense``), it is computed instead by one dense
formula (``applicative.fast_paths``: one einsum), the coordinates contracted through the Gram
matrix G of the contracted axes (the identity for a Vec, so there the two are equal). With
matrices as structures of rows (``Vec.from_array(x, Row, Col)`` is ``Vec[Row, Vec[Col, _]]``):

    operation          generic definition                                     dense formula
    dot(a, b)          counit (fmap (uncurry mul) (pair a b))                 a^T G b
    outer(a, b)        fmap (\\x -> fmap (x *) b) a                             a b^T
    mul_mv(m, v)       fmap (`dot` v) m                                       M G v
    mul_vm(v, m)       counit (fmap (\\(x, row) -> fmap (x *) row) (pair v m))  v^T G M
    mul_mm(a, b)       fmap (`mul_vm` b) a                                    A G B
    mul_mmt(a, b)      fmap (mul_mv a) b                                      B G A^T  (a applied to each row of b)
    each_mul_mmt(a, b) fmap (`mul_mmt` b) a                                   (B G A_i^T)_i
    sum_mul_mmt(a, b)  counit (fmap (uncurry mul_mmt) (pair a b))             sum_f B_f G A_f^T
    add(a, b)          fmap (uncurry add) (pair a b)                          a + b
    scale(r, a)        fmap (r *) a                                           r a
    linear(w, c, x)    add c (mul_mv w x)

Gram matrices fold into the first operand (the weights of a linear map, so
that under ``vmap`` they are applied once). How each instance's dense
formula relates to its generic definition is stated by the instance; every
relation is tested, and so is that the dense formula actually runs
(``record_fast_paths``). ``generic_only()`` forces the generic definitions.

``mul_mmt`` follows the reference (``mulMMT = fmap . mulMV``): the second
argument gives the outer structure, so attention scores are
``mul_mmt(keys, queries)``, one row per query.

Every operation checks its operands' nesting at trace time (``applicative.operands``: Python on
shapes, nothing added to a compiled function): a non-structure (an array where a Vec belongs), a
vector where a matrix belongs, or, under ordinary arithmetic, a matrix where a vector belongs raises
a TypeError naming the operation and the argument. Nesting is visible up front through ``Dense``
structures; in other structures (trees, distributions) the nested operations of the generic
definition check theirs (``mul_mv`` calls ``dot`` on each row), and ``dot``'s product refuses
structures, pointing to ``Compose`` (which takes a structure of structures as one structure).
``scale`` takes a scalar r (0-d), never an array that would broadcast against the coordinates.

>>> import numpy as np
>>> from applicative import Dim, Vec, mul_mm, to_array
>>> class Seq(Dim): ...
>>> class Model(Dim): ...
>>> class Hidden(Dim): ...
>>> x, w = Vec.from_array(np.ones((2, 3)), Seq, Model), Vec.from_array(np.ones((3, 4)), Model, Hidden)
>>> to_array(mul_mm(x, w)).shape
(2, 4)
"""

from __future__ import annotations

import contextlib
import operator
from collections.abc import Iterator
from typing import TypeVar, cast

import jax.numpy as jnp

from applicative.fast_paths import FAST_PATH_LOG, USE_FAST_PATHS, dense_formula, on_coordinates, shaped
from applicative.operands import alike, check_nesting, scalars
from applicative.protocols.algebra import Module, Pointwise, Real, Ring, arithmetic
from applicative.protocols.applicative import Applicative
from applicative.protocols.integration import counit
from applicative.protocols.kinds import F, G, H, I, R, Summed, Summed2

__all__ = [
    "add",
    "dot",
    "each_mul_mmt",
    "generic_only",
    "linear",
    "mul_mm",
    "mul_mmt",
    "mul_mv",
    "mul_vm",
    "outer",
    "record_fast_paths",
    "scale",
    "sum_mul_mmt",
]

T = TypeVar("T")


def dot(a: Applicative[Summed, R], b: Applicative[Summed, R], ring: Ring[R] | None = None) -> R:
    """The inner product sum_i a_i b_i (the integral of a b for functions)."""
    r = _ring(ring)
    check_nesting("dot", r, ("a", a, 1), ("b", b, 1))
    if (fast := dense_formula("dot", "f,f->", r, a, b)) is not None:
        return cast(R, fast[0])

    def product(p: tuple[R, R]) -> R:
        scalars("dot", r, *p)
        return r.mul(p[0], p[1])

    return counit(a.pair(b).fmap(product), r)


def outer(a: Applicative[F, R], b: Applicative[G, R], ring: Ring[R] | None = None) -> Applicative[F, Applicative[G, R]]:
    """The outer product (a b^T)_ij = a_i b_j."""
    r = _ring(ring)
    check_nesting("outer", r, ("a", a, 1), ("b", b, 1))
    if (fast := dense_formula("outer", "f,g->fg", r, a, b)) is not None:
        return shaped(*fast)
    return a.fmap(lambda x: b.fmap(lambda y: r.mul(x, y)))


def mul_mv(
    m: Applicative[F, Applicative[Summed, R]], v: Applicative[Summed, R], ring: Ring[R] | None = None
) -> Applicative[F, R]:
    """Matrix times vector: (m v)_i = dot(m_i, v)."""
    r = _ring(ring)
    check_nesting("mul_mv", r, ("m", m, 2), ("v", v, 1))
    if (fast := dense_formula("mul_mv", "fg,g->f", r, m, v)) is not None:
        return shaped(*fast)
    return m.fmap(lambda row: dot(row, v, r))


def mul_vm(
    v: Applicative[Summed, R], m: Applicative[Summed, Applicative[G, R]], ring: Ring[R] | None = None
) -> Applicative[G, R]:
    """Vector times matrix: v^T m = sum_i v_i m_i, a counit over the rows."""
    r = _ring(ring)
    check_nesting("mul_vm", r, ("v", v, 1), ("m", m, 2))
    if (fast := dense_formula("mul_vm", "f,fg->g", r, v, m)) is not None:
        return shaped(*fast)
    scaled_rows = v.pair(m).fmap(lambda p: p[1].fmap(lambda x: r.mul(p[0], x)))
    return counit(scaled_rows, Pointwise(r))


def mul_mm(
    a: Applicative[F, Applicative[Summed, R]], b: Applicative[Summed, Applicative[H, R]], ring: Ring[R] | None = None
) -> Applicative[F, Applicative[H, R]]:
    """Matrix product: (a b)_i = mul_vm(a_i, b)."""
    r = _ring(ring)
    check_nesting("mul_mm", r, ("a", a, 2), ("b", b, 2))
    if (fast := dense_formula("mul_mm", "fg,gh->fh", r, a, b)) is not None:
        return shaped(*fast)
    return a.fmap(lambda row: mul_vm(row, b, r))


def mul_mmt(
    a: Applicative[F, Applicative[Summed, R]], b: Applicative[H, Applicative[Summed, R]], ring: Ring[R] | None = None
) -> Applicative[H, Applicative[F, R]]:
    """Apply ``a`` to each row of ``b``: mul_mmt(a, b)_j = mul_mv(a, b_j), i.e. b a^T."""
    r = _ring(ring)
    check_nesting("mul_mmt", r, ("a", a, 2), ("b", b, 2))
    if (fast := dense_formula("mul_mmt", "fg,hg->hf", r, a, b)) is not None:
        return shaped(*fast)
    return b.fmap(lambda row: mul_mv(a, row, r))


def each_mul_mmt(
    a: Applicative[I, Applicative[F, Applicative[Summed, R]]],
    b: Applicative[H, Applicative[Summed, R]],
    ring: Ring[R] | None = None,
) -> Applicative[I, Applicative[H, Applicative[F, R]]]:
    """Each matrix of ``a`` applied to each row of ``b``: each_mul_mmt(a, b)_i = mul_mmt(a_i, b).

    Multi-head attention's projections, every head's map applied to one sequence: one contraction, one
    matmul for a Vec of heads. It produces the heads' features first and the sequence last, transposed
    after, as a hand-written einsum over the heads does: under a batch's ``vmap`` the compiler then lays
    out the sequence for the matmul (in the kernel that computes it), where ``fmap`` of ``mul_mmt``
    copies every head's weights.
    """
    r = _ring(ring)
    check_nesting("each_mul_mmt", r, ("a", a, 3), ("b", b, 2))
    if (fast := dense_formula("each_mul_mmt", "ifg,hg->ihf", r, a, b, contract_as="ifh")) is not None:
        return shaped(*fast)
    return a.fmap(lambda m: mul_mmt(m, b, r))


def sum_mul_mmt(
    a: Applicative[Summed, Applicative[G, Applicative[Summed2, R]]],
    b: Applicative[Summed, Applicative[I, Applicative[Summed2, R]]],
    ring: Ring[R] | None = None,
) -> Applicative[I, Applicative[G, R]]:
    """sum_f mul_mmt(a_f, b_f): contract over the outer structure and the innermost one.

    Multi-head attention's output projection, sum over heads of W_h o_h (W_o times the
    concatenated heads): written as one contraction, it is one matmul for a Vec.
    """
    r = _ring(ring)
    check_nesting("sum_mul_mmt", r, ("a", a, 3), ("b", b, 3))
    if (fast := dense_formula("sum_mul_mmt", "fgh,fih->ig", r, a, b)) is not None:
        return shaped(*fast)
    products = a.pair(b).fmap(lambda p: mul_mmt(p[0], p[1], r))
    lifted: Pointwise[I, Applicative[G, R]] = Pointwise(Pointwise(r))
    return counit(products, lifted)


def linear(
    w: Applicative[G, Applicative[Summed, R]],
    c: Applicative[G, R],
    x: Applicative[Summed, R],
    ring: Ring[R] | None = None,
) -> Applicative[G, R]:
    """The affine map x -> W x + c (weights indexed [out][in], as in the reference)."""
    r = _ring(ring)
    check_nesting("linear", r, ("w", w, 2), ("c", c, 1), ("x", x, 1))
    return add(c, mul_mv(w, x, r), r)


def add(a: Applicative[F, T], b: Applicative[F, T], module: Module[T] | None = None) -> Applicative[F, T]:
    """The pointwise sum of two structures (of scalars, or of anything ``module`` adds)."""
    m = module if module is not None else arithmetic()
    check_nesting("add", None, ("a", a, 1), ("b", b, 1))
    if (fast := on_coordinates("add", m, operator.add, a, b)) is not None:
        return cast(Applicative[F, T], fast)
    return a.pair(b).fmap(lambda p: m.add(*alike("add", m, p[0], p[1])))


def scale(r: Real, a: Applicative[F, T], module: Module[T] | None = None) -> Applicative[F, T]:
    """The structure scaled by a real: fmap (scale r) a. ``r`` is a scalar (a number or a 0-d array)."""
    m = module if module is not None else arithmetic()
    if isinstance(r, Applicative) or jnp.ndim(r) != 0:
        got = type(r).__name__ if isinstance(r, Applicative) else f"an array of shape {jnp.shape(r)}"
        raise TypeError(f"scale: r must be a scalar (a number or a 0-d array), got {got}")
    check_nesting("scale", None, ("a", a, 1))
    if (fast := on_coordinates("scale", m, lambda leaf: r * leaf, a)) is not None:
        return cast(Applicative[F, T], fast)
    return a.fmap(lambda x: m.scale(r, x))


# Switching the dense formulas off, and listing those that ran.


@contextlib.contextmanager
def generic_only() -> Iterator[None]:
    """Within this block every operation runs its generic definition.

    It acts when a function is traced: a function that ``jax.jit`` has traced before keeps its
    compiled path (JAX caches traces per function), so jit a fresh one, ``jax.jit(lambda x: f(x))``.
    """
    token = USE_FAST_PATHS.set(False)
    try:
        yield
    finally:
        USE_FAST_PATHS.reset(token)


@contextlib.contextmanager
def record_fast_paths() -> Iterator[list[str]]:
    """Within this block (at trace time), the names of the operations that ran their dense formula.

    >>> import numpy as np
    >>> from applicative import Dim, Vec, dot
    >>> class Seq(Dim): ...
    >>> v = Vec.from_array(np.ones(3), Seq)
    >>> with record_fast_paths() as taken:
    ...     _ = dot(v, v)
    >>> taken
    ['dot']
    """
    taken: list[str] = []
    token = FAST_PATH_LOG.set(taken)
    try:
        yield taken
    finally:
        FAST_PATH_LOG.reset(token)


def _ring(ring: Ring[R] | None) -> Ring[R]:
    return ring if ring is not None else arithmetic()
