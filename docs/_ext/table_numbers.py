"""MkDocs hook (mkdocs.yml): a number in a table cell is never broken across two lines.

Table cells wrap their text (css/site.css), and a browser may break a line after any hyphen: in
the narrow columns of a results table, 1.21e-6 was drawn as "1.21e-" above "6". Each number in
scientific notation in the text of a table cell (not in code or math) is wrapped in
``<span class="number">``, which site.css keeps on one line; the text itself is unchanged.
"""

from __future__ import annotations

import re
from typing import Any

_TABLE = re.compile(r"<table\b.*?</table>", re.DOTALL)
_TAG = re.compile(r"(<[^>]*>)")
_NAME = re.compile(r"</?([a-zA-Z][\w-]*)")
# 1.21e-6, 5e-3, 2.0E+10, with a sign before it or not
_NUMBER = re.compile(r"(?<![\w.])[-+\N{MINUS SIGN}]?\d+(?:\.\d+)?[eE][-+\N{MINUS SIGN}]?\d+(?!\w)")
_VERBATIM = frozenset({"code", "pre", "script", "style"})


def _is_math(tag: str) -> bool:
    return bool(re.search(r"""\bclass\s*=\s*["'][^"']*\barithmatex\b""", tag))


def keep_numbers(table: str) -> str:
    """``table`` (the HTML of one table) with each number of its text wrapped in ``span.number``."""
    parts = _TAG.split(table)
    verbatim: list[str] = []  # the open elements whose text is left alone: code, pre, math
    for i, part in enumerate(parts):
        if i % 2:  # a tag
            name = _NAME.match(part)
            if name is None or part.endswith("/>"):
                continue
            tag = name.group(1).lower()
            if part.startswith("</"):
                if verbatim and verbatim[-1] == tag:
                    verbatim.pop()
            elif tag in _VERBATIM or _is_math(part) or (verbatim and tag == verbatim[-1]):
                verbatim.append(tag)
        elif not verbatim:
            parts[i] = _NUMBER.sub(r'<span class="number">\g<0></span>', part)
    return "".join(parts)


def on_page_content(html: str, **kwargs: Any) -> str:
    return _TABLE.sub(lambda match: keep_numbers(match.group(0)), html)
