"""Training the seq2seq baseline through the learning layer (``applicative.training.fit``), and reading a run
back.

    train(fragments, steps, ...)   a trained ``Seq2Seq``: minibatches of a length bucket each (``batches.Draws``),
                                   a run directory (checkpoints, ``--resume``, a time budget, SIGTERM), a line and
                                   optionally the held-out loss every ``log_every`` steps
    Data                           the fragments a command-line run trains, watches and is tested on
    load(directory)                a run's ``Seq2Seq`` and its description, from its checkpoint
    learner, optimiser             the ``Learner`` and the optimiser of a run: equal settings give the same
                                   objects, so the runs of one process share their compiled steps

A run's description (config.json) holds everything that makes it: the model's and the optimiser's settings,
the steps, the seed, the steps an epoch, a digest of its training and held-out fragments (and the ``Data``
settings that drew them, for a command-line run), and the vocabularies and capacities they gave, which is
what ``load`` reads the model back with. A resume with other settings or other fragments is refused.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import itertools
import json
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax import Array

from applicative.examples import syntax
from applicative.examples.common import Optimisation
from applicative.examples.seq2seq.batches import Bucket, Draws, buckets, vocabularies
from applicative.examples.seq2seq.model import Config, Seq2Seq, Seq2SeqModel, batch_logits, batch_loss, init_model
from applicative.examples.syntax import Fragment
from applicative.training import Drawn, Learner, fit, restore
from applicative.training.files import CONFIG

__all__ = ["Data", "HeldOut", "describe", "description", "learner", "load", "optimiser", "train"]


@dataclass(frozen=True)
class Data:
    """What a command-line run draws (``syntax.fragments``): ``train_fragments`` fragments of ``min_tokens`` to
    ``max_tokens`` tokens of the training files in the order of the run's seed, the ``held_out`` after them
    (the loss an epoch watches), and the first ``test_fragments`` of the held-out files (``evaluate``)."""

    min_tokens: int = 8
    max_tokens: int = 32
    train_fragments: int = 2000
    held_out: int = 100
    test_fragments: int = 200

    def __post_init__(self) -> None:
        if not 1 <= self.min_tokens <= self.max_tokens or self.train_fragments < 1:
            raise ValueError(
                f"seq2seq: needs 1 <= min_tokens <= max_tokens and training fragments, got {self.min_tokens}, "
                f"{self.max_tokens} and {self.train_fragments}"
            )
        if self.held_out < 0 or self.test_fragments < 0:
            raise ValueError(f"seq2seq: held_out = {self.held_out} and test_fragments = {self.test_fragments} < 0")

    def training(self, seed: int) -> tuple[list[Fragment], list[Fragment]]:
        """The training fragments and the held-out ones after them (fewer if the files hold fewer)."""
        found = itertools.islice(syntax.fragments(self.min_tokens, self.max_tokens, "train", seed),
                                 self.train_fragments + self.held_out)  # fmt: skip
        drawn = list(found)
        return drawn[: self.train_fragments], drawn[self.train_fragments :]

    def test(self) -> list[Fragment]:
        """The test fragments: the first of the held-out files, in sorted order."""
        return list(itertools.islice(syntax.fragments(self.min_tokens, self.max_tokens, "test"), self.test_fragments))


Sources = tuple[Array, Array, Array]
"""A minibatch's inputs: token ids, their lengths, the decoder's input ids."""
Targets = tuple[Array, Array]
"""A minibatch's targets: the output ids, their lengths."""


def _loss(model: Seq2SeqModel, inputs: Sources, targets: Targets) -> Array:
    """``batch_loss`` of a minibatch as ``batches.Draws`` makes it: (sources, lengths, decoder inputs), (outputs,
    target lengths)."""
    return batch_loss(model, *inputs, *targets)


def _predict(model: Seq2SeqModel, inputs: Sources) -> Array:
    """``batch_logits`` of (sources, lengths, decoder inputs)."""
    return batch_logits(model, *inputs)


def _init(seed: int, *, config: Config, kinds: int, symbols: int) -> Seq2SeqModel:
    return init_model(jax.random.key(seed), config, kinds, symbols)


@functools.lru_cache(maxsize=16)
def learner(config: Config, kinds: int, symbols: int) -> Learner[Seq2SeqModel, Sources, Targets]:
    """The model of ``config``'s sizes over ``kinds`` token kinds and ``symbols`` output symbols as the learning
    layer trains it: ``init_model`` of ``jax.random.key(seed)``, ``batch_loss`` on a minibatch. The same object
    for the same arguments (its compiled steps are reused)."""
    return Learner(functools.partial(_init, config=config, kinds=kinds, symbols=symbols), _loss, _predict)


