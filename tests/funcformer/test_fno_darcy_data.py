"""The FNO paper's Darcy data (``funcformer.fno_darcy``) against independent references: the field's spectrum
against its covariance, through a DCT-II matrix written from its definition; the coefficient against the
field's sign; the solver against manufactured solutions (second-order convergence), against a dense solve
of the five-point scheme assembled node by node in MATLAB's column-major order, and under its symmetries;
the spline against bicubic polynomials and scipy's FITPACK interpolating spline; the subsampling against
the grid's indices; the metric against its formula; and the generator: it writes, resumes, and refuses a
corrupt shard by name."""

import io
import itertools
from pathlib import Path

import jax.numpy as jnp
import numpy as np
import pytest
from filelock import FileLock
from scipy.fft import idctn
from scipy.interpolate import RectBivariateSpline

from applicative import training
from applicative.training.files import RunInUse
from applicative.training.symmetry import moved
from funcformer.fno_darcy import TEST_SEED, TRAIN_SEED, export, generate, load
from funcformer.fno_darcy.__main__ import main
from funcformer.fno_darcy.data import (
    ALPHA,
    RESOLUTIONS,
    TAU,
    cell_centres,
    coarse_solution,
    coefficients,
    gaussian_field,
    grid_points,
    node_points,
    solution,
    solve,
    subsample,
    to_cells,
    to_nodes,
)
from funcformer.learning.metric import mean_values_relative_l2, values_relative_l2

# The random field


def dct2_matrix(s: int) -> np.ndarray:
    """The orthonormal DCT-II matrix from its definition: C[k, n] = sqrt((2 - [k = 0]) / s) cos(pi k (2n + 1) / 2s)."""
    k, n = np.arange(s)[:, None], np.arange(s)[None, :]
    matrix: np.ndarray = np.sqrt((2.0 - (k == 0)) / s) * np.cos(np.pi * k * (2 * n + 1) / (2 * s))
    return matrix


def test_field_spectrum_is_the_covariance() -> None:
    """Over 2000 draws at s = 16, each DCT-II mode k != 0 of g has mean 0 and variance
    s^2 tau^(2(alpha-1)) (pi^2 |k|^2 + tau^2)^(-alpha); mode 0 is zero. A mode's mean square over N draws is
    its variance times chi^2_N / N (standard deviation sqrt(2 / N) relative): every one of the 255 is
    within 4.5 of those deviations (the chance that any is not, were the code right: about 0.002)."""
    s, draws = 16, 2000
    c = dct2_matrix(s)
    np.testing.assert_allclose(c @ c.T, np.eye(s), atol=1e-14)  # the reference is orthonormal
    modes = np.einsum("ki,bij,lj->bkl", c, gaussian_field(seed=3, count=draws, s=s), c)
    k2 = np.arange(s) ** 2.0
    variance = s**2 * TAU ** (2 * (ALPHA - 1)) * (np.pi**2 * np.add.outer(k2, k2) + TAU**2) ** -ALPHA
    assert np.max(np.abs(modes[:, 0, 0])) < 1e-12 * np.sqrt(variance[0, 1])
    nonzero = np.ones((s, s), bool)
    nonzero[0, 0] = False
    ratio = np.mean(modes**2, axis=0)[nonzero] / variance[nonzero]
    assert np.max(np.abs(ratio - 1.0)) / np.sqrt(2.0 / draws) < 4.5
    means = np.mean(modes, axis=0)[nonzero] / np.sqrt(variance[nonzero] / draws)
    assert np.max(np.abs(means)) < 4.5


def test_samples_are_drawn_alone() -> None:
    """Sample i of a seed is the same drawn among others or alone; another seed draws other samples."""
    many = coefficients(seed=5, count=4, s=8)
    np.testing.assert_array_equal(coefficients(seed=5, count=1, s=8, start=2)[0], many[2])
    assert not np.array_equal(coefficients(seed=6, count=4, s=8), many)


