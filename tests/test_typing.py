"""Typing tests: mypy --strict accepts tests/typing/pass and every Python block of the README, and
reports exactly the errors marked ``# E: <message>`` in tests/typing/fail.

The snippets are users' scripts: they are copied into a temporary directory outside the
repository and checked there, so mypy sees the library only as installed (the README's
editable install), through its py.typed marker, as a user's mypy does."""

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).parent / "typing"
PASS = sorted((HERE / "pass").glob("*.py"))
FAIL = sorted((HERE / "fail").glob("*.py"))
README = re.findall(r"```python\n(.*?)```", (HERE.parent.parent / "README.md").read_text(), re.S)
ERROR = re.compile(r"^(?P<file>[^:]+):(?P<line>\d+): error: (?P<message>.*?)(  \[[a-z-]+\])?$")


@pytest.fixture(scope="module")
def mypy_errors(tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, int], str]:
    """Run mypy once over every snippet, copied outside the repository; map (file name, line) to its
    error messages."""
    user = tmp_path_factory.mktemp("user_scripts")
    assert len({path.name for path in PASS + FAIL}) == len(PASS + FAIL), "a pass and a fail snippet share a name"
    for path in PASS + FAIL:
        shutil.copy(path, user / path.name)
    for i, block in enumerate(README):
        (user / f"readme_block{i}.py").write_text(block)
    command = [sys.executable, "-m", "mypy", "--strict", "--no-incremental", "--hide-error-context", "."]
    result = subprocess.run(command, cwd=user, capture_output=True, text=True, check=False)
    assert not result.stderr, result.stderr
    assert "Cannot find implementation or library stub" not in result.stdout, result.stdout
    assert "missing library stubs or py.typed marker" not in result.stdout, result.stdout
    errors: dict[tuple[str, int], str] = {}
    for line in result.stdout.splitlines():
        if match := ERROR.match(line):
            key = (Path(match["file"]).name, int(match["line"]))
            errors[key] = errors.get(key, "") + match["message"] + "\n"
    return errors


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
