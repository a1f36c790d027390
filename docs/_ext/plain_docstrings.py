"""Griffe extension for the documentation site (mkdocs.yml): plain-text docstrings as Markdown.

The library's docstrings are plain text with ``double-backtick`` literals, which Markdown
renders as code. This extension changes their copies on the site (the source is untouched):

- the summary: mkdocstrings lists each member with the first *line* of its docstring, which
  in a docstring wrapped at 100 columns stops mid-sentence. The first paragraph is re-wrapped
  so that its first line is its first sentence (a line break inside a Markdown paragraph renders
  as a space, so the page reads as before);
- doctest examples (``>>>`` lines, run by pytest) would become nested block quotes; each example
  block (a ``>>>`` line up to the next blank line) is fenced as a ``pycon`` code block;
- index notation such as ``mask[i][j]`` or ``[out][in]`` would be a Markdown reference link
  (mkdocs-autorefs then fails the strict build on an unknown target ``j``); outside code, the
  ``][`` of such text is escaped so that it renders as written. A cross-reference to a dotted
  path, ``[Vec][applicative.Vec]``, is left alone and still links;
- a page of the site cited by its path in the repository (``docs/design.md``) becomes a link to
  that page, titled as in the navigation; another file of the repository (``tests/...``,
  ``bench/...``), which a user of the installed package does not have, is set as code;
- module-level type variables (``T = TypeVar("T")``) are not documented as attributes.

Links are relative to ``docs/api/``, where every API page lives (mkdocs checks them: a page
elsewhere that renders a docstring with such a link fails the strict build).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import griffe
from mkdocs.utils.yaml import yaml_load

_DOCS = Path(__file__).resolve().parent.parent
_CODE_SPAN = re.compile(r"(``.+?``|`[^`]+`)")
_INDEX = re.compile(r"\]\[(?=[^\].]*\])")  # the "][" of x[i][j]; not of [title][dotted.path]
# a repository path in running text: docs/<page>.md, or a file under tests/, bench/, notebooks/
_DOCS_PAGE = re.compile(r"(?<![\w/])(?<!\]\()docs/(\w+)\.md\b")
_REPO_FILE = re.compile(r"(?<![\w/])(?<!\]\()((?:tests|bench|notebooks)/[\w./]*\w(?:::\w+)?)")
# a line that would open a block of its own rather than continue a paragraph (in Python-Markdown a
# heading needs no space after its #; lists cannot interrupt a paragraph there, but are kept apart)
_BLOCK_START = re.compile(r"([-*+] |\d+[.)] |#|>|=+\s*$|-+\s*$|```|~~~)")
_ABBREVIATIONS = frozenset({"e.g.", "i.e.", "cf.", "vs.", "etc.", "al.", "incl.", "resp.", "approx.", "fig.", "eq."})
_TYPE_VARIABLES = frozenset({"TypeVar", "ParamSpec", "TypeVarTuple"})


def _nav_titles() -> dict[str, str]:
    """The navigation's title of each page of the site, by its file name under docs/."""
    config = yaml_load((_DOCS.parent / "mkdocs.yml").read_text())
    titles: dict[str, str] = {}

    def walk(entries: list[Any]) -> None:
        for entry in entries:
            if not isinstance(entry, dict):
                continue  # a page listed without a title
            for title, target in entry.items():
                if isinstance(target, list):
                    walk(target)
                else:
                    titles[target] = title

    walk(config.get("nav", []))
    return titles


_TITLES = _nav_titles()


def _link_paths(text: str) -> str:
    """Repository paths in a piece of Markdown text (not code) as links to site pages, or code."""

    def page(match: re.Match[str]) -> str:
        name = f"{match.group(1)}.md"
        title = _TITLES.get(name)
        return f"[{title}](../{name})" if title else f"`{match.group(0)}`"

    return _REPO_FILE.sub(r"`\1`", _DOCS_PAGE.sub(page, text))


def _text_line(line: str) -> str:
    """A line of Markdown text: index notation's ``][`` escaped, repository paths linked; code spans kept."""
    parts = _CODE_SPAN.split(line)
    return "".join(part if i % 2 else _link_paths(_INDEX.sub(r"]\\[", part)) for i, part in enumerate(parts))


