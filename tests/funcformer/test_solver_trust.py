"""When not to trust ``load_solver``: predictions beyond a dtype's range are errors naming the sample (overflow,
underflow, an input the model's dtype cannot hold); each task's a-posteriori residual against manufactured
solutions and an independent dense float64 ``numpy.polynomial`` computation; ``load_solver(DIR, check=True)``,
its calibration by ``evaluate`` and its warnings.

Every model here is freshly initialised (``init``), saved as a step-0 run: nothing below depends on training.
"""

import dataclasses
import json
import re
import warnings
from pathlib import Path

import numpy as np
import numpy.polynomial.chebyshev as C
import pytest

from applicative.training import State
from applicative.training.checkpoints import save
from applicative.training.files import CONFIG, METRICS, write_atomically
from funcformer import darcy, poisson
from funcformer.darcy import PROBLEM as DARCY
from funcformer.learning import RunConfig, Solver, load, load_solver
from funcformer.learning.evaluation import evaluate
from funcformer.learning.solver import as_checked_solver, as_solver
from funcformer.learning.steps import optimiser
from funcformer.learning.trust import (
    FLOOR,
    Calibration,
    Checked,
    UncalibratedRun,
    UntrustedPrediction,
    calibrate,
    relative,
)
from funcformer.model import ModelConfig, init
from funcformer.poisson import PROBLEM as POISSON

TINY = ModelConfig(channels=2, heads=1, head_channels=1, hidden_channels=2, layers=2, axes="xy", mixers="km", points=16)
RUN = RunConfig.of(DARCY, model=TINY, steps=4, batch=4, train_size=16, checkpoint_every=2, warmup=0)
POISSON_RUN = RunConfig.of(POISSON, model=TINY, steps=4, batch=4, train_size=16, checkpoint_every=2, warmup=0)
SCALE = 0.05
"""A Darcy output scale of the right size (the runs' is the mean ||u|| exp(m) of 1024 samples)."""


