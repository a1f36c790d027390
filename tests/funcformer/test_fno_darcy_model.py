"""The image-to-function model of the FNO benchmark (``funcformer.fno_darcy.model``, ``recipes``, ``fit``),
against independent references: the benchmark's grids written out, ``numpy.polynomial.chebyshev``,
attention on a function against attention at its sample points, an uninterrupted run against a resumed one,
and a short training against the mean-solution baseline."""

from __future__ import annotations

import dataclasses
import importlib
from pathlib import Path
from types import SimpleNamespace

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from numpy.polynomial import chebyshev as C

from applicative import Cheb, Compose, Dim, Vec, to_array
from applicative.nn import CrossAttentionBlock
from funcformer.fno_darcy import data
from funcformer.fno_darcy.data import grid_points
from funcformer.fno_darcy.fit import fit, relative_l2_loss
from funcformer.fno_darcy.model import (
    CrossAlongY,
    CrossLayer,
    ImageConfig,
    Patch,
    Pixel,
    init,
    patches,
    sampler,
    values,
)
from funcformer.fno_darcy.recipes import Recipe, image_loss, predict_image, solve_image, solver_part, train_image
from funcformer.model import Channel, X, Y

SMALL = ImageConfig(
    grid=15, patch=5, width=8, hidden=16, encoder_layers=1, n=6, channels=3, heads=2, head_channels=2,
    hidden_channels=4, axes="xy",
)  # fmt: skip


class Sample(Dim):
    """Sample points of the sequence axis, as a Vec."""


