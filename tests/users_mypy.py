"""mypy --strict over users' scripts, once a run: the scripts that tests/test_typing.py, tests/test_readme.py
and tests/test_guide.py check (tests/typing's snippets, the README's and the tour's blocks, the guides'
programs and their mistakes) are written into one directory outside the repository, where one mypy process
checks them all (one start-up, one analysis of the library), and every xdist worker reads its messages
(``tests/once.py``). Outside the repository, a script sees the library only as installed, through its
py.typed marker, as a user's mypy does."""

from __future__ import annotations

import re
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from tests import once

NAME = "users-mypy"
"""The directory of the scripts and mypy's output, made once a run (``tests/once.py``)."""
OUTPUT = "mypy.out"
"""mypy's output, written beside the scripts (a name no script has: it does not end in .py)."""
ERROR = re.compile(r"^(?P<file>[^:]+):(?P<line>\d+): error: (?P<message>.*?)(  \[[a-z-]+\])?$")
"""A line of mypy's output with ``--hide-error-context``: ``file.py:12: error: message  [code]``."""


def scripts() -> dict[str, str]:
    """Every script checked, by file name: each test module's ``scripts()``."""
    from tests import test_guide, test_readme, test_typing  # here: each of them imports this module

    groups = [test_typing.scripts(), test_readme.scripts(), test_guide.scripts()]
    names = [name for group in groups for name in group]
    assert len(set(names)) == len(names), f"two scripts share a name: {sorted(names)}"
    return {name: text for group in groups for name, text in group.items()}


def check(user: Path) -> None:
    """Every script written into the directory ``user``, and mypy's output over them beside them."""
    for name, text in scripts().items():
        (user / name).write_text(text)
    command = [sys.executable, "-m", "mypy", "--strict", "--no-incremental", "--hide-error-context", "."]
    result = subprocess.run(command, cwd=user, capture_output=True, text=True, check=False)
    assert not result.stderr, result.stderr
    assert "Cannot find implementation or library stub" not in result.stdout, result.stdout
    assert "missing library stubs or py.typed marker" not in result.stdout, result.stdout
    (user / OUTPUT).write_text(result.stdout)


def output(tmp_path_factory: pytest.TempPathFactory) -> str:
    """mypy's output over every script, run once for the whole test run (begun early: tests/conftest.py)."""
    return (once.directory(tmp_path_factory, NAME, check) / OUTPUT).read_text()


def begin(tmp_path_factory: pytest.TempPathFactory) -> threading.Thread:
    """``output``'s mypy run begun in a thread (``once.begin``)."""
    return once.begin(tmp_path_factory, NAME, check)


def errors(tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, int], str]:
    """mypy's error messages over every script, by (file name, line), each ending in a newline (the
    ``mypy_errors`` fixture of tests/conftest.py)."""
    found: dict[tuple[str, int], str] = {}
    for line in output(tmp_path_factory).splitlines():
        if match := ERROR.match(line):
            key = (Path(match["file"]).name, int(match["line"]))
            found[key] = found.get(key, "") + match["message"] + "\n"
    return found