def test_threshold_gives_exactly_two_values() -> None:
    g = gaussian_field(seed=1, count=3, s=32)
    a = coefficients(seed=1, count=3, s=32)
    assert a.dtype == np.float64
    assert set(np.unique(a).tolist()) == {3.0, 12.0}
    np.testing.assert_array_equal(a == 12.0, g >= 0)
    assert set(np.unique(coefficients(seed=1, count=3, s=32, low=4.0)).tolist()) == {4.0, 12.0}  # demo.m's
    with pytest.raises(ValueError, match=r"low = 0\.0 must be positive"):
        coefficients(seed=1, count=1, s=8, low=0.0)


# The spline


def test_spline_reproduces_bicubic_polynomials() -> None:
    """Not-a-knot splines reproduce cubics, extrapolated to the boundary nodes too."""
    p = np.random.default_rng(0).standard_normal((4, 4))
    cells, nodes = cell_centres(10), node_points(25)
    exact = np.polynomial.polynomial.polygrid2d(nodes, nodes, p)
    np.testing.assert_allclose(to_nodes(np.polynomial.polynomial.polygrid2d(cells, cells, p), 25), exact, atol=1e-13)
    back = np.polynomial.polynomial.polygrid2d(cell_centres(12), cell_centres(12), p)  # and from the nodes back
    np.testing.assert_allclose(to_cells(exact, 12), back, atol=1e-13)


def test_spline_is_fitpacks_interpolating_spline() -> None:
    """FITPACK's interpolating spline (s = 0) on [0, 1] has knots at the inner cell centres but the second and
    the last but one: the not-a-knot spline, extended by its end pieces."""
    values = np.random.default_rng(1).standard_normal((12, 12))
    cells = cell_centres(12)
    reference = RectBivariateSpline(cells, cells, values, bbox=[0, 1, 0, 1], kx=3, ky=3, s=0)(
        node_points(30), node_points(30)
    )
    np.testing.assert_allclose(to_nodes(values, 30), reference, atol=1e-12)


# The solver


def manufactured(n: int) -> float:
    """The largest nodal error of ``solve`` at n nodes for u = sin(pi x) sin(2 pi y), a = 2 + sin(2x + 3y),
    f = -div(a grad u) = -(a_x u_x + a_y u_y) + 5 pi^2 a u, a and f given at the n x n cell centres."""
    x, y = np.meshgrid(cell_centres(n), cell_centres(n), indexing="ij")
    a = 2.0 + np.sin(2 * x + 3 * y)
    ax, ay = 2.0 * np.cos(2 * x + 3 * y), 3.0 * np.cos(2 * x + 3 * y)
    ux, uy = np.pi * np.cos(np.pi * x) * np.sin(2 * np.pi * y), 2 * np.pi * np.sin(np.pi * x) * np.cos(2 * np.pi * y)
    f = -(ax * ux + ay * uy) + 5 * np.pi**2 * a * np.sin(np.pi * x) * np.sin(2 * np.pi * y)
    xn, yn = np.meshgrid(node_points(n), node_points(n), indexing="ij")
    return float(np.max(np.abs(solve(a, f, nodes=n) - np.sin(np.pi * xn) * np.sin(2 * np.pi * yn))))


def test_solver_converges_at_second_order() -> None:
    errors = [manufactured(n) for n in (41, 81, 161)]
    assert errors[0] < 3e-3
    for coarse, fine in itertools.pairwise(errors):
        assert 3.8 < coarse / fine < 4.2


def reference_solve(a: np.ndarray, f: np.ndarray) -> np.ndarray:
    """The five-point scheme of solve_gwf.m for a and f at the (n, n) nodes, assembled node by node, unknowns in
    MATLAB's column-major order (F(:)), solved densely by numpy."""
    n = len(a)
    m = n - 2
    matrix = np.zeros((m * m, m * m))
    for i in range(1, n - 1):
        for j in range(1, n - 1):
            row = (i - 1) + (j - 1) * m
            for ni, nj in ((i - 1, j), (i + 1, j), (i, j - 1), (i, j + 1)):
                face = (a[i, j] + a[ni, nj]) / 2.0
                matrix[row, row] += face
                if 1 <= ni <= n - 2 and 1 <= nj <= n - 2:
                    matrix[row, (ni - 1) + (nj - 1) * m] -= face
    u = np.zeros((n, n))
    interior = np.linalg.solve(matrix * (n - 1) ** 2, f[1:-1, 1:-1].ravel(order="F"))
    u[1:-1, 1:-1] = interior.reshape(m, m, order="F")
    return u


