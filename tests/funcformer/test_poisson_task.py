"""The Poisson task against independent references: manufactured solutions for the solver,
numpy.polynomial.chebyshev for the PDE residual, the boundary values and the metric's grid,
the documented random draw for the sources, and the on-disk cache's regeneration rules."""

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import numpy as np
import numpy.polynomial.chebyshev as C
import pytest

from funcformer.learning import problem as problem_module
from funcformer.poisson import (
    PROBLEM,
    SOLVER_POINTS,
    TEST_SEED,
    DataConfig,
    K,
    N,
    grid_values,
    make_dataset,
    relative_l2,
    solve,
    sources,
    summary,
    truncate,
)

Values = TypeVar("Values", float, np.ndarray)
"""A function of (x, y) evaluated at a point (floats) or on a grid (arrays)."""

UNIFORM = np.linspace(-1.0, 1.0, 64)  # the metric's documented grid (docs/poisson.md), a literal
X, Y = np.meshgrid(UNIFORM, UNIFORM, indexing="ij")


def interpolate_2d(function: Callable[[np.ndarray, np.ndarray], np.ndarray], degree: int) -> np.ndarray:
    """Chebyshev coefficients (chebval2d convention) of the interpolant of f(x, y) at first-kind points."""
    points = np.cos(np.pi * (np.arange(degree + 1) + 0.5) / (degree + 1))
    inverse = np.linalg.inv(C.chebvander(points, degree))
    values = function(points[:, None], points[None, :])
    coefficients: np.ndarray = inverse @ values @ inverse.T
    return coefficients


# The solver against manufactured solutions


@pytest.mark.parametrize("fine", [48, 64, 96])
def test_solver_sine(fine: int) -> None:
    c: np.ndarray = C.chebinterpolate(lambda t: np.sin(np.pi * t), 40)  # sin(pi x) to rounding
    f = -2.0 * np.pi**2 * np.outer(c, c)
    u = solve(f[None], fine)
    assert u.shape == (1, fine, fine)
    # measured 7e-14 (fine 64), 1.2e-13 (fine 96): rounding in the eigendecomposition grows with fine
    assert np.abs(grid_values(u)[0] - np.sin(np.pi * X) * np.sin(np.pi * Y)).max() < 1e-12


def test_solver_exp_cos() -> None:
    def u_exact(x: Values, y: Values) -> Values:
        u: Values = (1 - x**2) * (1 - y**2) * np.exp(x) * np.cos(y)
        return u

    def f_exact(x: Values, y: Values) -> Values:
        a, b = (1 - x**2) * np.exp(x), (1 - y**2) * np.cos(y)
        a_xx = (-(x**2) - 4 * x - 1) * np.exp(x)
        b_yy = (y**2 - 3) * np.cos(y) + 4 * y * np.sin(y)
        f: Values = a_xx * b + a * b_yy
        return f

    # the analytic f is right: a finite-difference Laplacian of u_exact agrees
    h, x0, y0 = 1e-4, 0.3, -0.2
    laplacian = (
        u_exact(x0 + h, y0) + u_exact(x0 - h, y0) + u_exact(x0, y0 + h) + u_exact(x0, y0 - h) - 4 * u_exact(x0, y0)
    ) / h**2
    assert abs(laplacian - f_exact(x0, y0)) < 1e-6
    u = solve(interpolate_2d(f_exact, 40)[None], 64)
    assert np.abs(grid_values(u)[0] - u_exact(X, Y)).max() < 1e-12  # measured 1.5e-13


