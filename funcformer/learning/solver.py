"""A trained run as a solver: ``load_solver(DIR, problem)``, a validating numpy function from input to output
coefficients, and with ``check=True`` one whose predictions carry their checks (``trust``).

The run's evaluation on its test set, which calibrates those checks, is ``funcformer.learning.evaluation``."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal, overload

import jax
import jax.numpy as jnp
import numpy as np

from applicative.training.files import METRICS
from funcformer.learning.checkpoints import load
from funcformer.learning.metric import real_array, resized
from funcformer.learning.problem import Problem, check_problem
from funcformer.learning.settings import RunConfig, read_run
from funcformer.learning.trust import Calibration, Checked, UncalibratedRun, UntrustedPrediction, read_calibration
from funcformer.model import Funcformer

__all__ = ["CheckedSolver", "Solver", "as_checked_solver", "as_solver", "load_solver"]

Solver = Callable[[np.ndarray], np.ndarray]
CheckedSolver = Callable[[np.ndarray], Checked]
"""A solver whose result carries each prediction's checks (``load_solver(DIR, check=True)``)."""

_EXPONENT = 1 << 20
"""Beyond every floating-point exponent: a factor 2^k clipped to it still over- or underflows."""

_apply = jax.jit(lambda m, x: jax.vmap(m)(x))
"""A model on a batch: one compilation per model structure and batch shape, shared by every solver."""


@overload
def load_solver(path: str | Path, problem: Problem[Any], *, check: Literal[False] = False) -> Solver: ...


@overload
def load_solver(path: str | Path, problem: Problem[Any], *, check: Literal[True]) -> CheckedSolver: ...


@overload
def load_solver(path: str | Path, problem: Problem[Any], *, check: bool) -> Solver | CheckedSolver: ...


def load_solver(path: str | Path, problem: Problem[Any], *, check: bool = False) -> Solver | CheckedSolver:
    """The ``problem`` run in ``path`` as a function: numpy input coefficients (B, P, Q) -> output
    coefficients (B, P, Q), both in the ``chebval2d`` convention; a run of another task is refused.

    The model is an operator on functions at its resolution, n x n coefficients (``RunConfig.data_config.n``);
    inputs may come at any count P x Q >= 1 x 1. An input is projected onto the model's resolution
    exactly: its coefficients of degree n or more in either variable are dropped (the orthogonal
    projection onto polynomials of degree < n per variable in the Chebyshev-weighted L2 inner
    product), a smaller one is padded with zeros (the same function). The prediction is returned at
    the input's count: padded with zeros, or its coefficients of degree P (Q) or more dropped. As a
    series it can be evaluated anywhere on [-1, 1]^2 (``numpy.polynomial.chebyshev.chebval2d``).

    The (projected) inputs are normalised by the run's ``Problem.normalise`` on the host, in float64 (or the
    input's dtype where wider); the model computes in its own dtype (float32); its output is scaled by
    the normalisation's factor times the run's stored output scale, in float64 (the factor as a power
    of two times a number near 1, so that it neither overflows nor underflows before the product
    does), and returned in the input's dtype. Inputs must be finite real numbers: floating point, or
    integers, taken as float64 (as ``from_arrays`` takes them; the prediction is then float64); a list
    of arrays of different shapes is refused, naming two. Past that, each of these raises a ValueError
    naming the first sample at fault, its value and the range it left, and counting the samples at fault:

    - an input whose normalised form is beyond the range of the model's dtype (or whose
      normalisation overflows float64): the input's fault;
    - a model output that is NaN or infinite (for a normalised input far outside the training set's);
    - a prediction that overflows the input's dtype;
    - a prediction that underflows it: a non-zero prediction whose largest coefficient is below
      2^(p - 1) times the dtype's smallest subnormal number, p the bits of precision of the narrower
      of the model's and the input's dtypes (float32 and narrower: the dtype's smallest normal number;
      float64: 2^-1051, about 4e-317), below which the dtype keeps fewer bits than the model computes.
      A coefficient lost below that is below the largest one's precision. A zero prediction (a zero
      factor: the input is zero and the task linear, as Poisson's f = 0) is no underflow.

    With ``check``, the solver returns a ``trust.Checked``: the predictions, each one's
    ``Problem.residual`` (an estimate of its relative error, computed on the normalised input and the
    prediction before its rounding to the input's dtype) and its input's ``distance`` from the
    training inputs; it warns (``trust.UntrustedPrediction``) when a batch has samples above the
    thresholds that ``evaluate`` calibrated on the run's test set and stored in its metrics.json. A
    run without that calibration still loads, with a ``trust.UncalibratedRun`` warning saying how to
    calibrate it; its distances are NaN and nothing is flagged. A problem without a residual
    (``Problem.residual`` None: a user's data, ``funcformer.learning.arrays``) has nothing to check
    predictions against: ``check`` raises a ValueError for it.

    Loading reads ``config.json``, ``checkpoint.npz`` (and with ``check``, ``metrics.json``) only,
    and generates no data.
    """
    directory = Path(path)
    check_problem(problem, f"load_solver({directory})")
    if check:
        _residual(problem, f"load_solver({directory}, check=True)")
    run = read_run(directory, problem)
    state = load(directory, run)
    if not check:
        return as_solver(state.model, state.scale, run, directory)
    calibration = read_calibration(directory / METRICS, run.data_config.n)
    if calibration is None:
        warnings.warn(
            f"load_solver({directory}, check=True): the run holds no trust calibration (its {METRICS} is "
            f"missing or older than calibrations): residuals are computed, distances are NaN and nothing is "
            f"flagged; calibrate it with "
            + problem.invocation(f"evaluate {directory}", f"funcformer.learning.evaluate({str(directory)!r}, problem)"),
            UncalibratedRun,
            stacklevel=2,
        )
    return as_checked_solver(state.model, state.scale, run, directory, calibration)


