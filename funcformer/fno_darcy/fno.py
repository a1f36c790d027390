"""The Fourier Neural Operator's 2-D Darcy model and its training recipe (Li et al. 2021, "Fourier Neural Operator for
Parametric Partial Differential Equations"), ported to JAX from the authors' ``fourier_2d.py`` and the two files it
imports, ``utilities3.py`` (the normaliser, the loss) and ``Adam.py`` (the optimiser). The contract, each line of it
checked against an independent reference (tests/funcformer/test_fno_port.py; the forward pass and the optimiser
against float64 numpy transcriptions):

Model (``init``, ``apply``; ``FNOConfig``: modes m = 12, width w = 32, layers L = 4, padding p = 9, hidden h = 128)
    input         a: (B, s1, s2), the normalised coefficient; at each point the features (a, x, y), x = linspace(0, 1,
                  s1) along axis 1 and y = linspace(0, 1, s2) along axis 2 (``get_grid``): any resolution
    lift          fc0: R^3 -> R^w pointwise; channels first, (B, w, s1, s2); zero-padded by p at the END of both
                  spatial axes (``F.pad(x, [0, p, 0, p])``): (B, w, n1, n2), n = s + p
    L layers      v <- K(v) + W(v), GELU after each but the last. W: a 1 x 1 convolution (w x w weight, bias).
                  K (``SpectralConv2d``): V = rfft2(v) over the spatial axes, (B, w, n1, n2 // 2 + 1); the output
                  spectrum is zero but for out[:, :, :m, :m] = einsum("bixy,ioxy->boxy", V[:, :, :m, :m], R1) and
                  then out[:, :, -m:, :m] = einsum(..., V[:, :, -m:, :m], R2), written second (it wins where the
                  blocks overlap, 2m > n1); K(v) = irfft2(out, s=(n1, n2)). R1, R2: complex (w, w, m, m).
    project       the padding cropped (``x[..., :-p, :-p]``); fc1: R^w -> R^h, GELU, fc2: R^h -> R, pointwise
    GELU          the exact one, x Phi(x) (torch's ``F.gelu``): ``jax.nn.gelu(approximate=False)``
    inverse FFT   the output spectrum's k2 = 0 column is not Hermitian (R1 and R2 are independent), and a
                  complex-to-real transform of such input is the implementation's choice. Here it is what numpy and
                  torch on the CPU compute: the real part of the inverse along axis -2 at k2 = 0 (and at the Nyquist
                  column, n2 even). The column is made Hermitian first, c[k] <- (c[k] + conj(c[-k])) / 2, which gives
                  that result on any FFT backend. (cuFFT, on which the authors trained, documents no result for such
                  input, and its result differs from the CPU's in cases: pytorch/pytorch#154496.)
    initialisation torch's defaults: fc and 1 x 1 convolution weights and biases U(-1/sqrt(fan_in), 1/sqrt(fan_in)),
                  fan_in the input features (channels); R1, R2: real and imaginary parts each U(0, 1) / w^2
    parameters    a flat dict of arrays (``Params``) named and shaped as the torch module's state_dict ("fc0.weight":
                  (w, 3), "w0.weight": (w, w, 1, 1), ...), each complex weight as two real arrays
                  ("conv0.weights1.real", "conv0.weights1.imag"); the paper's configuration has 2,368,001 real
                  numbers (``funcformer.parameter_count``, as the authors' ``count_params``). float32 by default.

Training (``train``; ``TrainConfig``)
    normalisers   a UnitGaussianNormalizer (``Normaliser``) fit on the training a, another on the training u: the
                  pointwise mean and unbiased standard deviation over the samples (``torch.std``), eps = 1e-5,
                  encode (x - mean) / (std + eps), decode x (std + eps) + mean. The model sees encoded a; its output
                  is decoded by u's normaliser
    loss          ``LpLoss(size_average=False)``: the SUM over the minibatch of ||decoded output - u||_2 / ||u||_2 per
                  sample over the flattened grid, in physical units; its gradient (not the mean's) feeds the optimiser
    optimiser     Adam, betas (0.9, 0.999), eps 1e-8, with torch's ``weight_decay=1e-4``: an L2 term, 1e-4 * parameter
                  added to the gradient before the moments (not AdamW): optax's ``add_decayed_weights`` then
                  ``adam``, each real component its own moments, as torch.optim.Adam keeps them (the authors'
                  ``Adam.py`` keeps one second moment per complex weight, |g|^2 shared by its two parts: not ported)
    schedule      StepLR stepped once an epoch: epoch e's rate is 1e-3 * 0.5^(e // 100) (``TrainConfig.optimiser``,
                  ``applicative.training.step_decay``)
    epochs        500, each of ntrain / 20 minibatches in the order ``numpy.random.default_rng((seed, e))
                  .permutation(ntrain)``; ntrain = 1000 at s = 85 in the paper
    metric        the mean over the test set (100 in the paper) of each sample's relative L2 error of the decoded
                  prediction (``predict``) against its solution: ``metric.mean_values_relative_l2`` (``evaluate``)

Not ported: torch's random streams (the initial weights and the minibatch orders are drawn from their own seeds);
float32 rounding (the authors fit the normalisers in float32 and decode the encoded u in the loss; here they are fit
in float64 and the loss takes u as given).
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Literal, NamedTuple, TypeVar

import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax.typing import ArrayLike, DTypeLike

from applicative.training import Arrays, Learner, State, fit, step_decay, values_relative_l2
from funcformer.learning.metric import mean_values_relative_l2

__all__ = [
    "EPS",
    "FNOConfig",
    "Normaliser",
    "Normalisers",
    "Params",
    "TrainConfig",
    "apply",
    "description",
    "evaluate",
    "init",
    "learner",
    "predict",
    "train",
]

Params = dict[str, jax.Array]
"""The model's parameters: arrays named as the torch module's state_dict; a complex weight as ``NAME.real``,
``NAME.imag``."""

EPS = 1e-5
"""UnitGaussianNormalizer's eps."""

