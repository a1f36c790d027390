"""A non-Vec where a Vec is required."""

import jax
import numpy as np

from applicative import Compose, Dim, Vec, matrix


class Seq(Dim): ...


class Model(Dim): ...


def first_row(x: Vec[Seq, Vec[Model, jax.Array]]) -> jax.Array:
    return x[0].to_array()


grid = Compose(matrix(np.ones((2, 3)), Seq, Model))
first_row(grid)  # E: Argument 1 to "first_row" has incompatible type "Compose[VecOf[Seq], VecOf[Model], Array]"
grid.to_array()  # E: "Compose[VecOf[Seq], VecOf[Model], Array]" has no attribute "to_array"
