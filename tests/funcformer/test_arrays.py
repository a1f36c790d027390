"""A ``Problem`` from a user's arrays (``funcformer.learning.arrays``) against independent references: the split by
position, the output scale over the training part, the fingerprint that refuses a run of other data, values on
Lobatto grids to coefficients beside ``numpy.polynomial.chebyshev``, a tiny run trained, served and evaluated with
its floor and baselines recomputed in numpy, and docs/own_operator.md run as a user's program, its stated results
checked."""

import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import jax
import numpy as np
import numpy.polynomial.chebyshev as C
import pytest

from applicative.training.files import CHECKPOINT
from funcformer.learning import (
    RunConfig,
    evaluate,
    from_arrays,
    from_values,
    load,
    load_solver,
    lobatto_coefficients,
    read_run,
    train,
)
from funcformer.learning.arrays import ArraysDataConfig, unnormalised
from funcformer.learning.cli import _print_metrics
from funcformer.learning.data import output_scale, training_arrays
from funcformer.model import ModelConfig
from tests.applicative.tolerance import float32

ROOT = Path(__file__).parents[2]
PAGE = ROOT / "docs" / "own_operator.md"
N, M, SAMPLES, TEST = 4, 6, 40, 8
TINY = ModelConfig(n=N, channels=2, heads=1, head_channels=1, hidden_channels=2, layers=1, mixers="k")


def data(seed: int = 0, samples: int = SAMPLES, n: int = N, m: int = M) -> tuple[np.ndarray, np.ndarray]:
    """(inputs (samples, n, n), outputs (samples, m, m)): random coefficients decaying with the degree."""
    rng = np.random.default_rng(seed)
    decay = 1.0 / (1.0 + np.add.outer(np.arange(m), np.arange(m))) ** 2
    x = rng.standard_normal((samples, n, n)) * decay[:n, :n]
    u = rng.standard_normal((samples, m, m)) * decay
    u[:, :n, :n] += 0.5 * x  # a target the inputs partly explain
    return x, u


def problem_of(x: np.ndarray, u: np.ndarray, **options: Any) -> Any:
    return from_arrays("toy", x, u, test_size=TEST, model=TINY, **options)


def grid_values(c: np.ndarray) -> np.ndarray:
    """(B, k, k) coefficients on the metric's uniform 64 x 64 grid, by numpy's chebgrid2d."""
    x = np.linspace(-1.0, 1.0, 64)
    return np.stack([C.chebgrid2d(x, x, ci) for ci in c])


def metric(predicted: np.ndarray, exact: np.ndarray) -> np.ndarray:
    """Per-sample relative L2 error on the uniform 64 x 64 grid (numpy's own evaluation)."""
    difference, u = grid_values(predicted) - grid_values(exact), grid_values(exact)
    errors: np.ndarray = np.sqrt((difference**2).sum(axis=(1, 2)) / (u**2).sum(axis=(1, 2)))
    return errors


def quadrature_norms(c: np.ndarray) -> np.ndarray:
    """Per-sample L2 norms on [-1, 1]^2 of (B, k, k) Chebyshev coefficients, by 40-point Gauss-Legendre."""
    x, w = np.polynomial.legendre.leggauss(40)
    t = C.chebvander(x, c.shape[-1] - 1)
    norms: np.ndarray = np.sqrt(np.einsum("i,bij,j->b", w, (t @ c @ t.T) ** 2, w))
    return norms


# The split, the output scale and the defaults


