"""A non-Vec where a Vec is required."""

import jax
import numpy as np

from applicative import Compose, DenseTree, Dim, Tree, Vec, dot, to_array


class Seq(Dim): ...


class Model(Dim): ...


def first_row(x: Vec[Seq, Vec[Model, jax.Array]]) -> jax.Array:
    return to_array(x[0])


grid = Compose(Vec.from_array(np.ones((2, 3)), Seq, Model))
first_row(grid)  # E: Argument 1 to "first_row" has incompatible type "Compose[VecOf[Seq], VecOf[Model], Array]"
grid[0]  # E: Value of type "Compose[VecOf[Seq], VecOf[Model], Array]" is not indexable


def total(x: Vec[Seq, jax.Array]) -> jax.Array:
    return x.counit()


total(Tree.from_nested((1.0, 2.0)))  # E: Argument 1 to "total" has incompatible type "Tree[float]"; expected "Vec[Seq, Array]"
total(DenseTree.from_nested((1.0, 2.0)))  # E: Argument 1 to "total" has incompatible type "DenseTree[float]"; expected "Vec[Seq, Array]"
dot(DenseTree.from_nested((1.0, 2.0)), Tree.from_nested((1.0, 2.0)))  # E: Cannot infer value of type parameter "Summed" of "dot"