def as_solver(model: Funcformer, scale: float, run: RunConfig, directory: Path) -> Solver:
    """``model`` (trained on ``run`` with output scale ``scale``, saved in ``directory``) as a
    validating numpy function; see ``load_solver``."""
    predict = _predictor(model, scale, run, directory)

    def solver(x: np.ndarray) -> np.ndarray:
        return predict(x)[0]

    return solver


def as_checked_solver(
    model: Funcformer, scale: float, run: RunConfig, directory: Path, calibration: Calibration | None
) -> CheckedSolver:
    """``as_solver``'s solver whose result carries each prediction's checks, flagged against
    ``calibration`` (None: no distances, nothing flagged); see ``load_solver``."""
    name = f"load_solver({directory}, check=True)"
    residual = _residual(run.problem, name)
    predict = _predictor(model, scale, run, directory)

    def solver(x: np.ndarray) -> Checked:
        result, inputs, unit = predict(x)
        residuals = residual(inputs, unit, run.data_config.solver)
        if calibration is None:
            return Checked(result, residuals, np.full(len(result), np.nan))
        distances = calibration.distance(inputs)
        for values, threshold, what in (
            (residuals, calibration.residual_threshold, "predictions have a residual"),
            (distances, calibration.distance_threshold, "inputs lie at a distance from the training inputs"),
        ):
            flagged = np.flatnonzero(~(values <= threshold))
            if flagged.size:
                worst = flagged[np.argmax(np.nan_to_num(values[flagged], nan=np.inf))]
                listed = ", ".join(str(i) for i in flagged[:10]) + (", ..." if flagged.size > 10 else "")
                warnings.warn(
                    f"{name}: {flagged.size} of {len(result)} {what} above the run's threshold {threshold:.3g} "
                    f"(its test set's {calibration.quantile:.0%} quantile): samples {listed}; the largest, "
                    f"{values[worst]:.3g}, at sample {worst}. Check them against the exact solver before use",
                    UntrustedPrediction,
                    stacklevel=2,
                )
        return Checked(result, residuals, distances)

    return solver