def test_solver_is_the_five_point_scheme() -> None:
    """A random coefficient and right-hand side at 15 points, interpolated by FITPACK (the test above) and
    solved by ``reference_solve``; and a constant coefficient against the five-point Laplacian built by kron."""
    rng = np.random.default_rng(2)
    a, f = coefficients(seed=2, count=1, s=15)[0], 1.0 + rng.random((15, 15))
    cells, nodes = cell_centres(15), node_points(15)

    def spline(v: np.ndarray) -> np.ndarray:
        values: np.ndarray = RectBivariateSpline(cells, cells, v, bbox=[0, 1, 0, 1], kx=3, ky=3, s=0)(nodes, nodes)
        return values

    np.testing.assert_allclose(solve(a, f, nodes=15), reference_solve(spline(a), spline(f)), rtol=1e-11, atol=1e-14)
    second = (np.diag(np.full(13, 2.0)) - np.diag(np.ones(12), 1) - np.diag(np.ones(12), -1)) * 14**2
    laplacian = np.kron(second, np.eye(13)) + np.kron(np.eye(13), second)
    poisson = np.linalg.solve(laplacian, np.ones(13 * 13)).reshape(13, 13)
    np.testing.assert_allclose(solve(np.ones((15, 15)), nodes=15)[1:-1, 1:-1], poisson, rtol=1e-12)


def test_solver_symmetries() -> None:
    """A transposed coefficient gives the transposed solution; a constant c gives 1 / c times c = 1's."""
    a = coefficients(seed=4, count=1, s=43)[0]
    u = solve(a, nodes=43)
    np.testing.assert_allclose(solve(a.T, nodes=43), u.T, rtol=1e-12, atol=1e-16)
    one = solve(np.ones((43, 43)), nodes=43)
    np.testing.assert_allclose(solve(np.full((43, 43), 7.5), nodes=43), one / 7.5, rtol=1e-12, atol=1e-16)
    assert u.shape == (43, 43)
    assert np.all(u[[0, -1], :] == 0)
    assert np.all(u[:, [0, -1]] == 0)
    assert np.all(u[1:-1, 1:-1] > 0)


def test_solver_errors() -> None:
    with pytest.raises(ValueError, match=r"shape \(s, s\).*\(5, 6\)"):
        solve(np.ones((5, 6)), nodes=9)
    a = np.ones((6, 6))
    a[2, 3] = 0.0
    with pytest.raises(ValueError, match="must be positive: 1 values"):
        solve(a, nodes=9)
    with pytest.raises(ValueError, match="f must have a's shape"):
        solve(np.ones((6, 6)), np.ones((7, 7)), nodes=9)
    with pytest.raises(ValueError, match="nodes must be >= 3"):
        solve(np.ones((6, 6)), nodes=2)


def square_poisson(x: np.ndarray, y: np.ndarray, terms: int = 301) -> np.ndarray:
    """-Laplacian u = 1 on (0, 1)^2, u = 0 on the boundary, by its sine series: u = sum over odd m, k of
    16 sin(m pi x) sin(k pi y) / (pi^4 m k (m^2 + k^2)) (301 terms: within 5e-9 of the sum)."""
    m = np.arange(1, terms + 1, 2.0)
    sx, sy = np.sin(np.pi * np.multiply.outer(x, m)), np.sin(np.pi * np.multiply.outer(y, m))
    weights = 16.0 / (np.pi**4 * np.outer(m, m) * np.add.outer(m**2, m**2))
    result: np.ndarray = sx @ weights @ sy.T
    return result


