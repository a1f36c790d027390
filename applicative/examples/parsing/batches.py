"""The parser's data: fragments of Python files in bands of sizes, trees laid out as the builder sees them, and
the teacher-forced minibatches that ``applicative.training.fit`` trains on.

    load_data(config, seed) -> Data        training fragments, and a random sample of held-out ones band by band
    training(config, seed)                 the training fragments: of the standard library's training files
                                           (and of the packages named), all or a few of each file's
    population(config, side), sample(population, n, seed)   every fragment of a side in each band; n drawn
                                           (``held``'s fragments of a side, kept on disk: ``cached``)
    pools(data, config)                    the training fragments of each band that fit it
    with_vocabularies(config, fragments)   ``config`` with the fragments' token kinds and labels
    Minibatches(pools, shares, config)     ``Drawn``'s draw: step s's minibatch from (seed, s)
    held_out(data, config)                 fixed teacher-forced minibatches of the held-out fragments

Training is every round of a decode at once, teacher forced: Python's whole tree, the labels of every node and
every node's scores over its span (no node sees a deeper one: ``model``). Every band of fragment
sizes (``Config.bands``) has its capacities of tokens and nodes, so every minibatch of a band has one shape
and one compiled step serves it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import gc
import gzip
import hashlib
import json
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, NamedTuple

import jax.numpy as jnp
import numpy as np
from filelock import FileLock

from applicative.examples import syntax
from applicative.examples.parsing import model
from applicative.examples.parsing.model import (
    BEGIN,
    CONTINUE,
    DEPTH_FEATURES,
    NESTING_FEATURES,
    OWN,
    POSITION_FEATURES,
    Band,
    Batch,
    Config,
    Nodes,
    sinusoids,
)
from applicative.examples.syntax import Fragment, Node
from applicative.examples.trees import LIBRARY, Side, library_files
from applicative.examples.trees import data as trees_data
from applicative.instances import dyadic
from applicative.training.files import atomic_file

__all__ = [
    "CACHE",
    "CEILING",
    "CLOSING",
    "OPENING",
    "Data",
    "Host",
    "Minibatches",
    "band_of",
    "cached",
    "fits",
    "held",
    "held_out",
    "laid_out",
    "load_data",
    "make_batch",
    "nesting",
    "nodes_of",
    "pools",
    "population",
    "sample",
    "stack",
    "token_inputs",
    "training",
    "walk",
    "with_vocabularies",
]


# Trees as the builder sees them


def walk(tree: Node, depth: int = 0) -> Iterator[tuple[Node, int]]:
    """The nodes of ``tree`` with their depths, in preorder."""
    yield tree, depth
    for child in tree.children:
        yield from walk(child, depth + 1)


def _unary(tree: Node, parent: tuple[int, int] | None = None) -> Iterator[bool]:
    """Whether each of ``tree``'s nodes covers its parent's span, in preorder."""
    yield tree.span == parent
    for child in tree.children:
        yield from _unary(child, tree.span)


Host = tuple[dyadic.Layout, np.ndarray, np.ndarray, np.ndarray, np.ndarray]  # one tree's ``Nodes``, on the host


def nodes_of(tree: Node, capacity: int) -> Host:
    """The layout and host arrays of a tree (``Nodes``), padded to ``capacity`` slots."""
    layout = dyadic.layout(dyadic.depths_of(syntax.binarised(tree)), capacity, "parsing")
    first, last, depth, extras = (
        np.zeros(capacity, np.int32),
        np.zeros(capacity, np.int32),
        np.zeros(capacity, np.int32),
        np.zeros((capacity, DEPTH_FEATURES + 1), np.float32),
    )
    depths = np.array([d for _, d in walk(tree)], np.int32)
    spans = np.array([n.span for n in syntax.nodes(tree)], np.int32)
    first[: len(spans)], last[: len(spans)], depth[: len(spans)] = spans[:, 0], spans[:, 1], depths
    extras[: len(spans), :DEPTH_FEATURES] = sinusoids(depths.astype(np.float64), DEPTH_FEATURES)
    extras[: len(spans), DEPTH_FEATURES] = np.fromiter(_unary(tree), bool)
    return layout, first, last, depth, extras


def stack(items: Sequence[Host]) -> Nodes:
    """The ``Nodes`` of a batch of trees: the layouts stacked on the device (one move), the rest on the host."""
    layouts = jnp.stack([item[0] for item in items])
    first, last, depth, extras = (np.stack([item[k] for item in items]) for k in range(1, 5))
    return Nodes(layouts, first, last, depth, extras)  # type: ignore[arg-type]  # host arrays, moved by the step


OPENING, CLOSING = frozenset("([{"), frozenset(")]}")
"""The bracket tokens: what ``nesting`` counts, and what the decode keeps whole in a node's children
(``decoding.children``): a node's tokens hold each of theirs with its match, as in Python's trees but for a
few comprehensions and match cases whose spans the project makes (docs/parsing.md, "The model", counts them)."""


def nesting(tokens: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """What the tokenizer knows of each token's place, as integers: how many brackets hold it (a bracket
    counted inside itself, so a pair has one depth) and how many blocks (an ``INDENT`` opens one from
    itself on, a ``DEDENT`` closes one from itself on)."""
    brackets, blocks = np.zeros(len(tokens), np.int64), np.zeros(len(tokens), np.int64)
    open_brackets = open_blocks = 0
    for t, kind in enumerate(tokens):
        open_brackets += kind in OPENING
        open_blocks += (kind == "INDENT") - (kind == "DEDENT")
        brackets[t], blocks[t] = open_brackets, open_blocks
        open_brackets -= kind in CLOSING
    return brackets, blocks


def token_inputs(fragments: Sequence[Fragment], kinds: dict[str, int], capacity: int) -> tuple[Any, Any]:
    """One-hot kinds, sinusoidal positions and nesting depths (``nesting``) (fragments, capacity, TokenIn), and
    the lengths: host arrays."""
    k = len(kinds)
    inputs = np.zeros((len(fragments), capacity, k + POSITION_FEATURES + 2 * NESTING_FEATURES), np.float32)
    inputs[:, :, k : k + POSITION_FEATURES] = sinusoids(np.arange(capacity, dtype=np.float64), POSITION_FEATURES)
    for i, fragment in enumerate(fragments):
        n = len(fragment.tokens)
        inputs[i, np.arange(n), syntax.ids(fragment.tokens, kinds)] = 1.0
        for j, depths in enumerate(nesting(fragment.tokens)):
            at = k + POSITION_FEATURES + j * NESTING_FEATURES
            inputs[i, :n, at : at + NESTING_FEATURES] = sinusoids(depths.astype(np.float64), NESTING_FEATURES)
    return inputs, np.asarray([len(f.tokens) for f in fragments], np.int32)


def fits(tree: Node, band: Band) -> bool:
    """Whether a tree's layout fits the band's node capacity and a layout's depth (``laid_out``)."""
    return _within(tree, band) and laid_out(tree)