def test_solver_polynomial_exact() -> None:
    # u = (1 - x^2)(1 - y^2) x y^2: polynomial, so collocation is exact and f is exact in coefficients
    u_power = np.zeros((5, 5))
    u_power[1, 2], u_power[3, 2], u_power[1, 4], u_power[3, 4] = 1.0, -1.0, -1.0, 1.0
    # power basis -> Chebyshev basis along each axis (poly2cheb trims trailing zeros: pad back)
    change = np.array([np.pad(C.poly2cheb(np.eye(5)[m]), (0, 4 - m)) for m in range(5)]).T
    u_cheb = change @ u_power @ change.T
    laplacian = np.pad(C.chebder(u_cheb, 2, axis=0), ((0, 2), (0, 0))) + np.pad(
        C.chebder(u_cheb, 2, axis=1), ((0, 0), (0, 2))
    )
    u = solve(laplacian[None], 16)[0]
    expected = np.zeros((16, 16))
    expected[:5, :5] = u_cheb
    np.testing.assert_allclose(u, expected, rtol=0, atol=1e-14)
    values = (1 - X**2) * (1 - Y**2) * X * Y**2
    np.testing.assert_allclose(grid_values(u[None])[0], values, rtol=0, atol=1e-14)


def test_solver_batched_and_padded() -> None:
    f = sources(DataConfig(), 3, 5)
    u = solve(f, 64)
    for b in range(5):  # the batch is solved sample by sample
        np.testing.assert_array_equal(u[b], solve(f[b : b + 1], 64)[0])
    padded = np.zeros((5, 40, 40))
    padded[:, :16, :16] = f
    np.testing.assert_allclose(solve(padded, 64), u, rtol=0, atol=1e-14)
    with pytest.raises(ValueError, match="points"):
        solve(np.zeros((1, 65, 65)), 64)
    with pytest.raises(ValueError, match=r"\(B, n, n\)"):
        solve(np.zeros((16, 16)), 64)


# Sources


def test_sources_vanish_on_boundary_and_degree() -> None:
    task = DataConfig()
    f = sources(task, 11, 32)
    assert f.shape == (32, N, N)
    assert np.all(f[:, K:, :] == 0.0)
    assert np.all(f[:, :, K:] == 0.0)
    assert np.abs(f[:, K - 1, :]).max() > 0  # degree k - 1 is used
    assert np.abs(f[:, :, K - 1]).max() > 0
    t = np.linspace(-1.0, 1.0, 37)
    for b in range(32):
        for side in (-1.0, 1.0):
            assert np.abs(C.chebval2d(np.full_like(t, side), t, f[b])).max() < 1e-12
            assert np.abs(C.chebval2d(t, np.full_like(t, side), f[b])).max() < 1e-12
    assert np.abs(C.chebval2d(X[1:-1, 1:-1], Y[1:-1, 1:-1], f[0])).max() > 1e-2  # not identically zero


def test_sources_deterministic() -> None:
    task = DataConfig()
    np.testing.assert_array_equal(sources(task, 7, 8), sources(task, 7, 8))
    assert not np.allclose(sources(task, 7, 8), sources(task, 8, 8))
    np.testing.assert_array_equal(sources(task, 7, 3), sources(task, 7, 8)[:3])  # one draw, sample-major


@pytest.mark.parametrize(("n", "k"), [(16, 12), (12, 5)])
def test_sources_amplitudes(n: int, k: int) -> None:
    f = sources(DataConfig(n=n, k=k, solver_points=2 * n + 16), 5, 4)
    p = np.zeros((n, k - 2))
    for i in range(k - 2):  # phi_i = T_{i+2} - T_i
        p[i + 2, i], p[i, i] = 1.0, -1.0
    pinv = np.linalg.pinv(p)
    recovered = pinv @ f @ pinv.T
    np.testing.assert_allclose(p @ recovered @ p.T, f, rtol=0, atol=1e-13)  # f lies in the span of phi x phi
    g = np.random.default_rng(5).standard_normal((4, k - 2, k - 2))
    index = np.arange(k - 2)
    np.testing.assert_allclose(recovered, g / ((1.0 + index)[:, None] * (1.0 + index)[None, :]), rtol=0, atol=1e-13)


# The reference solution satisfies the PDE


