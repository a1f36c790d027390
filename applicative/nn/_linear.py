"""``Linear``: the affine map x -> W x + b between two structures (the reference's ``linear``)."""

from __future__ import annotations

from typing import Generic, TypeVar

import jax
from jax import Array

from applicative.linalg import add, each_mul_mmt, mul_mmt, mul_mv, outer
from applicative.nn._base import Draws, Matrix, Std, Variance, by_measure, floating_template
from applicative.nn._parts import Level, agree, level, nested
from applicative.operands import check_nesting
from applicative.protocols.algebra import arithmetic
from applicative.protocols.applicative import Applicative, lift_a2
from applicative.protocols.kinds import Measured
from applicative.records import record

__all__ = ["Linear", "each_of"]

In = TypeVar("In", bound=Measured)  # summed over: a structure with a counit
Out = TypeVar("Out")
S = TypeVar("S")
E = TypeVar("E")  # a structure of maps (multi-head attention's heads)


@record
class Linear(Generic[In, Out]):
    """(W x + b)_o = sum_i W_oi x_i + b_o, with ``weight`` indexed [out][in].

    ``linear(x)`` maps one element; ``linear.each(xs)`` maps every element of a structure, as
    linear algebra (the reference's ``mulMMT``), never as ``fmap`` of a closure: on a ``Cheb``
    sequence that is one contraction of coefficients, where ``fmap`` would sample and transform.

    Built, it checks its parts (``nn._parts``): the weight is a structure of structures of scalars,
    the bias a structure of scalars on the weight's outer structure (its outputs), else a TypeError
    or ValueError naming ``Linear``.
    """

    weight: Applicative[Out, Applicative[In, Array]]
    bias: Applicative[Out, Array] | None

    def __post_init__(self) -> None:
        weight, bias = self.weight, self.bias
        nested("Linear", ("weight", weight, 2), ("bias", bias, 1))
        agree("Linear", ("the bias is", level(bias)), ("the weight's outputs are", level(weight)))

    def __call__(self, x: Applicative[In, Array]) -> Applicative[Out, Array]:
        y = mul_mv(self.weight, x)
        return y if self.bias is None else add(y, self.bias)

    def each(self, xs: Matrix[S, In]) -> Matrix[S, Out]:
        """fmap self xs, as mul_mmt(W, xs) + pure b (b is added to every element)."""
        y = mul_mmt(self.weight, xs)
        return y if self.bias is None else add(y, y.pure(self.bias))

    @staticmethod
    def init(
        key: jax.Array,
        inputs: Applicative[In, Array],
        outputs: Applicative[Out, Array],
        *,
        bias: bool = True,
        variance: Variance = by_measure,
        gain: float = 1.0,
    ) -> Linear[In, Out]:
        """Weights N(0, gain^2 / variance(inputs)) (LeCun's with the default ``by_measure``: 1 /
        measure(inputs)), drawn from ``key`` (``nn._base``'s rule: the weight is its first request),
        zero bias; ``inputs``/``outputs`` are templates, structures of floating scalars (anything else
        raises, naming the template)."""
        return draw_linear(Draws(key), inputs, outputs, bias=bias, variance=variance, gain=gain)


def each_of(maps: Applicative[E, Linear[In, Out]], xs: Matrix[S, In]) -> Applicative[E, Matrix[S, Out]]:
    """fmap (\\m -> m.each xs) maps: every map of a structure of maps applied to every element of
    ``xs``, as one contraction (``each_mul_mmt``) plus each map's bias: multi-head attention's
    projections, one matmul for every head."""
    projected = each_mul_mmt(maps.fmap(lambda m: m.weight), xs)
    return lift_a2(lambda m, y: y if m.bias is None else add(y, y.pure(m.bias)), maps, projected)


def draw_linear(
    draw: Draws,
    inputs: Applicative[In, Array],
    outputs: Applicative[Out, Array],
    *,
    bias: bool = True,
    variance: Variance = by_measure,
    gain: float = 1.0,
) -> Linear[In, Out]:
    """``Linear.init`` from an initialiser's draws (one request, the weight): the maps of heads drawn
    together, the maps of an MLP."""
    check_nesting("Linear.init", arithmetic(), ("inputs", inputs, 1), ("outputs", outputs, 1))
    floating_template("Linear.init", "inputs", inputs)
    floating_template("Linear.init", "outputs", outputs)
    weight = draw.normal(jax.eval_shape(outer, outputs, inputs), Std(variance(inputs), gain=gain))
    return Linear(weight, draw.zeros(outputs) if bias else None)


def outputs_of(linear: object) -> Level | None:
    """The structure a ``Linear`` maps into (its weight's outer level), None where it does not show."""
    return level(linear.weight) if isinstance(linear, Linear) else None


def inputs_of(linear: object) -> Level | None:
    """The structure a ``Linear`` maps from (its weight's inner level), None where it does not show."""
    return level(linear.weight, 1) if isinstance(linear, Linear) else None
