"""Functions of different variables do not meet."""

import jax
import numpy as np

from applicative import Cheb, Dim, Vec, dot, mul_mm


class X(Dim): ...


class Y(Dim): ...


f = Cheb.from_array(np.ones(4), X)
dot(f, Cheb.from_array(np.ones(4), Y))  # E: Cannot infer value of type parameter "Summed" of "dot"
mul_mm(Cheb.from_array(np.ones((4, 4)), X, Y), Cheb.from_array(np.ones((4, 4)), X, Y))  # E: Cannot infer value of type parameter "Summed" of "mul_mm"


def first(v: Vec[X, jax.Array]) -> jax.Array:
    return v[0]


first(f)  # E: Argument 1 to "first" has incompatible type "Cheb[X, Array]"; expected "Vec[X, Array]"
