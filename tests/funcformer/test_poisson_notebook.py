"""The Poisson notebook runs: every code cell of ``notebooks/poisson.ipynb``, in order, in one namespace.

As in ``tests/applicative/test_zoo_notebook.py``, the notebook is read as JSON and its code cells are
executed with ``exec``, so the asserts inside the cells hold here too: the reference solution vanishes on
the boundary and solves the PDE, the test metric is finite, ``load_solver`` reproduces ``evaluate``'s
mean, and predictions scale with the source.
The environment shrinks the run (POISSON_NOTEBOOK_TINY: a 2-channel, 1-layer model; 3 steps on 64 sources), so
it takes seconds; the stored outputs come from a run with the notebook's own settings.
"""

import json
import tempfile
from pathlib import Path
from typing import Any

import pytest

NOTEBOOK = Path(__file__).resolve().parents[2] / "notebooks" / "poisson.ipynb"
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def _code_cells() -> list[dict[str, Any]]:
    notebook = json.loads(NOTEBOOK.read_text(encoding="utf-8"))
    assert notebook["nbformat"] == 4
    return [cell for cell in notebook["cells"] if cell["cell_type"] == "code"]


def _source(cell: dict[str, Any]) -> str:
    source = cell["source"]
    return source if isinstance(source, str) else "".join(source)


@pytest.mark.end_to_end
def test_the_poisson_notebook_runs_and_its_checks_hold(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("POISSON_NOTEBOOK_TINY", "1")
    monkeypatch.setenv("POISSON_NOTEBOOK_STEPS", "3")
    monkeypatch.delenv("POISSON_NOTEBOOK_TRAIN_SIZE", raising=False)
    monkeypatch.setenv("FUNCFORMER_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # the notebook's run directory (mkdtemp) lands here
    namespace: dict[str, Any] = {"__name__": "poisson"}
    code = [_source(cell) for cell in _code_cells()]
    assert len(code) >= 7
    for i, source in enumerate(code):
        exec(compile(source, f"{NOTEBOOK.name}, code cell {i}", "exec"), namespace)

    printed = capsys.readouterr().out
    assert "model: 2 channels, 1 layers of 1 heads" in printed
    assert "trained 3 steps in" in printed
    assert "relative L2 error on 16 held-out sources" in printed
    assert "truncation floor" in printed
    assert "solver(2 f) against 2 solver(f)" in printed
    assert namespace["state"].step == 3
    assert len(namespace["state"].losses) == 3
    assert namespace["metrics"]["steps"] == 3
    assert Path(namespace["out"]).parent == tmp_path
    for figure in ("prediction", "curve"):
        assert namespace[figure]._repr_png_().startswith(PNG_SIGNATURE)


def test_the_stored_outputs_come_from_a_full_run_without_errors() -> None:
    # What a reader sees on GitHub: every code cell executed in order, both figures, no tracebacks, no stderr.
    code = _code_cells()
    assert [cell["execution_count"] for cell in code] == list(range(1, len(code) + 1))
    outputs = [output for cell in code for output in cell.get("outputs", [])]
    assert not [output for output in outputs if output["output_type"] == "error"]
    assert not [output for output in outputs if output.get("name") == "stderr"]
    images = [output for output in outputs if "image/png" in output.get("data", {})]
    assert len(images) >= 2
    text = "".join("".join(output.get("text", "")) for output in outputs)
    assert "model: 8 channels, 4 layers of 4 heads" in text  # the notebook's settings, not the test's tiny ones
    assert "relative L2 error on 256 held-out sources" in text
