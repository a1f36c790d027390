"""funcformer.learning.plots on the Poisson task: valid PNGs of the grid values, titled with the metric."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import matplotlib.image
import numpy as np
import pytest

from applicative.training import plots as training_plots
from funcformer import poisson as task
from funcformer.learning import plots


@pytest.fixture(scope="module")
def sample() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(f, u_fine, predicted): a real sample and its truncated target perturbed by 2% noise."""
    data = task.make_dataset(task.PROBLEM, task.DataConfig(), seed=3, count=2)
    noise = np.random.default_rng(0).standard_normal(data.u[1].shape)
    predicted = data.u[1] + 0.02 * np.abs(data.u[1]).max() * noise
    return data.inputs[1], data.exact()[1], predicted


def _read_png(path: Path) -> np.ndarray:
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    image = matplotlib.image.imread(path)
    assert isinstance(image, np.ndarray)
    return image


def test_panels_are_the_task_grid_values(sample: tuple[np.ndarray, np.ndarray, np.ndarray]) -> None:
    f, exact, predicted = sample
    for points in (task.GRID, 33):
        panels = plots.prediction_panels(f, exact, predicted, points)
        assert list(panels) == list(plots.PANELS)
        for name, coefficients in (("input", f), ("exact", exact), ("predicted", predicted)):
            np.testing.assert_array_equal(panels[name], task.grid_values(coefficients[None], points)[0])
        expected_error = task.grid_values(predicted[None], points)[0] - task.grid_values(exact[None], points)[0]
        np.testing.assert_array_equal(panels["error"], expected_error)
        # Independently of task.grid_values: chebval2d on the meshgrid, axis 0 is x.
        x, y = np.meshgrid(np.linspace(-1.0, 1.0, points), np.linspace(-1.0, 1.0, points), indexing="ij")
        chebval2d = np.polynomial.chebyshev.chebval2d
        for name, coefficients in (("input", f), ("exact", exact), ("predicted", predicted)):
            np.testing.assert_allclose(panels[name], chebval2d(x, y, coefficients), rtol=0, atol=1e-12)
        np.testing.assert_allclose(
            panels["error"], chebval2d(x, y, predicted) - chebval2d(x, y, exact), rtol=0, atol=1e-12
        )
    # The exact potential vanishes on the boundary; the perturbed prediction does not.
    boundary = np.concatenate([panels["exact"][[0, -1]].ravel(), panels["exact"][:, [0, -1]].ravel()])
    assert np.abs(boundary).max() < 1e-12
    assert np.abs(panels["error"]).max() > 1e-3


def test_prediction_figure_shows_the_panels_and_the_metric(
    sample: tuple[np.ndarray, np.ndarray, np.ndarray],
) -> None:
    f, exact, predicted = sample
    points = 40
    figure = plots.prediction_figure(f, exact, predicted, points)
    expected = task.relative_l2(predicted[None], exact[None])[0]
    assert 1e-3 < expected < 1.0
    assert plots.sample_error(exact, predicted) == expected
    assert plots.sample_error(exact, task.truncate(exact[None], task.N)[0]) < 1e-5
    for title in (figure.get_suptitle(), figure.axes[3].get_title()):
        match = re.search(r"relative L2 (?:error )?([0-9.]+e[-+][0-9]+)", title)
        assert match is not None, title
        assert float(match.group(1)) == pytest.approx(expected, rel=1e-3)
    # Three 3-D surfaces, then the error image (rows are y) on a symmetric diverging scale, then its colorbar.
    assert [axes.name for axes in figure.axes] == ["3d", "3d", "3d", "rectilinear", "rectilinear"]
    potentials = plots.prediction_panels(f, exact, predicted, points)
    both = (
        min(potentials["exact"].min(), potentials["predicted"].min()),
        max(potentials["exact"].max(), potentials["predicted"].max()),
    )
    assert figure.axes[1].get_zlim() == figure.axes[2].get_zlim() == both  # type: ignore[attr-defined]
    (image,) = figure.axes[3].images
    error = potentials["error"]
    np.testing.assert_array_equal(np.asarray(image.get_array()), error.T)
    low, high = image.get_clim()
    assert low == -high == -np.abs(error).max()
    assert image.get_cmap().name == "RdBu_r"
    assert image.colorbar is not None


def test_plot_prediction_writes_a_png(tmp_path: Path, sample: tuple[np.ndarray, np.ndarray, np.ndarray]) -> None:
    f, exact, predicted = sample
    path = tmp_path / "nested" / "dir" / "prediction.png"
    assert plots.plot_prediction(f, exact, predicted, str(path)) == path
    image = _read_png(path)
    figure = plots.prediction_figure(f, exact, predicted)
    width, height = figure.get_size_inches() * figure.dpi
    assert image.shape == (round(height), round(width), 4)
    assert image[..., :3].std() > 0.05


def test_plot_loss_writes_a_png(tmp_path: Path) -> None:
    rng = np.random.default_rng(1)
    losses = np.exp(-np.linspace(0.0, 5.0, 500)) * (1.0 + rng.random(500))
    path = training_plots.plot_loss(losses.tolist(), tmp_path / "a" / "loss.png", test_error=0.02)
    assert path == tmp_path / "a" / "loss.png"
    image = _read_png(path)
    assert image.shape == (500, 800, 4)
    assert image[..., :3].std() > 0.05
    figure = training_plots.loss_figure(list(losses), test_error=0.02)
    (axes,) = figure.axes
    assert axes.get_yscale() == "log"
    raw, smooth, test_line = axes.get_lines()
    np.testing.assert_array_equal(raw.get_ydata(), losses)
    window = training_plots.smoothing_window(500)
    assert window == 10
    np.testing.assert_allclose(
        np.asarray(smooth.get_ydata()), [np.exp(np.log(losses[i : i + window]).mean()) for i in range(500 - window + 1)]
    )
    np.testing.assert_array_equal(smooth.get_xdata(), np.arange(window - 1, 500))
    assert np.asarray(test_line.get_ydata()).tolist() == [0.02, 0.02]
    # One step, no test error.
    assert len(training_plots.loss_figure([0.5]).axes[0].get_lines()) == 2


