"""The seq2seq baseline's data: fragments as padded arrays of ids, grouped in length buckets, and the minibatch
of each training step.

    vocabularies(fragments)    the token kinds' ids and the output symbols of a training set
    sources_of, targets_of     the encoder's token ids, the decoder's inputs and outputs, padded, with lengths
    buckets(fragments, ...)    the training set in length buckets, each padded to its own fixed capacities
    Draws(buckets, batch)      ``Drawn``'s ``draw(seed, step)``: step s's minibatch, a bucket's rows

Padding every batch to the longest fragment's capacities cost several times the work of a few buckets of like
lengths, each at fixed capacities: one compiled step a bucket (a shape).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

from applicative.examples import syntax
from applicative.examples.seq2seq.linearise import CLOSE, END, TOKEN, linearise
from applicative.examples.syntax import Fragment

__all__ = [
    "Bucket",
    "Draws",
    "bucket_bounds",
    "buckets",
    "round_up",
    "sources_of",
    "target_size",
    "targets_of",
    "vocabularies",
]

Inputs = tuple[np.ndarray, np.ndarray, np.ndarray]
"""A minibatch's inputs: token ids (batch, tokens), their lengths (batch,), the decoder's inputs (batch, steps)."""
Targets = tuple[np.ndarray, np.ndarray]
"""A minibatch's targets: the decoder's outputs (batch, steps) and their lengths (batch,)."""


def round_up(n: int, multiple: int) -> int:
    return -(-n // multiple) * multiple


def vocabularies(fragments: Sequence[Fragment]) -> tuple[dict[str, int], tuple[str, ...]]:
    """The token kinds' ids (``syntax.vocabulary`` of the fragments' tokens: ``UNKNOWN`` last) and the output
    symbols by id: the open symbols of the fragments' labels (most frequent first), ``CLOSE``, ``TOKEN``,
    ``END``."""
    kinds = syntax.vocabulary(k for f in fragments for k in f.tokens)
    labels = list(syntax.vocabulary(n.label for f in fragments for n in syntax.nodes(f.tree)))
    return kinds, (*("(" + label for label in labels if label != syntax.UNKNOWN), CLOSE, TOKEN, END)


def target_size(fragment: Fragment) -> int:
    """The positions of a fragment's target: its linearised tree (2 * nodes + tokens) and the end symbol."""
    return 2 * sum(1 for _ in syntax.nodes(fragment.tree)) + len(fragment.tokens) + 1


def sources_of(fragments: Sequence[Fragment], kinds: dict[str, int], capacity: int) -> tuple[np.ndarray, np.ndarray]:
    """The fragments' token ids (fragments, ``capacity``), padded with 0, and their lengths."""
    ids = np.zeros((len(fragments), capacity), np.int32)
    for i, fragment in enumerate(fragments):
        ids[i, : len(fragment.tokens)] = syntax.ids(fragment.tokens, kinds)
    return ids, np.array([len(f.tokens) for f in fragments], np.int32)


