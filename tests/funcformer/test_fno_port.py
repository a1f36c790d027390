"""The JAX port of the FNO's Darcy model and recipe (``funcformer.fno_darcy.fno``) against independent references: the
forward pass against a float64 numpy transcription of the authors' ``FNO2d.forward`` (numpy's FFTs, which define
the complex-to-real transform of the non-Hermitian spectrum, einsum, scipy's erf), at several resolutions and in the
corner cases of the mode blocks; the parameter count against the architecture's formula and the initial weights
against torch's bounds; the normaliser against its formulas; the optimiser against a numpy transcription of the
authors' Adam.py (complex arithmetic) and of torch.optim.Adam; the schedule against StepLR's formula; the training
loss against the benchmark's metric; a tiny training run against the mean solution; and the refusals."""

import math
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.typing import DTypeLike
from scipy.special import erf

from funcformer import parameter_count
from funcformer.fno_darcy import coefficients, solution
from funcformer.fno_darcy.fno import (
    FNOConfig,
    Normaliser,
    Normalisers,
    Params,
    TrainConfig,
    apply,
    evaluate,
    init,
    predict,
    train,
)
from funcformer.learning.metric import mean_values_relative_l2
from tests.applicative.tolerance import float32

SMALL = FNOConfig(modes=3, width=4, layers=4, padding=9, hidden=5)
jitted = jax.jit(apply, static_argnames="config")

# The reference forward pass: fourier_2d.py's FNO2d.forward, in float64 numpy


def gelu(x: np.ndarray) -> np.ndarray:
    """torch's exact GELU: x Phi(x)."""
    result: np.ndarray = 0.5 * x * (1.0 + erf(x / math.sqrt(2.0)))
    return result


