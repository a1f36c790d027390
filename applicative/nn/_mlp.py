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
from applicative.nn._base import measure
from applicative.nn._linear import Linear
from applicative.protocols.algebra import Module, arithmetic
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
    """W2 sigma(W1 x + b1) + b2, with ``sigma`` applied to each element through ``fmap``."""

    hidden: Linear[D, Hidden]
    output: Linear[Hidden, D]
    activation: Callable[[Array], Array] = static(default=jax.nn.relu)

    def __call__(self, x: Applicative[D, Array]) -> Applicative[D, Array]:
        return self.output(self.hidden(x).fmap(self.activation))

    @staticmethod
    def init(
        key: jax.Array,
        model: Applicative[D, Array],
        hidden: Applicative[Hidden, Array],
        activation: Callable[[Array], Array] = jax.nn.relu,
    ) -> MLP[D, Hidden]:
        k1, k2 = jax.random.split(key)
        return MLP(Linear.init(k1, model, hidden), Linear.init(k2, hidden, model), activation)


@record
class LayerNorm(Generic[D]):
    """gamma * (x - mean) / sqrt(var + eps) + beta, the moments taken through counit."""

    gamma: Applicative[D, Array]
    beta: Applicative[D, Array]
    eps: float = static(default=1e-5)

    def __call__(self, x: Applicative[D, Array]) -> Applicative[D, Array]:
        n = measure(x)
        mean = counit(x) / n
        centred = add(x, x.pure(-mean))
        inv_std = jax.lax.rsqrt(counit(centred.fmap(jnp.square)) / n + self.eps)
        return add(lift_a2(lambda g, a: g * a * inv_std, self.gamma, centred), self.beta)

    @staticmethod
    def init(model: Applicative[D, Array], eps: float = 1e-5) -> LayerNorm[D]:
        zeros: Module[Applicative[D, Array]] = arithmetic()
        beta = zeros.zero(model)
        return LayerNorm(beta.fmap(lambda a: a + 1.0), beta, eps)