@functools.lru_cache(maxsize=16)
def _optimiser(optimisation: Optimisation, steps: int) -> optax.GradientTransformation:
    return optimisation.optimiser(steps)


def optimiser(config: Config, steps: int) -> optax.GradientTransformation:
    """AdamW on a warm-up and a cosine decay over ``steps`` updates (``warmup_cosine``) with ``config``'s
    settings; the same object for the same settings."""
    return _optimiser(config.optimisation, steps)


DEFAULT = Config()
"""The baseline's settings: the tree parser's sizes and optimiser."""

_mean_loss = jax.jit(batch_loss)


class HeldOut:
    """``validate``: the mean cross entropy a model gives the target symbols of held-out fragments (teacher
    forced, as the training loss), in chunks of ``batch`` at the fragments' capacities (one compile). The
    fragments with a label outside ``symbols`` are left out (``count`` says how many are kept); ValueError if
    none is left."""

    def __init__(self, fragments: Sequence[Fragment], kinds: dict[str, int], symbols: Sequence[str], batch: int):
        known = set(symbols)
        kept = [f for f in fragments if all("(" + n.label in known for n in syntax.nodes(f.tree))]
        if not kept:
            raise ValueError("seq2seq: no held-out fragment has only the training labels")
        self.count = len(kept)
        (whole,) = buckets(kept, kinds, symbols, 0)  # one bucket, at the fragments' capacities
        padding = -len(kept) % batch  # copies of the first row that count nothing (target length 0)
        rows = np.concatenate([np.arange(len(kept)), np.zeros(padding, np.int64)])
        self.chunks = [Bucket(*(a[rows[i : i + batch]] for a in whole)) for i in range(0, len(rows), batch)]
        self.chunks[-1].target_lengths[batch - padding :] = 0
        self.weights = np.array([np.sum(chunk.target_lengths) for chunk in self.chunks], np.float64)

    def __call__(self, model: Seq2SeqModel) -> float:
        losses = [float(_mean_loss(model, *(jnp.asarray(a) for a in chunk))) for chunk in self.chunks]
        return float(np.dot(losses, self.weights) / np.sum(self.weights))


def _digest(fragments: Sequence[Fragment]) -> str:
    """A digest of the fragments: their names, tokens and trees, in order."""
    digest = hashlib.sha256()
    for fragment in fragments:
        digest.update(repr(fragment).encode())
    return digest.hexdigest()


def _capacities(grouped: Sequence[Bucket]) -> tuple[int, int]:
    """The largest token and target capacities of the buckets."""
    return max(b.sources.shape[1] for b in grouped), grouped[-1].inputs.shape[1]


def describe(
    config: Config,
    steps: int,
    seed: int,
    log_every: int,
    fragments: Sequence[Fragment],
    held_out: Sequence[Fragment],
    data: Data | None,
    vocabulary: tuple[dict[str, int], Sequence[str]],
    grouped: Sequence[Bucket],
) -> str:
    """The run's description (config.json): a JSON object of everything that makes the run (the module's
    docstring); ``vocabulary`` and ``grouped``, the fragments' vocabularies and buckets."""
    kinds, symbols = vocabulary
    run = {
        "example": "seq2seq",
        "config": asdict(config),
        "steps": steps,
        "seed": seed,
        "log_every": log_every,
        "data": None if data is None else asdict(data),
        "fragments": {"count": len(fragments), "sha256": _digest(fragments)},
        "held_out": {"count": len(held_out), "sha256": _digest(held_out)},
        "kinds": list(kinds),
        "symbols": list(symbols),
        "capacities": list(_capacities(grouped)),
    }
    return json.dumps(run, indent=1)


