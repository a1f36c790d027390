"""Python source as tokens and its syntax tree as labelled spans of them: the data of the parsing
example (``applicative.examples.parsing``), and how parsers are scored.

A fragment is one statement of a file of the standard library (a definition, a loop, an
assignment), read as the tokens ``tokenize`` gives inside it: comments and non-logical newlines
dropped, ``NEWLINE``, ``INDENT`` and ``DEDENT`` kept (they carry the blocks; a ``DEDENT``, which
``tokenize`` puts at the next line's first token, is placed where the block's last token ends).

Its tree (``Node``) is the statement's abstract syntax tree, each node with the tokens it covers:
its span, the first and last of the tokens inside its source position or its descendants'.
A node that covers no token (a ``Load`` context, an operator, an empty argument list) is not a
node of its own: it is written into its parent's label, with where it stands among the parent's
other children (``BinOp(Add@1)``: an ``Add`` after the first child; ``Attribute(Load@-0)``:
a ``Load`` after the last). Children are in source order, so a child's span follows its elder
sibling's, and every token belongs to exactly one node: the deepest one that covers it. Before
Python 3.12, ``tokenize`` gives an f-string as one ``STRING`` token, inside which ``ast``'s positions
of its parts do not nest: there an f-string (``JoinedStr``) is one node of its own, a leaf; from 3.12
on, its tokens are its parts', and its tree is Python's. A statement whose nodes' spans do not nest
otherwise is not a fragment.

The tree's shape is the trees example's binarisation (``trees.binarised``: a leaf for the node
itself, then its children's shapes, paired level by level), so its leaves are the nodes in
preorder. Parsers are scored by exact match of whole trees and by bracketing F1: the labelled
spans ``(label, first, last)`` of every node of the predicted tree against those of Python's.
"""

from __future__ import annotations

import ast
import importlib.util
import io
import itertools
import keyword
import sys
import tokenize
from bisect import bisect_left, bisect_right
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from applicative.examples.trees import LIBRARY, Side, balanced, library_files
from applicative.instances.tree import Shape

__all__ = [
    "UNKNOWN",
    "Fragment",
    "Node",
    "Scores",
    "binarised",
    "depth",
    "file_fragments",
    "fragments",
    "fragments_of",
    "ids",
    "labelled_spans",
    "left_out",
    "nodes",
    "package_files",
    "right_branching",
    "score",
    "statement_trees",
    "token_kind",
    "tokens_of",
    "vocabulary",
]

Position = tuple[int, int]  # (line, byte offset in the line), as ``ast`` gives positions


@dataclass(frozen=True)
class Token:
    """A token of a file: its kind (``token_kind``) and where it starts and ends."""

    kind: str
    start: Position
    end: Position


@dataclass(frozen=True)
class Node:
    """A syntax node: its label, the first and last token it covers, its children in source order."""

    label: str
    span: tuple[int, int]
    children: tuple[Node, ...] = ()


@dataclass(frozen=True)
class Fragment:
    """A statement's tokens (kinds) and its tree, spans counted from its first token; named ``file:line``."""

    name: str
    tokens: tuple[str, ...]
    tree: Node


_DROPPED = {tokenize.COMMENT, tokenize.NL, tokenize.ENCODING, tokenize.ENDMARKER}


def token_kind(token: tokenize.TokenInfo) -> str:
    """What the parser reads of a token: an operator, a keyword or a soft keyword as itself, an
    f-string that ``tokenize`` gives whole (before Python 3.12) as ``FSTRING`` (it is a ``JoinedStr``
    where any other string is a ``Constant``), any other token as its type (``NAME``, ``NUMBER``,
    ``STRING``, ``NEWLINE``, ...)."""
    if token.type == tokenize.OP:
        return token.string
    if token.type == tokenize.NAME and (keyword.iskeyword(token.string) or keyword.issoftkeyword(token.string)):
        return token.string
    if token.type == tokenize.STRING and "f" in _prefix(token.string).lower():
        return "FSTRING"
    return tokenize.tok_name[token.type]


