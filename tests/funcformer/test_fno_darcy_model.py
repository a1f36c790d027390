"""The image-to-function model of the FNO benchmark (``funcformer.fno_darcy.model``, ``recipes``),
against independent references: the benchmark's grids written out, ``numpy.polynomial.chebyshev``,
attention on a function against attention at its sample points, and a short training against the mean-solution
baseline."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from numpy.polynomial import chebyshev as C

from applicative import Cheb, Compose, Dim, Vec, to_array
from applicative.nn import CrossAttentionBlock
from funcformer.fno_darcy import data, generate, vit
from funcformer.fno_darcy.__main__ import main
from funcformer.fno_darcy.data import grid_points
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
from funcformer.fno_darcy.recipes import (
    IMAGE,
    Recipe,
    image_loss,
    predict_image,
    solve_image,
    solver_part,
    train_image,
)
from funcformer.fno_darcy.vit import ViTConfig
from funcformer.learning.metric import mean_values_relative_l2
from funcformer.model import Channel, X, Y
from tests.applicative.tolerance import float32

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


@pytest.mark.slow
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


@pytest.mark.slow
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
    # the loss evaluates the series in float32 (on a GPU, products in TF32), predict_image in float64
    expected = mean_values_relative_l2(predict_image(model, a29), u)
    assert float(loss) == pytest.approx(expected, rel=float32(1e-5)["rtol"])
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
    # (under jit: a program for each, where eagerly each operation compiles)
    memory = jax.jit(model.encoder.encode)(Vec(Vec(jnp.asarray(tokens), Pixel, SMALL.patch**2), Patch, SMALL.tokens))
    attend = jax.jit(lambda queries: cross(queries, memory))
    h = model.queries
    n, p, c = SMALL.n, SMALL.samples, SMALL.channels
    on_function = np.asarray(to_array(attend(h)), np.float64)

    x = np.cos(np.pi * (np.arange(p) + 0.5) / p)
    rows = np.einsum("pi,ijc->pjc", C.chebvander(x, n - 1), np.asarray(to_array(h), np.float64))
    sampled = Vec(Compose(Cheb(Vec(jnp.asarray(rows, jnp.float32), Channel, c), Y, n, p)), Sample, p)
    at_points = np.asarray(to_array(attend(sampled)), np.float64)
    back = np.linalg.inv(C.chebvander(x, p - 1))[:n]
    np.testing.assert_allclose(on_function, np.einsum("ip,pjc->ijc", back, at_points), **float32(1e-4, atol=1e-5))


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


def test_the_input_is_read_between_the_datas_two_values(tmp_path: Path) -> None:
    """A model of ``low = 4`` reads 4 where a model of ``low = 3`` (the same weights) reads 3: the image is the
    coefficient mapped from [low, high] to [-1, 1], whatever the data's lower value. Coefficients outside the
    model's values are refused by ``train_image``, naming both."""
    a = data.coefficients(3, 2, s=15)  # 3 and 12
    model3 = init(0, SMALL)
    model4 = dataclasses.replace(model3, config=dataclasses.replace(SMALL, low=4.0))
    np.testing.assert_allclose(solve_image(model4, np.where(a == 3.0, 4.0, a)), solve_image(model3, a), rtol=1e-6)
    assert not np.allclose(solve_image(model4, a), solve_image(model3, a), rtol=1e-3)
    with pytest.raises(ValueError, match=r"span \[3, 12\], outside the model's \[low, high\] = \[4, 12\]"):
        train_image(Recipe(model=dataclasses.replace(SMALL, low=4.0), epochs=1, batch=2, augment=False), a, a, tmp_path)
    with pytest.raises(ValueError, match=r"low = 12\.0 and high = 12\.0 must rise"):
        ImageConfig(low=12.0)


def test_patches_are_the_p_by_p_blocks_of_the_image_row_by_row() -> None:
    image = np.arange(15.0 * 15).reshape(15, 15)
    expected = [image[5 * i : 5 * i + 5, 5 * j : 5 * j + 5].ravel() for i in range(3) for j in range(3)]
    np.testing.assert_array_equal(patches(jnp.asarray(image), 5), expected)


@pytest.mark.slow
def test_a_short_training_beats_the_mean_solution(tmp_path: Path) -> None:
    """The benchmark's recipe at s = 15 (the field drawn at 15 points, solved there): 256 training samples,
    30 epochs (40 s); on 32 held-out samples the model beats the mean of the training solutions by a fifth
    (measured: 0.173 against 0.246)."""
    a, test_a = data.coefficients(0, 256, s=15), data.coefficients(1, 32, s=15)
    u, test_u = (np.stack([data.solution(x) for x in batch]) for batch in (a, test_a))
    recipe = Recipe(model=SMALL, epochs=30, batch=32, learning_rate=3e-3, warmup=20, augment=False)
    fitted = train_image(recipe, a, u, tmp_path)
    error = mean_values_relative_l2(predict_image(fitted.model, test_a), test_u)
    baseline = mean_values_relative_l2(np.broadcast_to(u.mean(axis=0), test_u.shape), test_u)
    per_epoch = 256 // 32
    assert np.mean(fitted.losses[-per_epoch:]) < 0.2 * np.mean(fitted.losses[:per_epoch])
    assert error < 0.8 * baseline, (error, baseline)