def test_coarse_solution_converges_to_the_sine_series() -> None:
    """A constant coefficient c at the benchmark's 85 points, solved at 85, 169 and 337 nodes: 1 / c times the
    sine series of the unit square's Poisson problem at those points, to second order in the node spacing; and
    at 169 nodes, interpolated to the 141 points, as close there."""
    x = grid_points(85)
    exact = square_poisson(x, x) / 7.5
    errors = [
        float(np.max(np.abs(coarse_solution(np.full((85, 85), 7.5), nodes) - exact))) / float(np.max(exact))
        for nodes in (85, 169, 337)
    ]
    assert errors[0] < 2e-4
    for coarse, fine in itertools.pairwise(errors):
        assert 3.5 < coarse / fine < 4.5
    x = grid_points(141)  # the same solve, interpolated to another grid's points
    at_141 = coarse_solution(np.full((85, 85), 7.5), 169, s=141)
    assert np.max(np.abs(at_141 - square_poisson(x, x) / 7.5)) / np.max(exact) < 1.2 * errors[1]


def test_coarse_solution_reads_its_input_at_the_benchmarks_points() -> None:
    """A smooth coefficient given at the 85 points of the benchmark (every 5th point of the 421 grid): the
    85-node solve, splined back to those points, is within 2e-4 of the 421-node solution there (5.9e-5; read
    at the 85-grid's own cell centres instead, the input is shifted by up to a 170th: 3.5e-3)."""
    x = cell_centres(421)
    a = 4.0 + 2.0 * np.outer(np.sin(np.pi * x), np.cos(2 * np.pi * x)) + x[:, None]
    exact = subsample(solution(a), 85)
    assert mean_values_relative_l2(coarse_solution(subsample(a, 85), nodes=85)[None], exact[None]) < 2e-4


def test_coarse_solution_symmetry_and_errors() -> None:
    a = subsample(coefficients(seed=6, count=1, s=421)[0], 43)
    u = coarse_solution(a, nodes=57)
    np.testing.assert_allclose(coarse_solution(a.T, nodes=57), u.T, rtol=1e-12, atol=1e-16)
    assert u.shape == (43, 43)
    assert np.all(u > 0)
    with pytest.raises(ValueError, match=r"s = 44 is not one of the benchmark's grids"):
        coarse_solution(np.ones((44, 44)))
    with pytest.raises(ValueError, match=r"s = 100 is not one of the benchmark's grids"):
        coarse_solution(a, s=100)
    with pytest.raises(ValueError, match="must be positive: 2 values"):
        coarse_solution(np.where(np.eye(43) * np.arange(43) > 40, -1.0, 1.0))
    with pytest.raises(ValueError, match="nodes must be >= 4"):
        coarse_solution(np.ones((43, 43)), nodes=3)


# Resolutions and the metric


def test_subsampling_picks_every_rth_point() -> None:
    i, j = np.meshgrid(np.arange(421), np.arange(421), indexing="ij")
    index = 1000 * i + j
    for s, r in ((85, 5), (141, 3), (211, 2), (421, 1)):
        k, m = np.meshgrid(np.arange(s), np.arange(s), indexing="ij")
        np.testing.assert_array_equal(subsample(index, s), 1000 * r * k + r * m)
        x = np.broadcast_to(node_points(421)[:, None], (421, 421))
        np.testing.assert_allclose(subsample(x, s)[:, 0], node_points(s), rtol=1e-15)
    np.testing.assert_array_equal(subsample(np.stack([index, -index]), 85)[1], -subsample(index, 85))
    with pytest.raises(ValueError, match=r"s = 84 is not a resolution of the 421-point grid.*85, 106"):
        subsample(index, 84)
    with pytest.raises(ValueError, match=r"\(\.\.\., S, S\).*\(421, 420\)"):
        subsample(index[:, :-1], 85)


@pytest.mark.parametrize("s", [85, 141, 211, 421])
def test_grid_points_are_the_benchmark_subsample(s: int) -> None:
    step = 420 // (s - 1)
    np.testing.assert_allclose(grid_points(s), (2 * np.arange(0, 421, step) + 1) / 842, rtol=0, atol=1e-15)
    x = np.broadcast_to(cell_centres(421), (421, 421))  # x at every point of the 421 grid
    np.testing.assert_array_equal(grid_points(s), subsample(x, s)[0])


def test_grid_points_refuse_other_grids() -> None:
    with pytest.raises(ValueError, match=r"s = 100 is not one of the benchmark's grids"):
        grid_points(100)