def _within(tree: Node, band: Band) -> bool:
    return syntax.size(tree) <= band.nodes


def laid_out(tree: Node) -> bool:
    """Whether a tree's layout, its binarised shape, is at most ``dyadic.MAX_DEPTH`` deep."""
    return max(dyadic.depths_of(syntax.binarised(tree))) <= dyadic.MAX_DEPTH


def _tags(row: np.ndarray, node: Node) -> None:
    """Write into ``row`` (a node's row over the tokens) what each token of its span is to it."""
    first, last = node.span
    row[first : last + 1] = OWN
    for child in node.children:
        row[child.span[0]] = BEGIN
        row[child.span[0] + 1 : child.span[1] + 1] = CONTINUE


def ids(items: Sequence[str]) -> dict[str, int]:
    """A vocabulary's ids: its items' places."""
    return {item: i for i, item in enumerate(items)}


def make_batch(fragments: Sequence[Fragment], config: Config, band: Band) -> Batch:
    """Every round of each fragment's decode, teacher forced: Python's tree and its targets, padded to the
    band's capacities: host arrays but the layouts."""
    vocab = ids(config.labels)
    labels = np.full((len(fragments), band.nodes), -1, np.int32)
    tags = np.full((len(fragments), band.nodes, band.high), -1, np.int8)
    items = []
    for i, fragment in enumerate(fragments):
        items.append(nodes_of(fragment.tree, band.nodes))
        every = list(syntax.nodes(fragment.tree))
        labels[i, : len(every)] = syntax.ids((node.label for node in every), vocab)
        for j, node in enumerate(every):
            _tags(tags[i, j], node)
    inputs, lengths = token_inputs(fragments, ids(config.kinds), band.high)
    return Batch(inputs, lengths, stack(items), labels, tags)  # type: ignore[arg-type]  # host arrays