TINY_FNO = '{"modes": 2, "width": 2, "hidden": 4}'
TINY_IMAGE = json.dumps(
    {"grid": 15, "patch": 5, "width": 4, "hidden": 4, "encoder_layers": 1, "n": 4, "channels": 2, "heads": 1,
     "head_channels": 1, "hidden_channels": 2, "axes": "xy"}
)  # fmt: skip


TINY_VIT = '{"grid": 15, "patch": 5, "context": 1, "width": 8, "hidden": 8, "mixers": "ka", "heads": 2, "n": 6}'


@pytest.mark.parametrize(("model", "architecture"), [("fno", TINY_FNO), ("image", TINY_IMAGE), ("vit", TINY_VIT)])
@pytest.mark.slow
def test_the_task_trains_each_model_through_the_learning_layer(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], model: str, architecture: str
) -> None:
    """``python -m funcformer.fno_darcy train --model M``: a line an epoch with the held-out error, a run
    directory in the learning layer's format (config.json naming the model, checkpoint.npz), and metrics.json
    whose test error, computed from the checkpoint read back, is the last held-out error (the same 4 samples);
    a finished run resumed trains no more; a directory of no run is refused."""
    data, out = tmp_path / "data", tmp_path / "run"
    generate(data, 8, 4, 29, workers=1, progress=False, shard_size=4)
    command = ["train", "--model", model, "--data", str(data), "--out", str(out), "--s", "15", "--train", "8",
               "--epochs", "2", "--batch", "4", "--held-out", "4", "--architecture", architecture,
               "--quiet"]  # fmt: skip
    assert main(command) == 0
    printed = capsys.readouterr().out
    lines = [line for line in printed.splitlines() if line.startswith("epoch ")]
    assert [line.split(":")[0] for line in lines] == ["epoch 1/2", "epoch 2/2"]
    assert all("held-out error" in line for line in lines)
    assert json.loads((out / "config.json").read_text())["model"] == model
    metrics = json.loads((out / "metrics.json").read_text())
    assert (metrics["epochs"], metrics["test_samples"], metrics["s"]) == (2, 4, 15)
    assert metrics["relative_l2"] == pytest.approx(metrics["held_out"][-1][1], rel=1e-6)
    assert lines[-1].endswith(f"held-out error {metrics['held_out'][-1][1]:.4e}")
    assert main([*command, "--resume"]) == 0
    assert not [line for line in capsys.readouterr().out.splitlines() if line.startswith("epoch ")]
    assert main(["train", "--data", str(data), "--out", str(out), "--resume", "--quiet", "--held-out", "4"]) == 0
    assert main(["train", "--data", str(data), "--out", str(out), "--resume", "--epochs", "3"]) == 1
    assert capsys.readouterr().err.endswith(
        f"--resume continues {out} with its own settings; given otherwise: --epochs: 2 in the run, 3 given\n"
    )
    assert main(["evaluate", str(tmp_path / "data"), "--data", str(data)]) == 1
    assert "config.json is missing" in capsys.readouterr().err
    assert main(["plot", str(out), "--data", str(data), "--sample", "1"]) == 0
    assert capsys.readouterr().out.splitlines() == [f"wrote {out / 'loss.png'}", f"wrote {out / 'prediction.png'}"]
    for name in ("loss.png", "prediction.png"):
        assert (out / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert main(["plot", str(out), "--data", str(data), "--sample", "4"]) == 1
    assert "--sample must be an index of the 4 test samples, got 4" in capsys.readouterr().err


VIT = ViTConfig(grid=15, patch=5, context=2, width=8, hidden=8, mixers="ka", heads=2, n=6)


def test_the_vits_tokens_are_each_cells_window_of_the_zero_padded_image() -> None:
    """Token i side + j reads the (p + 2c)^2 window around cell (i, j) of the image padded by c zeros (numpy
    slicing); ``assemble`` puts each cell's p x p values back where ``model.patches`` took them."""
    image = np.arange(1.0, 15.0 * 15 + 1).reshape(15, 15)
    padded = np.pad(image, 2)
    expected = [padded[5 * i : 5 * i + 9, 5 * j : 5 * j + 9].ravel() for i in range(3) for j in range(3)]
    np.testing.assert_array_equal(vit.windows(jnp.asarray(image), VIT), expected)
    np.testing.assert_array_equal(vit.assemble(patches(jnp.asarray(image), 5), VIT), image)


@pytest.mark.slow
def test_the_vit_answers_with_the_least_squares_series_of_its_values_in_the_datas_units() -> None:
    """With its unembedding zero the model's values at its grid are scale * mean, whatever the input; its
    series is the least-squares N x N Chebyshev fit of them, exact for values that are such a series
    (``numpy.polynomial.chebyshev``); the optimiser's mask leaves mean and std out of the weight decay."""
    x = 2 * grid_points(15) - 1
    c = np.random.default_rng(3).normal(size=(6, 6))
    mean = C.chebgrid2d(x, x, c)
    model = vit.init(0, VIT, scale=2.0, moments=(mean, np.ones((15, 15))))
    unembed = model.encoder.unembed
    assert unembed is not None
    silent = jax.tree_util.tree_map(jnp.zeros_like, unembed)
    model = dataclasses.replace(model, encoder=dataclasses.replace(model.encoder, unembed=silent))
    a = data.coefficients(4, 1, s=15)[0]
    np.testing.assert_allclose(model.grid_values(a), 2.0 * mean, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(model(a), 2.0 * c, **float32(1e-4))  # a float32 projection, P U P^T
    mask = vit.trained(model)
    assert (mask.mean, mask.std) == (False, False)
    assert all(jax.tree_util.tree_leaves(mask.encoder))
    opt = Recipe(model=VIT, epochs=1, batch=1, weight_decay=0.5, warmup=0).optimiser(10)
    zero = jax.tree_util.tree_map(jnp.zeros_like, model)
    updates, _ = opt.update(zero, opt.init(model), model)
    assert not np.any(np.asarray(updates.mean))
    assert not np.any(np.asarray(updates.std))
    decayed = [np.any(np.asarray(leaf)) for leaf in jax.tree_util.tree_leaves(updates.encoder)]
    assert any(decayed)  # the weights do decay


@pytest.mark.slow
def test_the_augmented_vits_unit_is_the_symmetric_datas(tmp_path: Path) -> None:
    """Trained with the square's symmetries (``Recipe.augment``), the ViT's output unit is the pointwise mean
    and standard deviation of the augmented set, the training solutions and their eight images (numpy's flips
    and transposes), in the unit of their root mean square; without, the solutions' own. Neither moves in
    training."""
    a = data.coefficients(5, 6, s=15)
    u = np.stack([data.solution(x) for x in a])
    scale = np.sqrt(np.mean(u**2))
    images = np.concatenate([np.stack([v, v[::-1], v[:, ::-1], v[::-1, ::-1]]) for v in u / scale])
    orbit = np.concatenate([images, images.transpose(0, 2, 1)])  # the 8 images of each of the 6 solutions
    for augment, sample in ((True, orbit), (False, u / scale)):
        recipe = Recipe(model=VIT, epochs=1, batch=2, warmup=0, augment=augment)
        model = train_image(recipe, a, u, tmp_path / str(augment)).model
        assert isinstance(model, vit.ViTToFunction)
        np.testing.assert_allclose(np.asarray(model.mean), sample.mean(axis=0), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(np.asarray(model.std), sample.std(axis=0) + 1e-5, rtol=1e-4, atol=1e-6)
    assert not np.allclose(orbit.mean(axis=0), (u / scale).mean(axis=0), rtol=1e-2)  # the two units differ


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"patch": 4}, "ViTConfig.patch = 4 does not divide ViTConfig.grid = 85"),
        ({"heads": 3}, "ViTConfig.heads = 3 does not divide ViTConfig.width = 128"),
        ({"hidden": 0}, "ViTConfig.hidden must be positive, got 0"),
        ({"low": 12.0}, "ViTConfig: the coefficient's values low = 12.0 and high = 12.0 must rise"),
        ({"solver_nodes": 3}, "ViTConfig.solver_nodes must be 0 (no solver) or >= 4, got 3"),
        ({"mixers": "akx"}, "ViTConfig.mixers must be a non-empty string of 'a' and 'k', got 'akx'"),
        ({"n": 90}, "ViTConfig: context = 5 must be >= 0 and n = 90 at most the grid"),
    ],
)
def test_a_wrong_vit_setting_is_refused_by_name(fields: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        ViTConfig(**fields)  # type: ignore[arg-type]


@pytest.mark.end_to_end
def test_the_default_recipe_and_command_train_the_best_model(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The best learned model (docs/fno_darcy.md) is what Recipe() and the command without --model train: the ViT
    # with the square's symmetries, 50 epochs of 10; the attending model's recipe is IMAGE's.
    recipe = Recipe()
    assert (type(recipe.model), recipe.augment, recipe.epochs, recipe.batch) == (ViTConfig, True, 50, 10)
    assert recipe.model == ViTConfig()
    assert (type(IMAGE.model), IMAGE.augment, IMAGE.epochs, IMAGE.batch) == (ImageConfig, False, 40, 20)
    data, out = tmp_path / "data", tmp_path / "run"
    generate(data, 8, 4, 29, workers=1, progress=False, shard_size=4)
    command = ["train", "--data", str(data), "--out", str(out), "--s", "15", "--train", "8", "--epochs", "1",
               "--batch", "4", "--held-out", "4", "--architecture", TINY_VIT, "--quiet"]  # fmt: skip
    assert main(command) == 0
    config = json.loads((out / "config.json").read_text())
    assert config["model"] == "vit"
    assert config["recipe"]["augment"] is True
    assert main([*command[:4], str(tmp_path / "plain"), *command[5:], "--no-augment"]) == 0
    assert json.loads((tmp_path / "plain" / "config.json").read_text())["recipe"]["augment"] is False
    capsys.readouterr()
