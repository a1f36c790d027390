"""Griffe extension for the documentation site (mkdocs.yml): plain-text docstrings as Markdown.

The library's docstrings are plain text with ``double-backtick`` literals, which Markdown
renders as code, and two things it would misread:

- doctest examples (``>>>`` lines, run by pytest) would become nested block quotes; each example
  block (a ``>>>`` line up to the next blank line) is fenced as a ``pycon`` code block;
- index notation such as ``mask[i][j]`` or ``[out][in]`` would be a Markdown reference link
  (mkdocs-autorefs then fails the strict build on an unknown target ``j``); outside code, the
  ``][`` of such text is escaped so that it renders as written. A cross-reference to a dotted
  path, ``[Vec][applicative.Vec]``, is left alone and still links.

The docstrings in the source are untouched: only their copies in the documentation change.
"""

from __future__ import annotations

import re
from typing import Any

import griffe

_CODE_SPAN = re.compile(r"(``.+?``|`[^`]+`)")
_INDEX = re.compile(r"\]\[(?=[^\].]*\])")  # the "][" of x[i][j]; not of [title][dotted.path]


def _escape_references(line: str) -> str:
    """Escape the ``][`` of index notation in a line of Markdown text, leaving its code spans alone."""
    parts = _CODE_SPAN.split(line)
    return "".join(part if i % 2 else _INDEX.sub(r"]\\[", part) for i, part in enumerate(parts))


def _code_may_follow(out: list[str]) -> bool:
    """Whether an indented line after ``out`` is code: after a blank line or inside an indented block."""
    return not out or not out[-1].strip() or out[-1].startswith("    ")


def to_markdown(text: str) -> str:
    """Fence doctest blocks as ``pycon`` code; escape index notation's ``][`` outside code."""
    out: list[str] = []
    in_example = False
    in_fence = False
    previous_blank = True
    for line in text.splitlines():
        blank = not line.strip()
        if in_example and blank:
            out.append("```")
            in_example = False
        elif not in_example and not in_fence and line.startswith(">>>"):
            if not previous_blank:
                out.append("")
            out.append("```pycon")
            in_example = True
        if line.lstrip().startswith("```") and not in_example:
            in_fence = not in_fence
        indented = line.startswith("    ") and _code_may_follow(out)
        out.append(line if in_example or in_fence or indented else _escape_references(line))
        previous_blank = blank
    if in_example:
        out.append("```")
    return "\n".join(out)


class PlainDocstrings(griffe.Extension):
    """Rewrites every docstring with ``to_markdown`` once the object tree is loaded."""

    def on_object(self, *, obj: griffe.Object, loader: griffe.GriffeLoader, **kwargs: Any) -> None:
        if obj.docstring is not None:
            obj.docstring.value = to_markdown(obj.docstring.value)
