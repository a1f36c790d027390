"""The parser's test, measured honestly: fragments drawn at random, figures with intervals, what training saw
counted apart.

    other_code(config, n, seed, files) -> [[Fragment]]   fragments of files of installed packages that are not
                                                    the standard library (the project's own dependencies)
    measure(predicted, gold, names, seed) -> Measured    exact match and bracketing F1 with 95% intervals
    seen_in(train) -> set                           the (tokens, tree) pairs training saw

The held-out files' test is drawn by ``batches.population`` and ``batches.sample``.

Intervals are a cluster bootstrap: fragments of one file are alike (a file's statements share its style and
its names' patterns), so the resamples draw files, with replacement, and keep every sampled fragment of each
file drawn; each resample's exact match and F1 are computed as the figures are (F1 from the summed matches,
predictions and gold spans), and the interval is the 2.5th to 97.5th percentile of 2,000 resamples
(``numpy.random.default_rng(seed)``). "F1 inside" leaves out the root and every one-token span, the brackets a
parser gets for free (the root spans the fragment) or nearly (a token's own node).
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from applicative.examples import syntax
from applicative.examples.parsing.batches import fits, sample
from applicative.examples.parsing.model import Config
from applicative.examples.syntax import Fragment, Node

__all__ = [
    "OTHER_PACKAGES",
    "Measured",
    "file_of",
    "inner_spans",
    "measure",
    "other_code",
    "other_files",
    "seen_in",
]

RESAMPLES = 2000
OTHER_PACKAGES = ("numpy", "scipy", "jax", "optax", "matplotlib")
"""The installed packages whose files make the test on other code: the project's own dependencies, which every
environment that runs it has."""


def other_files(seed: int, files: int = 300, packages: Sequence[str] = OTHER_PACKAGES) -> list[tuple[Path, str]]:
    """The files of ``other_code``'s test: ``files`` of the installed ``packages``' drawn at random
    (``default_rng([seed, 3])``), each with its name, in order."""
    every = syntax.package_files(packages)
    rng = np.random.default_rng([seed, 3])
    return [every[i] for i in np.sort(rng.choice(len(every), min(files, len(every)), replace=False))]


def other_code(
    config: Config, n: int, seed: int, files: int = 300, packages: Sequence[str] = OTHER_PACKAGES
) -> list[list[Fragment]]:
    """A test on code that is not the standard library: ``files`` files drawn at random (``default_rng([seed,
    3])``) from the installed ``packages``, their fragments in each band as ``population`` finds them (files
    that do not parse are skipped), then ``n`` of each band's at random (``batches.sample``): a sample of fragments
    of a random sample of files. A ``ValueError`` names a package among ``config.train_packages``."""
    trained = sorted(set(packages) & set(config.train_packages))
    if trained:
        raise ValueError(f"the test's packages {', '.join(trained)} are among the run's training packages")
    chosen = other_files(seed, files, packages)
    bands, low, high = config.bands, min(b.low for b in config.bands), max(b.high for b in config.bands)
    found: list[list[Fragment]] = [[] for _ in bands]
    for path, name in chosen:
        for fragment in syntax.file_fragments(path, name, low, high):
            for i, band in enumerate(bands):
                if band.low <= len(fragment.tokens) <= band.high:
                    if fits(fragment.tree, band):
                        found[i].append(fragment)
                    break
    return sample(found, n, seed)


def seen_in(train: Iterable[Fragment]) -> set[tuple[tuple[str, ...], Node]]:
    """The (tokens, tree) pairs of the training fragments: a test fragment among them was seen in training."""
    return {(f.tokens, f.tree) for f in train}


def file_of(fragment: Fragment) -> str:
    """The file a fragment comes from (its name is ``file:line``)."""
    return fragment.name.rsplit(":", 1)[0]


def inner_spans(tree: Node) -> list[tuple[str, int, int]]:
    """The labelled spans of a tree but the root's and those of one token."""
    return [(n.label, *n.span) for n in itertools.islice(syntax.nodes(tree), 1, None) if n.span[0] < n.span[1]]


