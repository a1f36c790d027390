"""docs/new_structure.md, the guide to writing a structure, as a user's program: its Python blocks,
in order, run (the program checks its own results) and pass mypy --strict, and its blocks of
mistakes are rejected by mypy with exactly the errors they mark (``# error: <message>``).

Like tests/test_typing.py, the program is copied into a temporary directory outside the repository
and run and checked there, so it sees the library only as installed, as a user's script does."""

import re
import subprocess
import sys
from pathlib import Path

import pytest

GUIDE = Path(__file__).parent.parent / "docs" / "new_structure.md"
BLOCKS = re.findall(r"^```python\n(.*?)^```$", GUIDE.read_text(), re.S | re.M)
MARK = "  # error: "
PROGRAM = "\n".join(block for block in BLOCKS if MARK not in block)
MISTAKES = "\n".join(block for block in BLOCKS if MARK in block)
ERROR = re.compile(r"^(?P<file>[^:]+):(?P<line>\d+): error: (?P<message>.*?)(  \[[a-z-]+\])?$")


@pytest.fixture(scope="module")
def user(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory outside the repository holding the program (guide.py) and the program followed by
    its mistakes (mistakes.py)."""
    directory = tmp_path_factory.mktemp("guide")
    (directory / "guide.py").write_text(PROGRAM)
    (directory / "mistakes.py").write_text(PROGRAM + "\n" + MISTAKES)
    return directory


def test_the_guide_has_a_program_and_mistakes() -> None:
    assert len(BLOCKS) >= 10
    assert PROGRAM.startswith("from __future__ import annotations\n")
    assert 'jax.config.update("jax_enable_x64", True)' in PROGRAM
    assert MISTAKES.count(MARK) == 3


def test_the_guides_program_runs_and_its_checks_hold(user: Path) -> None:
    command = [sys.executable, "guide.py"]
    result = subprocess.run(command, cwd=user, capture_output=True, text=True, check=False, timeout=600)
    assert result.returncode == 0, result.stdout + result.stderr


def test_mypy_accepts_the_program_and_rejects_each_mistake_as_marked(user: Path) -> None:
    command = [sys.executable, "-m", "mypy", "--strict", "--no-incremental", "--hide-error-context"]
    result = subprocess.run(
        [*command, "guide.py", "mistakes.py"], cwd=user, capture_output=True, text=True, check=False
    )
    assert not result.stderr, result.stderr
    assert "Cannot find implementation or library stub" not in result.stdout, result.stdout
    errors: dict[tuple[str, int], str] = {}
    for line in result.stdout.splitlines():
        if match := ERROR.match(line):
            key = (match["file"], int(match["line"]))
            errors[key] = errors.get(key, "") + match["message"]
    expected = {
        ("mistakes.py", number): line.split(MARK, 1)[1].strip()
        for number, line in enumerate((user / "mistakes.py").read_text().splitlines(), start=1)
        if MARK in line
    }
    assert set(errors) == set(expected), result.stdout
    for key, message in expected.items():
        assert errors[key] == message, f"{key}: expected {message!r}, mypy said {errors[key]!r}"
