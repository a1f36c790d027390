"""``KernelIntegral``: a layer that mixes a sequence by learned kernels, the linear mixing of neural
operators, written once like attention.

    x(s)  <-  x(s) + sum_h W_o^h integral K_h(s, t) W_v^h x(t) dt + b

It is multi-head attention whose weights are learned kernels ``K_h``, not computed from queries and
keys: the integral over t is ``mul_mm(K_h, W_v^h x)``, a counit of the sequence structure. On a
``Vec`` sequence a kernel is a matrix (token mixing); on a ``Cheb`` sequence it is a function of two
variables (a ``Cheb`` of ``Cheb``s) and the integral is exact, one contraction of coefficients through
the Gram matrix. It carries no positional information but its kernels, and is linear in x.
"""

from __future__ import annotations

from typing import Generic, TypeVar

import jax
from jax import Array

from applicative.linalg import add, mul_mm, outer, sum_mul_mmt
from applicative.nn._base import Draws, Matrix, Std, Variance, by_measure
from applicative.nn._linear import Linear, draw_linear, inputs_of, outputs_of
from applicative.nn._parts import agree, level, nested, stacked
from applicative.protocols.applicative import Applicative
from applicative.protocols.kinds import Measured
from applicative.records import record

__all__ = ["KernelHead", "KernelIntegral"]

S = TypeVar("S", bound=Measured)  # the sequence: integrated over
D = TypeVar("D", bound=Measured)  # the features
Hv = TypeVar("Hv", bound=Measured)  # a head's value features
Heads = TypeVar("Heads", bound=Measured)


@record
class KernelHead(Generic[S, D, Hv]):
    """One head: a kernel on the sequence, a value map into the head's features, and the output
    projection back to the features.

    Built, it checks that the kernel is a structure of structures on one structure (S by S) and the
    output projection maps from the value's outputs into its inputs (a ValueError naming ``KernelHead``)."""

    kernel: Matrix[S, S]
    value: Linear[D, Hv]
    output: Matrix[D, Hv]

    def __post_init__(self) -> None:
        kernel, value, output = self.kernel, self.value, self.output
        module = "KernelHead"
        nested(module, ("kernel", kernel, 2), ("output", output, 2))
        agree(module, ("the kernel's rows are", level(kernel)), ("its columns are", level(kernel, 1)))
        agree(module, ("the value's outputs are", outputs_of(value)), ("the output's inputs are", level(output, 1)))
        agree(module, ("the value's inputs are", inputs_of(value)), ("the output's outputs are", level(output)))


@record
class KernelIntegral(Generic[Heads, S, D, Hv]):
    """x + sum_h W_o^h (K_h (W_v^h x)) + b, the heads a structure (as in ``MultiHeadAttention``).

    Built, it checks that the bias is a structure of scalars on the heads' output structure."""

    heads: Applicative[Heads, KernelHead[S, D, Hv]]
    bias: Applicative[D, Array]

    def __post_init__(self) -> None:
        heads, bias = self.heads, self.bias
        nested("KernelIntegral", ("bias", bias, 1))
        head = stacked(heads)
        outputs = level(head.output) if isinstance(head, KernelHead) else None
        agree("KernelIntegral", ("the bias is", level(bias)), ("the heads' outputs are", outputs))

    def __call__(self, x: Matrix[S, D], mask: Matrix[S, S] | None = None, /) -> Matrix[S, D]:
        if mask is not None:
            raise ValueError("KernelIntegral: a learned kernel takes no mask (zero its entries instead)")
        mixed = self.heads.fmap(lambda head: mul_mm(head.kernel, head.value.each(x)))
        projected = sum_mul_mmt(self.heads.fmap(lambda head: head.output), mixed)
        return add(x, add(projected, projected.pure(self.bias)))

    @staticmethod
    def init(
        key: jax.Array,
        *,
        heads: Applicative[Heads, Array],
        sequence: Applicative[S, Array],
        model: Applicative[D, Array],
        value_features: Applicative[Hv, Array],
        variance: Variance = by_measure,
        output_gain: float = 1.0,
    ) -> KernelIntegral[Heads, S, D, Hv]:
        """Templates give the shapes. Kernels N(0, 1 / variance(sequence)^2) (so that, with the default
        ``by_measure``, a kernel integral keeps a function's size), value maps ``Linear.init``
        (N(0, 1 / variance(model)), zero bias), output projections N(0, output_gain^2 /
        (variance(value_features) variance(heads))), since the heads' outputs are summed; a zero bias.
        The requests of ``key``, each for every head at once: kernels, values, output projections."""
        n = variance(sequence)
        out_std = Std(variance(value_features), variance(heads), output_gain)

        def one_head(draw: Draws) -> KernelHead[S, D, Hv]:
            return KernelHead(
                draw.normal(jax.eval_shape(outer, sequence, sequence), Std(n * n)),
                draw_linear(draw, model, value_features, variance=variance),
                draw.normal(jax.eval_shape(outer, model, value_features), out_std),
            )

        draw = Draws(key)
        return KernelIntegral(draw.each(heads, one_head), draw.zeros(model))