@dataclass(frozen=True)
class Measured:
    """A parser's figures on a sample: ``syntax.Scores``'s (trees, exact match, bracketing precision, recall, F1,
    malformed predictions), F1 without the root and one-token spans (``f1_inside``), and the 95% intervals of
    exact match, F1 and F1 inside (the cluster bootstrap of the module's docstring)."""

    trees: int
    exact: float
    precision: float
    recall: float
    f1: float
    malformed: int
    f1_inside: float
    exact_interval: tuple[float, float]
    f1_interval: tuple[float, float]
    f1_inside_interval: tuple[float, float]


def _counts(predicted: Node | None, gold: Node) -> np.ndarray:
    """A fragment's exact match, then (matched, predicted, gold) spans, all and inside."""
    truth, truth_inside = syntax.labelled_spans(gold), Counter(inner_spans(gold))
    if predicted is None:
        return np.array([0, 0, 0, sum(truth.values()), 0, 0, sum(truth_inside.values())], np.float64)
    guess, guess_inside = syntax.labelled_spans(predicted), Counter(inner_spans(predicted))
    return np.array(
        [
            predicted == gold,
            sum((guess & truth).values()),
            sum(guess.values()),
            sum(truth.values()),
            sum((guess_inside & truth_inside).values()),
            sum(guess_inside.values()),
            sum(truth_inside.values()),
        ],
        np.float64,
    )


def _f1(right: np.ndarray, found: np.ndarray, wanted: np.ndarray) -> np.ndarray:
    """F1 of summed counts (arrays of resamples); 0 where nothing was predicted or wanted."""
    with np.errstate(invalid="ignore", divide="ignore"):
        precision, recall = right / found, right / wanted
        f1: np.ndarray = np.nan_to_num(2 * precision * recall / (precision + recall))
    return f1


def measure(predicted: Sequence[Node | None], gold: Sequence[Node], files: Sequence[str], seed: int = 0) -> Measured:
    """The figures of ``predicted`` trees against Python's ``gold`` ones, fragment i from file ``files[i]``, with
    95% intervals by resampling files (``RESAMPLES`` resamples of ``default_rng(seed)``). An empty sample gives
    zeros."""
    if not gold:
        return Measured(0, 0.0, 0.0, 0.0, 0.0, 0, 0.0, (0.0, 0.0), (0.0, 0.0), (0.0, 0.0))
    counts = np.stack([_counts(p, g) for p, g in zip(predicted, gold, strict=True)])
    names = sorted(set(files))
    index = {name: i for i, name in enumerate(names)}
    by_file = np.zeros((len(names), counts.shape[1] + 1))  # fragments, then the counts, summed over each file
    np.add.at(by_file, [index[f] for f in files], np.concatenate([np.ones((len(gold), 1)), counts], 1))
    rng = np.random.default_rng(seed)
    resampled = by_file[rng.integers(0, len(names), (RESAMPLES, len(names)))].sum(1)  # (resamples, 8)
    totals = by_file.sum(0)

    def interval(values: np.ndarray) -> tuple[float, float]:
        low, high = np.percentile(values, [2.5, 97.5])
        return float(low), float(high)

    exact, right, found, wanted, right_in, found_in, wanted_in = totals[1:]
    return Measured(
        trees=len(gold),
        exact=float(exact / len(gold)),
        precision=float(right / found) if found else 0.0,
        recall=float(right / wanted) if wanted else 0.0,
        f1=float(_f1(right, found, wanted)),
        malformed=sum(p is None for p in predicted),
        f1_inside=float(_f1(right_in, found_in, wanted_in)),
        exact_interval=interval(resampled[:, 1] / resampled[:, 0]),
        f1_interval=interval(_f1(resampled[:, 2], resampled[:, 3], resampled[:, 4])),
        f1_inside_interval=interval(_f1(resampled[:, 5], resampled[:, 6], resampled[:, 7])),
    )