def test_the_last_test_size_samples_are_the_test_set_and_every_training_seed_gives_the_rest() -> None:
    x, u = data()
    problem = problem_of(x, u)
    task = problem.data_config()
    assert task == ArraysDataConfig(N, M, SAMPLES - TEST, TEST, task.fingerprint)
    test = problem.dataset(Path("unused"), task, problem.test_seed, TEST, True)
    np.testing.assert_array_equal(test.inputs, x[-TEST:])
    np.testing.assert_array_equal(test.exact(), u[-TEST:])
    np.testing.assert_array_equal(test.u, u[-TEST:, :N, :N])
    for seed in (0, 1, 2**40):
        training = problem.dataset(Path("unused"), task, seed, 10, False)
        np.testing.assert_array_equal(training.inputs, x[:10])
        np.testing.assert_array_equal(training.u, u[:10, :N, :N])
        assert training.u_fine is None
    with pytest.raises(ValueError, match=r"9 test samples asked for \(evaluate's test_size\), the arrays hold 8"):
        problem.dataset(Path("unused"), task, problem.test_seed, 9, True)
    with pytest.raises(ValueError, match=r"training seed \d+ is the toy task's held-out test seed"):
        RunConfig.of(problem, seed=problem.test_seed)


def test_a_train_size_above_the_training_samples_is_refused_naming_both_numbers() -> None:
    problem = problem_of(*data())
    run = RunConfig.of(problem, train_size=SAMPLES - TEST + 1, batch=4)
    with pytest.raises(ValueError, match=r"RunConfig.train_size = 33 exceeds the 32 training samples .* 8 held out"):
        training_arrays(run, 1.0)
    # by default a run takes the whole training set, in minibatches of at most RunConfig's default 32
    assert (RunConfig.of(problem).train_size, RunConfig.of(problem).batch) == (32, 32)
    small = from_arrays("toy", *data(samples=12), test_size=2, model=TINY)
    assert (RunConfig.of(small).train_size, RunConfig.of(small).batch) == (10, 10)


def test_the_output_scale_averages_the_training_outputs_of_at_most_1024_samples() -> None:
    x, u = data()
    problem = problem_of(x, u)
    expected = np.mean(quadrature_norms(u[: SAMPLES - TEST, :N, :N]))  # all 32, not a test sample
    np.testing.assert_allclose(output_scale(problem, problem.data_config()), expected, rtol=1e-12)
    x, u = data(samples=1100, n=2, m=2)
    problem = from_arrays("big", x, u, test_size=50)
    expected = np.mean(quadrature_norms(u[:1024]))
    np.testing.assert_allclose(output_scale(problem, problem.data_config()), expected, rtol=1e-12)


