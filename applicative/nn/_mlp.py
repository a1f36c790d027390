"""``MLP`` (linear, activation through ``fmap``, linear) and ``LayerNorm`` defined through ``counit``.

    mlp(x)        = W2 sigma(W1 x + b1) + b2
    layer_norm(x) = gamma * (x - mean) / sqrt(var + eps) + beta,
                    mean = counit(x) / measure(x),  var = counit((x - mean)^2) / measure(x)

For a Vec the measure is the length and counit the sum, so this is the usual
layer normalisation; for a function it normalises the mean and variance of
its values over the domain.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Generic, TypeVar

import jax
import jax.numpy as jnp
from jax import Array

from applicative.linalg import add
from applicative.nn._base import Draws, Variance, by_measure, measure
from applicative.nn._linear import Linear, draw_linear, inputs_of, outputs_of
from applicative.nn._parts import agree, level, nested
from applicative.protocols.applicative import Applicative, lift_a2
from applicative.protocols.integration import counit
from applicative.protocols.kinds import Measured
from applicative.records import record, static

__all__ = ["MLP", "LayerNorm"]

# Brands summed over (by counit and linear maps): structures with a counit.
D = TypeVar("D", bound=Measured)
Hidden = TypeVar("Hidden", bound=Measured)


@record
class MLP(Generic[D, Hidden]):
    """W2 sigma(W1 x + b1) + b2, with ``sigma`` applied to each element through ``fmap``.

    Built, it checks that the hidden layer maps into what the output layer maps from, and the output
    layer back into what the hidden layer maps from (a ValueError naming ``MLP`` and both: "the hidden
    layer's outputs are a Vec[Hidden] of size 10 but the output layer's inputs are a Vec[Hidden] of size 12")."""

    hidden: Linear[D, Hidden]
    output: Linear[Hidden, D]
    activation: Callable[[Array], Array] = static(default=jax.nn.relu)

    def __post_init__(self) -> None:
        hidden, output = self.hidden, self.output
        into, out_of = outputs_of(hidden), inputs_of(output)
        agree("MLP", ("the hidden layer's outputs are", into), ("the output layer's inputs are", out_of))
        into, out_of = outputs_of(output), inputs_of(hidden)
        agree("MLP", ("the output layer's outputs are", into), ("the hidden layer's inputs are", out_of))

    def __call__(self, x: Applicative[D, Array]) -> Applicative[D, Array]:
        return self.output(self.hidden(x).fmap(self.activation))

    @staticmethod
    def init(
        key: jax.Array,
        model: Applicative[D, Array],
        hidden: Applicative[Hidden, Array],
        activation: Callable[[Array], Array] = jax.nn.relu,
        *,
        variance: Variance = by_measure,
        output_gain: float = 1.0,
    ) -> MLP[D, Hidden]:
        """Templates give the shapes; both maps as ``Linear.init`` draws them: the hidden one N(0, 1 /
        variance(model)), the output one N(0, output_gain^2 / variance(hidden)), zero biases (the
        requests of ``key``: the hidden weight, the output weight)."""
        draw = Draws(key)
        return MLP(
            draw_linear(draw, model, hidden, variance=variance),
            draw_linear(draw, hidden, model, variance=variance, gain=output_gain),
            activation,
        )


@record
class LayerNorm(Generic[D]):
    """gamma * (x - mean) / sqrt(var + eps) + beta, the moments taken through counit.

    Built, it checks that gamma and beta are structures of scalars on one structure (else a
    TypeError or ValueError naming ``LayerNorm``)."""

    gamma: Applicative[D, Array]
    beta: Applicative[D, Array]
    eps: float = static(default=1e-5)

    def __post_init__(self) -> None:
        gamma, beta = self.gamma, self.beta
        nested("LayerNorm", ("gamma", gamma, 1), ("beta", beta, 1))
        agree("LayerNorm", ("gamma is", level(gamma)), ("beta is", level(beta)))

    def __call__(self, x: Applicative[D, Array]) -> Applicative[D, Array]:
        n = measure(x)
        mean = counit(x) / n
        centred = add(x, x.pure(-mean))
        inv_std = jax.lax.rsqrt(counit(centred.fmap(jnp.square)) / n + self.eps)
        return add(lift_a2(lambda g, a: g * a * inv_std, self.gamma, centred), self.beta)

    @staticmethod
    def init(model: Applicative[D, Array], eps: float = 1e-5) -> LayerNorm[D]:
        """The identity normalisation: gamma the structure's 1 (``pure``: the constant function 1 of a
        Cheb, ones in a Vec), beta its 0."""
        dtype = jnp.result_type(*jax.tree_util.tree_leaves(model))
        return LayerNorm(model.pure(jnp.ones((), dtype)), model.pure(jnp.zeros((), dtype)), eps)
