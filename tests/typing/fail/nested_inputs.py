"""Nested inputs from lists keep their element types: a list mixing functions of x and of y does not
make a sequence of functions of x."""

import jax
import numpy as np

from applicative import Cheb, Dim, Vec


class X(Dim): ...


class Y(Dim): ...


class Seq(Dim): ...


f = Cheb.from_array(np.ones(4), X)
g = Cheb.from_array(np.ones(4), Y)
ok: Vec[Seq, Cheb[X, jax.Array]] = Vec.of([f, f], Seq)
mixed: Vec[Seq, Cheb[X, jax.Array]] = Vec.of([f, g], Seq)  # E: List item 1 has incompatible type "Cheb[Y, Array]"
