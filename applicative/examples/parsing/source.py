"""The parser on a user's own code: source text in, a predicted tree for every statement out.

    sources(path) -> [(name, text)]                          a file, a notebook's code cells, a directory's files
    decoded(data, name) -> str                               bytes of Python source, as Python decodes them
    parse_source(parser, config, source, name) -> [Parsed]   each top-level statement, its band chosen here
    unread(source, parsed) -> [line]                         the statements Python's positions left out
    render(tree, texts) -> str                               a tree as indented lines: label, then its tokens
    compared(parsed) -> str                                  the predicted tree and Python's, differences marked

Source is read as Python reads it: its encoding from its PEP 263 declaration or byte-order mark (``tokenize``),
UTF-8 otherwise; a notebook's code cells each as a source of their own, IPython's magic lines (``%``, ``!``)
blanked; a directory's ``.py`` and ``.ipynb`` files in order. Whatever cannot be read is a ValueError naming
the file.

The source is Python's first: ``ast.parse`` raises its own ``SyntaxError`` (line, column, message) for invalid
code, and gives the reference tree of every statement (``syntax``). Each top-level statement (a definition
with everything in it, a loop, an assignment) is decoded in the first band that holds its size; a statement
shorter than the smallest band's low end is decoded in the smallest band and says so (``Parsed.problem``: it
is shorter than anything trained on); one longer than the largest band is not decoded and says so, naming its
size and the limit. Token kinds and labels the parser never saw in training are reported, never mapped to an
untrained input in silence: the kinds are read as the unknown kind, and a statement whose Python tree holds
an unseen label can never be matched exactly.
"""

from __future__ import annotations

import ast
import io
import json
import tokenize
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import jax.numpy as jnp
import numpy as np

from applicative import DenseTree
from applicative.examples import syntax
from applicative.examples.parsing.batches import band_of
from applicative.examples.parsing.decoding import parse
from applicative.examples.parsing.model import Band, Config, Parser
from applicative.examples.syntax import Node
from applicative.instances import dyadic

__all__ = ["Parsed", "compared", "decoded", "dense", "parse_source", "render", "sources", "unread"]


@dataclass(frozen=True)
class Parsed:
    """One top-level statement of a source: where it is, its tokens (kinds and texts), the band it was decoded
    in (None: too long for every band), the predicted tree (None: malformed, or not decoded), the same as a
    ``DenseTree`` (``dense``), Python's own tree, the token kinds and Python's labels that training never saw,
    and why it was not decoded as trained (``problem``, empty if nothing)."""

    line: int
    kinds: tuple[str, ...]
    texts: tuple[str, ...]
    band: Band | None
    predicted: Node | None
    python: Node
    unseen_kinds: tuple[str, ...] = ()
    unseen_labels: tuple[str, ...] = ()
    problem: str = ""
    tree: DenseTree[jnp.ndarray] | None = field(default=None, compare=False)

    @property
    def scores(self) -> syntax.Scores:
        """Exact match and bracketing F1 against Python's tree (a tree not decoded counts as malformed)."""
        return syntax.score([self.predicted], [self.python])


def dense(tree: Node, labels: Sequence[str]) -> DenseTree[jnp.ndarray]:
    """A predicted tree as the ``DenseTree`` the parser builds: its shape the binarised syntax tree
    (``syntax.binarised``), its leaves the nodes in preorder, each holding its label's index in ``labels``."""
    every = list(syntax.nodes(tree))
    layout = dyadic.layout(dyadic.depths_of(syntax.binarised(tree)), len(every), "parse_source")
    return DenseTree(jnp.asarray([labels.index(n.label) for n in every], jnp.int32), layout, len(every))


def _statements(module: ast.Module, tokens: Sequence[syntax.Token]) -> list[Node]:
    """The trees of the module's top-level statements (those not inside another), in source order."""
    found: list[Node] = []
    for tree in sorted(syntax.statement_trees(module, tokens), key=lambda t: (t.span[0], -t.span[1])):
        if not found or tree.span[0] > found[-1].span[1]:
            found.append(tree)
    return found


