"""The figure of one fragment (``plot``): its tokens under the predicted tree and Python's, side by side, a
node a bar over the tokens it covers, at its depth, with its label; drawn on its own Agg canvas (pyplot is
never imported)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

from applicative.examples import syntax
from applicative.examples.parsing.batches import walk
from applicative.examples.syntax import Fragment, Node

__all__ = ["plot"]


def plot(fragment: Fragment, predicted: Node | None, path: Path) -> None:
    """Draw the kinds of the fragment's tokens under the predicted tree and Python's, side by side: a node is a
    bar over the tokens it covers, at its depth, with its label; a node of one tree that the other
    lacks (the same label over the same tokens) is drawn in orange. Saved to ``path``."""
    trees = [("predicted" if predicted is not None else "predicted: malformed", predicted), ("Python's", fragment.tree)]
    spans = [syntax.labelled_spans(t) if t is not None else Counter() for _, t in trees]
    height = max(syntax.depth(t) for _, t in trees if t is not None)
    width = max(6.0, 0.42 * len(fragment.tokens))
    figure = Figure(figsize=(2 * width, 0.5 * height + 1.6))  # its own canvas: pyplot is never imported
    FigureCanvasAgg(figure)
    axes = [figure.add_subplot(1, 2, 1), figure.add_subplot(1, 2, 2)]
    for (title, tree), own, other, ax in zip(trees, spans, spans[::-1], axes, strict=True):
        for node, depth in walk(tree) if tree is not None else ():
            first, last = node.span
            missing = other[(node.label, first, last)] < own[(node.label, first, last)]
            ax.add_patch(
                Rectangle(
                    (first - 0.45, -depth - 0.4), last - first + 0.9, 0.8,
                    color="tab:orange" if missing else "tab:blue", alpha=0.25,
                )
            )  # fmt: skip
            ax.text((first + last) / 2, -depth, node.label, ha="center", va="center", fontsize=7)
        ax.set_xticks(range(len(fragment.tokens)), fragment.tokens, rotation=90, fontsize=7)
        ax.set_xlim(-0.6, len(fragment.tokens) - 0.4)
        ax.set_ylim(-height + 0.4, 0.6)
        ax.set_yticks([])
        ax.set_title(f"{title}: {fragment.name}", fontsize=9)
    figure.tight_layout()
    figure.savefig(path, dpi=110)