def test_inputs_are_not_normalised_unless_a_normalisation_is_given() -> None:
    x, u = data()
    inputs, log2_factors = unnormalised(x)
    np.testing.assert_array_equal(inputs, x)
    np.testing.assert_array_equal(log2_factors, np.zeros(SAMPLES))

    def halved(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return values / 2.0, np.ones(len(values))  # x' = x / 2, c = 2

    run = RunConfig.of(problem_of(x, u, normalise=halved), batch=4)
    model_inputs, targets = training_arrays(run, 3.0)
    np.testing.assert_allclose(model_inputs, x[:32] / 2.0, rtol=1e-7)
    np.testing.assert_allclose(targets, u[:32, :N, :N] / 6.0, rtol=1e-6)


# The task in config.json: which data a run was trained on


def test_the_fingerprint_identifies_the_values_and_shapes_of_the_arrays() -> None:
    x, u = data()
    problem = problem_of(x, u)
    fingerprint = problem.data_config().fingerprint
    assert 0 <= fingerprint < 2**63
    assert problem_of(x.copy(), u.copy()).data_config().fingerprint == fingerprint
    changed = u.copy()
    changed[3, 5, 5] += 1e-12
    assert problem_of(x, changed).data_config().fingerprint != fingerprint
    padded = np.zeros((SAMPLES, M + 1, M + 1))
    padded[:, :M, :M] = u  # the same functions, other shapes: other arrays
    assert problem_of(x, padded).data_config().fingerprint != fingerprint
    integers = np.arange(SAMPLES * N * N).reshape(SAMPLES, N, N)  # stored as float64: the same values
    assert problem_of(integers, u).data_config() == problem_of(integers.astype(np.float64), u).data_config()
    first = x[0, 0, 0]
    x[0, 0, 0] += 1.0  # the problem holds its own copy: changing the caller's array changes nothing
    assert problem.data_config().fingerprint == fingerprint
    assert problem.dataset(Path("unused"), problem.data_config(), 0, 1, False).inputs[0, 0, 0] == first


def test_a_run_is_read_back_only_by_a_problem_built_from_its_arrays() -> None:
    x, u = data()
    problem = problem_of(x, u)
    run = RunConfig.of(problem, steps=5, batch=4)
    assert RunConfig.from_json(run.to_json(), problem) == run
    assert RunConfig.from_json(run.to_json(), problem_of(x.copy(), u.copy())).data_config == run.data_config
    changed = u.copy()
    changed[0, 0, 0] = 7.0
    with pytest.raises(ValueError, match=r"a run of other data .*fields differ: fingerprint\)?"):
        RunConfig.from_json(run.to_json(), problem_of(x, changed))
    with pytest.raises(ValueError, match=r"fields differ: train_samples, test_samples;"):
        RunConfig.from_json(run.to_json(), from_arrays("toy", x, u, test_size=TEST + 1, model=TINY))
    with pytest.raises(ValueError, match="holds a run of the task 'toy', not a Other one"):
        RunConfig.from_json(run.to_json(), from_arrays("other", x, u, test_size=TEST, title="Other", model=TINY))


# Values on Lobatto grids


def test_lobatto_values_give_the_coefficients_of_a_polynomial_exactly() -> None:
    rng = np.random.default_rng(1)
    c = rng.standard_normal((3, 5, 7))
    x, y = C.chebpts2(5)[::-1], C.chebpts2(7)[::-1]  # lobatto_points: decreasing from 1 to -1
    values = np.stack([C.chebgrid2d(x, y, ci) for ci in c])
    np.testing.assert_allclose(lobatto_coefficients(values), c, rtol=0, atol=1e-13)


def test_lobatto_values_of_a_smooth_function_give_its_chebyshev_interpolant() -> None:
    m = 24
    x = C.chebpts2(m)[::-1]
    values = np.outer(np.exp(x), np.cos(2.0 * x))[None]
    along_x: np.ndarray = C.chebinterpolate(np.exp, m - 1)
    along_y: np.ndarray = C.chebinterpolate(lambda t: np.cos(2.0 * t), m - 1)
    expected = np.outer(along_x, along_y)
    np.testing.assert_allclose(lobatto_coefficients(values)[0], expected, rtol=0, atol=1e-14)


def test_from_values_is_from_arrays_of_the_lobatto_coefficients() -> None:
    x, u = data()
    px, pu = C.chebpts2(N)[::-1], C.chebpts2(M)[::-1]
    x_values = np.stack([C.chebgrid2d(px, px, c) for c in x])
    u_values = np.stack([C.chebgrid2d(pu, pu, c) for c in u])
    problem = from_values("toy", x_values, u_values, test_size=TEST, model=TINY)
    test = problem.dataset(Path("unused"), problem.data_config(), problem.test_seed, TEST, True)
    np.testing.assert_allclose(test.inputs, x[-TEST:], rtol=0, atol=1e-13)
    np.testing.assert_allclose(test.exact(), u[-TEST:], rtol=0, atol=1e-13)


# Bad arrays


@pytest.mark.parametrize(
    ("inputs", "outputs", "options", "message"),
    [
        (np.zeros((5, 3)), np.zeros((5, 3, 3)), {}, r"inputs must be coefficients of shape \(B, n, n\)"),
        (np.zeros((5, 3, 4)), np.zeros((5, 4, 4)), {}, r"inputs must be coefficients of shape \(B, n, n\)"),
        (np.zeros((5, 3, 3)), np.zeros((5, 2, 2)), {}, r"m >= n = 3, got \(5, 2, 2\)"),
        (np.zeros((5, 3, 3)), np.zeros((4, 3, 3)), {}, "the inputs' B = 5"),
        (np.zeros((5, 3, 3)), np.zeros((5, 3, 3)), {"test_size": 5}, "test_size must be an int from 1 to 4"),
        (np.zeros((5, 3, 3)), np.zeros((5, 3, 3)), {"test_size": 0}, "test_size must be an int from 1 to 4"),
        (np.zeros((5, 3, 3)), np.zeros((5, 3, 3)), {"test_size": True}, "test_size must be an int"),
        (np.full((5, 3, 3), np.nan), np.zeros((5, 3, 3)), {}, "the inputs contain NaN or infinite values"),
        (np.zeros((5, 3, 3)), np.full((5, 3, 3), np.inf), {}, "the outputs contain NaN or infinite values"),
        (
            np.zeros((5, 3, 3)),
            np.where(np.arange(45).reshape(5, 3, 3) % 10 == 7, np.nan, 1.0),
            {},
            r"the outputs contain NaN or infinite values: 4 of their 45 values, in 4 of the 5 samples \(the first, "
            r"sample 0\)",
        ),
        (
            np.zeros((5, 3, 3)),
            np.concatenate([np.ones((3, 3, 3)), np.full((2, 3, 3), 1e160)]),
            {},
            r"the outputs of 2 of the 5 samples overflow float64 when measured: their L2 norms \(sums of squares\) "
            r"exceed 1.8e\+308 \(the first, sample 3, holds a coefficient of 1e\+160\)",
        ),
        (
            np.full((5, 3, 3), -1e155),
            np.ones((5, 3, 3)),
            {},
            r"the inputs of 5 of the 5 samples overflow float64 when measured: .*sample 0, holds a coefficient of "
            r"1e\+155",
        ),
        (
            np.ones((5, 2, 2)),
            np.zeros((5, 3, 3)),
            {},
            r"the outputs are all zero in their first 2 x 2 coefficients \(the model's resolution\) over the 4 "
            r"training samples that set the output scale \(data.output_scale\): there is no scale to normalise",
        ),
        (
            np.ones((5, 2, 2)),
            np.pad(np.ones((5, 1, 1)), ((0, 0), (2, 0), (2, 0))),  # u beyond the model's 2 x 2 only
            {},
            r"the outputs are all zero in their first 2 x 2 coefficients",
        ),
        (
            np.ones((5, 2, 2)),
            np.concatenate([np.zeros((4, 2, 2)), np.ones((1, 2, 2))]),  # only in the test sample
            {},
            r"the outputs are all zero .* over the 4 training samples",
        ),
        (np.zeros((1, 3, 3)), np.ones((1, 3, 3)), {}, r"1 sample; at least 2 are needed, one to train on and one to "),
        (np.zeros((0, 3, 3)), np.ones((0, 3, 3)), {}, r"0 samples; at least 2 are needed"),
        (
            [np.zeros((3, 3)), np.zeros((3, 3)), np.zeros((4, 4))],
            np.ones((3, 3, 3)),
            {},
            r"from_arrays\('bad'\): inputs: a list of arrays of different shapes: element 0 has shape \(3, 3\), "
            r"element 2 \(4, 4\)",
        ),
        (
            np.zeros((2, 3, 3)),
            [np.ones((3, 3)), np.ones((4, 3))],
            {},
            r"from_arrays\('bad'\): outputs: a list of arrays of different shapes: element 0 has shape \(3, 3\), "
            r"element 1 \(4, 3\)",
        ),
        (np.zeros((5, 3, 3)), np.zeros((5, 3, 3)), {"model": TINY}, "the model's n = 4 differs from the inputs' n = 3"),
    ],
)
def test_bad_arrays_are_refused_by_name(
    inputs: np.ndarray, outputs: np.ndarray, options: dict[str, Any], message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        from_arrays("bad", inputs, outputs, **{"test_size": 1, **options})


def test_the_neighbours_of_bad_arrays_are_accepted() -> None:
    """The controls of the refusals above: one non-zero training output gives a scale, values of 1e150 have
    finite norms, one training and one test sample suffice, and a list of arrays of one shape is an array."""
    zeros = np.zeros((5, 2, 2))
    one = zeros.copy()
    one[3, 1, 1] = 1.0
    problem = from_arrays("ok", np.ones((5, 2, 2)), one, test_size=1)
    assert output_scale(problem, problem.data_config()) > 0
    from_arrays("ok", np.full((5, 3, 3), 1e150), np.full((5, 3, 3), -1e150), test_size=1)
    assert from_arrays("ok", np.ones((2, 3, 3)), np.ones((2, 3, 3)), test_size=1).data_config().train_samples == 1
    x, u = data(samples=3)
    listed = from_arrays("ok", list(x), list(u), test_size=1)  # type: ignore[arg-type]
    assert listed.data_config() == from_arrays("ok", x, u, test_size=1).data_config()


def test_arrays_that_are_not_real_numbers_are_refused() -> None:
    with pytest.raises(TypeError, match="inputs must be real floating-point numbers or integers, got dtype complex"):
        from_arrays("bad", np.zeros((5, 3, 3), complex), np.zeros((5, 3, 3)), test_size=1)
    with pytest.raises(TypeError, match="values must be real floating-point numbers or integers, got dtype bool"):
        lobatto_coefficients(np.zeros((5, 3, 3), bool))
    with pytest.raises(ValueError, match=r"values: a list of arrays of different shapes: element 0 has shape \(3, 3\)"):
        from_values("bad", [np.ones((3, 3)), np.ones((3, 4))], np.ones((2, 3, 3)), test_size=1)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="name must be a non-empty string"):
        from_arrays("", np.zeros((5, 3, 3)), np.zeros((5, 3, 3)), test_size=1)


# A tiny run: trained, served, evaluated


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Any, RunConfig]:
    """A tiny run of the toy problem, trained for a few steps: (its directory, its problem, its run)."""
    directory = tmp_path_factory.mktemp("toy") / "run"
    problem = problem_of(*data())
    run = RunConfig.of(problem, steps=4, batch=4, checkpoint_every=2, warmup=0)
    train(run, directory, progress=False)
    return directory, problem, run


