"""The Darcy task against independent references: manufactured solutions built with
numpy.polynomial.chebyshev (chebder, chebval2d), the Poisson solver at kappa = 0, a finer solve,
the documented random draw for the permeabilities, and the on-disk cache's regeneration rules."""

from pathlib import Path

import numpy as np
import numpy.polynomial.chebyshev as C
import pytest

from applicative.instances.chebyshev import derivative_matrix
from funcformer import darcy, poisson
from funcformer.darcy import (
    PROBLEM,
    SOLVER_DEGREE,
    TEST_SEED,
    TRAIN_SEED,
    DataConfig,
    K,
    N,
    grid_values,
    make_dataset,
    permeabilities,
    relative_l2,
    solve,
    truncate,
)
from funcformer.learning import metric
from funcformer.learning import problem as problem_module
from tests.funcformer.test_poisson_task import X, Y, interpolate_2d


def source(u: np.ndarray, kappa: np.ndarray) -> np.ndarray:
    """Coefficients of f = -div(exp(kappa) grad u) for series u and kappa: derivatives by chebder
    (exact on the series), f interpolated at degree 80 (exp(kappa) is entire: rounding-level error)."""

    def d(c: np.ndarray, axis: int, order: int = 1) -> np.ndarray:
        return C.chebder(c, order, axis=axis)

    def f(x: np.ndarray, y: np.ndarray) -> np.ndarray:
        x, y = np.broadcast_arrays(x, y)
        a = np.exp(C.chebval2d(x, y, kappa))
        laplacian = C.chebval2d(x, y, d(u, 0, 2)) + C.chebval2d(x, y, d(u, 1, 2))
        advection = C.chebval2d(x, y, d(kappa, 0)) * C.chebval2d(x, y, d(u, 0)) + C.chebval2d(
            x, y, d(kappa, 1)
        ) * C.chebval2d(x, y, d(u, 1))
        values: np.ndarray = -a * (laplacian + advection)
        return values

    return interpolate_2d(f, 80)


# The solver against manufactured solutions


@pytest.mark.parametrize("dense", [False, True])
def test_solver_manufactured_polynomial(dense: bool) -> None:
    # u = (1 - x^2)(1 - y^2) p(x, y), p a random polynomial of degree 9: collocation at M = 32 is exact
    p = np.random.default_rng(0).standard_normal((10, 10))
    bubble = np.array([0.5, 0.0, -0.5])  # 1 - t^2 = T_0 / 2 - T_2 / 2
    u = np.array([C.chebmul(bubble, row) for row in p])  # along y
    u = np.array([C.chebmul(bubble, column) for column in u.T]).T  # along x
    kappa = permeabilities(DataConfig(), 3, 1)[0]
    u_solved = solve(kappa[None], 32, source(u, kappa)[None], dense=dense)[0]
    expected = np.zeros((33, 33))
    expected[: u.shape[0], : u.shape[1]] = u
    scale = np.abs(grid_values(expected[None])).max()
    # measured 2.7e-14 (GMRES), 5.7e-15 (dense) relative
    assert np.abs(grid_values(u_solved[None]) - grid_values(expected[None])).max() < 1e-12 * scale
    np.testing.assert_allclose(u_solved, expected, rtol=0, atol=1e-12 * scale)


def test_solver_manufactured_smooth() -> None:
    def u_exact(x: np.ndarray, y: np.ndarray) -> np.ndarray:
        values: np.ndarray = (1 - x**2) * (1 - y**2) * np.sin(2 * x + 1) * np.cos(3 * y)
        return values

    u = interpolate_2d(u_exact, 40)  # to rounding
    kappa = permeabilities(DataConfig(), 4, 1)[0]
    u_solved = solve(kappa[None], 32, source(u, kappa)[None])
    error = np.abs(grid_values(u_solved)[0] - u_exact(X, Y)).max() / np.abs(u_exact(X, Y)).max()
    assert error < 1e-10  # measured 4e-14: spectral accuracy at M = 32