def _texts(source: str, tokens: Sequence[syntax.Token]) -> list[str]:
    """Each token's text in ``source`` (positions are UTF-8 byte offsets in their line)."""
    lines = [line.encode("utf-8") for line in io.StringIO(source).readlines()]  # as tokenize splits them

    def text(token: syntax.Token) -> str:
        (row, start), (end_row, end) = token.start, token.end
        if row != end_row or not 0 < row <= len(lines):
            return token.kind
        return lines[row - 1][start:end].decode("utf-8", errors="replace").strip() or token.kind

    return [text(t) for t in tokens]


def decoded(data: bytes, name: str) -> str:
    """Bytes of Python source as Python decodes them: the encoding its PEP 263 declaration or byte-order mark
    names, UTF-8 otherwise, the mark dropped. ValueError naming ``name``: bytes not of that encoding (a binary
    file), or a declaration of an encoding Python does not know."""
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
        return data.decode(encoding)  # "utf-8-sig" where a byte-order mark opens it, which drops the mark
    except (SyntaxError, UnicodeDecodeError, LookupError) as error:
        reason = error.msg if isinstance(error, SyntaxError) else str(error)
        raise ValueError(f"{name}: not Python source text ({reason})") from None


def sources(path: Path) -> list[tuple[str, str]]:
    """The Python sources at ``path``, each (name, text): a file's text (``decoded``); a notebook's (``.ipynb``)
    code cells, named "FILE, cell K" (K from 1, of every cell), each with IPython's magic lines blanked; a
    directory's ``.py`` and ``.ipynb`` files, found recursively, in order. ValueError naming what is wrong: a
    file that cannot be read or is not text, a notebook that is not one, a directory holding no Python."""
    if path.is_dir():
        found = sorted(p for p in path.rglob("*") if p.suffix in (".py", ".ipynb") and p.is_file())
        if not found:
            raise ValueError(f"{path}: a directory with no Python file (.py or .ipynb) in it")
        return [source for file in found for source in sources(file)]
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise FileNotFoundError(f"{path}: no such file") from None
    except OSError as error:
        raise ValueError(f"{path}: cannot be read ({error.strerror})") from None
    if path.suffix != ".ipynb":
        return [(str(path), decoded(data, str(path)))]
    try:
        cells = json.loads(data)["cells"]
        return [(f"{path}, cell {k}", _without_magics(cell["source"])) for k, cell in enumerate(cells, 1)
                if cell["cell_type"] == "code"]  # fmt: skip
    except (ValueError, KeyError, TypeError) as error:
        raise ValueError(f"{path}: not a Jupyter notebook ({type(error).__name__}: {error})") from None


def _without_magics(text: str | list[str]) -> str:
    """A cell's source (a string, or the notebook format's list of lines), its IPython magic and shell lines
    (``%``, ``!``) blank, so that the rest keeps its line numbers."""
    lines = ("".join(text) if isinstance(text, list) else str(text)).splitlines()
    return "".join("\n" if line.lstrip().startswith(("%", "!")) else line + "\n" for line in lines)


def parse_source(parser: Parser, config: Config, source: str | bytes, name: str = "<source>") -> list[Parsed]:
    """The predicted tree of every top-level statement of ``source`` (a statement, several, a file: text, or
    bytes as Python decodes them, ``decoded``), beside Python's, each decoded in the band that holds its size
    (the module's docstring). Empty or blank source (comments only) gives no statement. SyntaxError: ``source``
    is not Python (``ast.parse``'s own); TypeError: it is neither text nor bytes; ValueError: bytes that are
    not text."""
    if isinstance(source, bytes):
        source = decoded(source, name)
    elif not isinstance(source, str):
        raise TypeError(
            f"parse_source: source must be Python source, str or bytes, got {type(source).__name__} (a file's "
            "text: parsing.source.sources(path))"
        )
    source = source.removeprefix("\ufeff")  # a byte-order mark, as Python drops it from a file
    module = ast.parse(source, name)
    tokens = syntax.tokens_of(source)
    texts = _texts(source, tokens)
    statements = _statements(module, tokens)
    fragments = list(syntax.fragments_of(name, tokens, statements, 1, len(tokens)))
    smallest, largest = min(config.bands, key=lambda b: b.low), max(config.bands, key=lambda b: b.high)
    kinds, labels = set(config.kinds), set(config.labels)
    chosen: list[tuple[Band | None, str]] = []
    for fragment in fragments:
        size = len(fragment.tokens)
        index = band_of(fragment, config.bands)
        if index is not None:
            chosen.append((config.bands[index], ""))
        elif size < smallest.low:
            chosen.append((smallest, f"{size} tokens: shorter than the {smallest.low} of the smallest band trained on"))
        else:
            limit = largest.high
            chosen.append((None, f"{size} tokens: over the parser's limit of {limit} (its largest band); not parsed"))
    predicted: dict[int, Node | None] = {}
    for each in config.bands:
        members = [i for i, (b, _) in enumerate(chosen) if b == each]
        if members:
            found = parse(parser, config, [fragments[i] for i in members], each)
            predicted |= dict(zip(members, found, strict=True))
    result = []
    for i, (fragment, statement, (band, problem)) in enumerate(zip(fragments, statements, chosen, strict=True)):
        tree = predicted.get(i)
        first = statement.span[0]
        result.append(
            Parsed(
                line=tokens[first].start[0],
                kinds=fragment.tokens,
                texts=tuple(texts[first : statement.span[1] + 1]),
                band=band,
                predicted=tree,
                python=fragment.tree,
                unseen_kinds=tuple(sorted({k for k in fragment.tokens if k not in kinds})),
                unseen_labels=tuple(sorted({n.label for n in syntax.nodes(fragment.tree) if n.label not in labels})),
                problem=problem,
                tree=None if tree is None else dense(tree, config.labels),
            )
        )
    return result