def _residual(problem: Problem[Any], name: str) -> Callable[[np.ndarray, np.ndarray, int], np.ndarray]:
    """The problem's ``residual``, or a ValueError naming ``name`` if it has none."""
    if problem.residual is None:
        raise ValueError(
            f"{name}: the {problem.title} problem has no a-posteriori residual (its Problem.residual is None), "
            "so its predictions cannot be checked; load it with check=False"
        )
    return problem.residual


def _predictor(
    model: Funcformer, scale: float, run: RunConfig, directory: Path
) -> Callable[[np.ndarray], tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """The validated prediction of a batch: (the predictions, in the input's dtype and count; the model's
    inputs x' (n x n); the predictions before the factor c, scale * model(x') in float64 or wider, zero
    where c = 0 (n x n))."""
    n = run.data_config.n
    problem = run.problem
    model_dtype = np.dtype(jax.tree_util.tree_leaves(model)[0].dtype)
    name = f"load_solver({directory})"

    def predict(x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        given = real_array(x, f"{name}: the {problem.input} coefficients")  # integers as float64
        if given.ndim != 3 or 0 in given.shape[1:]:
            raise ValueError(
                f"{name}: expected {problem.input} coefficients of shape (B, P, Q), any P, Q >= 1 (the model's "
                f"resolution is {n} x {n}), got {given.shape}"
            )
        if not np.all(np.isfinite(given)):
            raise ValueError(f"{name}: the {problem.input} coefficients contain NaN or infinite values")
        a = resized(given, n, n)  # the projection onto the model's resolution
        work = np.promote_types(a.dtype, np.float64)
        with np.errstate(all="ignore"):  # an overflowing normalisation is reported below, by sample
            inputs, log2_factors = problem.normalise(a.astype(work))
        _check_inputs(name, problem, a, inputs, log2_factors, model_dtype)
        unit = np.asarray(_apply(model, jnp.asarray(inputs.astype(model_dtype)))).astype(work) * scale
        _check_outputs(name, problem, inputs, unit, model_dtype)
        zero = np.isneginf(log2_factors)  # c = 0: a zero prediction
        unit[zero] = 0.0
        result = _scaled(name, a.dtype, unit, np.where(zero, 0.0, log2_factors), model_dtype)
        return resized(result, *given.shape[1:]), inputs, unit

    return predict


def _first(bad: np.ndarray, total: int, what: str) -> tuple[int, str]:
    """The first sample flagged in ``bad`` (B,), and "k of B samples <what>"."""
    return int(np.flatnonzero(bad)[0]), f"{np.count_nonzero(bad)} of {total} samples {what}"


def _check_inputs(
    name: str, problem: Problem[Any], a: np.ndarray, inputs: np.ndarray, log2_factors: np.ndarray, dtype: np.dtype[Any]
) -> None:
    """Refuse inputs whose normalised form the model's ``dtype`` cannot hold: the input's fault."""
    limit = np.finfo(dtype).max
    with np.errstate(invalid="ignore"):
        sizes = np.max(np.abs(inputs), axis=(1, 2))
    bad = ~(sizes <= limit) | np.isnan(log2_factors) | np.isposinf(log2_factors)
    if not bad.any():
        return
    i, count = _first(bad, len(a), "are out of range")
    if np.all(np.isfinite(inputs[i])) and np.isfinite(sizes[i]):
        p, q = np.unravel_index(np.argmax(np.abs(inputs[i])), inputs.shape[1:])
        raise ValueError(
            f"{name}: the {problem.input} of sample {i} is out of the model's range: its coefficient "
            f"[{p}, {q}] = {a[i, p, q]:.3g} normalises to {inputs[i, p, q]:.3g}, beyond the range of {dtype}, "
            f"the model's dtype (largest {limit:.3g}); {count}"
        )
    p, q = np.unravel_index(np.argmax(np.abs(a[i])), a.shape[1:])
    raise ValueError(
        f"{name}: the {problem.input} of sample {i} is out of range: normalising it overflows {inputs.dtype} "
        f"(its largest coefficient, [{p}, {q}] = {a[i, p, q]:.3g}; {problem.title}'s normalisation computes in "
        f"{inputs.dtype}, largest {np.finfo(inputs.dtype).max:.3g}); {count}"
    )


def _check_outputs(
    name: str, problem: Problem[Any], inputs: np.ndarray, unit: np.ndarray, dtype: np.dtype[Any]
) -> None:
    """Refuse NaN or infinite model outputs, naming the normalised input's size."""
    bad = ~np.all(np.isfinite(unit), axis=(1, 2))
    if bad.any():
        i, count = _first(bad, len(unit), "give NaN or infinite outputs")
        raise ValueError(
            f"{name}: the model ({dtype}) gives NaN or infinite coefficients for sample {i}, whose normalised "
            f"{problem.input} reaches {np.max(np.abs(inputs[i])):.3g}, far outside the training inputs; {count}"
        )


def _magnitude(log2: float) -> str:
    """2^log2 in decimal, as "4.2e-317", whether a float can hold it or not ("10^(4.3e+18)" beyond a million
    digits)."""
    decimal = log2 * np.log10(2.0)
    if abs(decimal) >= 1e6:
        return f"10^({decimal:.2g})"
    exponent = int(np.floor(decimal))
    mantissa = float(np.round(10.0 ** (decimal - exponent), 1))
    if mantissa >= 10.0:
        mantissa, exponent = 1.0, exponent + 1
    return f"{mantissa:.1f}e{exponent:+03d}"


def _scaled(
    name: str, dtype: np.dtype[Any], unit: np.ndarray, log2: np.ndarray, model_dtype: np.dtype[Any]
) -> np.ndarray:
    """2^log2 * unit per sample (B,), (B, n, n) in ``dtype``, or a ValueError for a sample that over- or
    underflows it (see ``load_solver``)."""
    # c u' as 2^k (2^(l - k) u'), k = round(l): neither the factor nor the product over- or underflows
    # early; |k| is clipped where no dtype could hold the result anyway (so that it fits an int).
    k = np.clip(np.round(log2), -_EXPONENT, _EXPONENT)
    fraction = np.exp2(np.clip(log2 - k, -1.0, 1.0))
    with np.errstate(over="ignore", under="ignore"):
        result = np.ldexp(unit * fraction[:, None, None], k.astype(np.int64)[:, None, None]).astype(dtype)
    largest = np.max(np.abs(unit), axis=(1, 2))
    with np.errstate(divide="ignore"):
        sizes = np.log2(largest) + log2  # log2 of the largest coefficient, exactly computed
    overflow = ~np.all(np.isfinite(result), axis=(1, 2))
    if overflow.any():
        i, count = _first(overflow, len(unit), "overflow")
        raise ValueError(
            f"{name}: the prediction for sample {i} would reach about {_magnitude(sizes[i])}, beyond the range of "
            f"{dtype} (largest {np.finfo(dtype).max:.3g}); {count}"
        )
    bits = min(np.finfo(dtype).nmant, np.finfo(model_dtype).nmant)
    lower = np.ldexp(np.finfo(dtype).smallest_subnormal, bits)
    underflow = (largest > 0) & (np.max(np.abs(result), axis=(1, 2)) < lower)
    if underflow.any():
        i, count = _first(underflow, len(unit), "underflow")
        raise ValueError(
            f"{name}: the prediction for sample {i} would reach only about {_magnitude(sizes[i])}, below the "
            f"range of {dtype} (where it keeps the model's {bits + 1} bits, from {lower:.3g}); {count}"
        )
    scaled: np.ndarray = result
    return scaled