def train(
    fragments: Sequence[Fragment],
    steps: int,
    *,
    config: Config = DEFAULT,
    seed: int = 0,
    log: Callable[[str], None] = print,
    log_every: int = 50,
    out: Path | None = None,
    resume: bool = False,
    seconds: float | None = None,
    progress: bool = True,
    held_out: Sequence[Fragment] = (),
    data: Data | None = None,
) -> Seq2Seq:
    """Train on ``steps`` batches of ``config.batch`` fragments drawn from ``fragments`` into the run directory
    ``out`` (None: a temporary one, removed after) with ``applicative.training.fit``: a checkpoint and a line
    (the mean loss, and the loss on ``held_out`` if any: ``HeldOut``) every ``log_every`` steps, and at the end;
    ``resume`` continues the run in ``out``; ``seconds`` is a time budget (the run stops, checkpointed, at the
    first line past it); ``progress``, a progress bar. ``log`` takes the line that describes the data. The
    vocabularies are the fragments' token kinds and labels (``batches.vocabularies``); ``data``, the settings
    that drew the fragments, is only recorded (a command-line run's).

    The fragments fall into length buckets (``batches.buckets``), each padded to fixed capacities; step s
    takes the minibatch ``batches.Draws`` gives it (a bucket with the probability of its share of the
    fragments, then a batch uniformly from it), so every fragment is as likely to be drawn, and the step
    compiles once per bucket. The model starts from ``init_model(jax.random.key(seed), ...)``. A SIGTERM stops
    the run checkpointed (``Preempted``). ValueError: no fragments, no steps, a ``log_every`` or a batch below 1;
    FileExistsError: ``out`` holds a run and ``resume`` is not set; also ``fit``'s errors."""
    if not fragments or steps < 1:
        raise ValueError(f"seq2seq: needs fragments and steps, got {len(fragments)} fragments and {steps} steps")
    if log_every < 1:
        raise ValueError(f"seq2seq: log_every = {log_every} must be positive")
    kinds, symbols = vocabularies(fragments)
    grouped = buckets(fragments, kinds, symbols, config.first_bucket)
    described = ", ".join(bucket.describe() for bucket in grouped)
    log(f"{len(fragments)} fragments, {len(kinds)} token kinds, {len(symbols)} symbols; buckets {described}")
    description = describe(config, steps, seed, log_every, fragments, held_out, data, (kinds, symbols), grouped)
    source = Drawn(Draws(grouped, config.batch), log_every)
    validate = HeldOut(held_out, kinds, symbols, config.batch) if held_out else None
    model, opt = learner(config, len(kinds), len(symbols)), optimiser(config, steps)
    with contextlib.ExitStack() as stack:
        directory = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="seq2seq-"))) if out is None else out
        state = fit(model, opt, source, directory, description=description, steps=steps, seed=seed, resume=resume,
                    progress=progress, validate=validate, seconds=seconds)  # fmt: skip
    return Seq2Seq(state.model, kinds, symbols, *_capacities(grouped), tuple(state.losses), state.seconds)


def _config(stored: dict[str, Any]) -> Config:
    """The ``Config`` of its JSON fields (``asdict``'s: the optimisation a nested object)."""
    return Config(**{**stored, "optimisation": Optimisation(**stored["optimisation"])})


def description(directory: str | Path) -> dict[str, Any]:
    """The description (config.json, parsed) of the seq2seq run in ``directory``. FileNotFoundError when there
    is no run there; ValueError when it is not a seq2seq run's."""
    path = Path(directory) / CONFIG
    if not path.exists():
        raise FileNotFoundError(f"no trained run at {directory}: {CONFIG} is missing")
    try:
        run = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(run, dict) or run.get("example") != "seq2seq":
            raise ValueError("not a seq2seq run")
        _config(run["config"])
        for key, kind in [("steps", int), ("seed", int), ("log_every", int), ("kinds", list), ("symbols", list),
                          ("capacities", list)]:  # fmt: skip
            if not isinstance(run[key], kind):
                raise TypeError(f"{key} is {run[key]!r}")
    except (ValueError, KeyError, TypeError) as error:
        raise ValueError(f"{path} does not describe a seq2seq run ({type(error).__name__}: {error})") from error
    return run


def load(directory: str | Path) -> tuple[Seq2Seq, dict[str, Any]]:
    """The run in ``directory`` as ``train`` returned it (its checkpoint's state, the seconds of all its
    sessions), and its description (``description``). FileNotFoundError when there is no run there;
    ValueError when its files are not a seq2seq run's or do not agree."""
    run = description(directory)
    config, kinds, symbols = _config(run["config"]), run["kinds"], tuple(run["symbols"])
    state = restore(directory, learner(config, len(kinds), len(symbols)), optimiser(config, run["steps"]), run["seed"])
    vocabulary = {kind: i for i, kind in enumerate(kinds)}
    tokens, steps = run["capacities"]
    return Seq2Seq(state.model, vocabulary, symbols, tokens, steps, tuple(state.losses), state.seconds), run
