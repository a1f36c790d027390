"""ARITHMETIC where a Module is expected: as a default, lifted pointwise, in the algebra law suite."""

import hypothesis.strategies as st
import jax

from applicative import ARITHMETIC, Dim, Module, Pointwise, Vec, VecOf
from applicative.laws import check_algebra_laws


class X(Dim): ...


def total(xs: list[float], module: Module[float] | None = None) -> float:
    algebra = module or ARITHMETIC  # a Module[float]
    result = algebra.zero(0.0)
    for x in xs:
        result = algebra.add(result, x)
    return result


lifted: Pointwise[VecOf[X], jax.Array] = Pointwise(ARITHMETIC)
check_algebra_laws(ARITHMETIC, st.floats(-1.0, 1.0), max_examples=5)
# Pointwise's structure brand is not in its argument: name it once (above), then pass the lifted module.
check_algebra_laws(lifted, st.just(Vec.from_array(jax.numpy.ones(3), X)), max_examples=1)