def test_a_trained_run_is_served_as_the_model_times_the_stored_scale(trained: tuple[Path, Any, RunConfig]) -> None:
    directory, problem, run = trained
    assert read_run(directory, problem) == run
    state = load(directory, run)
    assert state.step == 4
    x, _ = data()
    predicted = load_solver(directory, problem)(x[-TEST:])
    direct = np.asarray(jax.vmap(state.model)(x[-TEST:].astype(np.float32)), np.float64) * state.scale
    # The served model runs jitted, the direct one eagerly: equal where float32 products are float32's; where
    # they are rounded (a GPU's TF32), a difference of a float32 ulp flips an operand's rounding (2.8e-3 on an H200)
    np.testing.assert_allclose(predicted, direct, **float32(1e-12, atol=0))
    np.testing.assert_allclose(state.scale, np.mean(quadrature_norms(data()[1][:32, :N, :N])), rtol=1e-12)


def test_evaluate_reports_the_floor_and_the_baselines_of_the_data(trained: tuple[Path, Any, RunConfig]) -> None:
    directory, problem, _ = trained
    metrics = evaluate(directory, problem, test_size=TEST)
    x, u = data()
    train_x, train_u, test_x, exact = x[:32], u[:32, :N, :N], x[-TEST:], u[-TEST:]
    solver = load_solver(directory, problem)
    np.testing.assert_allclose(metrics["test"]["mean"], np.mean(metric(solver(test_x), exact)), rtol=1e-10)
    floor = metric(exact[:, :N, :N], exact)
    np.testing.assert_allclose(metrics["truncation_floor"]["mean"], np.mean(floor), rtol=1e-10)
    np.testing.assert_allclose(metrics["truncation_floor"]["p95"], np.percentile(floor, 95), rtol=1e-10)
    mean = np.broadcast_to(train_u.mean(axis=0), (TEST, N, N))
    np.testing.assert_allclose(metrics["mean_predictor"]["median"], np.median(metric(mean, exact)), rtol=1e-10)
    # 32 samples of 16 coefficients: least squares is determined, and numpy's lstsq is the reference
    linear = np.linalg.lstsq(train_x.reshape(32, -1), train_u.reshape(32, -1), rcond=None)[0]
    fitted = (test_x.reshape(TEST, -1) @ linear).reshape(TEST, N, N)
    np.testing.assert_allclose(metrics["least_squares"]["mean"], np.mean(metric(fitted, exact)), rtol=1e-8)
    assert metrics["seconds_per_solve"] is None, "no exact solver to time"
    assert "trust" not in metrics, "no residual to calibrate"
    assert metrics["test_size"] == TEST
    assert metrics["steps"] == 4