ArrayT = TypeVar("ArrayT", np.ndarray, jax.Array)


def _positive(owner: str, name: str, value: object) -> None:
    """A ValueError naming ``owner.name`` unless ``value`` is an int >= 1 (a bool is not)."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{owner}.{name} must be a positive integer, got {value!r}")


@dataclasses.dataclass(frozen=True)
class FNOConfig:
    """The architecture (the module's docstring); the defaults are the paper's Darcy model."""

    modes: int = 12
    """Fourier modes kept per axis (modes1 = modes2)."""
    width: int = 32
    """Channels of the Fourier layers."""
    layers: int = 4
    """Fourier layers (GELU after each but the last)."""
    padding: int = 9
    """Zeros appended to each spatial axis before the Fourier layers (the domain is not periodic)."""
    hidden: int = 128
    """Channels of the projection's hidden layer (fc1)."""

    def __post_init__(self) -> None:
        for field in dataclasses.fields(self):
            _positive("FNOConfig", field.name, getattr(self, field.name))


@dataclasses.dataclass(frozen=True)
class TrainConfig:
    """The training protocol (the module's docstring); the defaults are the paper's Darcy script."""

    epochs: int = 500
    batch: int = 20
    learning_rate: float = 1e-3
    """The rate of the first ``step_size`` epochs."""
    step_size: int = 100
    """Epochs between the rate's reductions (StepLR)."""
    gamma: float = 0.5
    """The rate's factor every ``step_size`` epochs."""
    weight_decay: float = 1e-4
    """torch's L2 weight decay: ``weight_decay * parameter`` added to the gradient before Adam."""
    seed: int = 0
    """The initial weights' seed (``init``) and the minibatch orders' (``numpy.random.default_rng((seed, epoch))``)."""

    def __post_init__(self) -> None:
        for name in ("epochs", "batch", "step_size"):
            _positive("TrainConfig", name, getattr(self, name))
        if isinstance(self.seed, bool) or not isinstance(self.seed, int) or self.seed < 0:
            raise ValueError(f"TrainConfig.seed must be a non-negative integer, got {self.seed!r}")
        for name, least in (("learning_rate", 0.0), ("weight_decay", 0.0)):
            value = getattr(self, name)
            if not (isinstance(value, int | float) and math.isfinite(value) and value >= least):
                raise ValueError(f"TrainConfig.{name} must be a finite number >= {least}, got {value!r}")
        if not (isinstance(self.gamma, int | float) and math.isfinite(self.gamma) and self.gamma > 0):
            raise ValueError(f"TrainConfig.gamma must be a finite positive number, got {self.gamma!r}")

    def optimiser(self, steps_per_epoch: int) -> optax.GradientTransformation:
        """torch's Adam with ``weight_decay`` on StepLR: ``applicative.training.step_decay``, epoch e's rate
        ``learning_rate * gamma ** (e // step_size)``."""
        return step_decay(
            steps_per_epoch, self.learning_rate, every=self.step_size, gamma=self.gamma, weight_decay=self.weight_decay
        )


# The model


def _shapes(config: FNOConfig) -> dict[str, tuple[tuple[int, ...], Literal["linear", "spectral"], int]]:
    """Each parameter's (shape, kind, fan_in), in the torch module's order: fc0, conv0, ..., w0, ..., fc1, fc2."""
    w, m, h = config.width, config.modes, config.hidden
    shapes: dict[str, tuple[tuple[int, ...], Literal["linear", "spectral"], int]] = {
        "fc0.weight": ((w, 3), "linear", 3),
        "fc0.bias": ((w,), "linear", 3),
    }
    for k in range(config.layers):
        for name in ("weights1", "weights2"):
            for part in ("real", "imag"):
                shapes[f"conv{k}.{name}.{part}"] = ((w, w, m, m), "spectral", w)
    for k in range(config.layers):
        shapes[f"w{k}.weight"] = ((w, w, 1, 1), "linear", w)
        shapes[f"w{k}.bias"] = ((w,), "linear", w)
    shapes.update({"fc1.weight": ((h, w), "linear", w), "fc1.bias": ((h,), "linear", w)})
    shapes.update({"fc2.weight": ((1, h), "linear", h), "fc2.bias": ((1,), "linear", h)})
    return shapes


def init(seed: int, config: FNOConfig = FNOConfig(), dtype: DTypeLike = jnp.float32) -> Params:
    """The initial parameters of ``config`` drawn from ``seed`` (torch's default initialisation; the module's
    docstring), in ``dtype`` (float32 by default; float64 needs ``jax_enable_x64``). Deterministic in ``seed``: one
    vector of U(0, 1) draws, ``jax.random.uniform(jax.random.key(seed), (parameter count,), dtype)``, cut into the
    parameters in the torch module's order; u becomes u / w^2 in a spectral weight, (2u - 1) / sqrt(fan_in)
    elsewhere."""
    shapes = _shapes(config)
    sizes = [math.prod(shape) for shape, _, _ in shapes.values()]
    draws = jax.random.uniform(jax.random.key(seed), (sum(sizes),), dtype)  # traceable: jax.eval_shape takes shapes
    params: Params = {}
    start = 0
    for size, (name, (shape, kind, fan_in)) in zip(sizes, shapes.items(), strict=True):
        u = draws[start : start + size].reshape(shape)
        start += size
        value = u / (config.width * config.width) if kind == "spectral" else (2 * u - 1) / math.sqrt(fan_in)
        params[name] = jnp.asarray(value, draws.dtype)
    return params


def _hermitian(columns: jax.Array) -> jax.Array:
    """(c[k] + conj(c[-k mod n])) / 2 along axis -2: the Hermitian part, whose inverse DFT is the real part of c's."""
    mirrored = jnp.concatenate([columns[..., :1, :], jnp.flip(columns[..., 1:, :], axis=-2)], axis=-2)  # c[-k mod n]
    return (columns + jnp.conj(mirrored)) / 2


def _irfft2(columns: jax.Array, shape: tuple[int, int]) -> jax.Array:
    """numpy's ``irfft2(spectrum, s=shape)`` of the half spectrum (..., n1, n2 // 2 + 1) whose first m columns are
    ``columns`` (..., n1, m) and the rest zero, for any ``columns``: the columns that a real signal's spectrum holds
    real (k2 = 0 and, n2 even, n2 / 2) are made Hermitian along axis -2 first, so that the backend's complex-to-real
    transform gets the input it is defined for. m <= n2 // 2 + 1."""
    n2 = shape[1]
    m = columns.shape[-1]
    parts = [_hermitian(columns[..., :1])]
    if n2 % 2 == 0 and m == n2 // 2 + 1:  # the Nyquist column is kept: the last
        parts += [columns[..., 1:-1], _hermitian(columns[..., -1:])]
    else:
        parts.append(columns[..., 1:])
    spectrum = jnp.concatenate(parts, axis=-1)
    spectrum = jnp.pad(spectrum, [(0, 0)] * (spectrum.ndim - 1) + [(0, n2 // 2 + 1 - m)])
    return jnp.fft.irfft2(spectrum, s=shape)


def _spectral(v: jax.Array, r1: jax.Array, r2: jax.Array, modes: int) -> jax.Array:
    """SpectralConv2d: (B, C, n1, n2) -> (B, O, n1, n2) through the kept modes (the module's docstring). The output
    spectrum's first ``modes`` columns are assembled by concatenation: the rows of the first block that the second
    does not overwrite, zeros, the second block."""
    b, _, n1, n2 = v.shape
    spectrum = jnp.fft.rfft2(v)[..., :modes]
    low = jnp.einsum("bixy,ioxy->boxy", spectrum[:, :, :modes], r1)
    high = jnp.einsum("bixy,ioxy->boxy", spectrum[:, :, n1 - modes :], r2)
    kept = min(modes, n1 - modes)
    zeros = jnp.zeros((b, r1.shape[1], n1 - modes - kept, modes), spectrum.dtype)
    return _irfft2(jnp.concatenate([low[:, :, :kept], zeros, high], axis=2), (n1, n2))


def _linear(params: Params, name: str, x: jax.Array) -> jax.Array:
    """torch's nn.Linear on the last axis: x W^T + b."""
    return x @ params[f"{name}.weight"].T + params[f"{name}.bias"]


def _gelu(x: jax.Array) -> jax.Array:
    return jax.nn.gelu(x, approximate=False)


def apply(params: Params, a: ArrayLike, config: FNOConfig = FNOConfig()) -> jax.Array:
    """The model's output (B, s1, s2) for normalised inputs ``a`` (B, s1, s2) at any resolution, in the parameters'
    dtype (the module's docstring; ``FNO2d.forward`` with its output's channel axis dropped). Jit it with ``config``
    static. ValueError: ``a`` not of rank 3, a grid too small for the modes, or parameters not of ``config``."""
    expected = _shapes(config)
    if set(params) != set(expected) or any(params[k].shape != shape for k, (shape, _, _) in expected.items()):
        got = {k: tuple(v.shape) for k, v in params.items()}
        raise ValueError(f"apply: the parameters are not those of {config}: got {got}")
    dtype = params["fc0.weight"].dtype
    x = jnp.asarray(a, dtype)
    if x.ndim != 3:
        raise ValueError(f"apply: a must have shape (B, s1, s2), got {x.shape}")
    b, s1, s2 = x.shape
    m, p = config.modes, config.padding
    if m > s1 + p or m > (s2 + p) // 2 + 1:
        raise ValueError(
            f"apply: a {s1} x {s2} grid, padded to {s1 + p} x {s2 + p}, has fewer Fourier modes than modes = {m}"
        )
    gridx = jnp.broadcast_to(jnp.linspace(0.0, 1.0, s1, dtype=dtype)[None, :, None], (b, s1, s2))
    gridy = jnp.broadcast_to(jnp.linspace(0.0, 1.0, s2, dtype=dtype)[None, None, :], (b, s1, s2))
    v = _linear(params, "fc0", jnp.stack([x, gridx, gridy], axis=-1))  # (B, s1, s2, w)
    v = jnp.pad(jnp.moveaxis(v, -1, 1), ((0, 0), (0, 0), (0, p), (0, p)))  # (B, w, n1, n2)
    for k in range(config.layers):
        r1, r2 = (
            jax.lax.complex(params[f"conv{k}.{r}.real"], params[f"conv{k}.{r}.imag"]) for r in ("weights1", "weights2")
        )
        pointwise = jnp.einsum("bixy,oi->boxy", v, params[f"w{k}.weight"][:, :, 0, 0])
        v = _spectral(v, r1, r2, m) + pointwise + params[f"w{k}.bias"][None, :, None, None]
        if k < config.layers - 1:
            v = _gelu(v)
    v = jnp.moveaxis(v[:, :, :s1, :s2], 1, -1)  # (B, s1, s2, w)
    out = _linear(params, "fc2", _gelu(_linear(params, "fc1", v)))
    return out[..., 0]


_apply = jax.jit(apply, static_argnames="config")


# The normalisers


@dataclasses.dataclass(frozen=True, eq=False)  # arrays: no elementwise == or hash
class Normaliser:
    """The authors' UnitGaussianNormalizer: pointwise ``mean`` and unbiased standard deviation ``std`` (float64) of the
    samples it was fit on (``fit``), and ``eps``."""

    mean: np.ndarray
    std: np.ndarray
    eps: float = EPS

    @classmethod
    def fit(cls, samples: ArrayLike, eps: float = EPS) -> Normaliser:
        """The normaliser of ``samples`` (N, ...), N >= 2: mean and ``std(ddof=1)`` over axis 0 (``torch.std``)."""
        array = np.asarray(samples, dtype=np.float64)
        if array.ndim < 1 or array.shape[0] < 2:
            raise ValueError(f"Normaliser.fit: need at least 2 samples (N, ...), got shape {array.shape}")
        return cls(np.mean(array, axis=0), np.std(array, axis=0, ddof=1), eps)

    def encode(self, x: ArrayT) -> ArrayT:
        """(x - mean) / (std + eps), in x's kind of array (numpy or JAX) and, for JAX, dtype."""
        mean, scale = self._constants(x)
        encoded: ArrayT = (x - mean) / scale
        return encoded

    def decode(self, x: ArrayT) -> ArrayT:
        """x (std + eps) + mean, in x's kind of array (numpy or JAX) and, for JAX, dtype: ``encode``'s inverse."""
        mean, scale = self._constants(x)
        decoded: ArrayT = x * scale + mean
        return decoded

    def _constants(self, x: ArrayT) -> tuple[ArrayT, ArrayT]:
        """(mean, std + eps) as numpy float64 arrays for a numpy x, as JAX arrays of x's dtype for a JAX x."""
        scale = self.std + self.eps
        if isinstance(x, np.ndarray):
            return self.mean, scale
        return jnp.asarray(self.mean, x.dtype), jnp.asarray(scale, x.dtype)


class Normalisers(NamedTuple):
    """The input's and the output's normalisers of a trained model."""

    a: Normaliser
    u: Normaliser


# Training


def _samples(what: str, array: ArrayLike) -> np.ndarray:
    """``array`` as finite float64 (N, s1, s2), or a ValueError naming ``what``."""
    samples = np.asarray(array, dtype=np.float64)
    if samples.ndim != 3:
        raise ValueError(f"{what} must have shape (N, s1, s2), got {samples.shape}")
    if not np.all(np.isfinite(samples)):
        raise ValueError(f"{what} holds NaN or infinite values")
    return samples


def learner(config: FNOConfig, normalisers: Normalisers) -> Learner[Params]:
    """The FNO of ``config`` as ``funcformer.learning`` trains it: ``init``, the loss (the SUM over the minibatch
    of the relative L2 errors of the decoded output, the authors' ``LpLoss(size_average=False)``) of encoded
    coefficients against solutions in physical units, and the decoded prediction."""

    def loss(params: Params, a: jax.Array, u: jax.Array) -> jax.Array:
        return jnp.sum(values_relative_l2(normalisers.u.decode(apply(params, a, config)), u))

    def predict(params: Params, a: jax.Array) -> jax.Array:
        return normalisers.u.decode(apply(params, a, config))

    return Learner(functools.partial(init, config=config), loss, predict)


def description(config: FNOConfig, run: TrainConfig, count: int, s: int) -> str:
    """A run's config.json: the model, the protocol, the training samples and their grid."""
    fields = {"model": "fno", "config": dataclasses.asdict(config), "training": dataclasses.asdict(run)}
    return json.dumps({**fields, "train": count, "s": s}, indent=2, sort_keys=True)


def train(
    train_a: ArrayLike,
    train_u: ArrayLike,
    directory: Path | str,
    config: FNOConfig = FNOConfig(),
    run: TrainConfig = TrainConfig(),
    *,
    resume: bool = False,
    progress: bool = False,
    log: bool = False,
    validate: Callable[[Params, Normalisers], float] | None = None,
    validate_every: int = 1,
    seconds: float | None = None,
) -> tuple[State[Params], Normalisers]:
    """Train the model of ``config`` on coefficients ``train_a`` and solutions ``train_u`` (N, s1, s2) by ``run``'s
    protocol (the module's docstring), in float32, into the run directory ``directory`` (``applicative.training.fit``:
    a checkpoint every epoch; ``resume`` continues it; ``progress``: a bar; ``log``: a line an epoch, with
    ``validate(params, normalisers)`` every ``validate_every`` epochs). Returns the state, whose ``losses[k]`` is
    step k's minibatch loss (a SUM over the minibatch, as the authors' script; taken before its update), and the
    normalisers (fit on the training set again when a run resumes: the same numbers).

    ValueError: arrays not (N, s1, s2) of one shape or not finite, or N not a multiple of ``run.batch`` (no sample is
    dropped)."""
    a, u = _samples("train: train_a", train_a), _samples("train: train_u", train_u)
    if a.shape != u.shape:
        raise ValueError(f"train: train_a {a.shape} and train_u {u.shape} must have one shape")
    n = a.shape[0]
    if n % run.batch:
        raise ValueError(
            f"train: ntrain = {n} is not a multiple of the batch size {run.batch}: "
            f"{n % run.batch} samples would be dropped each epoch"
        )
    normalisers = Normalisers(Normaliser.fit(a), Normaliser.fit(u))
    per_epoch = n // run.batch
    state = fit(
        learner(config, normalisers), run.optimiser(per_epoch),
        Arrays(normalisers.a.encode(a).astype(np.float32), u.astype(np.float32), run.batch), directory,
        description=description(config, run, n, a.shape[-1]), steps=run.epochs * per_epoch, seed=run.seed,
        resume=resume, progress=progress, log=log,
        validate=None if validate is None else (lambda params: validate(params, normalisers)),
        validate_every=validate_every, seconds=seconds, block=per_epoch,
    )  # fmt: skip
    return state, normalisers


def predict(
    params: Params,
    normalisers: Normalisers,
    a: ArrayLike,
    config: FNOConfig = FNOConfig(),
    batch: int = 100,
) -> np.ndarray:
    """The decoded predictions (N, s1, s2), float64, for coefficients ``a`` (N, s1, s2) in physical units: encoded by
    ``normalisers.a``, the model applied ``batch`` samples at a time (jitted), decoded by ``normalisers.u``.
    The normalisers' grid must be a's. ValueError as ``apply``."""
    samples = _samples("predict: a", a)
    _positive("predict", "batch", batch)
    if normalisers.a.mean.shape != samples.shape[1:]:
        raise ValueError(f"predict: a's grid {samples.shape[1:]} is not the normalisers' {normalisers.a.mean.shape}")
    dtype = params["fc0.weight"].dtype
    encoded = normalisers.a.encode(samples)
    outputs = [
        np.asarray(_apply(params, jnp.asarray(encoded[i : i + batch], dtype), config))
        for i in range(0, len(samples), batch)
    ]
    return normalisers.u.decode(np.concatenate(outputs).astype(np.float64))


def evaluate(
    params: Params,
    normalisers: Normalisers,
    a: ArrayLike,
    u: ArrayLike,
    config: FNOConfig = FNOConfig(),
    batch: int = 100,
) -> float:
    """The benchmark's figure: the mean over the samples of the relative L2 error of ``predict`` against the
    solutions ``u`` (``metric.mean_values_relative_l2``)."""
    return mean_values_relative_l2(predict(params, normalisers, a, config, batch), np.asarray(u, dtype=np.float64))
