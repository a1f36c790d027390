"""The README's Python examples run and their stated results hold."""

import re
from pathlib import Path

import pytest

README = (Path(__file__).parent.parent / "README.md").read_text()
BLOCKS = re.findall(r"```python\n(.*?)```", README, re.S)


@pytest.mark.parametrize("block", BLOCKS, ids=[f"block{i}" for i in range(len(BLOCKS))])
def test_readme_example_runs(block: str) -> None:
    # "expr  # value" lines (a number or a tuple, then an optional remark) state a result: check it.
    value = r"(\([^)]*\)|-?[\d.]+(?:e-?\d+)?)"
    checked = re.sub(rf"^([^#=\n]+?)  # {value}(,.*)?$", r"assert (\1) == \2, \1", block, flags=re.M)
    exec(compile(checked, "README.md", "exec"), {})
