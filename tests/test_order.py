"""How the tests are handed out to xdist's workers (tests/order.py): how many ``-n auto`` starts."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _workers(tmp_path: Path, hooks: bool, asked: str | None = None) -> int:
    """The workers ``pytest -n auto`` starts, as its one test writes them into the file count: with
    tests/order.py's hooks or xdist's alone, and ``PYTEST_XDIST_AUTO_NUM_WORKERS`` set to ``asked`` or unset."""
    (tmp_path / "test_count.py").write_text(
        "import os\n\ndef test_count():\n    open('count', 'w').write(os.environ['PYTEST_XDIST_WORKER_COUNT'])\n"
    )
    environment = {k: v for k, v in os.environ.items() if k != "PYTEST_XDIST_AUTO_NUM_WORKERS"}
    environment.update(PYTHONPATH=str(ROOT), **({} if asked is None else {"PYTEST_XDIST_AUTO_NUM_WORKERS": asked}))
    done = subprocess.run(
        [sys.executable, "-m", "pytest", *(["-p", "tests.order"] if hooks else []), "-p", "no:cacheprovider",
         "-q", "-o", "addopts=", "-n", "auto", "--rootdir", str(tmp_path), str(tmp_path)],
        capture_output=True, text=True, env=environment, cwd=tmp_path, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    return int((tmp_path / "count").read_text())


def test_auto_starts_one_worker_more_than_xdist_unless_a_number_is_asked_for(tmp_path: Path) -> None:
    assert _workers(tmp_path, hooks=True) == _workers(tmp_path, hooks=False) + 1
    assert _workers(tmp_path, hooks=True, asked="2") == 2