def reference_forward(params: dict[str, np.ndarray], a: np.ndarray, config: FNOConfig) -> np.ndarray:
    """FNO2d.forward for x = a[..., None], transcribed: the grid, fc0, permute, F.pad, the Fourier layers (torch's
    slice assignments into a zero spectrum, numpy's irfft2), the crop, fc1, GELU, fc2."""
    p, m = config.padding, config.modes
    b, s1, s2 = a.shape
    gridx = np.broadcast_to(np.linspace(0, 1, s1)[None, :, None], a.shape)
    gridy = np.broadcast_to(np.linspace(0, 1, s2)[None, None, :], a.shape)
    x = np.stack([a, gridx, gridy], axis=-1) @ params["fc0.weight"].T + params["fc0.bias"]
    x = np.pad(x.transpose(0, 3, 1, 2), ((0, 0), (0, 0), (0, p), (0, p)))
    for k in range(config.layers):
        w1 = params[f"conv{k}.weights1.real"] + 1j * params[f"conv{k}.weights1.imag"]
        w2 = params[f"conv{k}.weights2.real"] + 1j * params[f"conv{k}.weights2.imag"]
        x_ft = np.fft.rfft2(x)
        out_ft = np.zeros((b, w1.shape[1], x.shape[-2], x.shape[-1] // 2 + 1), complex)
        out_ft[:, :, :m, :m] = np.einsum("bixy,ioxy->boxy", x_ft[:, :, :m, :m], w1)
        out_ft[:, :, -m:, :m] = np.einsum("bixy,ioxy->boxy", x_ft[:, :, -m:, :m], w2)
        x1 = np.fft.irfft2(out_ft, s=(x.shape[-2], x.shape[-1]))
        x2 = np.einsum("oi,bixy->boxy", params[f"w{k}.weight"][:, :, 0, 0], x) + params[f"w{k}.bias"][:, None, None]
        x = x1 + x2
        if k < config.layers - 1:
            x = gelu(x)
    x = x[..., :-p, :-p].transpose(0, 2, 3, 1)
    x = gelu(x @ params["fc1.weight"].T + params["fc1.bias"]) @ params["fc2.weight"].T + params["fc2.bias"]
    result: np.ndarray = x[..., 0]
    return result


def random_params(config: FNOConfig, seed: int) -> dict[str, np.ndarray]:
    """Normal draws (standard deviation 0.5) in the shapes of ``init``'s: the spectral path as large as the rest (at
    torch's initialisation it is ~1/w^2 of it) and the spectrum's k2 = 0 column far from Hermitian."""
    rng = np.random.default_rng(seed)
    return {name: 0.5 * rng.standard_normal(value.shape) for name, value in init(0, config).items()}


def as_jax(params: dict[str, np.ndarray], dtype: DTypeLike) -> Params:
    return {name: jnp.asarray(value, dtype) for name, value in params.items()}


CASES = [
    (SMALL, (3, 11, 11)),
    (SMALL, (2, 16, 16)),
    (SMALL, (2, 11, 16)),  # a rectangular grid
    # n = (7, 6): the two row blocks overlap (2m > n1: the second wins) and the kept columns reach the Nyquist one
    (FNOConfig(modes=4, width=3, layers=2, padding=1, hidden=4), (2, 6, 5)),
]


@pytest.mark.parametrize(("config", "shape"), CASES)
def test_forward_pass_is_the_reference(config: FNOConfig, shape: tuple[int, int, int]) -> None:
    params = random_params(config, seed=shape[1])
    a = np.random.default_rng(shape[2]).standard_normal(shape)
    expected = reference_forward(params, a, config)
    scale = np.max(np.abs(expected))
    assert scale > 0.1  # a test of something
    in64 = np.asarray(jitted(as_jax(params, jnp.float64), a, config))
    np.testing.assert_allclose(in64, expected, rtol=0, atol=1e-12 * scale)
    if config == SMALL and shape[1] == shape[2]:  # float32, the default: the square grids
        out32 = jitted(as_jax(params, jnp.float32), jnp.asarray(a, jnp.float32), config)
        assert out32.dtype == jnp.float32
        assert out32.shape == shape
        tol = float32(2e-5)  # the backend's float32 products: TF32 on a GPU
        np.testing.assert_allclose(np.asarray(out32, np.float64), expected, rtol=0, atol=tol["atol"] * scale)


def test_parameter_count_and_initialisation() -> None:
    """The paper's configuration: the count from the architecture's formula (2,368,001, the authors' count_params), and
    the initial weights within torch's bounds, filling them."""
    config = FNOConfig()
    assert (config.modes, config.width, config.layers, config.padding, config.hidden) == (12, 32, 4, 9, 128)
    w, m, layers, h = 32, 12, 4, 128
    formula = (3 * w + w) + layers * 2 * 2 * w * w * m * m + layers * (w * w + w) + (w * h + h) + (h + 1)
    params = init(0, config)
    assert parameter_count(params) == formula == 2_368_001
    assert all(value.dtype == jnp.float32 for value in params.values())
    spectral = np.concatenate([np.ravel(v) for k, v in params.items() if k.startswith("conv")])
    assert spectral.size == layers * 2 * 2 * w * w * m * m
    assert spectral.min() >= 0.0
    assert spectral.max() < 1.0 / (w * w)
    assert abs(spectral.mean() - 0.5 / (w * w)) < 0.01 / (w * w)  # U(0, 1/w^2): mean 1/(2w^2), 2.4M draws
    fan_in = {"fc0": 3, "fc1": w, "fc2": h, **{f"w{k}": w for k in range(layers)}}
    for name, fan in fan_in.items():
        bound = 1.0 / math.sqrt(fan)
        for part in ("weight", "bias"):
            values = np.asarray(params[f"{name}.{part}"])
            assert np.all(np.abs(values) <= bound), f"{name}.{part}"
        weights = np.asarray(params[f"{name}.weight"])
        if weights.size >= 1000:
            assert np.max(np.abs(weights)) > 0.95 * bound
    assert params["w0.weight"].shape == (w, w, 1, 1)
    assert params["fc0.weight"].shape == (w, 3)
    again, other = init(0, config), init(1, config)
    assert all(np.array_equal(params[k], again[k]) for k in params)
    assert not np.array_equal(params["fc1.weight"], other["fc1.weight"])


def test_one_set_of_parameters_at_every_resolution() -> None:
    """The same parameters at s = 11 and s = 21, each against the reference at its resolution."""
    params = random_params(SMALL, seed=7)
    for s in (11, 21):
        a = np.random.default_rng(s).standard_normal((3, s, s))
        out = jitted(as_jax(params, jnp.float64), a, SMALL)
        assert out.shape == (3, s, s)
        np.testing.assert_allclose(out, reference_forward(params, a, SMALL), rtol=0, atol=1e-11)


def test_normaliser_is_unit_gaussian_normalizer() -> None:
    """Mean and unbiased standard deviation over the samples, by hand; encode and decode by their formulas;
    a round trip; JAX arrays keep their dtype."""
    x = np.random.default_rng(0).uniform(2.0, 5.0, (7, 4, 3))
    normaliser = Normaliser.fit(x)
    mean = sum(x[i] for i in range(7)) / 7
    std = np.sqrt(sum((x[i] - mean) ** 2 for i in range(7)) / 6)
    np.testing.assert_allclose(normaliser.mean, mean, rtol=1e-14)
    np.testing.assert_allclose(normaliser.std, std, rtol=1e-14)
    assert normaliser.eps == 1e-5
    y = np.random.default_rng(1).standard_normal((2, 4, 3))
    np.testing.assert_allclose(normaliser.encode(y), (y - mean) / (std + 1e-5), rtol=1e-14)
    np.testing.assert_allclose(normaliser.decode(y), y * (std + 1e-5) + mean, rtol=1e-14)
    np.testing.assert_allclose(normaliser.decode(normaliser.encode(y)), y, rtol=0, atol=1e-14)
    encoded32 = normaliser.encode(jnp.asarray(y, jnp.float32))
    assert isinstance(encoded32, jax.Array)
    assert encoded32.dtype == jnp.float32
    np.testing.assert_allclose(encoded32, (y - mean) / (std + 1e-5), rtol=1e-5)
    with pytest.raises(ValueError, match="at least 2 samples"):
        Normaliser.fit(x[:1])


def test_schedule_is_steplr() -> None:
    """Adam's updates under a constant unit gradient are the rate itself (to its eps, 1e-8): update k of an
    epoch of 3 updates is 0.3 * 0.25^((k // 3) // 2), StepLR's formula."""
    opt = TrainConfig(learning_rate=0.3, step_size=2, gamma=0.25, weight_decay=0.0).optimiser(steps_per_epoch=3)
    params = {"w": jnp.zeros((), jnp.float64)}
    state = opt.init(params)
    for count in range(20):
        updates, state = opt.update({"w": jnp.ones((), jnp.float64)}, state, params)
        assert -float(updates["w"]) == pytest.approx(0.3 * 0.25 ** ((count // 3) // 2), rel=1e-7)


def reference_adam(
    params: dict[str, np.ndarray], grads: list[dict[str, np.ndarray]], rates: list[float], decay: float
) -> dict[str, np.ndarray]:
    """Adam with torch's L2 weight decay on complex weights held as complex arrays, as torch.optim.Adam's
    view_as_real: each real component its own moments."""
    b1, b2, eps = 0.9, 0.999, 1e-8

    def complex_view(tree: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        out = {k: v for k, v in tree.items() if not k.endswith((".real", ".imag"))}
        out.update({k[:-5]: v + 1j * tree[k[:-5] + ".imag"] for k, v in tree.items() if k.endswith(".real")})
        return out

    p = complex_view(params)
    exp_avg = {k: np.zeros_like(v) for k, v in p.items()}
    exp_avg_sq = {k: np.zeros_like(v) for k, v in p.items()}
    for step, (g_tree, lr) in enumerate(zip(grads, rates, strict=True), start=1):
        g_all = complex_view(g_tree)
        for k in p:
            grad = g_all[k] + decay * p[k]
            exp_avg[k] = beta_mix(exp_avg[k], grad, b1)
            if not np.iscomplexobj(grad):
                exp_avg_sq[k] = beta_mix(exp_avg_sq[k], grad * grad.conj(), b2)
                denom = np.sqrt(exp_avg_sq[k]) / math.sqrt(1 - b2**step) + eps
                p[k] = p[k] - lr / (1 - b1**step) * exp_avg[k] / denom
            else:
                exp_avg_sq[k] = beta_mix(exp_avg_sq[k], grad.real**2 + 1j * grad.imag**2, b2)
                denom_re = np.sqrt(exp_avg_sq[k].real) / math.sqrt(1 - b2**step) + eps
                denom_im = np.sqrt(exp_avg_sq[k].imag) / math.sqrt(1 - b2**step) + eps
                step_size = lr / (1 - b1**step)
                p[k] = p[k] - step_size * (exp_avg[k].real / denom_re + 1j * exp_avg[k].imag / denom_im)
    out = {k: v for k, v in p.items() if not np.iscomplexobj(v)}
    out.update({f"{k}.real": v.real for k, v in p.items() if np.iscomplexobj(v)})
    out.update({f"{k}.imag": v.imag for k, v in p.items() if np.iscomplexobj(v)})
    return out


def beta_mix(average: np.ndarray, value: np.ndarray, beta: float) -> np.ndarray:
    """torch's ``average.mul_(beta).add_(value, alpha=1 - beta)``."""
    mixed: np.ndarray = average * beta + value * (1 - beta)
    return mixed


def test_optimiser_is_torchs_adam_with_weight_decay() -> None:
    """Seven updates, two a epoch, the rate halved every epoch, a large weight decay: the parameters against the
    numpy transcription (float64, to rounding)."""
    config = FNOConfig(modes=2, width=2, layers=2, padding=1, hidden=3)
    run = TrainConfig(learning_rate=0.1, step_size=1, gamma=0.5, weight_decay=0.3)
    params = {k: np.asarray(v) for k, v in init(3, config, jnp.float64).items()}
    rng = np.random.default_rng(4)
    grads = [
        {k: rng.standard_normal(v.shape) * 10.0 ** rng.integers(-3, 2) for k, v in params.items()} for _ in range(7)
    ]
    opt = run.optimiser(steps_per_epoch=2)
    state = opt.init(as_jax(params, jnp.float64))
    current = as_jax(params, jnp.float64)
    update = jax.jit(opt.update)
    for g in grads:
        updates, state = update(as_jax(g, jnp.float64), state, current)
        current = {k: current[k] + updates[k] for k in current}
    rates = [0.1 * 0.5 ** (i // 2) for i in range(7)]
    expected = reference_adam(params, grads, rates, 0.3)
    assert set(expected) == set(current)
    for k in current:
        assert current[k].dtype == jnp.float64
        np.testing.assert_allclose(current[k], expected[k], rtol=1e-12, atol=1e-14, err_msg=k)
    moved = {k: np.max(np.abs(np.asarray(current[k]) - params[k])) for k in params}
    assert min(moved.values()) > 0.01  # every parameter took its steps


def darcy(count: int, s: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """``count`` Darcy samples (a, u) at s x s, from the benchmark's recipe."""
    a = coefficients(seed, count, s)
    return a, np.stack([solution(sample) for sample in a])


TINY = FNOConfig(modes=4, width=6, layers=2, padding=3, hidden=8)


@pytest.mark.slow
def test_training_loss_is_the_benchmarks_metric(tmp_path: Path) -> None:
    """At rate zero the parameters stay ``init``'s, the normalisers are fit on the training set, and the first
    epoch's loss is the mean over the samples of the relative L2 error of the decoded reference forward pass."""
    a, u = darcy(8, 9, seed=5)
    fitted, normalisers = train(a, u, tmp_path, TINY, TrainConfig(epochs=1, batch=4, learning_rate=0.0, seed=2))
    params = fitted.model
    history = np.mean(np.reshape(fitted.losses, (-1, 2)), axis=1) / 4  # a minibatch's loss is its sum
    start = init(2, TINY)
    assert all(np.array_equal(params[k], start[k]) for k in start)
    mean_a, std_a = a.mean(axis=0), a.std(axis=0, ddof=1)
    np.testing.assert_allclose(normalisers.a.mean, mean_a, rtol=1e-14)
    np.testing.assert_allclose(normalisers.a.std, std_a, rtol=1e-14)
    np.testing.assert_allclose(normalisers.u.std, u.std(axis=0, ddof=1), rtol=1e-14)
    reference_params = {k: np.asarray(v, np.float64) for k, v in start.items()}
    output = reference_forward(reference_params, (a - mean_a) / (std_a + 1e-5), TINY)
    decoded = output * (u.std(axis=0, ddof=1) + 1e-5) + u.mean(axis=0)
    assert history.shape == (1,)
    assert history[0] == pytest.approx(mean_values_relative_l2(decoded, u), rel=float32(1e-5)["rtol"])
    np.testing.assert_allclose(predict(params, normalisers, a, TINY, batch=4), decoded, **float32(1e-5, 1e-7))
    assert evaluate(params, normalisers, a, u, TINY, batch=4) == pytest.approx(
        mean_values_relative_l2(decoded, u), rel=float32(1e-5)["rtol"]
    )


def test_a_tiny_training_run_learns(tmp_path: Path) -> None:
    """40 Darcy samples at s = 9, 30 epochs: the loss falls, and ends well below the error of the mean solution (the
    decoded zero output) on the training set."""
    a, u = darcy(40, 9, seed=6)
    run = TrainConfig(epochs=30, batch=10, learning_rate=1e-2, step_size=10, seed=1)
    fitted, normalisers = train(a, u, tmp_path, TINY, run)
    history = np.mean(np.reshape(fitted.losses, (30, -1)), axis=1) / run.batch  # each epoch's mean
    assert history.shape == (30,)
    assert np.all(np.isfinite(history))
    assert history[-1] < 0.7 * history[0]
    baseline = mean_values_relative_l2(np.broadcast_to(normalisers.u.decode(np.zeros((9, 9))), u.shape), u)
    assert history[-1] < 0.7 * baseline


def test_refusals(tmp_path: Path) -> None:
    a, u = np.ones((30, 9, 9)), np.ones((30, 9, 9))
    with pytest.raises(ValueError, match=r"ntrain = 30 .* batch size 20"):
        train(a, u, tmp_path, TINY, TrainConfig(epochs=1))
    with pytest.raises(ValueError, match=r"a must have shape \(B, s1, s2\), got \(4, 9\)"):
        apply(init(0, TINY), np.ones((4, 9)), TINY)
    with pytest.raises(ValueError, match=r"train_a must have shape \(N, s1, s2\), got \(30, 81\)"):
        train(a.reshape(30, 81), u, tmp_path, TINY)
    with pytest.raises(ValueError, match="fewer Fourier modes"):
        apply(init(0, FNOConfig(modes=12, padding=1)), np.ones((1, 9, 9)), FNOConfig(modes=12, padding=1))
    with pytest.raises(ValueError, match="not those of"):
        apply(init(0, TINY), np.ones((1, 9, 9)), SMALL)
    for field in ("modes", "width", "layers", "padding", "hidden"):
        with pytest.raises(ValueError, match=rf"FNOConfig\.{field} must be a positive integer"):
            FNOConfig(**{field: 0})
    with pytest.raises(ValueError, match=r"TrainConfig\.batch"):
        TrainConfig(batch=0)
    with pytest.raises(ValueError, match="grid"):
        predict(init(0, TINY), Normalisers(Normaliser.fit(a), Normaliser.fit(u)), np.ones((2, 8, 8)), TINY)