def _code_may_follow(out: list[str]) -> bool:
    """Whether an indented line after ``out`` is code: after a blank line or inside an indented block."""
    return not out or not out[-1].strip() or out[-1].startswith("    ")


def first_sentence_end(text: str) -> int:
    """The index just past the first sentence of ``text`` (a paragraph on one line), or its length.

    A sentence ends at ``.``, ``!`` or ``?`` followed by a space, outside code spans, formulas and
    brackets (a sentence may start with a lowercase name: ``x`` is ...); ``e.g.`` and the like,
    and ``...``, end none.
    """
    depth = 0
    i = 0
    while i < len(text):
        c = text[i]
        if c == "`":
            run = len(text[i:]) - len(text[i:].lstrip("`"))
            close = text.find("`" * run, i + run)
            i = len(text) if close < 0 else close + run
            continue
        if c == "$" and (close := text.find("$", i + 1)) > 0:  # a formula: $x. y$
            i = close + 1
            continue
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth = max(depth - 1, 0)  # also closes half-open intervals such as [0, 1)
        elif (
            c in ".!?"
            and depth == 0
            and text[i + 1 : i + 2] == " "
            and text[i - 1 : i] not in (".", " ")  # "...", or an operator: q_i . k_j
            and text[: i + 1].rsplit(" ", 1)[-1].lstrip("([").lower() not in _ABBREVIATIONS
        ):
            return i + 1
        i += 1
    return len(text)


def summary_first(text: str) -> str:
    """``text`` with its first paragraph re-wrapped: its first sentence on the first line, the rest after.

    mkdocstrings takes a member's summary from the first line of its docstring.
    """
    lines = text.splitlines()
    end = 0
    while end < len(lines) and lines[end].strip():
        stripped = lines[end].strip()
        if end and (_BLOCK_START.match(stripped) or stripped.startswith(">>>")):
            break
        end += 1
    if end == 0 or lines[0].startswith((">>>", "    ", "```")):
        return text
    paragraph = " ".join(line.strip() for line in lines[:end])
    cut = first_sentence_end(paragraph)
    head, rest = paragraph[:cut], paragraph[cut:].strip()
    if rest and _BLOCK_START.match(rest):
        head, rest = paragraph, ""  # the rest on a line of its own would start a list or a heading
    return "\n".join([head, *([rest] if rest else []), *lines[end:]])


def to_markdown(text: str) -> str:
    """The docstring ``text`` as the site's Markdown: summary line, fenced doctests, escapes, links."""
    out: list[str] = []
    in_example = False
    in_fence = False
    previous_blank = True
    for line in summary_first(text).splitlines():
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
        out.append(line if in_example or in_fence or indented else _text_line(line))
        previous_blank = blank
    if in_example:
        out.append("```")
    return "\n".join(out)


def _is_type_variable(obj: griffe.Object | griffe.Alias) -> bool:
    """Whether ``obj`` is a module-level ``X = TypeVar(...)`` (or ``ParamSpec``, ``TypeVarTuple``)."""
    if obj.is_alias or not isinstance(obj, griffe.Attribute) or not isinstance(obj.value, griffe.ExprCall):
        return False
    return str(obj.value.function).rsplit(".", 1)[-1] in _TYPE_VARIABLES


def _drop_type_variables(module: griffe.Module) -> None:
    """Remove the type variables of ``module`` and its submodules from the documented members."""
    for name, member in list(module.members.items()):
        if _is_type_variable(member):
            del module.members[name]
        elif isinstance(member, griffe.Module) and not member.is_alias:
            _drop_type_variables(member)


class PlainDocstrings(griffe.Extension):
    """Rewrites every docstring with ``to_markdown`` once loaded; drops type variables from packages."""

    def on_object(self, *, obj: griffe.Object, loader: griffe.GriffeLoader, **kwargs: Any) -> None:
        if obj.docstring is not None:
            obj.docstring.value = to_markdown(obj.docstring.value)

    def on_package(self, *, pkg: griffe.Module, loader: griffe.GriffeLoader, **kwargs: Any) -> None:
        _drop_type_variables(pkg)