def _prefix(string: str) -> str:
    """A string literal's prefix: the letters before its first quote (``rb``, ``F``, ``Rf``, ...)."""
    return string[: min(i for i in (string.find("'"), string.find('"')) if i >= 0)]


def tokens_of(source: str) -> list[Token]:
    """The tokens a parser reads of ``source``, at ``ast``'s positions (UTF-8 byte offsets in lines counted
    as ``tokenize`` and ``ast`` count them: at newlines, not at the form feeds or U+2028 where
    ``str.splitlines`` also breaks, which put every later token's offsets on the wrong line)."""
    lines = io.StringIO(source).readlines()

    def at(position: tuple[int, int]) -> Position:
        row, column = position
        line = lines[row - 1] if 0 < row <= len(lines) else ""
        return row, len(line[:column].encode("utf-8"))

    tokens: list[Token] = []
    for t in tokenize.generate_tokens(io.StringIO(source).readline):
        if t.type in _DROPPED or (t.string == "" and tokenize.tok_name[t.type] == "FSTRING_MIDDLE"):
            continue  # Python 3.12's tokenize gives an empty part before a format specifier's closing brace
        if t.type == tokenize.DEDENT and tokens:  # where the block ends, not where the next line starts
            tokens.append(Token(token_kind(t), tokens[-1].end, tokens[-1].end))
        elif t.type == tokenize.NEWLINE and not t.string:  # added where a source ends without one: past its end
            row, column = at(t.start)
            tokens.append(Token(token_kind(t), (row, column), (row, column + 1)))
        else:
            tokens.append(Token(token_kind(t), at(t.start), at(t.end)))
    return tokens


_NOT_NESTED = object()  # a subtree whose spans do not nest; so is every tree that holds it
_FSTRING_PARTS = sys.version_info >= (3, 12)
"""Whether ``tokenize`` gives an f-string's parts as tokens of their own (PEP 701), so that its tree nests."""


class _Index(NamedTuple):
    """A file's tokens as ``_own_span`` searches them: their starts and ends (both sorted), and the starts
    of its ``@`` tokens."""

    starts: list[Position]
    ends: list[Position]
    ats: list[Position]


def _own_span(node: ast.AST, index: _Index) -> tuple[int, int] | None:
    """The first and last token inside a node's source position, None if it has none or covers none. A
    decorated definition's position starts at ``def`` or ``class``: its span starts at its first decorator's
    ``@`` (the last ``@`` before the decorator: a parenthesised one's ``(`` lies between), so every ``@`` is
    its own."""
    starts, ends = index.starts, index.ends
    if getattr(node, "end_lineno", None) is None:
        return None
    first = bisect_left(starts, (node.lineno, node.col_offset))  # type: ignore[attr-defined]
    if decorators := getattr(node, "decorator_list", None):
        at = index.ats[bisect_right(index.ats, (decorators[0].lineno, decorators[0].col_offset)) - 1]
        first = min(first, bisect_left(starts, at))
    last = bisect_right(ends, (node.end_lineno, node.end_col_offset)) - 1  # type: ignore[attr-defined]
    return (first, last) if first <= last else None


def _empty(node: ast.AST) -> bool:
    """An empty string of no source text: the part Python 3.12's parser (3.13's does not) puts before a format
    specifier's closing brace, ``f"{x:>{w}}"``. It is no node of the tree, which is then the same on every
    Python."""
    return (
        isinstance(node, ast.Constant)
        and node.value == ""
        and (node.lineno, node.col_offset) == (node.end_lineno, node.end_col_offset)
    )


