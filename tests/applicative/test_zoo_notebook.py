"""The notebooks run: every code cell of ``notebooks/zoo.ipynb``, in order, in one namespace.

No Jupyter needed: the notebook is read as JSON and its code cells are executed with
``exec``, so the asserts inside the cells (each instantiation checked against a direct
numpy computation) are checked here too. The notebook's own sizes are small (model width
8, one layer), so it runs in about 20 s, most of it XLA compiling each structure once.
"""

import json
from pathlib import Path
from typing import Any

import pytest

NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"
ZOO = NOTEBOOKS / "zoo.ipynb"


def _cells(path: Path) -> list[dict[str, Any]]:
    notebook = json.loads(path.read_text(encoding="utf-8"))
    assert notebook["nbformat"] == 4
    cells: list[dict[str, Any]] = notebook["cells"]
    return cells


def _source(cell: dict[str, Any]) -> str:
    source = cell["source"]
    return source if isinstance(source, str) else "".join(source)


@pytest.mark.slow
def test_the_zoo_notebook_runs_and_its_checks_hold(capsys: pytest.CaptureFixture[str]) -> None:
    namespace: dict[str, Any] = {"__name__": "zoo"}
    code = [_source(cell) for cell in _cells(ZOO) if cell["cell_type"] == "code"]
    assert len(code) >= 5
    for i, source in enumerate(code):
        exec(compile(source, f"{ZOO.name}, code cell {i}", "exec"), namespace)
    printed = capsys.readouterr().out
    for structure in ("Vec∘Vec", "Cheb∘Vec", "Tree∘Vec", "DenseTree∘Vec", "Distribution∘Vec"):
        assert structure in printed


def test_the_stored_outputs_show_no_errors() -> None:
    # The outputs a reader sees on GitHub come from a full run: one per code cell, no tracebacks.
    code = [cell for cell in _cells(ZOO) if cell["cell_type"] == "code"]
    assert all(cell["execution_count"] is not None for cell in code)
    outputs = [output for cell in code for output in cell.get("outputs", [])]
    assert outputs
    assert not [output for output in outputs if output["output_type"] == "error"]
    assert not [output for output in outputs if output.get("name") == "stderr"]
