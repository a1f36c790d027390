"""Two different dimension tags paired, or dotted."""

import numpy as np

from applicative import Dim, dot, vector


class Seq(Dim): ...


class Model(Dim): ...


a = vector(np.ones(3), Seq)
b = vector(np.ones(3), Model)
a.pair(b)  # E: Argument 1 to "pair" of "Vec" has incompatible type "Vec[Model, Array]"
dot(a, b)  # E: Cannot infer value of type parameter "F" of "dot"
vector(np.ones(3), int)  # E: Value of type variable "N" of "vector" cannot be "int"
