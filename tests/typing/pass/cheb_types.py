"""Must type-check: Chebyshev functions carry their axis tags."""

from typing import assert_type

import jax
import numpy as np

from applicative import Applicative, Cheb, ChebOf, Dim, dot, mul_mm


class X(Dim): ...


class Y(Dim): ...


class Z(Dim): ...


f = Cheb.from_array(np.ones(4), X)
g2 = Cheb.from_array(np.ones((4, 5)), X, Y)
h2 = Cheb.from_array(np.ones((5, 3)), Y, Z)
assert_type(f, Cheb[X, jax.Array])
assert_type(g2, Cheb[X, Cheb[Y, jax.Array]])
assert_type(dot(f, f), jax.Array)
product: Applicative[ChebOf[X], Applicative[ChebOf[Z], jax.Array]] = mul_mm(g2, h2)
