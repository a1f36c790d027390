"""Must type-check under mypy --strict: the types say which dimensions meet."""

from typing import assert_type

import jax
import numpy as np

from applicative import (
    Applicative,
    Compose,
    ComposeOf,
    Dim,
    Vec,
    VecOf,
    dot,
    linear,
    matrix,
    mul_mm,
    mul_mmt,
    mul_mv,
    mul_vm,
    outer,
    vector,
)


class Seq(Dim): ...


class Model(Dim): ...


class Hidden(Dim): ...


x = matrix(np.ones((2, 3)), Seq, Model)
w = matrix(np.ones((3, 4)), Model, Hidden)
v = vector(np.ones(3), Model)

assert_type(x, Vec[Seq, Vec[Model, jax.Array]])
assert_type(mul_mm(x, w), Vec[Seq, Vec[Hidden, jax.Array]])
out: jax.Array = mul_mm(x, w).to_array()
assert_type(mul_mv(x, v), Vec[Seq, jax.Array])
assert_type(mul_vm(vector(np.ones(2), Seq), x), Vec[Model, jax.Array])
assert_type(mul_mmt(x, matrix(np.ones((5, 3)), Hidden, Model)), Vec[Hidden, Vec[Seq, jax.Array]])
assert_type(outer(vector(np.ones(2), Seq), v), Vec[Seq, Vec[Model, jax.Array]])
assert_type(linear(matrix(np.ones((4, 3)), Hidden, Model), vector(np.ones(4), Hidden), v), Vec[Hidden, jax.Array])
assert_type(dot(v, v), jax.Array)
assert_type(x.pair(x), Vec[Seq, tuple[Vec[Model, jax.Array], Vec[Model, jax.Array]]])

# Generic structures: the brand encoding carries the dimensions through Compose.
grid = Compose(x)
assert_type(grid, Compose[VecOf[Seq], VecOf[Model], jax.Array])
assert_type(dot(grid, grid), jax.Array)
generic: Applicative[ComposeOf[VecOf[Seq], VecOf[Model]], jax.Array] = grid.fmap(lambda a: 2 * a)