def _labelled(node: ast.AST, index: _Index, statements: list[Node]) -> object:
    """``node`` as a ``Node``, as its label if it covers no token, or ``_NOT_NESTED``; the statements
    inside it (itself included) whose spans nest appended to ``statements`` as ``Node``s, innermost first."""
    if isinstance(node, ast.JoinedStr) and not _FSTRING_PARTS:  # one STRING token: one node, a leaf
        own = _own_span(node, index)
        return "JoinedStr" if own is None else Node("JoinedStr", own, ())
    children = [_labelled(child, index, statements) for child in ast.iter_child_nodes(node) if not _empty(child)]
    if any(c is _NOT_NESTED for c in children):
        return _NOT_NESTED
    spanned = sorted((c for c in children if isinstance(c, Node)), key=lambda c: c.span)
    if any(elder.span[1] >= younger.span[0] for elder, younger in itertools.pairwise(spanned)):
        return _NOT_NESTED
    empties, before = [], 0
    for child in children:
        if isinstance(child, Node):
            before += 1
        else:
            after = len(spanned) - before
            empties.append(f"{child}@{before}" if before <= after else f"{child}@-{after}")
    label = type(node).__name__ + (f"({','.join(empties)})" if empties else "")
    bounds = [s for s in (_own_span(node, index), *(c.span for c in spanned)) if s is not None]
    if not bounds:
        return label
    tree = Node(label, (min(b[0] for b in bounds), max(b[1] for b in bounds)), tuple(spanned))
    if isinstance(node, ast.stmt):
        statements.append(tree)
    return tree


def statement_trees(module: ast.AST, tokens: Sequence[Token]) -> list[Node]:
    """The trees of the statements in ``module`` whose spans nest, over its file's ``tokens`` (spans
    counted in them), innermost first."""
    statements: list[Node] = []
    ats = [t.start for t in tokens if t.kind == "@"]
    _labelled(module, _Index([t.start for t in tokens], [t.end for t in tokens], ats), statements)
    return statements


def left_out(sources: Iterable[str]) -> tuple[int, int]:
    """(statements left out, statements) of these sources: those whose spans do not nest, which are no fragment
    (sources that do not tokenize or parse are skipped)."""
    out = every = 0
    for source in sources:
        try:
            module, tokens = ast.parse(source), tokens_of(source)
        except (SyntaxError, ValueError, tokenize.TokenError, RecursionError):
            continue
        statements = sum(isinstance(node, ast.stmt) for node in ast.walk(module))
        out, every = out + statements - len(statement_trees(module, tokens)), every + statements
    return out, every


def _shifted(node: Node, offset: int) -> Node:
    first, last = node.span
    return Node(node.label, (first - offset, last - offset), tuple(_shifted(c, offset) for c in node.children))


def nodes(tree: Node) -> Iterator[Node]:
    """The nodes of a tree in preorder: the order of its binarised shape's leaves."""
    yield tree
    for child in tree.children:
        yield from nodes(child)


def size(tree: Node) -> int:
    """The number of nodes of a tree (of its binarised shape's leaves)."""
    return 1 + sum(map(size, tree.children))


def depth(tree: Node) -> int:
    """The number of nodes on the longest path from the root (1 for a node without children)."""
    return 1 + max((depth(c) for c in tree.children), default=0)


def binarised(tree: Node) -> Shape:
    """The tree's shape as the trees example binarises a syntax tree: a leaf for the node, then its
    children's shapes, paired level by level."""
    return balanced([None, *(binarised(c) for c in tree.children)])


def labelled_spans(tree: Node) -> Counter[tuple[str, int, int]]:
    """The labelled spans ``(label, first, last)`` of every node, with their multiplicities."""
    return Counter((n.label, *n.span) for n in nodes(tree))


def fragments(min_tokens: int, max_tokens: int, side: Side = "all", seed: int | None = None) -> Iterator[Fragment]:
    """Every statement of ``min_tokens`` to ``max_tokens`` tokens whose spans nest, from the files
    ``library_files(side)`` in sorted order or, given a ``seed``, in a seeded random order; within a
    file, innermost first (the statements inside a definition before it). Files that do not
    tokenize or parse (test data with deliberate errors) are skipped."""
    for name in library_files(side, seed):
        yield from file_fragments(LIBRARY / name, name, min_tokens, max_tokens)


def file_fragments(path: Path, name: str, min_tokens: int, max_tokens: int) -> list[Fragment]:
    """The fragments of ``min_tokens`` to ``max_tokens`` tokens of the file at ``path`` (``fragments_of``,
    named ``name:line``); none if it does not decode as UTF-8, tokenize or parse."""
    try:
        source = path.read_bytes().decode("utf-8")
        tokens = tokens_of(source)
        trees = statement_trees(ast.parse(source), tokens)
    except (SyntaxError, ValueError, UnicodeDecodeError, tokenize.TokenError, RecursionError):
        return []
    return list(fragments_of(name, tokens, trees, min_tokens, max_tokens))