@pytest.fixture(autouse=True)
def cache(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FUNCFORMER_CACHE", str(tmp_path_factory.getbasetemp() / "cache"))


def saved(directory: Path, run: RunConfig) -> Path:
    """A freshly initialised model saved as ``run``'s step-0 checkpoint, as ``train`` saves one (no data)."""
    directory.mkdir()
    model = init(run.seed, run.model)
    write_atomically(directory / CONFIG, run.to_json())
    save(directory, run.to_json(), State(model, optimiser(run).init(model), 0, [], SCALE))
    return directory


@pytest.fixture(scope="module")
def darcy_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return saved(tmp_path_factory.mktemp("darcy") / "run", RUN)


@pytest.fixture(scope="module")
def solver(darcy_run: Path) -> Solver:
    return load_solver(darcy_run, DARCY)


def kappas(count: int = 3) -> np.ndarray:
    return darcy.permeabilities(darcy.DataConfig(), 5, count)


def shifted(kappa: np.ndarray, c: float) -> np.ndarray:
    """kappa + c: the constant coefficient moves (T_0(x) T_0(y) = 1)."""
    moved = kappa.copy()
    moved[:, 0, 0] += c
    return moved


def number_in(message: str, before: str) -> float:
    """The number printed just after ``before`` in ``message``."""
    match = re.search(re.escape(before) + r"\s*([-+0-9.e]+)", message)
    assert match, message
    return float(match.group(1))


# Predictions beyond the range of a dtype


@pytest.mark.parametrize(("constant", "decimal"), [(-1e18, "4.3e+17"), (-1e19, "4.3e+18")])
def test_a_huge_negative_constant_is_an_overflow_error_not_zeros(solver: Solver, constant: float, decimal: str) -> None:
    kappa = kappas()
    kappa[:, 0, 0] = constant  # u(kappa + c) = exp(-c) u(kappa): exp(1e19) is 10^(4.3e18)
    assert f"{-constant * np.log10(np.e):.1e}" == decimal
    with pytest.raises(
        ValueError, match=re.escape(f"sample 0 would reach about 10^({decimal}), beyond the range of float64")
    ):
        solver(kappa)


def test_an_input_the_models_dtype_cannot_hold_is_named_as_the_inputs_fault(solver: Solver) -> None:
    kappa = kappas()
    kappa[1, 0, 1] = 1e39  # finite in float64, beyond float32 (3.4e38)
    with pytest.raises(ValueError, match="out of the model's range") as raised:
        solver(kappa)
    message = str(raised.value)
    assert "log-permeability kappa of sample 1 is out of the model's range: its coefficient [0, 1] = 1e+39" in message
    assert "beyond the range of float32, the model's dtype (largest 3.4e+38); 1 of 3 samples" in message
    assert "prediction" not in message
    assert "nan" not in message
    with pytest.raises(ValueError, match="out of range") as raised:
        solver(np.full((1, 16, 16), 1e308))  # its mean overflows float64
    message = str(raised.value)
    assert "kappa of sample 0 is out of range: normalising it overflows float64" in message
    assert "largest coefficient, [0, 0] = 1e+308" in message
    assert "nan" not in message
    kappa = kappas()
    kappa[2, 0, 1] = 3e38  # float32 holds it, the model's layers do not
    with pytest.raises(
        ValueError, match=r"gives NaN or infinite coefficients for sample 2, whose normalised .* 3e\+38"
    ):
        solver(kappa)


LOWER: dict[type, float] = {np.float64: 2.0**-1051, np.float32: 2.0**-126, np.float16: 2.0**-14}
"""Where load_solver's documented underflow starts: 2^(p - 1) times the smallest subnormal, p = 24 bits
(float32, the model's) for float64; for float32 and float16 their smallest normal number."""


@pytest.mark.parametrize(
    ("dtype", "constant", "raises"),
    [
        (np.float64, 700.0, False),
        (np.float64, 745.0, True),
        (np.float64, 735.0, True),
        (np.float64, -700.0, False),
        (np.float32, 80.0, False),
        (np.float32, 700.0, True),
        (np.float16, 4.0, False),
        (np.float16, 12.0, True),
    ],
)
def test_underflow_is_an_error_as_overflow_is(solver: Solver, dtype: type, constant: float, raises: bool) -> None:
    given: np.ndarray = shifted(kappas(), constant).astype(dtype)
    # the symmetry, in float64: the prediction at kappa + c is exp(-c) times the one at kappa
    expected = solver(shifted(given.astype(np.float64), -constant)) * np.exp(-constant)
    largest = np.abs(expected).max(axis=(1, 2))
    assert np.all((largest < LOWER[dtype]) == raises)
    if not raises:
        predicted = solver(given)
        assert predicted.dtype == dtype
        # to the dtype's rounding and to that of kappa + c in float64 (the constant's ulp moves the factor)
        atol = 4 * (np.finfo(dtype).eps + np.spacing(abs(constant))) * largest.max()
        np.testing.assert_allclose(predicted, expected, rtol=0, atol=atol)
        return
    with pytest.raises(ValueError, match="underflow") as raised:
        solver(given)
    message = str(raised.value)
    assert "the prediction for sample 0 would reach only about" in message
    assert f"below the range of {np.dtype(dtype)}" in message
    assert "3 of 3 samples underflow" in message
    np.testing.assert_allclose(number_in(message, "would reach only about"), largest[0], rtol=0.05)
    assert number_in(message, "bits, from") == pytest.approx(LOWER[dtype], rel=0.01)


def test_a_zero_source_gives_zero_and_a_subnormal_one_an_underflow_error(tmp_path: Path) -> None:
    solver = load_solver(saved(tmp_path / "run", POISSON_RUN), POISSON)
    f = poisson.sources(poisson.DataConfig(), 9, 2)
    unit = solver(f)
    predicted = solver(np.stack([f[0], np.zeros_like(f[1])]))
    np.testing.assert_array_equal(predicted[1], 0.0)  # f = 0 gives u = 0, not an underflow
    assert np.all(np.isfinite(solver(1e-300 * f)))
    with pytest.raises(ValueError, match=r"sample 0 would reach only about .* below the range of float64"):
        solver(1e-320 * f)  # a 1e-320 source: its prediction keeps fewer bits than the model's 24
    assert np.abs(unit).max() * 1e-320 < LOWER[np.float64]


# The residual: manufactured solutions, and an independent dense computation


def quadrature_norm(c: np.ndarray) -> float:
    """L2 norm on [-1, 1]^2 of one Chebyshev coefficient matrix (degree < 40), by 40-point Gauss-Legendre."""
    x, w = np.polynomial.legendre.leggauss(40)
    return float(np.sqrt(np.einsum("i,ij,j->", w, C.chebgrid2d(x, x, c) ** 2, w)))


def padded(c: np.ndarray, n: int) -> np.ndarray:
    out: np.ndarray = np.zeros((n, n))
    out[: c.shape[0], : c.shape[1]] = c
    return out


def laplacian(c: np.ndarray) -> np.ndarray:
    n = c.shape[0]
    result: np.ndarray = padded(C.chebder(c, 2, axis=0), n) + padded(C.chebder(c, 2, axis=1), n)
    return result


def manufactured(seed: int) -> np.ndarray:
    """16 x 16 coefficients of u = (1 - x^2)(1 - y^2) p(x, y), p of degree 5 per variable: u = 0 on the boundary."""
    p = np.random.default_rng(seed).standard_normal((6, 6))
    bubble = [0.5, 0.0, -0.5]  # 1 - x^2 = (T_0 - T_2) / 2
    b = np.zeros((8, 6))  # column i: (1 - x^2) T_i
    for i in range(6):
        b[: i + 3, i] = C.chebmul(bubble, np.eye(6)[i])[: i + 3]
    return padded(b @ p @ b.T, 16)


def test_poissons_residual_is_zero_for_the_exact_solution_and_the_error_for_a_perturbed_one() -> None:
    u = manufactured(0)
    f = laplacian(u)
    assert poisson.residual(f[None], u[None])[0] < 1e-12
    assert poisson.strong_residual(f[None], u[None])[0] < 1e-14
    bump = np.zeros((16, 16))
    bump[3, 2] = 1e-3 * quadrature_norm(u)  # T_3(x) T_2(y): not zero on the boundary
    predicted = u + bump
    # the inverse Laplacian is exact: e = u - u_p = -bump
    np.testing.assert_allclose(
        poisson.residual(f[None], predicted[None]), quadrature_norm(bump) / quadrature_norm(predicted), rtol=1e-9
    )
    np.testing.assert_allclose(
        poisson.strong_residual(f[None], predicted[None]),
        quadrature_norm(laplacian(bump)) / quadrature_norm(f),
        rtol=1e-12,
    )


def dense_darcy_residual(kappa: np.ndarray, u: np.ndarray, m: int = darcy.SOLVER_DEGREE) -> float:
    """darcy.residual's definition, written out: Lobatto points cos(pi k / m), the nodal differentiation matrix
    from numpy.polynomial (interpolate, chebder, evaluate), the Laplacian on the interior nodes as a dense
    Kronecker sum solved by LAPACK, the norms by Gauss-Legendre quadrature."""
    x = np.cos(np.pi * np.arange(m + 1) / m)
    v = C.chebvander(x, m)
    v_inverse = np.linalg.inv(v)
    d = v @ padded(C.chebder(np.eye(m + 1), axis=0), m + 1) @ v_inverse
    d2, eye = (d @ d)[1:-1, 1:-1], np.eye(m - 1)
    minus_laplacian = -(np.kron(d2, eye) + np.kron(eye, d2))  # x-major interior unknowns
    inner = x[1:-1]

    def at(c: np.ndarray) -> np.ndarray:
        values: np.ndarray = C.chebgrid2d(inner, inner, c)
        return values

    rhs = np.exp(-at(kappa))
    rhs += at(C.chebder(kappa, axis=0)) * at(C.chebder(u, axis=0))
    rhs += at(C.chebder(kappa, axis=1)) * at(C.chebder(u, axis=1))
    values = np.zeros((m + 1, m + 1))
    values[1:-1, 1:-1] = np.linalg.solve(minus_laplacian, rhs.ravel()).reshape(m - 1, m - 1)
    e = v_inverse @ values @ v_inverse.T - padded(u, m + 1)
    return quadrature_norm(e) / quadrature_norm(u)


def test_darcys_residual_matches_an_independent_dense_computation() -> None:
    kappa = kappas(2)
    rng = np.random.default_rng(1)
    u = darcy.truncate(darcy.solve(kappa), 16) + 1e-3 * rng.standard_normal((2, 16, 16)) / np.arange(1, 17)
    expected = [dense_darcy_residual(kappa[b], u[b]) for b in range(2)]
    np.testing.assert_allclose(darcy.residual(kappa, u), expected, rtol=1e-9)


def test_darcys_residual_of_the_exact_solution_is_zero_and_at_kappa_zero_is_poissons() -> None:
    kappa = kappas(2)
    exact = darcy.solve(kappa)  # (2, 33, 33): the collocation solution itself
    assert np.all(darcy.residual(padded_batch(kappa, 33), exact) < 1e-12)
    # truncated to 16 x 16, the residual is about its error (0.5x to 2x here)
    truncated = darcy.truncate(exact, 16)
    ratio = darcy.residual(kappa, truncated) / darcy.relative_l2(truncated, exact)
    assert np.all((ratio > 0.5) & (ratio < 2.0))
    # kappa = 0: -(u_xx + u_yy) = 1 is Poisson's u_xx + u_yy = -1, at the same 33 points
    u = np.stack([manufactured(2), manufactured(3)])
    minus_one = np.zeros((2, 1, 1))
    minus_one[:, 0, 0] = -1.0
    np.testing.assert_allclose(
        darcy.residual(np.zeros_like(u), u), poisson.residual(minus_one, u, darcy.SOLVER_DEGREE + 1), rtol=1e-10
    )


def padded_batch(c: np.ndarray, n: int) -> np.ndarray:
    return np.stack([padded(x, n) for x in c])


def test_darcys_strong_residual_at_a_constant_kappa() -> None:
    u = manufactured(4)
    kappa = np.zeros((1, 16, 16))
    kappa[0, 0, 0] = 0.7  # constant: r = -(u_xx + u_yy) - exp(-0.7), a polynomial the interpolant holds exactly
    r = -laplacian(u)
    r[0, 0] -= np.exp(-0.7)
    np.testing.assert_allclose(
        darcy.strong_residual(kappa, u[None]), quadrature_norm(r) / (2 * np.exp(-0.7)), rtol=1e-11
    )


def test_the_residuals_are_invariant_under_the_normalisation() -> None:
    kappa = kappas(3)
    u = darcy.truncate(darcy.solve(kappa), 16) * 1.01
    inputs, log2 = darcy.normalise(kappa)
    np.testing.assert_allclose(
        darcy.residual(inputs, u / np.exp2(log2)[:, None, None]), darcy.residual(kappa, u), rtol=1e-10
    )
    f = poisson.sources(poisson.DataConfig(), 3, 3)
    u = poisson.truncate(poisson.solve(f), 16) * 1.01
    np.testing.assert_allclose(poisson.residual(3e-5 * f, 3e-5 * u), poisson.residual(f, u), rtol=1e-12)


# load_solver(DIR, check=True)


def test_a_checked_solver_of_an_uncalibrated_run_says_how_to_calibrate(darcy_run: Path, solver: Solver) -> None:
    with pytest.warns(UncalibratedRun, match=re.escape(f"python -m funcformer.darcy evaluate {darcy_run}")):
        checked = load_solver(darcy_run, DARCY, check=True)
    kappa = kappas()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # nothing flagged without thresholds
        result = checked(kappa)
    assert isinstance(result, Checked)
    assert isinstance(solver(kappa), np.ndarray)
    np.testing.assert_array_equal(result.u, solver(kappa))
    np.testing.assert_allclose(result.residual, darcy.residual(kappa, result.u), rtol=1e-10)
    assert result.distance.shape == (3,)
    assert np.all(np.isnan(result.distance))


def test_evaluate_calibrates_the_checks_from_the_runs_own_data(tmp_path: Path, solver: Solver) -> None:
    darcy_run = saved(tmp_path / "run", RUN)  # the model of the module's run: ``solver`` predicts for it
    evaluate(darcy_run, DARCY, test_size=8)
    stored = json.loads((darcy_run / METRICS).read_text())["trust"]
    # the training inputs' statistics, recomputed here from the task's definitions
    train_inputs, _ = darcy.normalise(darcy.permeabilities(darcy.DataConfig(), RUN.seed, RUN.train_size))
    std = train_inputs.std(axis=0)
    spread = np.maximum(std, FLOOR * np.max(std))
    np.testing.assert_allclose(stored["mean"], train_inputs.mean(axis=0), rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(stored["spread"], spread, rtol=1e-12)

    def distance(kappa: np.ndarray) -> np.ndarray:
        z = np.sqrt(np.mean(((darcy.normalise(kappa)[0] - train_inputs.mean(axis=0)) / spread) ** 2, axis=(1, 2)))
        distances: np.ndarray = z / np.median(
            np.sqrt(np.mean(((train_inputs - train_inputs.mean(axis=0)) / spread) ** 2, axis=(1, 2)))
        )
        return distances

    test = darcy.permeabilities(darcy.DataConfig(), darcy.TEST_SEED, 8)
    residuals = darcy.residual(test, solver(test))
    assert stored["residual_threshold"] == pytest.approx(np.quantile(residuals, 0.99), rel=1e-9)
    assert stored["distance_threshold"] == pytest.approx(np.quantile(distance(test), 0.99), rel=1e-9)
    checked = load_solver(darcy_run, DARCY, check=True)
    # the largest test residual and distance are above their 99% quantiles; kappa x 20 is far away
    batch = np.concatenate([test, 20.0 * test[:1]])
    with pytest.warns(UntrustedPrediction) as records:
        result = checked(batch)
    np.testing.assert_allclose(result.distance, distance(batch), rtol=1e-10)
    messages = [str(record.message) for record in records]
    far = [m for m in messages if "inputs lie at a distance" in m]
    assert len(far) == 1, messages
    assert f"samples {int(np.argmax(distance(test)))}, 8;" in far[0]
    assert "the largest" in far[0]
    assert "at sample 8" in far[0]
    assert any("have a residual above" in m for m in messages)


def test_the_warnings_name_exactly_the_samples_above_a_threshold(darcy_run: Path) -> None:
    state = load(darcy_run, RUN)
    kappa = kappas(4)
    residuals = darcy.residual(kappa, as_solver(state.model, SCALE, RUN, darcy_run)(kappa))
    order = np.argsort(residuals)
    mean, spread = np.zeros((16, 16)), np.ones((16, 16))
    threshold = float(residuals[order[1]] + residuals[order[2]]) / 2
    calibration = Calibration(mean, spread, 1.0, threshold, 1e300, 0.99, 8)
    checked = as_checked_solver(state.model, SCALE, RUN, darcy_run, calibration)
    with pytest.warns(UntrustedPrediction) as records:
        checked(kappa)
    assert len(records) == 1
    message = str(records[0].message)
    listed = ", ".join(str(i) for i in sorted(order[2:]))
    assert f"2 of 4 predictions have a residual above the run's threshold {threshold:.3g}" in message
    assert f"samples {listed};" in message
    assert f"at sample {order[3]}" in message


def test_a_damaged_calibration_is_a_clear_error(tmp_path: Path) -> None:
    run = saved(tmp_path / "run", RUN)
    (run / METRICS).write_text(json.dumps({"trust": {"version": 1, "mean": [[0.0]], "spread": [[1.0]]}}))
    with pytest.raises(ValueError, match=re.escape(f'{run / METRICS} (its "trust" entry): not a valid trust')):
        load_solver(run, DARCY, check=True)
    assert isinstance(load_solver(run, DARCY)(kappas()), np.ndarray)  # the plain solver does not read it


def test_a_zero_source_has_a_zero_residual(tmp_path: Path) -> None:
    run = saved(tmp_path / "run", POISSON_RUN)
    with pytest.warns(UncalibratedRun):
        checked = load_solver(run, POISSON, check=True)
    f = poisson.sources(poisson.DataConfig(), 9, 2)
    f[1] = 0.0
    result = checked(f)
    assert result.residual[1] == 0.0
    assert result.residual[0] > 0
    np.testing.assert_array_equal(result.u[1], 0.0)


# The calibration at its boundaries: a spread of zero, a tiny scale, a threshold reached exactly


def test_calibrate_is_the_documented_formula_at_a_zero_spread_and_a_tiny_scale() -> None:
    """The module docstring's formulas in numpy, on training inputs of size 1e-6 whose coefficient [0, 0]
    never varies: its spread is a thousandth of the largest one (not 0, not an absolute 1e-3), distances are
    z over the training inputs' median z, and the thresholds are the 99% quantiles of the test set's."""
    rng = np.random.default_rng(4)
    train = 1e-6 * rng.standard_normal((40, 4, 4)) * np.linspace(1.0, 3.0, 16).reshape(4, 4)
    train[:, 0, 0] = 0.25  # std 0
    test = 1e-6 * rng.standard_normal((9, 4, 4))
    test[:, 0, 0] = 0.25 + 1e-9 * np.arange(9)  # off the constant coefficient by up to 3 of its spreads
    residuals = rng.uniform(size=9)
    calibration = calibrate(train, test, residuals)
    std = train.std(axis=0)
    spread = np.maximum(std, 1e-3 * np.max(std))
    assert spread[0, 0] == 1e-3 * np.max(std) > 0

    def z(x: np.ndarray) -> np.ndarray:
        scores: np.ndarray = np.sqrt(np.mean(((x - train.mean(axis=0)) / spread) ** 2, axis=(1, 2)))
        return scores

    reference = float(np.median(z(train)))
    np.testing.assert_allclose(calibration.spread, spread, rtol=1e-12)
    assert calibration.reference == pytest.approx(reference, rel=1e-12)
    np.testing.assert_allclose(calibration.distance(test), z(test) / reference, rtol=1e-12)
    assert calibration.residual_threshold == pytest.approx(np.quantile(residuals, 0.99), rel=1e-12)
    assert calibration.distance_threshold == pytest.approx(np.quantile(z(test) / reference, 0.99), rel=1e-12)
    assert (calibration.quantile, calibration.samples) == (0.99, 9)


def test_inputs_that_never_vary_and_stored_zeros_are_refused() -> None:
    with pytest.raises(ValueError, match="the training inputs do not vary"):
        calibrate(np.full((5, 4, 4), 0.25), np.zeros((3, 4, 4)), np.zeros(3))  # every spread would be 0
    good = Calibration(np.zeros((2, 2)), np.ones((2, 2)), 1.5, 0.5, 2.0, 0.99, 8).to_json()
    assert Calibration.from_json(good, 2, "good").reference == 1.5
    spread = [[1.0, 1.0], [0.0, 1.0]]
    with pytest.raises(ValueError, match=r"bad: not a valid trust calibration \(a mean or spread .* not > 0\)"):
        Calibration.from_json({**good, "spread": spread}, 2, "bad")
    for key in ("reference", "residual_threshold", "distance_threshold"):
        with pytest.raises(ValueError, match=r"bad: not a valid trust calibration \(a threshold is not positive"):
            Calibration.from_json({**good, key: 0.0}, 2, "bad")


def test_relative_is_zero_for_zero_over_zero_and_infinite_for_a_positive_norm_over_zero() -> None:
    ratios = relative(np.array([0.0, 0.0, 3.0, 1.0]), np.array([0.0, 2.0, 0.0, 4.0]))
    np.testing.assert_array_equal(ratios, [0.0, 0.0, np.inf, 0.25])


def test_a_check_exactly_at_its_threshold_is_not_flagged_and_a_nan_one_is(darcy_run: Path) -> None:
    """A check is flagged strictly above its threshold: a residual or a distance equal to it passes, one a
    floating-point step above it is flagged, and so is a NaN check (one that could not be computed)."""
    state = load(darcy_run, RUN)
    kappa = kappas(4)
    residuals = as_checked_solver(state.model, SCALE, RUN, darcy_run, None)(kappa).residual
    mean, spread = np.zeros((16, 16)), np.ones((16, 16))
    distances = Calibration(mean, spread, 1.0, 1.0, 1.0, 0.99, 4).distance(darcy.normalise(kappa)[0])
    top_r, top_d = float(residuals.max()), float(distances.max())
    at = Calibration(mean, spread, 1.0, top_r, top_d, 0.99, 4)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        result = as_checked_solver(state.model, SCALE, RUN, darcy_run, at)(kappa)
    np.testing.assert_array_equal(result.residual, residuals)
    np.testing.assert_array_equal(result.distance, distances)
    below = Calibration(mean, spread, 1.0, float(np.nextafter(top_r, 0.0)), float(np.nextafter(top_d, 0.0)), 0.99, 4)
    with pytest.warns(UntrustedPrediction) as records:
        as_checked_solver(state.model, SCALE, RUN, darcy_run, below)(kappa)
    messages = sorted(str(record.message) for record in records)
    assert len(messages) == 2, messages
    assert "1 of 4 inputs lie at a distance from the training inputs above the run's threshold" in messages[0]
    assert f"samples {int(np.argmax(distances))};" in messages[0]
    assert "1 of 4 predictions have a residual above" in messages[1]
    assert f"samples {int(np.argmax(residuals))};" in messages[1]
    # a residual that could not be computed (NaN) is flagged, and named the largest
    nan_at_2 = dataclasses.replace(DARCY, residual=lambda x, u, task: np.where(np.arange(len(x)) == 2, np.nan, 0.0))
    run = dataclasses.replace(RUN, problem=nan_at_2)
    with pytest.warns(UntrustedPrediction, match=r"1 of 4 predictions have a residual .* samples 2; the largest, nan"):
        as_checked_solver(state.model, SCALE, run, darcy_run, at)(kappa)