def test_the_command_lines_report_prints_a_run_without_a_solver_or_a_calibration(
    trained: tuple[Path, Any, RunConfig], capsys: pytest.CaptureFixture[str]
) -> None:
    directory, problem, _ = trained
    _print_metrics(problem, evaluate(directory, problem, test_size=TEST))
    printed = capsys.readouterr().out
    assert "us per prediction (no exact solver to time)" in printed
    assert "least squares" in printed
    assert "check=True" not in printed


def test_the_solver_takes_integers_as_float64_as_from_arrays_does(trained: tuple[Path, Any, RunConfig]) -> None:
    directory, problem, _ = trained
    solver = load_solver(directory, problem)
    integers = np.round(10.0 * data()[0][-TEST:]).astype(np.int64)
    predicted = solver(integers)
    assert predicted.dtype == np.float64
    np.testing.assert_array_equal(predicted, solver(integers.astype(np.float64)))
    np.testing.assert_array_equal(solver(list(integers)), predicted)  # type: ignore[arg-type]
    with pytest.raises(
        ValueError,
        match=r"load_solver\(.*\): the input coefficients: a list of arrays of different shapes: element 0 has shape "
        r"\(4, 4\), element 1 \(5, 5\)",
    ):
        solver([np.ones((4, 4)), np.ones((5, 5))])  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"the input coefficients must be real floating-point numbers or integers, got "
                       r"dtype bool"):
        solver(integers > 0)


