"""What the default run holds and its time budget (tests/budget.py): a test past the budget fails by name, a
slow one does not, and an end-to-end one is slow."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _pytest(directory: Path, *options: str) -> subprocess.CompletedProcess[str]:
    """pytest over ``directory`` with tests/budget.py's hooks, a budget of 0.3 s and none of pyproject's options."""
    env = {**os.environ, "APPLICATIVE_TEST_BUDGET": "0.3", "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "tests.budget", "-p", "no:cacheprovider", "-q", "-o", "addopts=",
         "-o", "markers=slow\nend_to_end", "--rootdir", str(directory), *options, str(directory)],
        capture_output=True, text=True, env=env, cwd=directory, timeout=60,
    )  # fmt: skip


def test_a_default_test_past_the_budget_fails_naming_itself_and_a_slow_one_passes(tmp_path: Path) -> None:
    (tmp_path / "test_timed.py").write_text(
        "import time\nimport pytest\n\n"
        "def test_quick():\n    pass\n\n"
        "def test_long():\n    time.sleep(0.6)\n\n"
        "@pytest.mark.slow\ndef test_long_and_marked():\n    time.sleep(0.6)\n\n"
        "@pytest.mark.end_to_end\ndef test_whole():\n    time.sleep(0.6)\n"
    )
    done = _pytest(tmp_path)
    assert done.returncode == 1, done.stdout
    assert "1 failed, 3 passed" in done.stdout, done.stdout
    assert "test_timed.py::test_long: its call took 0.6 s, past the default run's budget of 0.3 s a test" in done.stdout
    selected = _pytest(tmp_path, "--collect-only", "-m", "slow")
    assert selected.returncode == 0, selected.stdout
    assert selected.stdout.split("\n\n")[0].splitlines() == [
        "test_timed.py::test_long_and_marked", "test_timed.py::test_whole"
    ], selected.stdout  # fmt: skip
