"""The Darcy task through the shared operator-learning layer: its normalisation against the solver
(an exact symmetry), a tiny run trained, evaluated and plotted by its CLI, ``load_solver``'s
predictions and validation, and each task refusing the other's runs."""

from pathlib import Path

import jax
import numpy as np
import numpy.polynomial.chebyshev as C
import pytest

from applicative.training.loop import _killed_after
from funcformer.darcy import PROBLEM, DataConfig, mean_value, normalise, permeabilities, solve
from funcformer.learning import RunConfig, load, load_solver, read_run, train
from funcformer.learning.cli import main
from funcformer.model import ModelConfig
from funcformer.poisson import PROBLEM as POISSON

TINY = ModelConfig(channels=2, heads=1, head_channels=1, hidden_channels=2, layers=2, axes="xy", mixers="km", points=16)
RUN = RunConfig.of(PROBLEM, model=TINY, steps=4, batch=4, train_size=16, checkpoint_every=2, warmup=0)


@pytest.fixture(autouse=True)
def cache(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FUNCFORMER_CACHE", str(tmp_path_factory.getbasetemp() / "cache"))


def test_the_mean_value_is_the_integral_over_the_square_over_its_area() -> None:
    kappa = permeabilities(DataConfig(), 3, 4)
    x, w = np.polynomial.legendre.leggauss(20)  # exact for degree < 40
    values = np.stack([C.chebgrid2d(x, x, k) for k in kappa])
    np.testing.assert_allclose(mean_value(kappa), np.einsum("bij,i,j->b", values, w, w) / 4.0, rtol=1e-14)


def test_the_normalisation_is_an_exact_symmetry_of_the_solution_operator() -> None:
    kappa = permeabilities(DataConfig(), 4, 3)
    inputs, log2_factors = normalise(kappa)
    np.testing.assert_allclose(mean_value(inputs), 0.0, atol=1e-15)
    np.testing.assert_array_equal(inputs[:, 1:, :], kappa[:, 1:, :])  # only the constant term moves
    # u(kappa) = c u(kappa - m), c = exp(-m): the solver agrees to rounding
    np.testing.assert_allclose(solve(kappa), np.exp2(log2_factors)[:, None, None] * solve(inputs), rtol=0, atol=1e-13)
    shifted = kappa.copy()
    shifted[:, 0, 0] += 2.5
    inputs_shifted, log2_shifted = normalise(shifted)
    np.testing.assert_allclose(inputs_shifted, inputs, rtol=0, atol=1e-14)
    np.testing.assert_allclose(log2_shifted, log2_factors - 2.5 / np.log(2.0), rtol=1e-14)


@pytest.mark.slow
def test_a_tiny_run_trains_evaluates_plots_and_serves_through_the_cli(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "run"
    flags = ["--steps", "4", "--batch", "4", "--train-size", "16", "--checkpoint-every", "2", "--warmup", "0"]
    model = ["--channels", "2", "--heads", "1", "--head-channels", "1", "--hidden-channels", "2", "--layers", "2"]
    model += ["--axes", "xy", "--mixers", "km"]
    assert main(PROBLEM, ["train", "--out", str(out), *flags, *model, "--quiet", "--test-size", "8"]) == 0
    printed = capsys.readouterr().out
    for line in ("model", "truncation floor", "mean of the training set", "least squares"):
        assert line in printed
    assert read_run(out, PROBLEM) == RUN
    assert main(PROBLEM, ["evaluate", str(out), "--test-size", "8"]) == 0
    assert main(PROBLEM, ["plot", str(out), "--test-size", "8"]) == 0  # the evaluated samples: no new solves
    assert (out / "prediction.png").stat().st_size > 0
    # load_solver: the model on the normalised input, scaled back by exp(-m) and the stored output scale
    state = load(out, RUN)
    kappa = permeabilities(DataConfig(), 11, 3)
    predicted = load_solver(out, PROBLEM)(kappa)
    inputs, log2_factors = normalise(kappa)
    direct = np.asarray(jax.vmap(state.model)(inputs.astype(np.float32)), np.float64)
    expected = direct * (np.exp2(log2_factors) * state.scale)[:, None, None]
    np.testing.assert_allclose(predicted, expected, rtol=1e-12, atol=0)
    with pytest.raises(ValueError, match=r"expected log-permeability kappa coefficients of shape \(B, P, Q\)"):
        load_solver(out, PROBLEM)(kappa[0])
    with pytest.raises(TypeError, match="real floating-point"):
        load_solver(out, PROBLEM)(kappa.astype(np.complex128))
    with pytest.raises(ValueError, match="NaN or infinite"):
        load_solver(out, PROBLEM)(np.full_like(kappa, np.inf))
    # each task refuses the other's runs, naming the right one
    with pytest.raises(
        ValueError, match=r"holds a run of the task 'darcy', not a Poisson one: .*funcformer.darcy.PROBLEM"
    ):
        load_solver(out, POISSON)
    assert main(POISSON, ["evaluate", str(out)]) == 1
    assert "holds a run of the task 'darcy', not a Poisson one: load it with that task's Problem" in (
        capsys.readouterr().err
    )


@pytest.mark.end_to_end
def test_a_run_resumes_bitwise(tmp_path: Path) -> None:
    whole = train(RUN, tmp_path / "whole", progress=False)
    with _killed_after(3):
        train(RUN, tmp_path / "cut", progress=False)
    resumed = train(RUN, tmp_path / "cut", resume=True, progress=False)
    assert resumed.losses == whole.losses
    for a, b in zip(jax.tree_util.tree_leaves(resumed.model), jax.tree_util.tree_leaves(whole.model), strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
