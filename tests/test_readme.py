"""The worked examples of the README and of the tour (docs/tour.md) run, their stated results hold,
and the tour's pass mypy --strict as written (tests/test_typing.py checks the README's).

Each Python block is a program of its own. Like tests/test_typing.py, mypy checks the tour's blocks
copied into a temporary directory outside the repository, so it sees the library only as installed."""

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).parent.parent
TOUR = "docs/tour.md"
PAGES = ("README.md", TOUR)
"""The documents whose Python blocks are worked examples, by path in the repository."""


def blocks(page: str) -> list[str]:
    """The page's Python blocks, in order."""
    return re.findall(r"```python\n(.*?)```", (ROOT / page).read_text(), re.S)


EXAMPLES = [(page, block) for page in PAGES for block in blocks(page)]


@pytest.mark.parametrize(
    ("page", "block"), EXAMPLES, ids=[f"{page}:block{i}" for page in PAGES for i in range(len(blocks(page)))]
)
def test_example_runs_and_its_stated_results_hold(page: str, block: str) -> None:
    # "expr  # value" lines (a number or a tuple, then an optional remark) state a result: check it.
    value = r"(\([^)]*\)|-?[\d.]+(?:e-?\d+)?)"
    checked = re.sub(rf"^([^#=\n]+?)  # {value}(,.*)?$", r"assert (\1) == \2, \1", block, flags=re.M)
    exec(compile(checked, page, "exec"), {})


def test_the_pages_hold_their_examples() -> None:
    # the README keeps its first example; the tour the examples that moved out of the README
    assert len(blocks("README.md")) >= 1
    assert len(blocks(TOUR)) >= 4
    checked = [line for block in blocks(TOUR) for line in block.splitlines() if re.search(r"\S  # [-\d(]", line)]
    assert len(checked) >= 6, "the tour states results that the test checks"


def scripts() -> dict[str, str]:
    """The tour's blocks, by file name (``tests/users_mypy.py`` checks them)."""
    return {f"tour_block{i}.py": block for i, block in enumerate(blocks(TOUR))}


@pytest.mark.parametrize("i", range(len(blocks(TOUR))), ids=lambda i: f"block{i}")
def test_tour_block_type_checks(i: int, mypy_errors: dict[tuple[str, int], str]) -> None:
    found = {line: message for (name, line), message in mypy_errors.items() if name == f"tour_block{i}.py"}
    assert not found, f"{TOUR} Python block {i} should pass mypy --strict as written:\n{found}"
