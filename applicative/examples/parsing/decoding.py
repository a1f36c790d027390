"""Decoding: the parser builds a fragment's tree top down, a level a round.

    parse(parser, config, fragments, band) -> [Node | None]   the trees of a band's fragments, None if malformed

The root covers every token; in round k every node at depth k reads its children's spans from its scores over
its own span (the best sequence of own, begin, continue that begins no child with a continuation and splits
no pair of brackets: a segmentation by dynamic programming, ``children``), and those children join the tree
(``grown``). It stops when a round adds no node; the labels are the last round's (``labelled``). A node over
its parent's span gets no child over it too: Python's trees almost never hold such a chain of three nodes
(none among the 20,000 training fragments, 286 in 87 of the 69,911 held-out fragments, f-strings with nested
format specifiers, which the decode cannot match exactly), and without this rule and the builder's feature
of it, chains grew round after round. A decode that needs more rounds than ``Config.rounds``, more nodes than
the band's capacity or a deeper binarised tree than a layout holds is malformed. One compiled reading and one
compiled round serve every fragment of a band.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import jax
import numpy as np

from applicative.examples.parsing.batches import CLOSING, OPENING, fits, ids, nodes_of, stack, token_inputs
from applicative.examples.parsing.model import BEGIN, CONTINUE, OWN, Band, Config, Parser, build, read
from applicative.examples.syntax import Fragment, Node

__all__ = ["children", "grown", "labelled", "parse"]


def children(scores: np.ndarray, span: tuple[int, int], tokens: Sequence[str]) -> list[tuple[int, int]]:
    """The children's spans a node's scores (tags, tokens) give over its ``span`` of ``tokens``: the most likely
    sequence of tags in which no child begins with a continuation and every child holds each of its brackets
    with its match. A segmentation of the span into the node's own tokens and its children, by dynamic
    programming in one pass: ``best[j]`` scores the best tagging of the span's first j tokens, and a child
    ``[i, j]`` scores ``best[i] + begin[i] + continue[i + 1] + ... + continue[j]``; its first token is one of
    those that began at the level of brackets where it ends, with no bracket closed below that level since
    (``starts``: the best of them at each level open)."""
    first, last = span
    logp = scores[:, first : last + 1].T - np.logaddexp.reduce(scores[:, first : last + 1].T, axis=1, keepdims=True)
    own, begin, continued = (logp[:, tag].tolist() for tag in (OWN, BEGIN, CONTINUE))
    best, start = [0.0], [-1]  # start[j]: the first token of the child ending at token j - 1, or -1: its own
    starts: dict[int, tuple[float, int]] = {}  # level -> the best best[i] + begin[i] - (continued up to i), and i
    level, total = 0, 0.0  # the brackets open before token j; continued[0] + ... + continued[j - 1]
    for j, token in enumerate(tokens[first : last + 1]):
        total += continued[j]
        here = best[j] + begin[j] - total
        if level not in starts or here > starts[level][0]:
            starts[level] = (here, j)
        level += (token in OPENING) - (token in CLOSING)
        for closed in [d for d in starts if d > level]:
            del starts[closed]
        mine = best[j] + own[j]
        if level in starts and starts[level][0] + total > mine:
            best.append(starts[level][0] + total)
            start.append(starts[level][1])
        else:
            best.append(mine)
            start.append(-1)
    spans, j = [], len(best) - 1
    while j > 0:
        if start[j] < 0:
            j -= 1
        else:
            spans.append((first + start[j], first + j - 1))
            j = start[j]
    return spans[::-1]


def grown(tree: Node, scores: np.ndarray, round_: int, tokens: Sequence[str]) -> Node:
    """``tree`` of ``tokens`` with children for its nodes at depth ``round_``, read from their scores (tags, node
    slots, tokens)."""
    slots = itertools.count()

    def grow(node: Node, depth: int, parent: tuple[int, int] | None) -> Node:
        slot = next(slots)
        if depth < round_:
            return Node(node.label, node.span, tuple(grow(c, depth + 1, node.span) for c in node.children))
        spans = children(scores[:, slot], node.span, tokens)
        if node.span == parent and spans == [node.span]:  # a third node over one span: Python's trees have none
            spans = []
        return Node(node.label, node.span, tuple(Node("", s) for s in spans))

    return grow(tree, 0, None)


def labelled(tree: Node, labels: np.ndarray, names: Sequence[str]) -> Node:
    """``tree`` with every node's label the most likely of its row of ``labels`` (node slots, labels)."""
    slots = itertools.count()

    def label(node: Node) -> Node:
        name = names[int(labels[next(slots)].argmax())]
        return Node(name, node.span, tuple(label(c) for c in node.children))

    return label(tree)


_read_batch = jax.jit(jax.vmap(read, in_axes=(None, 0, 0)))
_build_batch = jax.jit(jax.vmap(build, in_axes=(None, 0, 0, 0)))


def parse(parser: Parser, config: Config, fragments: Sequence[Fragment], band: Band) -> list[Node | None]:
    """The trees the parser builds for ``fragments`` of the band ``band``, None where a decode is
    malformed: more rounds than ``config.rounds``, more nodes than the band holds or a binarised
    tree deeper than a layout holds. In batches of ``config.batch`` (the last one filled with
    repeats): one compiled reading and one compiled round serve the band. ValueError naming a fragment
    with more tokens than the band holds."""
    for fragment in fragments:
        if len(fragment.tokens) > band.high:
            raise ValueError(
                f"parse: {fragment.name} has {len(fragment.tokens)} tokens, more than the band {band.low}-{band.high} "
                "holds (parsing.parse_source picks each statement's band)"
            )
    found: list[Node | None] = []
    for start in range(0, len(fragments), config.batch):
        chunk = [fragments[(start + i) % len(fragments)] for i in range(config.batch)]
        inputs, lengths = token_inputs(chunk, ids(config.kinds), band.high)
        memory = _read_batch(parser, inputs, lengths)
        trees = [Node("", (0, len(f.tokens) - 1)) for f in chunk]
        built: list[Node | None] = [None] * len(chunk)
        growing = set(range(len(chunk)))
        for round_ in range(config.rounds + 1):
            if not growing:
                break
            nodes = stack([nodes_of(tree, band.nodes) for tree in trees])
            labels, scores = (np.asarray(a) for a in _build_batch(parser, memory, lengths, nodes))
            for i in sorted(growing):
                more = grown(trees[i], scores[i], round_, chunk[i].tokens)
                if more == trees[i]:  # no node grew: the tree is built
                    built[i] = labelled(more, labels[i], config.labels)
                    growing.discard(i)
                elif round_ == config.rounds or not fits(more, band):
                    growing.discard(i)  # malformed: built[i] stays None
                else:
                    trees[i] = more
        found += built
    return found[: len(fragments)]