def test_solution_satisfies_pde() -> None:
    task = DataConfig()
    f = sources(task, 21, 8)
    u = solve(f, task.solver_points)
    rng = np.random.default_rng(0)
    x, y = rng.uniform(-1, 1, 300), rng.uniform(-1, 1, 300)
    t = np.linspace(-1, 1, 41)
    for b in range(8):
        laplacian = np.pad(C.chebder(u[b], 2, axis=0), ((0, 2), (0, 0))) + np.pad(
            C.chebder(u[b], 2, axis=1), ((0, 0), (0, 2))
        )
        source = C.chebval2d(x, y, f[b])
        # measured 3e-10 of max |f|: differentiating twice per axis amplifies rounding in high degrees
        assert np.abs(C.chebval2d(x, y, laplacian) - source).max() < 1e-8 * np.abs(source).max()
        for side in (-1.0, 1.0):
            assert np.abs(C.chebval2d(np.full_like(t, side), t, u[b])).max() < 1e-14
            assert np.abs(C.chebval2d(t, np.full_like(t, side), u[b])).max() < 1e-14


def test_solution_converged() -> None:
    f = sources(DataConfig(), 2, 64)
    # measured 3.6e-13 (mean) between fine 64 and 128: the reference is exact to rounding
    assert relative_l2(solve(f, 64), solve(f, 128)).max() < 1e-11
    assert relative_l2(solve(f, 32), solve(f, 128)).max() > 1e-12  # and the comparison can see a coarser solve


# The metric


def test_grid_values_brute_force() -> None:
    c = np.random.default_rng(3).standard_normal((3, 20, 20))
    values = grid_values(c)
    assert values.shape == (3, 64, 64)
    for b in range(3):
        np.testing.assert_allclose(values[b], C.chebval2d(X, Y, c[b]), rtol=0, atol=1e-12)
    asymmetric = np.zeros((1, 2, 2))
    asymmetric[0, 1, 0] = 1.0  # u = x: axis 1 is x
    np.testing.assert_allclose(grid_values(asymmetric, 5)[0], np.linspace(-1, 1, 5)[:, None] * np.ones(5), atol=0)


def test_relative_l2() -> None:
    data = make_dataset(PROBLEM, DataConfig(), 9, 6)
    np.testing.assert_array_equal(relative_l2(data.exact(), data.exact()), np.zeros(6))
    np.testing.assert_array_equal(relative_l2(np.zeros((6, N, N)), data.exact()), np.ones(6))
    predicted = data.u + 1e-3 * np.random.default_rng(4).standard_normal(data.u.shape)
    expected = [
        np.linalg.norm(C.chebval2d(X, Y, predicted[b]) - C.chebval2d(X, Y, data.exact()[b]))
        / np.linalg.norm(C.chebval2d(X, Y, data.exact()[b]))
        for b in range(6)
    ]
    np.testing.assert_allclose(relative_l2(predicted, data.exact()), expected, rtol=1e-10)


def test_summary() -> None:
    errors = np.random.default_rng(6).exponential(size=101)
    s = summary(errors)
    assert s == {"mean": np.mean(errors), "median": np.median(errors), "p95": np.percentile(errors, 95)}
    assert all(type(v) is float for v in s.values())
    with pytest.raises(ValueError, match="non-empty"):
        summary(np.array([]))


def test_truncation_floor() -> None:
    task = DataConfig()
    test = make_dataset(PROBLEM, task, TEST_SEED, 256)
    np.testing.assert_array_equal(test.u, truncate(test.exact(), N))
    floor = test.truncation_floor()
    print(f"truncation floor at n = {task.n}, 256 test samples: {floor}")
    # measured mean 1.75e-6, median 1.31e-6, p95 4.48e-6
    assert 1e-7 < floor["median"] <= floor["p95"] < 1e-4
    assert 1e-7 < floor["mean"] < 1e-4
    finer = make_dataset(PROBLEM, DataConfig(n=24, solver_points=64), TEST_SEED, 64)
    assert finer.truncation_floor()["mean"] < floor["mean"] / 10


# Datasets and the cache


def test_make_dataset() -> None:
    task = DataConfig(n=12, k=8, solver_points=32)
    data = make_dataset(PROBLEM, task, 4, 5)
    assert data.data_config == task
    assert data.seed == 4
    np.testing.assert_array_equal(data.inputs, sources(task, 4, 5))
    np.testing.assert_array_equal(data.u_fine, solve(data.inputs, 32))
    np.testing.assert_array_equal(data.u, data.exact()[:, :12, :12])