# The fragments


class Data(NamedTuple):
    """Fragments of the training files and, band by band, of the held-out files."""

    train: tuple[Fragment, ...]
    test: tuple[tuple[Fragment, ...], ...]


def load_data(config: Config, seed: int = 0) -> Data:
    """``config.train_fragments`` fragments of the training files in the bands (``training``), and the test:
    ``config.test_fragments`` of each band's held-out fragments, drawn at random from all of them
    (``population``, ``sample``)."""
    test = sample(population(config, "test"), config.test_fragments, seed)
    return Data(training(config, seed), tuple(tuple(found) for found in test))


def training(config: Config, seed: int = 0) -> tuple[Fragment, ...]:
    """``config.train_fragments`` fragments of the training files: the standard library's (``library_files``)
    and those of ``config.train_packages`` (``syntax.package_files``), in one order ``default_rng([seed, 4])``
    draws, every fragment of each file or, given ``config.per_file``, at most as many drawn at random from its
    own (kept in the file's order), until there are as many as asked (fewer if the files have fewer)."""
    low, high = min(b.low for b in config.bands), max(b.high for b in config.bands)
    files = [(LIBRARY / name, name) for name in library_files("train")] + syntax.package_files(config.train_packages)
    rng = np.random.default_rng([seed, 4])
    train: list[Fragment] = []
    with _uncollected():
        for i in rng.permutation(len(files)):
            path, name = files[i]
            found = syntax.file_fragments(path, name, low, high)
            if config.per_file:
                chosen = np.sort(rng.choice(len(found), min(config.per_file, len(found)), replace=False))
                found = [found[j] for j in chosen]
            train += found
            if len(train) >= config.train_fragments:
                break
    return tuple(train[: config.train_fragments])


def population(config: Config, side: Side = "test") -> list[list[Fragment]]:
    """Every fragment of ``side``'s files (``syntax.fragments``, in sorted file order) in each of ``config``'s
    bands (the first band that holds its size) whose tree fits the band: ``held(side, ceiling)``'s fragments,
    the bands a filter over them, so that every set of bands within ``CEILING`` tokens reads one population."""
    return [list(found) for found in _population(config.bands, side)]


CACHE = "APPLICATIVE_CACHE"
"""The environment variable naming the folder where the populations are kept (default ~/.cache/applicative)."""

CEILING = max(band.high for band in Config().bands)
"""The most tokens of the fragments a population holds (512, ``Config``'s largest band's), or a band's above it."""


@functools.lru_cache(maxsize=4)
def _population(bands: tuple[Band, ...], side: Side) -> tuple[tuple[Fragment, ...], ...]:
    found: list[list[Fragment]] = [[] for _ in bands]
    with _uncollected():
        for fragment in held(side, max(CEILING, *(b.high for b in bands))):
            index = band_of(fragment, bands)
            if index is not None and _within(fragment.tree, bands[index]):  # held's are laid_out: they fit
                found[index].append(fragment)
    return tuple(tuple(f) for f in found)


