"""Typing tests: mypy --strict accepts tests/typing/pass and reports exactly the
errors marked ``# E: <message>`` in tests/typing/fail."""

import re
from pathlib import Path

import pytest
from mypy import api

HERE = Path(__file__).parent / "typing"
PASS = sorted((HERE / "pass").glob("*.py"))
FAIL = sorted((HERE / "fail").glob("*.py"))
ERROR = re.compile(r"^(?P<file>[^:]+):(?P<line>\d+): error: (?P<message>.*?)(  \[[a-z-]+\])?$")


@pytest.fixture(scope="module")
def mypy_errors() -> dict[tuple[str, int], str]:
    """Run mypy once over every snippet; map (file name, line) to its error messages."""
    stdout, stderr, _ = api.run(["--strict", "--no-incremental", "--hide-error-context", *map(str, PASS + FAIL)])
    assert not stderr, stderr
    errors: dict[tuple[str, int], str] = {}
    for line in stdout.splitlines():
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
