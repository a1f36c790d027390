"""The default run's time budget (tests/budget.py): a test past it fails by name, a slow one does not."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_a_default_test_past_the_budget_fails_naming_itself_and_a_slow_one_passes(tmp_path: Path) -> None:
    (tmp_path / "test_timed.py").write_text(
        "import time\nimport pytest\n\n"
        "def test_quick():\n    pass\n\n"
        "def test_long():\n    time.sleep(0.6)\n\n"
        "@pytest.mark.slow\ndef test_long_and_marked():\n    time.sleep(0.6)\n"
    )
    env = {**os.environ, "APPLICATIVE_TEST_BUDGET": "0.3", "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "tests.budget", "-p", "no:cacheprovider", "-q", "-o", "addopts=",
         "-o", "markers=slow", "--rootdir", str(tmp_path), str(tmp_path)],
        capture_output=True, text=True, env=env, cwd=tmp_path, timeout=60,
    )  # fmt: skip
    assert done.returncode == 1, done.stdout
    assert "1 failed, 2 passed" in done.stdout, done.stdout
    assert "test_timed.py::test_long: its call took 0.6 s, past the default run's budget of 0.3 s a test" in done.stdout