def test_values_are_the_series_at_the_grid() -> None:
    c = np.random.default_rng(0).normal(size=(7, 7))
    x = 2 * grid_points(29) - 1
    np.testing.assert_allclose(np.asarray(values(c, 29)), C.chebgrid2d(x, x, c), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("s", [141, 211, 421])
def test_sampler_reads_the_model_points(s: int) -> None:
    index = sampler(s, 85)
    spacing = (420 // (s - 1)) / 421
    assert np.max(np.abs(grid_points(s)[index] - grid_points(85))) <= spacing / 2 + 1e-12
    if s == 421:  # the model's points are among the 421 points: exactly the subsample
        a = np.random.default_rng(1).normal(size=(421, 421))
        np.testing.assert_array_equal(a[index][:, index], data.subsample(a, 85))


def test_one_model_answers_from_and_at_every_grid() -> None:
    model = init(0, SMALL)
    a = data.coefficients(3, 2, s=421)
    fine, coarse = solve_image(model, a), solve_image(model, data.subsample(a, 15))
    np.testing.assert_array_equal(fine, coarse)  # the 15 points are among the 421
    eager = model(jnp.asarray(data.subsample(a[0], 15), jnp.float32))  # jit changes nothing
    np.testing.assert_allclose(np.asarray(eager, np.float64), fine[0], rtol=1e-5, atol=1e-6)
    for s in (15, 61):
        x = 2 * grid_points(s) - 1
        expected = np.stack([C.chebgrid2d(x, x, c) for c in fine])
        np.testing.assert_allclose(predict_image(model, a, s), expected, rtol=1e-5, atol=1e-5 * np.abs(expected).max())


def test_a_corrected_model_adds_its_series_to_the_solver_on_its_image() -> None:
    """``solver_nodes``: the prediction at any grid, from any grid, is ``data.coarse_solution`` of the image the
    model reads plus the series there (numpy.polynomial); the training loss is the benchmark's metric of that
    sum."""
    config = dataclasses.replace(SMALL, solver_nodes=21)
    a = data.coefficients(8, 3, s=421)
    image, a29 = data.subsample(a, 15), data.subsample(a, 29)
    u = np.stack([data.coarse_solution(one, 57) for one in a29])  # any target will do
    scale = float(np.sqrt(np.mean((u - np.stack([data.coarse_solution(one, 21, 29) for one in image])) ** 2)))
    model = init(0, config, scale)
    series = solve_image(model, a)
    for s in (15, 29):
        x = 2 * grid_points(s) - 1
        part = np.stack([data.coarse_solution(one, 21, s) for one in image])
        expected = part + np.stack([C.chebgrid2d(x, x, c) for c in series])
        for given in (a, a29):
            np.testing.assert_allclose(predict_image(model, given, s), expected, rtol=1e-5, atol=1e-7)
    targets = jnp.asarray(np.stack([u, solver_part(config, a29, 29)], axis=1), jnp.float32)
    loss = jax.jit(image_loss, static_argnums=3)(model, jnp.asarray(a29, jnp.float32), targets, 29)
    assert float(loss) == pytest.approx(data.mean_relative_l2(predict_image(model, a29), u), rel=1e-5)
    with pytest.raises(ValueError, match=r"solver_nodes must be 0 \(no solver\) or >= 4, got 3"):
        ImageConfig(solver_nodes=3)


def test_a_wrong_image_is_refused_by_shape() -> None:
    with pytest.raises(ValueError, match=r"expected one square \(s, s\) coefficient image, got shape \(15, 14\)"):
        init(0, SMALL)(np.zeros((15, 14)))
    with pytest.raises(ValueError, match=r"s = 17 is not one of the benchmark's grids"):
        init(0, SMALL)(np.zeros((17, 17)))
    with pytest.raises(ValueError, match=r"patch = 4 does not divide ImageConfig.grid = 15"):
        ImageConfig(grid=15, patch=4)
    with pytest.raises(ValueError, match=r"heads = 3 does not divide ImageConfig.width = 64"):
        ImageConfig(heads=3)


def test_cross_attention_on_a_function_is_attention_at_its_points() -> None:
    """Cross attention from a Chebyshev function of x to the patch tokens, by the generic definition,
    equals the same block on the function's P samples (a Vec of rows) interpolated back: attention acts
    row by row, its linear maps commute with sampling, and the softmax samples at the same points."""
    model = init(0, SMALL)
    layer = model.layers[0]
    assert isinstance(layer, CrossLayer)
    cross = CrossAttentionBlock(layer.cross.attention, None)  # no pre-norm: a norm's output is truncated to N
    tokens = np.random.default_rng(2).normal(size=(SMALL.tokens, SMALL.patch**2)).astype(np.float32)
    memory = model.encoder.encode(Vec(Vec(jnp.asarray(tokens), Pixel, SMALL.patch**2), Patch, SMALL.tokens))
    h = model.queries
    n, p, c = SMALL.n, SMALL.samples, SMALL.channels
    on_function = np.asarray(to_array(cross(h, memory)), np.float64)

    x = np.cos(np.pi * (np.arange(p) + 0.5) / p)
    rows = np.einsum("pi,ijc->pjc", C.chebvander(x, n - 1), np.asarray(to_array(h), np.float64))
    sampled = Vec(Compose(Cheb(Vec(jnp.asarray(rows, jnp.float32), Channel, c), Y, n, p)), Sample, p)
    at_points = np.asarray(to_array(cross(sampled, memory)), np.float64)
    back = np.linalg.inv(C.chebvander(x, p - 1))[:n]
    np.testing.assert_allclose(on_function, np.einsum("ip,pjc->ijc", back, at_points), rtol=1e-4, atol=1e-5)


def test_a_layer_along_y_is_the_layer_on_the_transposed_function() -> None:
    model = init(0, SMALL)
    along_y = model.layers[1]
    assert isinstance(along_y, CrossAlongY)
    tokens = jnp.asarray(np.random.default_rng(3).normal(size=(SMALL.tokens, SMALL.patch**2)), jnp.float32)
    memory = model.encoder.encode(Vec(Vec(tokens, Pixel, SMALL.patch**2), Patch, SMALL.tokens))
    h = model.queries
    swapped = np.swapaxes(np.asarray(to_array(h)), 0, 1)
    n, p, c = SMALL.n, SMALL.samples, SMALL.channels
    transposed = Cheb(Compose(Cheb(Vec(jnp.asarray(swapped), Channel, c), X, n, p)), Y, n, p)
    direct = np.asarray(to_array(along_y(h, memory)))
    via = np.swapaxes(np.asarray(to_array(along_y.layer(transposed, memory))), 0, 1)
    np.testing.assert_allclose(direct, via, rtol=1e-6, atol=1e-6)


def _linear_run(tmp: Path | None, epochs: int) -> tuple[dict[str, jax.Array], list[float]]:
    rng = np.random.default_rng(4)
    a = rng.normal(size=(24, 5, 5))
    u = 2.0 * a + 1.0 + 0.01 * rng.normal(size=a.shape)
    params = {"w": jnp.zeros(()), "b": jnp.ones(())}

    def loss(p: dict[str, jax.Array], a: jax.Array, u: jax.Array) -> jax.Array:
        return relative_l2_loss(p["w"] * a + p["b"], u)

    fitted = fit(
        params, loss, optax.adam(0.1), a, u, epochs=epochs, batch=8, seed=1, checkpoint=tmp, description="line"
    )
    return fitted.params, fitted.losses


def test_fit_resumes_where_it_stopped(tmp_path: Path) -> None:
    straight, straight_losses = _linear_run(None, 6)
    _linear_run(tmp_path / "run.npz", 4)  # killed after four epochs
    resumed, resumed_losses = _linear_run(tmp_path / "run.npz", 6)
    assert resumed_losses == straight_losses
    for name in straight:
        np.testing.assert_array_equal(np.asarray(resumed[name]), np.asarray(straight[name]))
    assert straight_losses[-1] < 0.5 * straight_losses[0]  # w -> 2, b -> 1
    with pytest.raises(ValueError, match=r"run.npz: a checkpoint of another run \('line', not 'other'\)"):
        fit(
            {"w": jnp.zeros(()), "b": jnp.ones(())}, lambda p, a, u: jnp.sum(p["w"] * a), optax.adam(0.1),
            np.zeros((8, 2, 2)), np.zeros((8, 2, 2)), epochs=5, batch=8, checkpoint=tmp_path / "run.npz",
            description="other",
        )  # fmt: skip


def _tracking(checkpoint: Path, epochs: int) -> tuple[float, float]:
    """A scalar p fitted by SGD (rate 1/2) to each minibatch's mean input (10 samples, 3 a step): p, seconds."""
    inputs = np.random.default_rng(9).normal(size=(10, 2, 2))

    def loss(params: dict[str, jax.Array], a: jax.Array, u: jax.Array) -> jax.Array:
        return 0.5 * (params["p"] - jnp.mean(a)) ** 2

    fitted = fit({"p": jnp.zeros(())}, loss, optax.sgd(0.5), inputs, inputs, epochs=epochs, batch=3, seed=7,
                 checkpoint=checkpoint, description="mean")  # fmt: skip
    return float(fitted.params["p"]), fitted.seconds


def test_fit_visits_each_epoch_in_its_own_order_also_after_a_resume(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Epoch e visits the training set in the order default_rng((seed, e)).permutation, the last partial
    batch dropped: p against the same SGD written out in numpy, after a run killed at epoch 2 and resumed to 5.
    Each step pulls p halfway to its batch's mean, so the order shows. The seconds add up over the sessions
    (a clock that advances one second a reading: one second an epoch)."""
    inputs = np.random.default_rng(9).normal(size=(10, 2, 2))
    expected = 0.0
    for epoch in range(5):
        order = np.random.default_rng((7, epoch)).permutation(10)
        for step in range(3):
            expected -= 0.5 * (expected - inputs[order[3 * step : 3 * step + 3]].mean())
    clock = iter(range(1000))
    monkeypatch.setattr(importlib.import_module("funcformer.fno_darcy.fit"), "time",
                        SimpleNamespace(perf_counter=lambda: float(next(clock))))  # fmt: skip
    assert _tracking(tmp_path / "run.npz", 2)[1] == 2.0  # killed after two epochs
    p, seconds = _tracking(tmp_path / "run.npz", 5)
    np.testing.assert_allclose(p, expected, rtol=1e-13)
    assert seconds == 5.0


def test_patches_are_the_p_by_p_blocks_of_the_image_row_by_row() -> None:
    image = np.arange(15.0 * 15).reshape(15, 15)
    expected = [image[5 * i : 5 * i + 5, 5 * j : 5 * j + 5].ravel() for i in range(3) for j in range(3)]
    np.testing.assert_array_equal(patches(jnp.asarray(image), 5), expected)


def test_fit_refuses_mismatched_sizes() -> None:
    with pytest.raises(ValueError, match=r"fit: batch = 9 must be between 1 and the 8 training samples"):
        fit(
            {"w": jnp.zeros(())},
            lambda p, a, u: p["w"],
            optax.adam(0.1),
            np.zeros((8, 2)),
            np.zeros((8, 2)),
            epochs=1,
            batch=9,
        )
    with pytest.raises(ValueError, match=r"fit: 8 inputs but 7 targets"):
        fit(
            {"w": jnp.zeros(())},
            lambda p, a, u: p["w"],
            optax.adam(0.1),
            np.zeros((8, 2)),
            np.zeros((7, 2)),
            epochs=1,
            batch=4,
        )


@pytest.mark.slow
def test_a_short_training_beats_the_mean_solution() -> None:
    """The benchmark's recipe at s = 15 (the field drawn at 15 points, solved there): 256 training samples,
    30 epochs (40 s); on 32 held-out samples the model beats the mean of the training solutions by a fifth
    (measured: 0.173 against 0.246)."""
    a, test_a = data.coefficients(0, 256, s=15), data.coefficients(1, 32, s=15)
    u, test_u = (np.stack([data.solution(x) for x in batch]) for batch in (a, test_a))
    recipe = Recipe(model=SMALL, epochs=30, batch=32, learning_rate=3e-3, warmup=20)
    fitted = train_image(recipe, a, u)
    error = data.mean_relative_l2(predict_image(fitted.params, test_a), test_u)
    baseline = data.mean_relative_l2(np.broadcast_to(u.mean(axis=0), test_u.shape), test_u)
    assert fitted.losses[-1] < 0.2 * fitted.losses[0]
    assert error < 0.8 * baseline, (error, baseline)
