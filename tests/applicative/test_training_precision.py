"""``applicative.training.bfloat16``: the loss and prediction computed in bfloat16, the parameters, their
gradients and what the loop keeps in float32; against float64 numpy on bfloat16-rounded operands, and on the
digit reverser, whose products then run in bfloat16."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import optax

from applicative.examples.digits.data import test_set as held_out_digits
from applicative.examples.digits.model import Config
from applicative.examples.digits.training import learner as digits
from applicative.training import Arrays, Learner, bfloat16, fit

Params = dict[str, jax.Array]
RNG = np.random.default_rng(3)
X, W = RNG.normal(size=(16, 8)).astype(np.float32), RNG.normal(size=8).astype(np.float32)
Y = (X @ W + 0.1 * RNG.normal(size=16)).astype(np.float32)


def line() -> Learner[Params]:
    """u = x . w, loss the mean squared error."""

    def loss(p: Params, x: jax.Array, y: jax.Array) -> jax.Array:
        return jnp.mean((x @ p["w"] - y) ** 2)

    return Learner(lambda seed: {"w": jnp.zeros(8, jnp.float32)}, loss, lambda p, x: x @ p["w"])


def rounded(a: np.ndarray) -> np.ndarray:
    """``a`` rounded to bfloat16, as float64."""
    return np.asarray(a).astype(ml_dtypes.bfloat16).astype(np.float64)


def test_the_loss_is_computed_from_bfloat16_operands_and_given_as_float32() -> None:
    """The prediction x . w from bfloat16-rounded x and w (the float64 reference on the rounded operands, within
    the error bound of a sum of n products rounded in bfloat16, (n + 1) u sum |x_i w_i| with u = 2^-8, which
    holds however the backend orders and accumulates the sum: a CPU in float32, an H200 in bfloat16), given
    as float32; the loss from it and the float32 targets, as float32, and its gradient float32; the float32
    learner's loss differs from it."""
    low, full, w = bfloat16(line()), line(), {"w": jnp.asarray(W)}
    products = rounded(X) @ rounded(W)
    bound = (X.shape[1] + 1) * 2.0**-8 * (np.abs(rounded(X)) @ np.abs(rounded(W)))
    prediction = low.predict(w, jnp.asarray(X))
    assert prediction.dtype == jnp.float32
    assert np.all(np.abs(np.asarray(prediction, np.float64) - products) <= bound)
    value = low.loss(w, jnp.asarray(X), jnp.asarray(Y))
    assert value.dtype == jnp.float32
    np.testing.assert_allclose(float(value), np.mean((np.asarray(prediction, np.float64) - Y) ** 2), rtol=1e-5)
    assert jax.grad(low.loss)(w, jnp.asarray(X), jnp.asarray(Y))["w"].dtype == jnp.float32
    exact = float(full.loss(w, jnp.asarray(X), jnp.asarray(Y)))
    assert abs(float(value) - exact) > 1e-3 * exact  # residuals of 0.1 beside bfloat16's steps of 0.01


def test_integer_inputs_pass_as_they_are_and_the_loop_keeps_float32(tmp_path: Path) -> None:
    """Through ``fit``: the parameters and the optimiser's state stay float32, and a run learns the line as
    the float32 run does, to bfloat16's precision; the digit reverser's integer tokens pass uncast, and its
    untrained predictions are the float32 model's."""
    states = [
        fit(
            model,
            optax.adam(0.05),
            Arrays(X, Y, 8),
            tmp_path / name,
            description="{}",
            steps=40,
            progress=False,
            log=False,
        )
        for name, model in (("full", line()), ("low", bfloat16(line())))
    ]
    for state in states:
        assert {leaf.dtype for leaf in jax.tree_util.tree_leaves((state.model, state.opt_state))} <= {
            jnp.dtype(jnp.float32),
            jnp.dtype(jnp.int32),
        }
    assert all(state.losses[-1] < 0.2 * state.losses[0] for state in states)  # both learned (4.57 -> 0.67)
    np.testing.assert_allclose(np.asarray(states[1].model["w"]), np.asarray(states[0].model["w"]), atol=0.05)
    tokens, _ = held_out_digits(0, 4)  # integers, which a cast to bfloat16 would corrupt
    plain = digits(Config())
    np.testing.assert_array_equal(bfloat16(plain).predict(plain.init(0), tokens), plain.predict(plain.init(0), tokens))


def test_the_digit_reversers_products_run_in_bfloat16() -> None:
    """Every matrix product of the digit reverser's loss computes in bfloat16 under ``bfloat16``, in float32
    without it: the model's one-hot tokens take its parameters' dtype, or the products would widen back."""
    model = digits(Config())
    params, (tokens, targets) = model.init(0), held_out_digits(0, 4)

    def products(learner: Learner[Any]) -> Counter[str]:
        text = str(jax.make_jaxpr(learner.loss)(params, tokens, targets))
        return Counter(re.findall(r"(\w+)\[[^\]]*\] = dot_general", text))

    assert set(products(bfloat16(model))) == {"bf16"}
    assert set(products(model)) == {"f32"}
