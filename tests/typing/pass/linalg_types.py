"""Must type-check under mypy --strict: the types say which dimensions meet."""

from typing import TypeVar, assert_type

import jax
import numpy as np

from applicative import (
    Applicative,
    Compose,
    ComposeOf,
    Dim,
    Vec,
    VecOf,
    as_vec,
    dot,
    linear,
    mul_mm,
    mul_mmt,
    mul_mv,
    mul_vm,
    outer,
    to_array,
)


class Seq(Dim): ...


class Model(Dim): ...


class Hidden(Dim): ...


M = TypeVar("M", bound=Dim)
N = TypeVar("N", bound=Dim)


x = Vec.from_array(np.ones((2, 3)), Seq, Model)
w = Vec.from_array(np.ones((3, 4)), Model, Hidden)
v = Vec.from_array(np.ones(3), Model)

# Results are generic structures whose brands carry every dimension (linalg knows no instance);
# as_vec narrows one back to a Vec, checked at run time.
Matrix = Applicative[VecOf[M], Applicative[VecOf[N], jax.Array]]
assert_type(x, Vec[Seq, Vec[Model, jax.Array]])
assert_type(mul_mm(x, w), Matrix[Seq, Hidden])
assert_type(mul_mv(x, v), Applicative[VecOf[Seq], jax.Array])
assert_type(mul_vm(Vec.from_array(np.ones(2), Seq), x), Applicative[VecOf[Model], jax.Array])
assert_type(mul_mmt(x, Vec.from_array(np.ones((5, 3)), Hidden, Model)), Matrix[Hidden, Seq])
assert_type(outer(Vec.from_array(np.ones(2), Seq), v), Matrix[Seq, Model])
assert_type(
    linear(Vec.from_array(np.ones((4, 3)), Hidden, Model), Vec.from_array(np.ones(4), Hidden), v),
    Applicative[VecOf[Hidden], jax.Array],
)
assert_type(dot(v, v), jax.Array)
assert_type(x.pair(x), Vec[Seq, tuple[Vec[Model, jax.Array], Vec[Model, jax.Array]]])
assert_type(as_vec(mul_mv(x, v)), Vec[Seq, jax.Array])
out: jax.Array = to_array(mul_mm(x, w))

# Generic structures: the brand encoding carries the dimensions through Compose.
grid = Compose(x)
assert_type(grid, Compose[VecOf[Seq], VecOf[Model], jax.Array])
assert_type(dot(grid, grid), jax.Array)
generic: Applicative[ComposeOf[VecOf[Seq], VecOf[Model]], jax.Array] = grid.fmap(lambda a: 2 * a)
