"""Resolution in and out: ``load_solver`` takes inputs at any coefficient count, projects them exactly onto
the model's 16 x 16 (zeros padded, higher degrees dropped), and answers at the input's count; the answer is
a series that ``numpy.polynomial.chebyshev.chebval2d`` evaluates anywhere. Checked on freshly initialised
Darcy and Poisson runs (``tests.funcformer.test_solver_trust.saved``: no training) against the exact solvers at 24 and
32 coefficients."""

from pathlib import Path

import numpy as np
import numpy.polynomial.chebyshev as C
import pytest

from funcformer import darcy, poisson
from funcformer.learning import Solver, load_solver
from funcformer.learning.metric import relative_l2
from tests.funcformer.test_solver_trust import POISSON_RUN, RUN, saved


@pytest.fixture(scope="module")
def darcy_solver(tmp_path_factory: pytest.TempPathFactory) -> Solver:
    return load_solver(saved(tmp_path_factory.mktemp("resolution") / "darcy", RUN), darcy.PROBLEM)


def padded(c: np.ndarray, m: int) -> np.ndarray:
    out = np.zeros((len(c), m, m))
    out[:, : c.shape[1], : c.shape[2]] = c[:, :m, :m]
    return out


@pytest.mark.parametrize("m", [24, 32])
def test_darcy_inputs_at_any_count_are_projected_and_answered_at_that_count(darcy_solver: Solver, m: int) -> None:
    kappa = darcy.permeabilities(darcy.DataConfig(n=m, k=12, solver_degree=2 * m), 7, 3)  # degree < 12: 16 hold all
    rough = kappa + padded(0.01 * np.random.default_rng(m).standard_normal((3, m, m)), m)  # degrees >= 16 too
    at_16 = darcy_solver(kappa[:, :16, :16])
    np.testing.assert_array_equal(darcy_solver(kappa), padded(at_16, m))
    np.testing.assert_array_equal(darcy_solver(rough), padded(darcy_solver(rough[:, :16, :16]), m))
    # against the exact solver at m coefficients: the answer at m is the answer at 16, the same function
    exact = darcy.solve(kappa, 2 * m)
    np.testing.assert_allclose(relative_l2(darcy_solver(kappa), exact), relative_l2(at_16, exact), rtol=1e-12)
    x, y = np.random.default_rng(1).uniform(-1, 1, (2, 50))
    for b in range(3):
        np.testing.assert_allclose(C.chebval2d(x, y, darcy_solver(kappa)[b]), C.chebval2d(x, y, at_16[b]), atol=1e-12)


def test_fewer_coefficients_are_the_same_function_padded(darcy_solver: Solver) -> None:
    kappa = darcy.permeabilities(darcy.DataConfig(), 3, 2)  # degree < 8
    assert darcy_solver(kappa[:, :8, :8]).shape == (2, 8, 8)
    np.testing.assert_array_equal(darcy_solver(kappa[:, :8, :8]), darcy_solver(kappa)[:, :8, :8])
    np.testing.assert_array_equal(darcy_solver(kappa[:, :8, :12]), darcy_solver(kappa)[:, :8, :12])


def test_poisson_answers_at_32_coefficients_against_the_exact_solver(tmp_path: Path) -> None:
    solver = load_solver(saved(tmp_path / "poisson", POISSON_RUN), poisson.PROBLEM)
    f = poisson.sources(poisson.DataConfig(n=32, k=12, solver_points=64), 4, 2)
    exact = poisson.solve(f, 64)
    at_32, at_16 = solver(f), solver(f[:, :16, :16])
    assert at_32.shape == (2, 32, 32)
    np.testing.assert_array_equal(at_32, padded(at_16, 32))
    np.testing.assert_allclose(relative_l2(at_32, exact), relative_l2(at_16, exact), rtol=1e-12)


def test_an_input_with_no_coefficients_is_refused(darcy_solver: Solver) -> None:
    with pytest.raises(ValueError, match=r"shape \(B, P, Q\), any P, Q >= 1 \(the model's resolution is 16 x 16\)"):
        darcy_solver(np.zeros((2, 0, 16)))
    with pytest.raises(ValueError, match="NaN or infinite"):  # in a coefficient the projection drops, too
        darcy_solver(padded(np.full((1, 1, 1), np.nan), 24)[:, ::-1, ::-1].copy())


def test_an_input_at_the_models_count_in_one_variable_only_is_projected_in_the_other(darcy_solver: Solver) -> None:
    kappa = darcy.permeabilities(darcy.DataConfig(), 3, 2)  # 16 x 16
    rough = 0.01 * np.random.default_rng(5).standard_normal((2, 16, 8))
    wide = np.concatenate([kappa, rough], axis=2)  # (2, 16, 24): degrees 16 to 23 in y are dropped
    expected = np.zeros((2, 16, 24))
    expected[:, :, :16] = darcy_solver(kappa)
    np.testing.assert_array_equal(darcy_solver(wide), expected)
    tall = wide.transpose(0, 2, 1).copy()  # (2, 24, 16): degrees 16 to 23 in x are dropped
    expected = np.zeros((2, 24, 16))
    expected[:, :16, :] = darcy_solver(tall[:, :16, :])
    np.testing.assert_array_equal(darcy_solver(tall), expected)


def test_poisson_normalises_the_projected_input_not_the_given_one(tmp_path: Path) -> None:
    """Poisson's factor is the source's norm: it must be the projected source's, the function the model
    sees, not that of the input with its degrees 16 and above (here ten times the rest)."""
    solver = load_solver(saved(tmp_path / "poisson", POISSON_RUN), poisson.PROBLEM)
    f = padded(poisson.sources(poisson.DataConfig(), 4, 2), 24)
    f[:, 16:, :] = 10.0 * np.random.default_rng(6).standard_normal((2, 8, 24))
    np.testing.assert_array_equal(solver(f), padded(solver(f[:, :16, :16]), 24))
