"""Two different dimension tags paired, or dotted."""

import numpy as np

from applicative import Dim, Vec, dot


class Seq(Dim): ...


class Model(Dim): ...


a = Vec.from_array(np.ones(3), Seq)
b = Vec.from_array(np.ones(3), Model)
a.pair(b)  # E: Argument 1 to "pair" of "Vec" has incompatible type "Vec[Model, Array]"
dot(a, b)  # E: Cannot infer value of type parameter "Summed" of "dot"
Vec.from_array(np.ones(3), int)  # E: Value of type variable "M" of "from_array" of "Vec" cannot be "int"