def test_relative_l2() -> None:
    rng = np.random.default_rng(3)
    exact, predicted = rng.standard_normal((4, 9, 9)), rng.standard_normal((4, 9, 9))
    expected = [np.sqrt(np.sum((p - e) ** 2) / np.sum(e**2)) for p, e in zip(predicted, exact, strict=True)]
    np.testing.assert_allclose(values_relative_l2(predicted, exact), expected, rtol=1e-14)
    np.testing.assert_allclose(
        training.values_relative_l2(jnp.asarray(predicted), jnp.asarray(exact)), expected, rtol=1e-6
    )
    assert mean_values_relative_l2(predicted, exact) == pytest.approx(np.mean(expected), rel=1e-14)
    assert values_relative_l2(2.0 * exact, exact).tolist() == pytest.approx([1.0] * 4, rel=1e-15)
    with pytest.raises(ValueError, match="exact sample 1 is zero"):
        values_relative_l2(exact, exact * np.array([1.0, 0.0, 1.0, 1.0])[:, None, None])
    with pytest.raises(ValueError, match="of one shape"):
        values_relative_l2(exact[:, :8], exact)


# The generator


def tiny(out: Path, workers: int = 1, **sizes: int) -> int:
    """The generator at s = 43 (43 nodes), shards of 2 samples, no progress bar."""
    counts = {"train": 3, "test": 2} | sizes
    return generate(out, counts["train"], counts["test"], 43, workers=workers, shard_size=2, progress=False)


def test_generator_writes_resumes_and_refuses(tmp_path: Path) -> None:
    out = tmp_path / "data"
    assert tiny(out) == 5
    assert sorted(p.name for p in out.iterdir()) == [
        ".lock",
        "dataset.json",
        "test-00000.npz",
        "train-00000.npz",
        "train-00001.npz",
    ]
    a, u = load(out, "train", s=43)
    np.testing.assert_array_equal(a, coefficients(TRAIN_SEED, 3, s=43))
    for sample, stored in zip(a, u, strict=True):
        np.testing.assert_array_equal(stored, to_cells(solve(sample, nodes=43), 43))
    test_a, _ = load(out, "test", s=43)
    np.testing.assert_array_equal(test_a, coefficients(TEST_SEED, 2, s=43))
    a22, u22 = load(out, "train", s=22)
    np.testing.assert_array_equal(a22, a[:, ::2, ::2])
    np.testing.assert_array_equal(u22, u[:, ::2, ::2])
    with pytest.raises(ValueError, match="s = 85 is not a resolution of the 43-point grid"):
        load(out, "train")

    # a killed run: one shard missing; only it is made again, with the same numbers
    first = (out / "train-00000.npz").stat()
    (out / "train-00001.npz").unlink()
    with pytest.raises(FileNotFoundError, match=r"train-00001\.npz is missing"):
        load(out, "train", s=43)
    assert tiny(out) == 1
    assert (out / "train-00000.npz").stat().st_mtime_ns == first.st_mtime_ns
    np.testing.assert_array_equal(load(out, "train", s=43)[1], u)
    assert tiny(out) == 0

    with pytest.raises(ValueError, match=r"other settings.*differing: splits"):
        tiny(out, train=4)
    with FileLock(out / ".lock", timeout=0), pytest.raises(RunInUse, match="another generator"):
        tiny(out)


