"""``load_solver`` and the stored run: the output scale is computed once and stored, loading generates no data,
sources of any finite size give finite predictions (linear in the source to float32 rounding), and a damaged
or older checkpoint gives an error naming the file and the fix."""

import re
from pathlib import Path

import numpy as np
import numpy.polynomial.chebyshev as C
import pytest

from applicative.training.files import CHECKPOINT
from applicative.training.loop import _killed_after
from funcformer.learning import RunConfig, load, load_solver, loop, train
from funcformer.learning.cli import main as cli_main
from funcformer.learning.evaluation import evaluate
from funcformer.learning.solver import as_solver
from funcformer.model import ModelConfig
from funcformer.poisson import PROBLEM, TEST_SEED, DataConfig, make_dataset, sources

TINY = ModelConfig(channels=2, heads=1, head_channels=1, hidden_channels=2, layers=1)
RUN = RunConfig.of(PROBLEM, model=TINY, steps=6, batch=4, train_size=16, checkpoint_every=2, warmup=0)


def main(argv: list[str]) -> int:
    """The Poisson command line."""
    return cli_main(PROBLEM, argv)


@pytest.fixture(autouse=True)
def cache(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    directory = tmp_path_factory.getbasetemp() / "cache"
    monkeypatch.setenv("FUNCFORMER_CACHE", str(directory))
    return directory


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny trained run (its own cache: the function-scoped FUNCFORMER_CACHE is not set yet here)."""
    directory = tmp_path_factory.mktemp("trained")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("FUNCFORMER_CACHE", str(tmp_path_factory.getbasetemp() / "cache"))
        train(RUN, directory, progress=False)
    return directory


def quadrature_norms(c: np.ndarray) -> np.ndarray:
    """Per-sample L2 norms on [-1, 1]^2 of (B, n, n) Chebyshev coefficients, by 40-point Gauss-Legendre."""
    x, w = np.polynomial.legendre.leggauss(40)
    t = C.chebvander(x, c.shape[-1] - 1)
    values = t @ c @ t.T
    norms: np.ndarray = np.sqrt(np.einsum("i,bij,j->b", w, values**2, w))
    return norms


def unit_sources(count: int) -> np.ndarray:
    f = sources(DataConfig(), 9, count)
    unit: np.ndarray = f / quadrature_norms(f)[:, None, None]
    return unit


# The output scale: computed once, stored, read back


def test_the_output_scale_is_computed_when_a_run_starts_and_stored(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with _killed_after(3):
        cut = train(RUN, tmp_path, progress=False)
    # the mean ||u|| / ||f|| over the 1024 sources of seed 12345, by quadrature
    data = make_dataset(PROBLEM, DataConfig(), 12345, 1024, fine=False)
    expected = np.mean(quadrature_norms(data.u) / quadrature_norms(data.inputs))
    with np.load(tmp_path / CHECKPOINT) as stored:
        assert stored["output_scale"].dtype == np.float64
        np.testing.assert_allclose(stored["output_scale"], expected, rtol=1e-12)
        assert float(stored["output_scale"]) == cut.scale

    def forbidden(problem: object, task: DataConfig) -> float:
        raise AssertionError("recomputed the output scale")

    monkeypatch.setattr(loop, "output_scale", forbidden)
    resumed = train(RUN, tmp_path, resume=True, progress=False)  # reads it from the checkpoint
    assert resumed.scale == cut.scale
    assert load(tmp_path, RUN).scale == cut.scale


def test_loading_a_run_generates_no_data(trained: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    empty = tmp_path / "cache"
    empty.mkdir()
    monkeypatch.setenv("FUNCFORMER_CACHE", str(empty))
    predicted = load_solver(trained, PROBLEM)(sources(DataConfig(), 9, 3))
    assert np.all(np.isfinite(predicted))
    assert not list(empty.iterdir())
    evaluate(trained, PROBLEM, test_size=8)  # its only data: the test set, and the training set for the baselines
    names = sorted(path.name for path in empty.iterdir())
    assert len(names) == 2
    assert any(name.endswith(f"_seed{TEST_SEED}.npz") for name in names)
    assert any(name.endswith(f"_seed{RUN.seed}_truncated.npz") for name in names)


def test_a_checkpoint_of_the_older_format_is_refused_saying_to_train_again(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    train(RUN, tmp_path, progress=False)
    path = tmp_path / CHECKPOINT
    with np.load(path) as stored:  # as versions before stored scales wrote it
        arrays = {key: stored[key] for key in stored.files if key != "output_scale"}
    np.savez(path, **arrays)
    message = f"{path} is a checkpoint of an older format (saved before runs stored their output scale)"
    for attempt in (lambda: load_solver(tmp_path, PROBLEM), lambda: train(RUN, tmp_path, resume=True, progress=False)):
        with pytest.raises(ValueError, match=re.escape(message)):
            attempt()
    assert main(["evaluate", str(tmp_path), "--test-size", "8"]) == 1
    assert "train the run again (`python -m funcformer.poisson train --out DIR`" in capsys.readouterr().err


# Predictions for sources of any size


@pytest.mark.parametrize("size", [1e-310, 1e-300, 1e-30, 1.0, 1e30, 1e300])
def test_a_finite_source_of_any_size_gives_the_scaled_prediction(trained: Path, size: float) -> None:
    solver = load_solver(trained, PROBLEM)
    unit = unit_sources(4)
    expected = solver(unit)
    assert np.abs(expected).max() > 1e-3
    predicted = solver(size * unit)
    assert predicted.dtype == np.float64
    assert np.all(np.isfinite(predicted))
    # linear to float32 rounding. Measured: 3e-16 of the largest coefficient (3e-13 at 1e-310, whose
    # coefficients are subnormal); the bound allows a normalised source that float64 rounding moves
    # to a neighbouring float32
    np.testing.assert_allclose(predicted / size, expected, rtol=0, atol=1e-6 * np.abs(expected).max())


def test_dtypes_and_zero_sources(trained: Path) -> None:
    solver = load_solver(trained, PROBLEM)
    unit = unit_sources(3)
    expected = solver(unit)
    for dtype in (np.float32, np.float16):
        predicted = solver(unit.astype(dtype))
        assert predicted.dtype == dtype
        np.testing.assert_allclose(predicted, expected, rtol=0, atol=2 * np.finfo(dtype).eps * np.abs(expected).max())
    big = solver((1e30 * unit).astype(np.float32))  # its norm overflows float32; the prediction does not
    assert big.dtype == np.float32
    np.testing.assert_allclose(big / 1e30, expected, rtol=0, atol=1e-6 * np.abs(expected).max())
    largest = np.finfo(np.float64).max * unit / np.abs(unit).max()
    assert np.all(np.isfinite(solver(largest)))
    mixed = np.stack([unit[0], np.zeros_like(unit[0]), 1e-200 * unit[2]])
    predicted = solver(mixed)
    np.testing.assert_array_equal(predicted[1], 0.0)  # f = 0 gives u = 0
    np.testing.assert_allclose(predicted[[0, 2]] / [[[1.0]], [[1e-200]]], expected[[0, 2]], rtol=0, atol=1e-6)


def test_a_prediction_beyond_the_dtype_range_is_a_clear_error(trained: Path) -> None:
    state = load(trained, RUN)
    solver = as_solver(state.model, 1e10, RUN, trained)  # a run whose potentials are 1e10 times its sources
    unit = unit_sources(3)
    assert np.all(np.isfinite(solver(1e290 * unit)))
    with pytest.raises(
        ValueError, match=r"prediction for sample 1 would reach about \d\.\de\+3\d\d, beyond the range of float64"
    ):
        solver(np.stack([unit[0], 1e300 * unit[1], 1e300 * unit[2]]))
    with pytest.raises(ValueError, match=r"2 of 3 samples overflow"):
        solver(np.stack([unit[0], 1e300 * unit[1], 1e300 * unit[2]]))
    with pytest.raises(ValueError, match=r"sample 0 would reach about \d\.\de\+\d\d, beyond the range of float32"):
        solver((1e30 * unit).astype(np.float32))


# Damaged checkpoints


@pytest.mark.parametrize("damage", ["truncated", "random bytes", "a flipped byte", "empty", "an .npy file"])
def test_a_damaged_checkpoint_is_a_clear_error_naming_it(
    tmp_path: Path, damage: str, capsys: pytest.CaptureFixture[str]
) -> None:
    train(RUN, tmp_path, progress=False)
    path = tmp_path / CHECKPOINT
    content = path.read_bytes()
    if damage == "truncated":
        path.write_bytes(content[: len(content) // 2])
    elif damage == "random bytes":
        path.write_bytes(np.random.default_rng(0).bytes(len(content)))
    elif damage == "a flipped byte":
        middle = len(content) // 2
        path.write_bytes(content[:middle] + bytes([content[middle] ^ 0xFF]) + content[middle + 1 :])
    elif damage == "empty":
        path.write_bytes(b"")
    else:
        with path.open("wb") as file:
            np.save(file, np.zeros(3))
    message = f"{path} is corrupt or not a checkpoint"
    with pytest.raises(ValueError, match=re.escape(message)):
        load_solver(tmp_path, PROBLEM)
    assert main(["evaluate", str(tmp_path), "--test-size", "8"]) == 1
    assert message in capsys.readouterr().err
    with pytest.raises(ValueError, match=re.escape(message)):
        train(RUN, tmp_path, resume=True, progress=False)
