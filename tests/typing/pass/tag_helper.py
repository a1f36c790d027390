"""A helper that builds structures for any tag: a TypeVar bound to Dim keeps each caller's tag,
so mypy checks the dimensions of what the helper returns."""

from typing import TypeVar

import jax
import numpy as np

from applicative import Applicative, Dim, Vec, VecOf, mul_mm, mul_mv

N = TypeVar("N", bound=Dim)
M = TypeVar("M", bound=Dim)


class Seq(Dim): ...


class Model(Dim): ...


def zeros(n: int, tag: type[N]) -> Vec[N, jax.Array]:
    return Vec.from_array(np.zeros(n, np.float32), tag)


def matrix(rows: int, row: type[N], cols: int, col: type[M]) -> Vec[N, Vec[M, jax.Array]]:
    return Vec.from_array(np.zeros((rows, cols), np.float32), row, col)


w = matrix(4, Seq, 3, Model)
x = zeros(3, Model)
y: Applicative[VecOf[Seq], jax.Array] = mul_mv(w, x)
product = mul_mm(w, matrix(3, Model, 2, Seq))