def test_the_loss_figure_marks_the_held_out_errors_and_the_values_figure_shows_a_sample() -> None:
    """``held_out`` (step, error) pairs are drawn as given; ``values_figure`` shows a, u, the prediction and
    the error as images (axis 0 is x: transposed for imshow) and titles the error with the relative L2 error
    over the points, computed here in numpy."""
    (axes,) = training_plots.loss_figure([1.0, 0.5, 0.25, 0.2], held_out=[(1, 0.6), (3, 0.3)]).axes
    marks = axes.get_lines()[-1]
    assert np.asarray(marks.get_xdata()).tolist() == [1, 3]
    assert np.asarray(marks.get_ydata()).tolist() == [0.6, 0.3]
    rng = np.random.default_rng(2)
    a, u, p = rng.normal(size=(3, 7, 7))
    figure = plots.values_figure(a, u, p)
    images = [ax.get_images()[0].get_array() for ax in figure.axes if ax.get_images()]
    for shown, expected in zip(images, (a, u, p, p - u), strict=True):
        np.testing.assert_allclose(np.asarray(shown), expected.T)
    error = np.sqrt(np.sum((p - u) ** 2) / np.sum(u**2))
    assert figure.axes[6].get_title() == f"error (relative L2 {error:.3e})"
    with pytest.raises(ValueError, match=r"one \(s, s\) shape, got \(7, 7\), \(7, 7\), \(6, 7\)"):
        plots.values_figure(a, u, p[:6])


def test_moving_average() -> None:
    np.testing.assert_array_equal(training_plots.moving_average(np.array([1.0, 2.0, 3.0, 6.0]), 2), [1.5, 2.5, 4.5])
    np.testing.assert_array_equal(training_plots.moving_average(np.array([4.0]), 1), [4.0])
    with pytest.raises(ValueError, match="window"):
        training_plots.moving_average(np.array([1.0, 2.0]), 3)
    assert [training_plots.smoothing_window(n) for n in (1, 10, 100, 1000, 10**6)] == [1, 1, 2, 20, 200]


@pytest.mark.parametrize(
    ("argument", "bad", "message"),
    [
        ("x", np.zeros((3, 4)), r"x must be a 2-D square.*\(3, 4\)"),
        ("x", np.zeros((2, 3, 3)), r"x must be a 2-D square.*\(2, 3, 3\)"),
        ("exact", np.zeros(5), r"exact must be a 2-D square.*\(5,\)"),
        ("exact", np.zeros((0, 0)), r"exact must be a 2-D square.*\(0, 0\)"),
        ("predicted", np.zeros((16, 15)), r"predicted must be a 2-D square.*\(16, 15\)"),
        ("predicted", np.full((2, 2), np.inf), r"predicted must be finite, predicted\[0, 0\] = inf"),
        ("points", 1, "points must be an int >= 2"),
        ("points", 8.0, "points must be an int >= 2"),
        ("path", "figure.pdf", "path must end in .png"),
    ],
)
def test_plot_prediction_rejects_bad_inputs(
    tmp_path: Path, sample: tuple[np.ndarray, np.ndarray, np.ndarray], argument: str, bad: object, message: str
) -> None:
    f, exact, predicted = sample
    arguments: dict[str, object] = {
        "x": f,
        "exact": exact,
        "predicted": predicted,
        "points": 16,
        "path": tmp_path / "out.png",
    }
    arguments[argument] = tmp_path / bad if argument == "path" and isinstance(bad, str) else bad
    with pytest.raises(ValueError, match=message):
        plots.plot_prediction(**arguments)  # type: ignore[arg-type]
    assert not any(tmp_path.iterdir())


@pytest.mark.parametrize(
    ("losses", "test_error", "message"),
    [
        ([], None, "losses must be non-empty"),
        ([[1.0, 2.0]], None, r"losses must be a 1-D sequence.*\(1, 2\)"),
        ([1.0, 0.5, float("nan"), 0.2], None, r"losses must be finite, losses\[2\] = nan"),
        ([1.0, float("inf")], None, r"losses\[1\] = inf"),
        ([1.0, 0.0], None, r"losses must be > 0 for the log scale, losses\[1\] = 0.0"),
        ([1.0, 0.5], float("nan"), "test_error must be a finite float > 0"),
        ([1.0, 0.5], -0.1, "test_error must be a finite float > 0"),
    ],
)
def test_plot_loss_rejects_bad_inputs(
    tmp_path: Path, losses: list[float], test_error: float | None, message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        training_plots.plot_loss(losses, tmp_path / "loss.png", test_error=test_error)
    assert not any(tmp_path.iterdir())


@pytest.mark.end_to_end
def test_no_global_matplotlib_state(tmp_path: Path) -> None:
    """Plotting under a backend the user chose keeps it, and never imports pyplot."""
    script = f"""
import sys, matplotlib
matplotlib.use("pdf")
from applicative.training import plots as training_plots
from funcformer.learning import plots
training_plots.plot_loss([1.0, 0.5, 0.25], {str(tmp_path / "loss.png")!r})
assert matplotlib.get_backend() == "pdf", matplotlib.get_backend()
assert "matplotlib.pyplot" not in sys.modules
"""
    subprocess.run([sys.executable, "-c", script], check=True, cwd=Path(__file__).parents[2], timeout=60)
    _read_png(tmp_path / "loss.png")