def package_files(packages: Iterable[str]) -> list[tuple[Path, str]]:
    """Every ``.py`` file of the installed ``packages`` (or modules), with its name (``package/relative/path.py``),
    sorted; a ``ValueError`` naming one that is not installed."""
    found = []
    for package in packages:
        try:
            spec = importlib.util.find_spec(package)
        except (ImportError, ValueError):  # a dotted name whose parent is missing; an empty or relative name
            spec = None
        if spec is None:
            raise ValueError(f"the package {package!r} is not installed here: install it or name another")
        if spec.submodule_search_locations is None:  # a module of one file
            found += [(Path(spec.origin), f"{package}.py")] if spec.origin and spec.origin.endswith(".py") else []
            continue
        for root in map(Path, spec.submodule_search_locations):
            found += [(path, f"{package}/{path.relative_to(root)}") for path in root.rglob("*.py")]
    return sorted(found, key=lambda item: item[1])


def fragments_of(
    name: str, tokens: Sequence[Token], trees: Iterable[Node], min_tokens: int, max_tokens: int
) -> Iterator[Fragment]:
    """The fragments of a file ``name``: of its statements' ``trees`` over its ``tokens`` (``statement_trees``),
    those of ``min_tokens`` to ``max_tokens`` tokens, named ``name:line``."""
    for tree in trees:
        first, last = tree.span
        if min_tokens <= last - first + 1 <= max_tokens:
            kinds = tuple(t.kind for t in tokens[first : last + 1])
            yield Fragment(f"{name}:{tokens[first].start[0]}", kinds, _shifted(tree, first))


def right_branching(tokens: int, root: str, label: str) -> Node:
    """The right-branching tree over ``tokens`` tokens: node i covers tokens i to the last, its only
    child node i + 1; the root labelled ``root``, every other node ``label``."""
    tree = Node(label, (tokens - 1, tokens - 1))
    for first in range(tokens - 2, -1, -1):
        tree = Node(label if first else root, (first, tokens - 1), (tree,))
    return tree if tokens > 1 else Node(root, (0, 0))


@dataclass(frozen=True)
class Scores:
    """A parser's scores on a test set: exact matches of whole trees, bracketing precision, recall
    and F1 over the labelled spans of all trees, and how many predictions were malformed (None)."""

    trees: int
    exact: float
    precision: float
    recall: float
    f1: float
    malformed: int


def score(predicted: Iterable[Node | None], gold: Iterable[Node]) -> Scores:
    """Score predicted trees against Python's; a malformed prediction (None) counts as a tree that
    matches nothing and brackets nothing."""
    trees = exact = malformed = right = found = wanted = 0
    for p, g in zip(predicted, gold, strict=True):
        trees += 1
        truth = labelled_spans(g)
        wanted += sum(truth.values())
        if p is None:
            malformed += 1
            continue
        guess = labelled_spans(p)
        found += sum(guess.values())
        right += sum((guess & truth).values())
        exact += p == g
    precision = right / found if found else 0.0
    recall = right / wanted if wanted else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return Scores(trees, exact / trees if trees else 0.0, precision, recall, f1, malformed)


UNKNOWN = "<unknown>"


def vocabulary(items: Iterable[str]) -> dict[str, int]:
    """Ids for the distinct ``items`` (token kinds, labels), most frequent first, then ``UNKNOWN``
    for any item not among them (``ids``)."""
    counts = Counter(items)
    ordered = sorted(counts, key=lambda item: (-counts[item], item))
    return {item: i for i, item in enumerate([*ordered, UNKNOWN])}


def ids(items: Iterable[str], vocab: dict[str, int]) -> list[int]:
    """The ids of ``items`` in ``vocab``, ``UNKNOWN``'s for an item it does not hold."""
    unknown = vocab[UNKNOWN]
    return [vocab.get(item, unknown) for item in items]
