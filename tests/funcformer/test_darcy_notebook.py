"""The Darcy notebook runs: every code cell of ``notebooks/darcy.ipynb``, in order, in one namespace (as for the
Poisson notebook): the reference solution vanishes on the boundary and solves the PDE, the metrics are finite,
``load_solver`` reproduces ``evaluate``'s mean, and predictions follow the exact shift symmetry. The environment
shrinks the run (DARCY_NOTEBOOK_TINY: a 2-channel, 2-layer model; 3 steps on 64 samples), so it takes seconds; the
stored outputs come from a run with the notebook's own settings."""

import json
import tempfile
from pathlib import Path
from typing import Any

import pytest

from tests.funcformer.test_poisson_notebook import PNG_SIGNATURE

NOTEBOOK = Path(__file__).resolve().parents[2] / "notebooks" / "darcy.ipynb"


def _code() -> list[dict[str, Any]]:
    notebook = json.loads(NOTEBOOK.read_text(encoding="utf-8"))
    assert notebook["nbformat"] == 4
    return [cell for cell in notebook["cells"] if cell["cell_type"] == "code"]


@pytest.mark.slow
def test_the_darcy_notebook_runs_and_its_checks_hold(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("DARCY_NOTEBOOK_TINY", "1")
    monkeypatch.setenv("DARCY_NOTEBOOK_STEPS", "3")
    monkeypatch.setenv("FUNCFORMER_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # the notebook's run directory (mkdtemp) lands here
    namespace: dict[str, Any] = {"__name__": "darcy"}
    cells = _code()
    assert len(cells) >= 7
    for i, cell in enumerate(cells):
        exec(compile("".join(cell["source"]), f"{NOTEBOOK.name}, code cell {i}", "exec"), namespace)

    printed = capsys.readouterr().out
    assert "model: 2 channels, 2 layers" in printed
    assert "relative L2 error on 16 held-out samples" in printed
    assert "solver(kappa +4) against exp(-4) solver(kappa)" in printed
    assert namespace["state"].step == 3
    assert namespace["metrics"]["steps"] == 3
    assert Path(namespace["out"]).parent == tmp_path
    for figure in ("prediction", "curve"):
        assert namespace[figure]._repr_png_().startswith(PNG_SIGNATURE)


def test_the_stored_outputs_come_from_a_full_run_without_errors() -> None:
    code = _code()
    assert [cell["execution_count"] for cell in code] == list(range(1, len(code) + 1))
    outputs = [output for cell in code for output in cell.get("outputs", [])]
    assert not [output for output in outputs if output["output_type"] == "error"]
    assert not [output for output in outputs if output.get("name") == "stderr"]
    assert len([output for output in outputs if "image/png" in output.get("data", {})]) >= 2
    text = "".join("".join(output.get("text", "")) for output in outputs)
    assert "relative L2 error on 256 held-out samples" in text  # the notebook's settings, not the test's tiny ones