def test_a_run_is_loaded_only_with_a_problem(trained: tuple[Path, Any, RunConfig]) -> None:
    directory, problem, _ = trained
    given = r"problem must be a funcformer.learning.Problem \(a task's PROBLEM, .*\), got "
    for call, name in (
        (lambda p: load_solver(directory, p), "load_solver"),
        (lambda p: load_solver(directory, p, check=True), "load_solver"),
        (lambda p: evaluate(directory, p), "evaluate"),
        (lambda p: read_run(directory, p), "read_run"),
    ):
        with pytest.raises(TypeError, match=rf"{name}\({re.escape(str(directory))}\): " + given + "None"):
            call(None)
        with pytest.raises(TypeError, match=given + "'toy'"):
            call("toy")
    assert read_run(directory, problem).problem is problem


def test_a_problem_without_a_residual_refuses_checked_predictions(trained: tuple[Path, Any, RunConfig]) -> None:
    directory, problem, _ = trained
    with pytest.raises(ValueError, match=r"check=True\): the toy problem has no a-posteriori residual"):
        load_solver(directory, problem, check=True)


def test_a_run_of_other_data_is_refused_by_load_solver_evaluate_and_resume(
    trained: tuple[Path, Any, RunConfig],
) -> None:
    directory, _, run = trained
    x, u = data()
    other = problem_of(x[1:], u[1:])
    for attempt in (
        lambda: load_solver(directory, other),
        lambda: evaluate(directory, other, test_size=TEST),
        lambda: train(RunConfig.of(other, steps=6, batch=4), directory, resume=True),
        lambda: load(directory, RunConfig.of(other, steps=4, batch=4, checkpoint_every=2, warmup=0)),
    ):
        with pytest.raises(ValueError, match=r"a run of other data .*fields differ: train_samples, fingerprint"):
            attempt()
    assert load(directory, run).step == 4, "the run itself is untouched"


