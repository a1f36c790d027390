"""The out-of-distribution source families (funcformer.poisson.families) against their definitions,
checked independently: amplitudes recovered from the coefficients through a basis built with
numpy.polynomial.chebyshev, the bumps evaluated from their parameters at random points, and the
least-squares baseline against the reference solver."""

import numpy as np
import numpy.polynomial.chebyshev as C
import pytest

from funcformer.poisson import PROBLEM, TRAIN_SEED, DataConfig, K, make_dataset, relative_l2, sources
from funcformer.poisson.families import (
    BUMPS,
    FAMILIES,
    HIGH_K,
    Family,
    apply_linear,
    bump_parameters,
    fit_least_squares,
    gaussian_bumps,
    high_degree,
    in_distribution,
    slow_decay,
)


def basis(n: int, k: int) -> np.ndarray:
    """(n, k-2): column i the coefficients of T_{i+2} - T_i, built by numpy's series subtraction."""
    columns = []
    for i in range(k - 2):
        column = np.zeros(n)
        difference = C.chebsub([0.0] * (i + 2) + [1.0], [0.0] * i + [1.0])
        column[: len(difference)] = difference
        columns.append(column)
    return np.stack(columns, axis=1)


def amplitudes(f: np.ndarray, k: int) -> np.ndarray:
    """a with f = P a P^T (P = basis(n, k)), by least squares; asserts that f lies in that span."""
    p = basis(f.shape[1], k)
    pinv = np.linalg.pinv(p)
    a: np.ndarray = pinv @ f @ pinv.T
    np.testing.assert_allclose(p @ a @ p.T, f, atol=1e-12 * np.abs(f).max())
    return a


def decay_exponent(a: np.ndarray) -> float:
    """The slope of log E[a_ij^2] against log((1+i)(1+j)) over the sample."""
    scale = 1.0 + np.arange(a.shape[1])
    x = np.log(np.multiply.outer(scale, scale)).ravel()
    y = np.log(np.mean(a**2, axis=0)).ravel()
    return float(np.polyfit(x, y, 1)[0])


@pytest.mark.parametrize("name", list(FAMILIES))
@pytest.mark.parametrize("n", [16, 20])
def test_shapes_and_determinism(name: str, n: int) -> None:
    family: Family = FAMILIES[name]
    f = family(n, 3, 5)
    assert f.shape == (5, n, n)
    assert f.dtype == np.float64
    assert np.all(np.isfinite(f))
    np.testing.assert_array_equal(family(n, 3, 5), f)  # the seed determines the draw
    assert not np.array_equal(family(n, 4, 5), f)
    assert family(n, 3, 0).shape == (0, n, n)


def test_families_reject_bad_sizes() -> None:
    with pytest.raises(ValueError, match="count"):
        slow_decay(16, 0, -1)
    with pytest.raises(ValueError, match="n = 12"):
        high_degree(12, 0, 1)  # degree 15 needs 16 coefficients
    with pytest.raises(ValueError, match="n = 11"):
        in_distribution(11, 0, 1)


def test_in_distribution_is_the_task() -> None:
    np.testing.assert_array_equal(in_distribution(16, 5, 7), sources(DataConfig(), 5, 7))
    np.testing.assert_array_equal(in_distribution(20, 5, 7), sources(DataConfig(n=20), 5, 7))


@pytest.mark.parametrize(("name", "k", "exponent"), [("in_distribution", K, 2.0), ("slow_decay", K, 1.0)])
def test_decay_laws(name: str, k: int, exponent: float) -> None:
    """a_ij ((1+i)(1+j))^(exponent/2) is standard normal, entry by entry; E[a_ij^2] falls like
    ((1+i)(1+j))^-exponent."""
    a = amplitudes(FAMILIES[name](16, 11, 4000), k)
    assert a.shape == (4000, k - 2, k - 2)
    scale = (1.0 + np.arange(k - 2)) ** (exponent / 2)
    g = a * np.multiply.outer(scale, scale)
    # sample variance of 4000 standard normals: standard deviation 0.022; 100 entries
    assert np.abs(np.var(g, axis=0) - 1.0).max() < 0.12
    assert np.abs(np.mean(g, axis=0)).max() < 0.08
    assert decay_exponent(a) == pytest.approx(-exponent, abs=0.05)


