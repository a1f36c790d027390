"""``Linear``: the affine map x -> W x + b between two structures (the reference's ``linear``)."""

from __future__ import annotations

from typing import Generic, TypeVar

import jax
import jax.numpy as jnp
from jax import Array

from applicative.linalg import add, check_nesting, mul_mmt, mul_mv, outer
from applicative.nn._base import Matrix, floating_template, measure, normal_like
from applicative.protocols.algebra import Module, arithmetic
from applicative.protocols.applicative import Applicative
from applicative.protocols.kinds import Measured
from applicative.records import record

__all__ = ["Linear"]

In = TypeVar("In", bound=Measured)  # summed over: a structure with a counit
Out = TypeVar("Out")
S = TypeVar("S")


@record
class Linear(Generic[In, Out]):
    """(W x + b)_o = sum_i W_oi x_i + b_o, with ``weight`` indexed [out][in].

    ``linear(x)`` maps one element; ``linear.each(xs)`` maps every element of a structure, as
    linear algebra (the reference's ``mulMMT``), never as ``fmap`` of a closure: on a ``Cheb``
    sequence that is one contraction of coefficients, where ``fmap`` would sample and transform.
    """

    weight: Applicative[Out, Applicative[In, Array]]
    bias: Applicative[Out, Array] | None

    def __call__(self, x: Applicative[In, Array]) -> Applicative[Out, Array]:
        y = mul_mv(self.weight, x)
        return y if self.bias is None else add(y, self.bias)

    def each(self, xs: Matrix[S, In]) -> Matrix[S, Out]:
        """fmap self xs, as mul_mmt(W, xs) + pure b (b is added to every element)."""
        y = mul_mmt(self.weight, xs)
        return y if self.bias is None else add(y, y.pure(self.bias))

    @staticmethod
    def init(
        key: jax.Array, inputs: Applicative[In, Array], outputs: Applicative[Out, Array], *, bias: bool = True
    ) -> Linear[In, Out]:
        """Weights N(0, 1 / measure(inputs)) (LeCun), zero bias; ``inputs``/``outputs`` are templates,
        structures of floating scalars (anything else raises, naming the template)."""
        check_nesting("Linear.init", arithmetic(), ("inputs", inputs, 1), ("outputs", outputs, 1))
        floating_template("Linear.init", "inputs", inputs)
        floating_template("Linear.init", "outputs", outputs)
        weight = normal_like(key, outer(outputs, inputs), 1.0 / jnp.sqrt(measure(inputs)))
        zeros: Module[Applicative[Out, Array]] = arithmetic()
        return Linear(weight, zeros.zero(outputs) if bias else None)
