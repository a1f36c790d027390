"""The linearised tree: a fragment's syntax tree (``syntax.Node``) as a sequence of symbols, as Vinyals et
al.'s "Grammar as a foreign language" writes a parse, and back.

    linearise(tree, tokens)       node X is ``"(" + X.label``, then its tokens (each one ``TOKEN``) and its
                                  children in token order, then ``CLOSE``: 2 * nodes + tokens symbols
    delinearise(symbols, tokens)  the tree back, its spans read from where the ``TOKEN`` symbols fall; None
                                  for a malformed sequence

The tokens themselves are not written: the source gives them, so every token is one ``TOKEN``. ``END`` ends
the sequence the decoder writes, and ``START`` is the decoder's first input; neither is ever inside a tree.
"""

from __future__ import annotations

from collections.abc import Sequence

from applicative.examples.syntax import Node

__all__ = ["CLOSE", "END", "START", "TOKEN", "delinearise", "linearise"]

TOKEN = "XX"  # a token, in the linearised tree
CLOSE = ")"  # the end of a node
END = "<end>"  # the end of the linearised tree: the decoder's last output
START = "<start>"  # the decoder's first input, never an output


def linearise(tree: Node, tokens: int) -> list[str]:
    """The symbols of ``tree`` over ``tokens`` tokens: node X is ``"(" + X.label`` (one symbol), then,
    in token order over its span, ``TOKEN`` for each token no child covers and each child's symbols,
    then ``CLOSE``. Every token is one ``TOKEN``: 2 * nodes + ``tokens`` symbols in all.

    A ValueError if the root does not span tokens 0 to ``tokens - 1``, or a child's span is empty,
    leaves its parent's or does not follow its elder sibling's."""
    if tree.span != (0, tokens - 1):
        raise ValueError(f"linearise: the root spans {tree.span}, not the {tokens} tokens (0, {tokens - 1})")
    symbols: list[str] = []

    def walk(node: Node) -> None:
        first, last = node.span
        symbols.append("(" + node.label)
        position = first  # the next token of the node not yet written
        for child in node.children:
            if not position <= child.span[0] <= child.span[1] <= last:
                raise ValueError(
                    f"linearise: {node.label} {node.span} has a child {child.label} {child.span} out of place"
                )
            symbols.extend([TOKEN] * (child.span[0] - position))
            walk(child)
            position = child.span[1] + 1
        symbols.extend([TOKEN] * (last + 1 - position))
        symbols.append(CLOSE)

    walk(tree)
    return symbols


def delinearise(symbols: Sequence[str], tokens: int) -> Node | None:
    """The tree whose linearisation (``linearise``) is ``symbols``, over ``tokens`` tokens; None (a
    malformed sequence) if its brackets do not balance, it is not exactly one root node, it holds
    other than ``tokens`` ``TOKEN``s, a node covers no token, or a symbol is none of an open symbol
    (``"("`` and a label), ``CLOSE`` and ``TOKEN``."""
    open_nodes: list[tuple[str, int, list[Node]]] = []  # label, first token, children so far
    position = 0  # the tokens read so far
    root: Node | None = None
    for symbol in symbols:
        if root is not None:
            return None  # a symbol after the root closed: a second root, or a stray one
        if symbol == TOKEN:
            if not open_nodes:
                return None  # a token outside every node
            position += 1
        elif symbol == CLOSE:
            if not open_nodes:
                return None
            label, first, children = open_nodes.pop()
            if position == first:
                return None  # a node that covers no token
            node = Node(label, (first, position - 1), tuple(children))
            if open_nodes:
                open_nodes[-1][2].append(node)
            else:
                root = node
        elif symbol.startswith("(") and len(symbol) > 1:
            open_nodes.append((symbol[1:], position, []))
        else:
            return None
    return root if root is not None and position == tokens else None