def targets_of(
    fragments: Sequence[Fragment], symbols: Sequence[str], capacity: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The decoder's inputs (``START``, then the linearised tree) and outputs (the linearised tree,
    then ``END``), both (fragments, ``capacity``) padded with 0, and their lengths. A KeyError for a
    label outside ``symbols``."""
    index = {symbol: i for i, symbol in enumerate(symbols)}
    inputs = np.zeros((len(fragments), capacity), np.int32)
    outputs = np.zeros((len(fragments), capacity), np.int32)
    lengths = np.zeros(len(fragments), np.int32)
    for i, fragment in enumerate(fragments):
        written = [index[s] for s in linearise(fragment.tree, len(fragment.tokens))]
        inputs[i, : len(written) + 1] = [len(symbols), *written]
        outputs[i, : len(written) + 1] = [*written, index[END]]
        lengths[i] = len(written) + 1
    return inputs, outputs, lengths


class Bucket(NamedTuple):
    """Fragments of like lengths as arrays (``sources_of``, ``targets_of``): token ids (fragments, tokens) and
    their lengths, the decoder's inputs and outputs (fragments, steps) and the targets' lengths."""

    sources: np.ndarray
    lengths: np.ndarray
    inputs: np.ndarray
    outputs: np.ndarray
    target_lengths: np.ndarray

    def rows(self, chosen: np.ndarray) -> tuple[Inputs, Targets]:
        """The minibatch of the rows ``chosen``: (inputs, targets) as the learner reads them."""
        return (self.sources[chosen], self.lengths[chosen], self.inputs[chosen]), (
            self.outputs[chosen],
            self.target_lengths[chosen],
        )

    def describe(self) -> str:
        return f"{len(self.lengths)} of {self.sources.shape[1]} tokens x {self.inputs.shape[1]}"


def bucket_bounds(capacity: int, first: int) -> list[int]:
    """The target capacities of the length buckets: ``first``, twice that, ... while under two thirds
    of ``capacity``, then ``capacity`` (one bucket if ``first`` is 0)."""
    bounds, bound = [], first
    while bound > 0 and 3 * bound < 2 * capacity:
        bounds.append(bound)
        bound *= 2
    return [*bounds, capacity]


def buckets(fragments: Sequence[Fragment], kinds: dict[str, int], symbols: Sequence[str], first: int) -> list[Bucket]:
    """The fragments in length buckets by their targets (``target_size``): ``bucket_bounds`` of the longest
    rounded up to a multiple of 8, from ``first`` positions, the empty ones left out, shortest first. Each is
    padded to fixed capacities: its bound, and its longest fragment's tokens rounded up to a multiple of 8."""
    sizes = [target_size(f) for f in fragments]
    grouped, low = [], 0
    for bound in bucket_bounds(round_up(max(sizes), 8), first):
        members = [f for f, size in zip(fragments, sizes, strict=True) if low < size <= bound]
        low = bound
        if members:
            tokens = round_up(max(len(f.tokens) for f in members), 8)
            grouped.append(Bucket(*sources_of(members, kinds, tokens), *targets_of(members, symbols, bound)))
    return grouped


class Draws:
    """Step s's minibatch (``draw(seed, step)``, a ``Drawn`` source), as the seq2seq baseline has always drawn
    it: a generator ``numpy.random.default_rng(seed)`` picks at each step a bucket with the probability of its
    share of the fragments (``choice``), then ``batch`` of its rows uniformly, with replacement (``integers``),
    so every fragment is as likely to be drawn.

    The generator is sequential (how many numbers ``integers`` takes varies), so step s's minibatch is found by
    replaying the steps before it: from the last step asked for (a run asks in order, one step's draws a step),
    or from step 0 for an earlier one (a resumed run: the draws of the steps before its checkpoint, on the host,
    microseconds each). A function of (seed, step) alone, then, as ``Drawn`` needs. ValueError: a negative step."""

    def __init__(self, buckets: Sequence[Bucket], batch: int) -> None:
        if not buckets or batch < 1:
            raise ValueError(f"seq2seq: draws need buckets and a positive batch, got {len(buckets)} and {batch}")
        self.buckets = tuple(buckets)
        self.batch = batch
        counts = np.array([len(bucket.lengths) for bucket in self.buckets])
        self.shares = counts / counts.sum()
        self._at: dict[int, tuple[int, np.random.Generator]] = {}  # seed -> (the next step, the generator there)

    def picks(self, seed: int, step: int) -> tuple[int, np.ndarray]:
        """Step ``step``'s bucket and rows."""
        if step < 0:
            raise ValueError(f"seq2seq: no minibatch for step {step}")
        following, rng = self._at.get(seed, (0, None))
        if rng is None or following > step:
            following, rng = 0, np.random.default_rng(seed)
        while True:
            bucket = int(rng.choice(len(self.buckets), p=self.shares))
            chosen = rng.integers(0, len(self.buckets[bucket].lengths), self.batch)
            following += 1
            if following > step:
                self._at[seed] = (following, rng)
                return bucket, chosen

    def __call__(self, seed: int, step: int) -> tuple[Inputs, Targets]:
        bucket, chosen = self.picks(seed, step)
        return self.buckets[bucket].rows(chosen)
