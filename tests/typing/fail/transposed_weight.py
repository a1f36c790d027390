"""A transposed weight: the inner dimension of x (Model) is not the outer one of w (Hidden)."""

import numpy as np

from applicative import Dim, Vec, mul_mm, mul_mv


class Seq(Dim): ...


class Model(Dim): ...


class Hidden(Dim): ...


x = Vec.from_array(np.ones((2, 3)), Seq, Model)
w_transposed = Vec.from_array(np.ones((4, 3)), Hidden, Model)
mul_mm(x, w_transposed)  # E: Cannot infer value of type parameter "Summed" of "mul_mm"
mul_mv(x, Vec.from_array(np.ones(4), Hidden))  # E: Cannot infer value of type parameter "Summed" of "mul_mv"