def test_kappa_zero_is_poisson() -> None:
    # kappa = 0: -(u_xx + u_yy) = 1, Poisson's u_xx + u_yy = f with f = -1, at the same 33 Lobatto points
    u = solve(np.zeros((1, N, N)), 32)
    f = np.zeros((1, 1, 1))
    f[0, 0, 0] = -1.0
    expected = poisson.solve(f, 33)
    np.testing.assert_allclose(u, expected, rtol=0, atol=1e-13 * np.abs(expected).max())
    # and a constant kappa = log 2 halves u
    two = np.zeros((1, N, N))
    two[0, 0, 0] = np.log(2.0)
    np.testing.assert_allclose(solve(two, 32), u / 2, rtol=0, atol=1e-14)


def test_solver_converged_and_dense_agrees() -> None:
    kappa = permeabilities(DataConfig(), 2, 8)
    # GMRES itself converges (the dense fallback is not what answers)
    nodes = 32
    g = derivative_matrix(16)  # as solve differentiates kappa
    kx, ky = darcy._interior_values(g @ kappa, nodes), darcy._interior_values(kappa @ g.T, nodes)
    rhs = np.exp(-darcy._interior_values(kappa, nodes))
    assert all(darcy._gmres(kx[b], ky[b], rhs[b], nodes)[1] for b in range(8))
    u = solve(kappa, 32)
    assert u.shape == (8, 33, 33)
    fine = solve(kappa, 48)
    # measured 9e-8 to 1.9e-6, median 3.2e-7 (64 samples of seed 9: max 2.3e-6); M = 24: 3.7e-6 to 7.8e-5
    assert relative_l2(u, fine).max() < 5e-6
    assert np.median(relative_l2(u, fine)) < 1e-6
    assert relative_l2(solve(kappa, 24), fine).max() > 2e-5
    np.testing.assert_allclose(relative_l2(u, solve(kappa, 32, dense=True)), 0.0, atol=1e-12)  # measured 1.4e-14


def test_solution_satisfies_pde_and_boundary() -> None:
    kappa = permeabilities(DataConfig(), 5, 1)[0]
    u = solve(kappa[None], 48)[0]
    f = source(u, kappa)
    rng = np.random.default_rng(1)
    x, y = rng.uniform(-0.9, 0.9, 200), rng.uniform(-0.9, 0.9, 200)
    # the residual of u between the nodes, away from the corners: measured 1.1e-4
    assert np.abs(C.chebval2d(x, y, f) - 1.0).max() < 1e-3
    t = np.linspace(-1, 1, 41)
    for side in (-1.0, 1.0):
        assert np.abs(C.chebval2d(np.full_like(t, side), t, u)).max() < 1e-14
        assert np.abs(C.chebval2d(t, np.full_like(t, side), u)).max() < 1e-14


def test_solver_validation() -> None:
    with pytest.raises(ValueError, match=r"\(B, n, n\)"):
        solve(np.zeros((16, 16)))
    with pytest.raises(ValueError, match="degree"):
        solve(np.zeros((1, 34, 34)), 32)
    with pytest.raises(ValueError, match="f must"):
        solve(np.zeros((2, 16, 16)), 32, np.ones((1, 1, 1)))


# Permeabilities


def test_permeabilities() -> None:
    task = DataConfig()
    kappa = permeabilities(task, 5, 4)
    assert kappa.shape == (4, N, N)
    assert np.all(kappa[:, K:, :] == 0.0)
    assert np.all(kappa[:, :, K:] == 0.0)
    g = np.random.default_rng(5).standard_normal((4, K, K))
    index = 1.0 + np.arange(K)
    np.testing.assert_array_equal(kappa[:, :K, :K], g / np.multiply.outer(index, index))
    np.testing.assert_array_equal(permeabilities(task, 5, 2), kappa[:2])  # one draw, sample-major
    assert not np.allclose(permeabilities(task, 6, 4), kappa)
    with pytest.raises(ValueError, match="count"):
        permeabilities(task, 5, -1)


# The metric is the shared layer's, as Poisson's is; the floor


