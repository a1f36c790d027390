"""Typing tests: mypy --strict accepts tests/typing/pass and every Python block of the README, and
reports exactly the errors marked ``# E: <message>`` in tests/typing/fail.

The snippets are users' scripts: they are copied into a temporary directory outside the
repository and checked there, so mypy sees the library only as installed (the README's
editable install), through its py.typed marker, as a user's mypy does."""

import re
from pathlib import Path

import pytest

HERE = Path(__file__).parent / "typing"
PASS = sorted((HERE / "pass").glob("*.py"))
FAIL = sorted((HERE / "fail").glob("*.py"))
README = re.findall(r"```python\n(.*?)```", (HERE.parent.parent / "README.md").read_text(), re.S)


def scripts() -> dict[str, str]:
    """The snippets and the README's blocks, by file name (``tests/users_mypy.py`` checks them)."""
    snippets = {path.name: path.read_text() for path in PASS + FAIL}
    assert len(snippets) == len(PASS + FAIL), "a pass and a fail snippet share a name"
    return snippets | {f"readme_block{i}.py": block for i, block in enumerate(README)}


def _expected(path: Path) -> dict[int, str]:
    return {
        number: line.split("# E: ", 1)[1].strip()
        for number, line in enumerate(path.read_text().splitlines(), start=1)
        if "# E: " in line
    }


@pytest.mark.parametrize("path", PASS, ids=lambda p: p.name)
def test_snippet_type_checks(path: Path, mypy_errors: dict[tuple[str, int], str]) -> None:
    found = {line: message for (name, line), message in mypy_errors.items() if name == path.name}
    assert not found, f"{path.name} should type-check: {found}"


@pytest.mark.parametrize("path", FAIL, ids=lambda p: p.name)
def test_snippet_is_rejected_as_marked(path: Path, mypy_errors: dict[tuple[str, int], str]) -> None:
    expected = _expected(path)
    assert expected, f"{path.name} marks no expected error"
    found = {line: message for (name, line), message in mypy_errors.items() if name == path.name}
    assert set(found) == set(expected), f"{path.name}: errors on lines {sorted(found)}, expected {sorted(expected)}"
    for line, fragment in expected.items():
        assert fragment in found[line], f"{path.name}:{line}: expected {fragment!r}, mypy said {found[line]!r}"


@pytest.mark.parametrize("i", range(len(README)), ids=lambda i: f"block{i}")
def test_readme_block_type_checks(i: int, mypy_errors: dict[tuple[str, int], str]) -> None:
    found = {line: message for (name, line), message in mypy_errors.items() if name == f"readme_block{i}.py"}
    assert not found, f"README Python block {i} should pass mypy --strict as written: {found}"