def unread(source: str, parsed: Sequence[Parsed]) -> list[int]:
    """The first lines of ``source``'s top-level statements that ``parse_source`` left out: those whose
    positions Python gives do not nest, so that they have no reference
    tree over their tokens (``syntax``)."""
    read = {p.line for p in parsed}
    lines = []
    for statement in ast.parse(source).body:
        decorators = getattr(statement, "decorator_list", [])
        line = decorators[0].lineno if decorators else statement.lineno
        if line not in read:
            lines.append(line)
    return lines


def render(tree: Node, texts: Sequence[str], marks: dict[tuple[str, int, int], str] | None = None) -> str:
    """``tree`` as indented lines, a node a line: its label (``marks``' mark of its labelled span before it, if
    any), then the texts of the tokens it covers, in their columns."""
    rows = []

    def walk(node: Node, depth: int) -> None:
        mark = (marks or {}).get((node.label, *node.span), " ")
        first, last = node.span
        rows.append((f"{mark} {'  ' * depth}{node.label}", first, " ".join(texts[first : last + 1])))
        for child in node.children:
            walk(child, depth + 1)

    walk(tree, 0)
    width = max(len(label) for label, _, _ in rows) + 2
    starts = np.cumsum([0, *(len(t) + 1 for t in texts)])
    return "\n".join(f"{label:<{width}}{' ' * int(starts[first])}{text}" for label, first, text in rows)


def compared(parsed: Parsed) -> str:
    """A statement's predicted tree and Python's, each node whose labelled span the other lacks marked ``x``
    (predicted) or ``-`` (Python's: missed), with its scores and what training never saw."""
    s = parsed.scores
    head = f"line {parsed.line}: {len(parsed.kinds)} tokens"
    head += f", band {parsed.band.low}-{parsed.band.high}" if parsed.band is not None else ""
    head += f"; exact {'yes' if s.exact else 'no'}, F1 {s.f1:.3f}"
    notes = [parsed.problem] if parsed.problem else []
    if parsed.unseen_kinds:
        notes.append(f"token kinds never seen in training, read as unknown: {' '.join(parsed.unseen_kinds)}")
    if parsed.unseen_labels:
        notes.append(f"labels never seen in training (never matched): {' '.join(parsed.unseen_labels)}")
    python, missed = syntax.labelled_spans(parsed.python), {}
    if parsed.predicted is None:
        body = ["predicted: none (" + ("not decoded" if parsed.band is None else "malformed") + ")"]
    else:
        guess = syntax.labelled_spans(parsed.predicted)
        body = ["predicted:", render(parsed.predicted, parsed.texts, dict.fromkeys(guess - python, "x"))]
        missed = dict.fromkeys(python - guess, "-")
    body += ["python:", render(parsed.python, parsed.texts, missed)]
    return "\n".join([head, *(f"  {n}" for n in notes), *body])