def test_metric_is_the_shared_one() -> None:
    for name in ("relative_l2", "grid_values", "truncate", "summary", "GRID"):
        assert getattr(darcy, name) is getattr(metric, name) is getattr(poisson, name)


def test_truncation_floor() -> None:
    task = DataConfig()
    test = make_dataset(PROBLEM, task, TEST_SEED, 256)
    np.testing.assert_array_equal(test.u, truncate(test.exact(), N))
    floor = test.truncation_floor()
    print(f"truncation floor at n = {task.n}, 256 test samples: {floor}")
    # measured mean 5.50e-4, median 4.38e-4, p95 1.36e-3 (DARCY: 5.5e-4, 4.3e-4, 1.5e-3)
    assert 3e-4 < floor["mean"] < 1e-3
    assert 2e-4 < floor["median"] <= floor["p95"] < 3e-3


# Datasets and the cache


def _only_file(directory: Path) -> Path:
    (path,) = directory.iterdir()
    return path


def test_make_dataset() -> None:
    task = DataConfig(n=12, k=6, solver_degree=24)
    data = make_dataset(PROBLEM, task, 4, 5)
    np.testing.assert_array_equal(data.inputs, permeabilities(task, 4, 5))
    np.testing.assert_array_equal(data.u_fine, solve(data.inputs, 24))
    np.testing.assert_array_equal(data.u, data.exact()[:, :12, :12])


def test_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    task = DataConfig(n=12, k=6, solver_degree=24)
    first = PROBLEM.dataset(tmp_path, task, 3, 7)
    path = _only_file(tmp_path)
    assert all(s in path.name for s in ("darcy", "n12", "k6", "solver_degree24", "seed3"))

    def forbidden(*args: object) -> None:
        raise AssertionError("regenerated a cached dataset")

    with monkeypatch.context() as patch:
        patch.setattr(problem_module, "make_dataset", forbidden)
        second = PROBLEM.dataset(tmp_path, task, 3, 7)
        for name in ("inputs", "u", "u_fine"):
            np.testing.assert_array_equal(getattr(second, name), getattr(first, name))
        # fewer samples of the seed: the first ones (they do not depend on the count), from the same file
        np.testing.assert_array_equal(PROBLEM.dataset(tmp_path, task, 3, 2).u_fine, first.exact()[:2])
    np.testing.assert_array_equal(make_dataset(PROBLEM, task, 3, 2).u_fine, first.exact()[:2])
    assert _only_file(tmp_path) == path
    content = path.read_bytes()
    path.write_bytes(content[: len(content) // 2])  # a corrupt file is regenerated
    np.testing.assert_array_equal(PROBLEM.dataset(tmp_path, task, 3, 7).u_fine, first.u_fine)
    assert path.read_bytes() == content
    small = PROBLEM.dataset(tmp_path, task, 3, 7, fine=False)
    assert small.u_fine is None
    np.testing.assert_array_equal(small.u, first.u)
    with pytest.raises(ValueError, match="without its fine solutions"):
        small.exact()


# DataConfig


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"k": 0}, "DataConfig.k"),
        ({"n": 7}, "DataConfig.n"),
        ({"solver_degree": 31}, "DataConfig.solver_degree"),
        ({"n": 16.0}, "DataConfig.n"),
    ],
)
def test_task_validation(kwargs: dict[str, object], field: str) -> None:
    with pytest.raises(ValueError, match=field):
        DataConfig(**kwargs)  # type: ignore[arg-type]


def test_defaults_and_seeds() -> None:
    assert DataConfig() == DataConfig(n=N, k=K, solver_degree=SOLVER_DEGREE) == DataConfig(16, 8, 32)
    assert TRAIN_SEED != TEST_SEED
    assert TEST_SEED != poisson.TEST_SEED
    assert PROBLEM.check_train_seed(TRAIN_SEED) == TRAIN_SEED
    with pytest.raises(ValueError, match="held-out test seed"):
        PROBLEM.check_train_seed(TEST_SEED)