def test_a_problem_without_a_command_line_names_the_python_call_that_trains_a_run_again(
    trained: tuple[Path, Any, RunConfig], tmp_path: Path
) -> None:
    """A checkpoint of the older format (no output scale): the message says how to train it again, in Python."""
    directory, problem, _ = trained
    copy = tmp_path / "run"
    shutil.copytree(directory, copy)
    with np.load(copy / CHECKPOINT) as stored:  # the checkpoint as versions before stored scales wrote it
        arrays = {key: stored[key] for key in stored.files if key != "output_scale"}
    np.savez(copy / CHECKPOINT, **arrays)
    with pytest.raises(ValueError, match=re.escape("train the run again (`funcformer.learning.train(run, DIR)`")):
        load_solver(copy, problem)


# The page


STATED = re.compile(
    r"^(?P<indent> *)(?P<expr>[^#=\s][^#=\n]*?)  # (?P<value>True|False|\([^)]*\)|-?[\d.]+(?:e-?\d+)?)(?:,.*)?$",
    re.M,
)
"""A line ``expression  # value`` (a bool, a tuple or a number, then an optional remark): a stated result."""


def page_program() -> str:
    """docs/own_operator.md's Python blocks, in order, as one program that asserts each stated result."""
    blocks = re.findall(r"^```python\n(.*?)^```$", PAGE.read_text(), re.S | re.M)
    assert len(blocks) >= 5
    program = "\n".join(blocks)
    stated = STATED.findall(program)
    assert len(stated) >= 12, "the page states results that the test checks"
    return STATED.sub(lambda m: f"{m['indent']}assert ({m['expr']}) == {m['value']}, {m['expr']!r}", program)


@pytest.mark.slow
def test_the_page_runs_as_a_users_program_and_its_stated_results_hold(tmp_path: Path) -> None:
    (tmp_path / "own_operator.py").write_text(page_program())
    command = [sys.executable, "own_operator.py"]
    result = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, check=False, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr[-5000:]


def test_an_evaluation_on_fewer_samples_than_the_test_set_takes_its_first_ones(
    trained: tuple[Path, Any, RunConfig],
) -> None:
    """evaluate(test_size=3) of arrays holding 8 test samples measures the first 3 of them (as with the tasks'
    sets, the first samples of a larger count are a smaller count's), and every metric over those 3 only."""
    directory, problem, _ = trained
    metrics = evaluate(directory, problem, test_size=3)
    x, u = data()
    first = slice(SAMPLES - TEST, SAMPLES - TEST + 3)
    test = problem.dataset(Path("unused"), problem.data_config(), problem.test_seed, 3, True)
    np.testing.assert_array_equal(test.inputs, x[first])
    np.testing.assert_array_equal(test.exact(), u[first])
    assert metrics["test_size"] == 3
    predicted = load_solver(directory, problem)(x[first])
    np.testing.assert_allclose(metrics["test"]["mean"], np.mean(metric(predicted, u[first])), rtol=1e-10)
    floor = metric(u[first][:, :N, :N], u[first])
    np.testing.assert_allclose(metrics["truncation_floor"]["mean"], np.mean(floor), rtol=1e-10)
    # the whole training set, a count equal to its size, is not refused
    whole = problem.dataset(Path("unused"), problem.data_config(), 0, SAMPLES - TEST, False)
    np.testing.assert_array_equal(whole.inputs, x[: SAMPLES - TEST])