@functools.lru_cache(maxsize=2)
def held(side: Side, ceiling: int) -> tuple[Fragment, ...]:
    """Every fragment of 1 to ``ceiling`` tokens of ``side``'s files whose layout is ``laid_out`` (within a
    band's depth), in ``syntax.fragments``'s order. Read once a process (the held-out files' take about half
    a minute) and kept on disk for the next (``cached``, under ``$APPLICATIVE_CACHE``, else
    ~/.cache/applicative); a process that finds another making it waits for it, then reads it."""
    files = [(name, (LIBRARY / name).stat()) for name in library_files(side)]
    modules = (syntax, sys.modules[__name__], model, trees_data, dyadic)  # the code that reads and keeps them
    code = b"".join(Path(m.__file__ or "").read_bytes() for m in modules)
    key = hashlib.sha256(
        json.dumps(
            [sys.version, str(LIBRARY), ceiling, side, [(n, f.st_size, f.st_mtime_ns) for n, f in files]]
        ).encode()
        + code
    ).hexdigest()
    folder = Path(os.environ.get(CACHE) or Path.home() / ".cache" / "applicative")

    def make() -> tuple[tuple[Fragment, ...]]:
        return (tuple(f for f in syntax.fragments(1, ceiling, side) if laid_out(f.tree)),)

    (fragments,) = cached(folder / f"population-{side}-{key[:16]}.json.gz", key, make)
    return fragments


def cached(
    path: Path, key: str, make: Callable[[], tuple[tuple[Fragment, ...], ...]]
) -> tuple[tuple[Fragment, ...], ...]:
    """The groups of fragments kept at ``path`` if its file was written for ``key`` and holds them whole
    (a SHA-256 of its fragments checked); else ``make()``'s, kept there (atomically) for the next process.
    ``key`` names everything the fragments depend on: for a population, the Python, its files' names,
    sizes and times, the most tokens and the code that reads them, so that a change of any makes it anew.
    One process makes them at a time (a lock beside the file, taken only to make them): another waits, then
    reads them."""
    if (kept := _kept(path, key)) is not None:
        return kept
    path.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(path.with_name(path.name + ".lock")):
        if (kept := _kept(path, key)) is not None:  # made by the process that held the lock before
            return kept
        with _uncollected():
            groups = make()
            text = json.dumps([[[f.name, f.tokens, _list(f.tree)] for f in group] for group in groups]).encode()
        # zlib's default level, not gzip's 9: the held-out population (64 MiB of JSON) in 1.8 s where 7.3, 6.3 MiB
        # where 5.8, read back as fast
        with atomic_file(path) as raw, gzip.open(raw, "wb", compresslevel=6) as file:
            file.write(json.dumps({"key": key, "sha256": hashlib.sha256(text).hexdigest()}).encode() + b"\n" + text)
    return groups


def _kept(path: Path, key: str) -> tuple[tuple[Fragment, ...], ...] | None:
    """The groups kept at ``path`` for ``key``; None if the file is absent, truncated, altered or another's."""
    try:
        with gzip.open(path, "rb") as file, _uncollected():
            header, text = file.read().split(b"\n", 1)
            if json.loads(header) == {"key": key, "sha256": hashlib.sha256(text).hexdigest()}:
                return tuple(tuple(Fragment(name, tuple(tokens), _node(tree)) for name, tokens, tree in group)
                             for group in json.loads(text))  # fmt: skip
    except (OSError, EOFError, ValueError, KeyError, TypeError):
        pass
    return None