def _only_file(directory: Path) -> Path:
    (path,) = directory.iterdir()
    return path


def test_cache_reads_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    task = DataConfig(n=12, k=8, solver_points=32)
    first = PROBLEM.dataset(tmp_path, task, 3, 7)
    path = _only_file(tmp_path)  # no temporary file left behind
    assert path.suffix == ".npz"
    assert all(s in path.name for s in ("n12", "k8", "solver_points32", "seed3"))

    def forbidden(*args: object) -> None:
        raise AssertionError("regenerated a cached dataset")

    monkeypatch.setattr(problem_module, "make_dataset", forbidden)
    mtime = path.stat().st_mtime_ns
    second = PROBLEM.dataset(tmp_path, task, 3, 7)
    assert path.stat().st_mtime_ns == mtime
    for name in ("inputs", "u", "u_fine"):
        np.testing.assert_array_equal(getattr(second, name), getattr(first, name))
    assert second.data_config == task
    assert second.seed == 3
    with pytest.raises(AssertionError, match="regenerated"):  # other parameters are other files
        PROBLEM.dataset(tmp_path, task, 4, 7)


@pytest.mark.parametrize("damage", ["garbage", "truncated", "empty"])
def test_cache_corrupt_file_regenerated(tmp_path: Path, damage: str) -> None:
    task = DataConfig(n=12, k=8, solver_points=32)
    PROBLEM.dataset(tmp_path, task, 3, 7)
    path = _only_file(tmp_path)
    content = path.read_bytes()
    damaged = {"garbage": b"not an npz file" * 10, "truncated": content[: len(content) // 2], "empty": b""}
    path.write_bytes(damaged[damage])
    data = PROBLEM.dataset(tmp_path, task, 3, 7)
    np.testing.assert_array_equal(data.u_fine, make_dataset(PROBLEM, task, 3, 7).u_fine)
    assert path.read_bytes() == content  # rewritten


def test_cache_mismatched_parameters_regenerated(tmp_path: Path) -> None:
    task = DataConfig(n=12, k=8, solver_points=32)
    PROBLEM.dataset(tmp_path / "other", task, 4, 7)
    wrong = _only_file(tmp_path / "other")
    PROBLEM.dataset(tmp_path / "cache", task, 3, 7)
    path = _only_file(tmp_path / "cache")
    os.replace(wrong, path)  # a seed-4 file under the seed-3 name
    data = PROBLEM.dataset(tmp_path / "cache", task, 3, 7)
    expected = make_dataset(PROBLEM, task, 3, 7)
    np.testing.assert_array_equal(data.inputs, expected.inputs)
    np.testing.assert_array_equal(data.u_fine, expected.u_fine)
    with np.load(path) as stored:  # and the file now holds the right dataset
        np.testing.assert_array_equal(stored["inputs"], expected.inputs)


def test_the_cache_holds_one_file_per_dataset_whatever_the_count(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The first samples of a seed do not depend on the count, so a smaller count is read from the
    # file of a larger one and a larger count replaces it: one file, as large as the largest asked for.
    task = DataConfig(n=12, k=8, solver_points=32)
    small, large = make_dataset(PROBLEM, task, 3, 4), make_dataset(PROBLEM, task, 3, 9)
    np.testing.assert_array_equal(large.inputs[:4], small.inputs)
    np.testing.assert_array_equal(large.exact()[:4], small.exact())
    PROBLEM.dataset(tmp_path, task, 3, 4)
    np.testing.assert_array_equal(PROBLEM.dataset(tmp_path, task, 3, 9).u_fine, large.u_fine)
    path = _only_file(tmp_path)

    def forbidden(*args: object) -> None:
        raise AssertionError("regenerated a cached dataset")

    monkeypatch.setattr(problem_module, "make_dataset", forbidden)
    for count in (1, 4, 9):
        data = PROBLEM.dataset(tmp_path, task, 3, count)
        assert len(data.inputs) == count
        np.testing.assert_array_equal(data.u_fine, large.exact()[:count])
    assert _only_file(tmp_path) == path
    with np.load(path) as stored:
        assert len(stored["inputs"]) == 9


@pytest.mark.end_to_end
def test_a_dataset_cached_by_one_process_is_read_by_another(tmp_path: Path) -> None:
    # The cache key names a digest of the data's code; it must not depend on what else a process has
    # imported (this one imported every test module, among them funcformer.poisson.families), or the
    # processes of one run would each generate and store their own copy.
    import funcformer.poisson.families  # noqa: F401  (a submodule the task's code does not import)

    task = DataConfig(n=12, k=8, solver_points=32)
    PROBLEM.dataset(tmp_path, task, 3, 4)
    before = _only_file(tmp_path)
    script = (
        "import sys; from funcformer.poisson import PROBLEM, DataConfig; "
        "PROBLEM.dataset(sys.argv[1], DataConfig(n=12, k=8, solver_points=32), 3, 4)"
    )
    env = {**os.environ, "JAX_PLATFORMS": "cpu"}
    subprocess.run([sys.executable, "-c", script, str(tmp_path)], check=True, env=env, cwd=Path(__file__).parents[2])
    assert _only_file(tmp_path) == before
    assert before.stat().st_mtime_ns == _only_file(tmp_path).stat().st_mtime_ns


def test_the_code_digest_reads_every_library_import_of_the_source() -> None:
    # imports under TYPE_CHECKING (never run), relative ones, submodules and names of a module
    source = """
from __future__ import annotations
from typing import TYPE_CHECKING
import numpy as np
import applicative.instances.collocation
from . import families
from ..learning.problem import Problem
if TYPE_CHECKING:
    from funcformer.learning import metric
"""
    found = problem_module._library_imports(source, sys.modules["funcformer.poisson"])
    expected = {
        "applicative.instances.collocation": "applicative/instances/collocation.py",
        "funcformer.poisson.families": "funcformer/poisson/families.py",
        "funcformer.learning.problem": "funcformer/learning/problem.py",
        "funcformer.learning.metric": "funcformer/learning/metric.py",
    }
    assert {name: path.as_posix()[-len(expected[name]) :] for name, path in found.items()} == expected


def test_a_training_set_is_cached_without_its_fine_solutions(tmp_path: Path) -> None:
    task = DataConfig(n=12, k=8, solver_points=32)
    full = PROBLEM.dataset(tmp_path, task, 3, 7)
    small = PROBLEM.dataset(tmp_path, task, 3, 7, fine=False)
    assert small.u_fine is None
    np.testing.assert_array_equal(small.inputs, full.inputs)
    np.testing.assert_array_equal(small.u, full.u)
    with pytest.raises(ValueError, match="without its fine solutions"):
        small.exact()
    files = sorted(tmp_path.glob("*.npz"), key=lambda path: path.stat().st_size)
    assert len(files) == 2
    assert "_truncated" in files[0].name
    assert files[0].stat().st_size < files[1].stat().st_size / 2  # (7, 12, 12) targets, not (7, 32, 32)
    np.testing.assert_array_equal(PROBLEM.dataset(tmp_path, task, 3, 7, fine=False).u, full.u)  # read back


# DataConfig


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"k": 2}, "DataConfig.k"),
        ({"n": 11}, "DataConfig.n"),
        ({"solver_points": 31}, "DataConfig.solver_points"),
        ({"n": 12, "k": 12, "solver_points": 15}, "DataConfig.solver_points"),
        ({"n": 16.0}, "DataConfig.n"),
        ({"k": True}, "DataConfig.k"),
    ],
)
def test_task_validation(kwargs: dict[str, object], field: str) -> None:
    with pytest.raises(ValueError, match=field):
        DataConfig(**kwargs)  # type: ignore[arg-type]


def test_defaults_and_seeds() -> None:
    assert DataConfig() == DataConfig(n=N, k=K, solver_points=SOLVER_POINTS) == DataConfig(16, 12, 64)
    assert DataConfig(n=3, k=3, solver_points=16).n == 3
    assert PROBLEM.check_train_seed(0) == 0
    with pytest.raises(ValueError, match="held-out test seed"):
        PROBLEM.check_train_seed(TEST_SEED)
