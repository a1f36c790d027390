"""The guides as users' programs: docs/new_structure.md (a sampled structure, Periodic),
docs/legendre.md (a coefficient structure, Legendre), docs/typing.md (mypy's messages and the
mistakes behind them), docs/learning.md (a user's model trained by ``applicative.training.fit``) and
docs/graphs.md (graphs built, batched, attended over and trained on).
Each guide's Python blocks, in order, run (the program checks its own results) and pass mypy --strict, and its
blocks of mistakes are rejected by mypy with exactly the errors they mark (``# error: <message>``).

Like tests/test_typing.py, each program is copied into a temporary directory outside the repository
and run and checked there, so it sees the library only as installed, as a user's script does."""

import re
import subprocess
import sys
from pathlib import Path

import pytest

DOCS = Path(__file__).parent.parent / "docs"
MISTAKES = {"new_structure.md": 3, "legendre.md": 5, "typing.md": 6, "learning.md": 1, "graphs.md": 1}
"""Each guide, and how many mistakes its blocks of mistakes mark."""
STRUCTURES = ("new_structure.md", "legendre.md")
"""The guides that write a structure (a long program, in float64)."""
MARK = "  # error: "


def blocks(guide: str) -> list[str]:
    """The guide's Python blocks, in order."""
    return re.findall(r"^```python\n(.*?)^```$", (DOCS / guide).read_text(), re.S | re.M)


def program(guide: str) -> str:
    """The guide's program: its blocks that mark no mistake."""
    return "\n".join(block for block in blocks(guide) if MARK not in block)


def mistakes(guide: str) -> str:
    """The guide's blocks of mistakes."""
    return "\n".join(block for block in blocks(guide) if MARK in block)


def scripts() -> dict[str, str]:
    """Each guide's program and the program followed by its mistakes, by file name (``tests/users_mypy.py``
    checks them)."""
    files: dict[str, str] = {}
    for guide in MISTAKES:
        stem = guide.removesuffix(".md")
        files[f"{stem}_program.py"] = program(guide)
        files[f"{stem}_mistakes.py"] = program(guide) + "\n" + mistakes(guide)
    return files


@pytest.fixture(scope="module")
def user(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory outside the repository holding each guide's program (<guide>_program.py), to run."""
    directory = tmp_path_factory.mktemp("guides")
    for name, text in scripts().items():
        if name.endswith("_program.py"):
            (directory / name).write_text(text)
    return directory


@pytest.mark.parametrize("guide", sorted(MISTAKES))
def test_the_guide_has_a_program_and_mistakes(guide: str) -> None:
    assert program(guide).startswith("from __future__ import annotations\n")
    assert mistakes(guide).count(MARK) == MISTAKES[guide]
    if guide in STRUCTURES:
        assert len(blocks(guide)) >= 10
        assert 'jax.config.update("jax_enable_x64", True)' in program(guide)


@pytest.mark.parametrize(
    "guide",
    # whole programs, left out of the README's run; the structure guides' check their laws in float64, 30 s
    # each: in CI's slow run of the newest environment only, the others in both (tests/budget.py)
    [pytest.param(g, marks=pytest.mark.slow if g in STRUCTURES else pytest.mark.end_to_end) for g in sorted(MISTAKES)],
)
def test_the_guides_program_runs_and_its_checks_hold(guide: str, user: Path) -> None:
    command = [sys.executable, f"{guide.removesuffix('.md')}_program.py"]
    result = subprocess.run(command, cwd=user, capture_output=True, text=True, check=False, timeout=600)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize("guide", sorted(MISTAKES))
def test_mypy_accepts_the_program_and_rejects_each_mistake_as_marked(
    guide: str, mypy_errors: dict[tuple[str, int], str]
) -> None:
    stem = guide.removesuffix(".md")
    files = (f"{stem}_program.py", f"{stem}_mistakes.py")
    errors = {key: message.rstrip("\n") for key, message in mypy_errors.items() if key[0] in files}
    expected = {
        (f"{stem}_mistakes.py", number): line.split(MARK, 1)[1].strip()
        for number, line in enumerate(scripts()[f"{stem}_mistakes.py"].splitlines(), start=1)
        if MARK in line
    }
    assert set(errors) == set(expected), errors
    for key, message in expected.items():
        assert errors[key] == message, f"{key}: expected {message!r}, mypy said {errors[key]!r}"