def test_high_degree() -> None:
    """Degree 15 per variable, the task's decay law over i, j < 14, zero on the boundary."""
    f = high_degree(20, 11, 4000)
    assert np.all(f[:, HIGH_K:, :] == 0)
    assert np.all(f[:, :, HIGH_K:] == 0)
    assert np.abs(f[:, HIGH_K - 1, :]).max() > 0
    assert np.abs(f[:, :, HIGH_K - 1]).max() > 0
    a = amplitudes(f, HIGH_K)
    assert a.shape == (4000, 14, 14)
    scale = 1.0 + np.arange(14)
    assert np.abs(np.var(a * np.multiply.outer(scale, scale), axis=0) - 1.0).max() < 0.12
    assert decay_exponent(a) == pytest.approx(-2.0, abs=0.05)
    # beyond the in-distribution degree, so a 16 x 16 truncation of u loses far more than in distribution
    floor = make_dataset(PROBLEM, DataConfig(k=HIGH_K), 11, 64).truncation_floor()["mean"]
    assert 1e-4 < floor < 3e-3


@pytest.mark.parametrize("name", ["in_distribution", "slow_decay", "high_degree"])
def test_zero_on_the_boundary(name: str) -> None:
    f = FAMILIES[name](16, 2, 8)
    t = np.random.default_rng(0).uniform(-1.0, 1.0, 50)
    for s in range(8):
        for side in (-1.0, 1.0):
            assert np.abs(C.chebval2d(np.full_like(t, side), t, f[s])).max() < 1e-12
            assert np.abs(C.chebval2d(t, np.full_like(t, side), f[s])).max() < 1e-12


def bumps_at(seed: int, count: int, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """(count, len(x)): sum_m c_m exp(-((x - x_m)^2 + (y - y_m)^2) / (2 s_m^2)) at the points (x, y)."""
    p = bump_parameters(seed, count)
    r2 = (x - p.centres[..., 0, None]) ** 2 + (y - p.centres[..., 1, None]) ** 2
    values: np.ndarray = np.sum(p.amplitudes[..., None] * np.exp(-r2 / (2 * p.widths[..., None] ** 2)), axis=1)
    return values


def test_bump_parameters() -> None:
    p = bump_parameters(9, 500)
    assert p.amplitudes.shape == (500, BUMPS)
    assert p.centres.shape == (500, BUMPS, 2)
    assert p.widths.shape == (500, BUMPS)
    assert np.abs(p.centres).max() <= 0.5
    assert p.widths.min() >= 0.25
    assert p.widths.max() <= 0.4
    assert abs(np.std(p.amplitudes) - 1.0) < 0.05


def test_bumps_interpolate() -> None:
    """The coefficients reproduce the bumps exactly at the first-kind Chebyshev points, and everywhere to
    the stated 1.2e-3 sum_m |c_m| at n = 16 (far closer at n = 24)."""
    count = 64
    f = gaussian_bumps(16, 21, count)
    t = np.cos(np.pi * (np.arange(16) + 0.5) / 16)
    x, y = (a.ravel() for a in np.meshgrid(t, t, indexing="ij"))
    exact = bumps_at(21, count, x, y)
    interpolant = np.stack([C.chebval2d(x, y, f[s]) for s in range(count)])
    np.testing.assert_allclose(interpolant, exact, atol=1e-13 * np.abs(exact).max())

    px, py = np.random.default_rng(1).uniform(-1.0, 1.0, (2, 2000))
    size = np.abs(bump_parameters(21, count).amplitudes).sum(axis=1)
    for n, bound, typical in [(16, 1.2e-3, 2e-4), (24, 1e-6, 1e-7)]:
        f = gaussian_bumps(n, 21, count)
        values = np.stack([C.chebval2d(px, py, f[s]) for s in range(count)])
        error = np.abs(values - bumps_at(21, count, px, py)).max(axis=1) / size
        assert error.max() < bound, (n, error.max())
        assert np.median(error) < typical, (n, np.median(error))


def test_least_squares_baseline() -> None:
    """Fitted on >= 100 in-distribution sources (the sources' span has dimension 100), the linear map reaches
    the truncation floor; on 90 it cannot; out of the span (high_degree) it predicts nothing of the rest."""
    task = DataConfig()
    train = make_dataset(PROBLEM, task, TRAIN_SEED, 128, fine=False)
    test = make_dataset(PROBLEM, task, 7, 64)
    floor = test.truncation_floor()["mean"]
    m = fit_least_squares(train.inputs, train.u)
    assert m.shape == (256, 256)
    predicted = apply_linear(m, test.inputs)
    assert predicted.shape == test.inputs.shape
    error = float(np.mean(relative_l2(predicted, test.exact())))
    assert error < 1e-4
    assert error < 1.5 * floor, (error, floor)
    short = apply_linear(fit_least_squares(train.inputs[:90], train.u[:90]), test.inputs)
    assert float(np.mean(relative_l2(short, test.exact()))) > 1e-4

    outside = make_dataset(PROBLEM, DataConfig(k=HIGH_K), 7, 64)
    assert float(np.mean(relative_l2(apply_linear(m, outside.inputs), outside.exact()))) > 1e-3
    with pytest.raises(ValueError, match="shape"):
        fit_least_squares(train.inputs, train.u[:, :8, :8])