@contextlib.contextmanager
def _uncollected() -> Iterator[None]:
    """Python's cycle collector paused while fragments are made: it would pass over their millions of nodes
    again and again, half the time taken or more (here, the held-out population made 46 -> 21 s, read back
    13 -> 4 s; 32,000 training fragments read 6.7 -> 3.1 s)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _list(node: Node) -> list[Any]:
    return [node.label, *node.span, [_list(child) for child in node.children]]


def _node(item: list[Any]) -> Node:
    label, first, last, children = item
    return Node(label, (first, last), tuple(map(_node, children)))


def sample(population: Sequence[Sequence[Fragment]], n: int, seed: int) -> list[list[Fragment]]:
    """``n`` fragments of each band's population (all of them if it has fewer), a simple random sample drawn by
    ``default_rng([seed, 2])`` without replacement, in the population's order."""
    rng = np.random.default_rng([seed, 2])
    drawn = []
    for fragments in population:
        chosen = np.sort(rng.choice(len(fragments), min(n, len(fragments)), replace=False))
        drawn.append([fragments[i] for i in chosen])
    return drawn


def band_of(fragment: Fragment, bands: Sequence[Band]) -> int | None:
    """The index of the first band that holds the fragment's size, None if none does."""
    return next((i for i, b in enumerate(bands) if b.low <= len(fragment.tokens) <= b.high), None)


def pools(data: Data, config: Config) -> list[list[Fragment]]:
    """The training fragments of each band whose trees fit it, in the data's order."""
    found: list[list[Fragment]] = [[] for _ in config.bands]
    for fragment in data.train:
        index = band_of(fragment, config.bands)
        if index is not None and fits(fragment.tree, config.bands[index]):
            found[index].append(fragment)
    return found


def with_vocabularies(config: Config, fragments: Sequence[Fragment]) -> Config:
    """``config`` with the token kinds and labels of the training fragments (an unknown one last)."""
    kinds = syntax.vocabulary(k for f in fragments for k in f.tokens)
    labels = syntax.vocabulary(n.label for f in fragments for n in syntax.nodes(f.tree))
    return dataclasses.replace(config, kinds=tuple(kinds), labels=tuple(labels))


# Minibatches


class Minibatches:
    """The draw of a ``Drawn`` source, ``draw(seed, step) -> (inputs, targets)``: inputs (token inputs,
    lengths, ``Nodes``) and targets (labels, tags) of a ``Batch``, host arrays but the layouts.

    Step s's minibatch is drawn by ``default_rng([seed, s])``: a band (with the probability of its
    ``shares``), then ``band.batch`` fragments of its pool (with replacement). A function of (seed, step)
    alone, so a resumed run draws what the uninterrupted one drew."""

    def __init__(self, pools: Sequence[Sequence[Fragment]], shares: np.ndarray, config: Config) -> None:
        self.pools, self.config = pools, config
        self.p = shares / shares.sum()

    def choice(self, seed: int, step: int) -> tuple[int, list[Fragment]]:
        """Step ``step``'s band and fragments."""
        rng = np.random.default_rng([seed, step])
        b = int(rng.choice(len(self.config.bands), p=self.p))
        chosen = rng.choice(len(self.pools[b]), self.config.bands[b].batch)
        return b, [self.pools[b][i] for i in chosen]

    def __call__(self, seed: int, step: int) -> tuple[Any, Any]:
        b, fragments = self.choice(seed, step)
        batch = make_batch(fragments, self.config, self.config.bands[b])
        return (batch.inputs, batch.lengths, batch.nodes), (batch.labels, batch.tags)


def held_out(data: Data, config: Config) -> list[list[Batch]]:
    """Band by band, the held-out fragments whose trees fit the band in minibatches of ``band.batch`` (the
    last filled with repeats): the same minibatches at every epoch, so their loss is a curve
    (``runs.held_out_loss``). Bands without held-out fragments have no minibatch."""
    found = []
    for band, fragments in zip(config.bands, data.test, strict=True):
        usable = [f for f in fragments if fits(f.tree, band)]
        batches = []
        for start in range(0, len(usable), band.batch):
            chunk = [usable[(start + i) % len(usable)] for i in range(band.batch)]
            batches.append(make_batch(chunk, config, band))
        found.append(batches)
    return found