def test_generator_refuses_a_corrupt_shard_by_name(tmp_path: Path) -> None:
    out = tmp_path / "data"
    tiny(out, train=2, test=1)
    path = out / "train-00000.npz"
    good = path.read_bytes()

    path.write_bytes(good[: len(good) // 2])  # truncated
    for call in (lambda: load(out, "train", s=43), lambda: tiny(out, train=2, test=1)):
        with pytest.raises(ValueError, match=r"train-00000\.npz is corrupt or truncated"):
            call()

    with np.load(io.BytesIO(good)) as stored:  # a value changed, the checksum kept
        arrays = {name: stored[name] for name in stored.files}
    arrays["u"][1, 20, 20] += 1e-9
    np.savez_compressed(path, **arrays)
    with pytest.raises(ValueError, match=r"train-00000\.npz is corrupt: its arrays do not match its SHA-256"):
        load(out, "train", s=43)


@pytest.mark.end_to_end
def test_generator_on_processes_and_command_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Two processes make the samples one process does; the command line makes them too, and refuses bad input."""
    tiny(tmp_path / "pool", workers=2, train=2, test=1)
    assert (
        main(["generate", "--out", str(tmp_path / "cli"), "--train", "2", "--test", "1", "--s", "43", "--workers", "1"])
        == 0
    )
    for name in ("pool", "cli"):
        np.testing.assert_array_equal(load(tmp_path / name, "train", s=43)[0], coefficients(TRAIN_SEED, 2, s=43))
        first_test = coefficients(TEST_SEED, 1, s=43)[0]
        np.testing.assert_array_equal(load(tmp_path / name, "test", s=43)[1][0], solution(first_test))
    assert main(["generate", "--out", str(tmp_path / "bad"), "--s", "3"]) == 1
    assert "s must be an integer >= 4" in capsys.readouterr().err


def test_an_export_is_the_dataset_at_one_grid(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``export`` (and the command line's) writes both splits at one grid in float32; ``load`` reads the file
    as it reads the directory there, and refuses another grid, a changed value and a truncated file by name."""
    out = tmp_path / "data"
    tiny(out)
    path = export(out, tmp_path / "d22.npz", 22)
    assert main(["export", "--data", str(out), "--out", str(tmp_path / "cli.npz"), "--s", "22"]) == 0
    assert "cli.npz: the dataset at s = 22" in capsys.readouterr().out
    for file in (path, tmp_path / "cli.npz"):
        for split in ("train", "test"):
            a, u = load(file, split, 22)
            expected_a, expected_u = load(out, split, 22)
            np.testing.assert_array_equal(a, expected_a)  # the two values are exact in float32
            np.testing.assert_allclose(u, expected_u, rtol=2**-24, atol=0)
            assert a.dtype == u.dtype == np.float64
    with pytest.raises(ValueError, match=r"d22\.npz holds the dataset at s = 22 alone, not s = 43"):
        load(path, "train", 43)
    good = path.read_bytes()
    with np.load(io.BytesIO(good)) as stored:  # a value changed, the checksum kept
        arrays = {name: stored[name] for name in stored.files}
    arrays["u_test"][0, 5, 5] *= 1.5
    np.savez_compressed(path, **arrays)
    with pytest.raises(ValueError, match=r"d22\.npz is corrupt: its arrays do not match its SHA-256"):
        load(path, "test", 22)
    path.write_bytes(good[: len(good) // 2])
    with pytest.raises(ValueError, match=r"d22\.npz is corrupt or truncated"):
        load(path, "train", 22)


def test_the_data_are_symmetric_under_the_squares_eight_symmetries() -> None:
    """What ``Recipe.augment`` assumes (applicative.training.symmetry): every benchmark grid is symmetric about
    1/2; the field's law is invariant (a reflection of the cell-centred grid is the field of xi with its
    odd-k1 rows negated, xi's law unchanged; a transpose, of xi transposed); and the solution map commutes with
    each of the eight symmetries S, u(S a) = S u(a), through the spline, the five-point solve and back."""
    for s in RESOLUTIONS:
        x = grid_points(s)
        np.testing.assert_allclose(x + x[::-1], 1.0, rtol=0, atol=1e-15)
    g = gaussian_field(seed=2, count=1, s=43)[0]
    xi = np.random.default_rng((2, 0)).standard_normal((43, 43))
    k2 = np.arange(43.0) ** 2
    amplitude = 43 * TAU ** (ALPHA - 1) * (np.pi**2 * np.add.outer(k2, k2) + TAU**2) ** (-ALPHA / 2)
    amplitude[0, 0] = 0.0
    signs = (-1.0) ** np.arange(43)[:, None]
    np.testing.assert_allclose(g[::-1], idctn(amplitude * signs * xi, type=2, norm="ortho"), atol=1e-12)
    np.testing.assert_allclose(g.T, idctn(amplitude * xi.T, type=2, norm="ortho"), atol=1e-12)
    a = coefficients(seed=4, count=1, s=43)[0]
    u = solution(a)
    for k in range(8):
        np.testing.assert_allclose(solution(moved(a, k)), moved(u, k), rtol=0, atol=1e-12 * u.max())
