"""The trap: a helper typed ``tag: type[Dim]`` returns Vec[Dim, ...], every tag the same to mypy, so a
correct product is rejected, and the message names Dim, not the dimensions. Use a TypeVar bound to Dim
(typing/pass/tag_helper.py)."""

import jax
import numpy as np

from applicative import Applicative, Dim, Vec, VecOf, mul_mv


class Seq(Dim): ...


class Model(Dim): ...


def zeros(n: int, tag: type[Dim]) -> Vec[Dim, jax.Array]:
    return Vec.from_array(np.zeros(n, np.float32), tag)


def matrix(rows: int, row: type[Dim], cols: int, col: type[Dim]) -> Vec[Dim, Vec[Dim, jax.Array]]:
    return Vec.from_array(np.zeros((rows, cols), np.float32), row, col)


w, x = matrix(4, Seq, 3, Model), zeros(3, Model)
y: Applicative[VecOf[Seq], jax.Array] = mul_mv(w, x)  # E: has incompatible type "Vec[Dim, Vec[Dim, Array]]"
