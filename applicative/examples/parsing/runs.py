"""A run of the parser: trained by ``applicative.training.fit`` into a run directory, tested band by band on
the held-out files against the right-branching tree and the seq2seq baseline, read back.

    train(steps, seed, config, ...) -> (Parser, Config, Result)   the parser, its baseline, their tests
    evaluate(DIR) -> Result         the test of a run read back (the parser and the right-branching tree)
    load(DIR) -> (Parser, Config)   a run's parser and its config, vocabularies included
    Run                             a run's settings, its directory's config.json

A run directory is every model's (``applicative.training``): ``config.json`` holds ``Run`` (the steps, the
seed, the steps an epoch and the ``Config`` with the vocabularies the data gave, so the directory alone says
how to rebuild the parser and its data), ``checkpoint.npz`` the parameters, the optimiser's state, the losses
and the held-out curve (the teacher-forced loss on fixed minibatches of the held-out fragments, every
``VALIDATE_EVERY`` epochs).
The seq2seq baseline (``seq2seq.train``) trains beside it, into the run's ``seq2seq`` folder (a run of its own,
resumed with the parser's); ``evaluate`` leaves it out.
"""

from __future__ import annotations

import contextlib
import functools
import json
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import NamedTuple

import jax
import numpy as np
import optax
from jax import Array

from applicative.examples import seq2seq, syntax
from applicative.examples.common import Optimisation
from applicative.examples.parsing import testing
from applicative.examples.parsing.batches import Data, Minibatches, held_out, load_data, pools, with_vocabularies
from applicative.examples.parsing.decoding import parse
from applicative.examples.parsing.model import Band, Batch, Config, Nodes, Parser, init_parser, loss, rounds
from applicative.examples.syntax import Fragment, Node
from applicative.training import Drawn, Learner, fit, restore
from applicative.training.files import CHECKPOINT, CONFIG, holding_run
from applicative.training.steps import make_update

__all__ = [
    "PER_EPOCH", "STEPS", "VALIDATE_EVERY", "BandResult", "Result", "Run", "evaluate", "held_out_loss", "learner",
    "load", "train",
]  # fmt: skip

STEPS = 5000  # the default run's training steps: 13 minutes of training, 17 in all, on a 2-core CPU
PER_EPOCH = 100  # steps an epoch: a line, a checkpoint
VALIDATE_EVERY = 5  # epochs between held-out losses (and the last): one takes 6 s on a 2-core CPU, 5 minutes of
# the default run if every epoch had one


@dataclass(frozen=True)
class Run:
    """A run's settings: ``config.json`` of its directory (``description``), read back by ``read``."""

    steps: int = STEPS
    seed: int = 0
    per_epoch: int = PER_EPOCH
    config: Config = field(default_factory=Config)

    def description(self) -> str:
        return json.dumps({"example": "parsing", **asdict(self)}, indent=1)

    @staticmethod
    def read(directory: Path) -> Run:
        """The settings in ``directory``'s config.json. FileNotFoundError when there is none; ValueError when
        it is not a parsing run's."""
        path = Path(directory) / CONFIG
        if not path.exists():
            raise FileNotFoundError(f"no trained run at {directory}: {CONFIG} is missing")
        try:
            raw = json.loads(path.read_text(encoding="utf-8"))
            if raw.pop("example") != "parsing":
                raise ValueError("another example's run")
            stored = raw.pop("config")
            if "train_packages" not in stored:
                raise ValueError("a run of an older version, whose training fragments are drawn no more: train anew")
            config = Config(
                **{**stored, "bands": tuple(Band(*b) for b in stored["bands"]),
                   "optimisation": Optimisation(**stored["optimisation"])}
                | {key: tuple(stored[key]) for key in ("train_share", "kinds", "labels", "train_packages")}
            )
            return Run(**raw, config=config)
        except (ValueError, KeyError, TypeError, AttributeError) as error:
            raise ValueError(f"{path} does not describe a run of the parser ({error})") from error


class BandResult(NamedTuple):
    """The figures of the parser and of its baselines on one band's test fragments (``testing.measure``: with
    95% intervals), the parser's also on the fragments training saw (same tokens, same tree) and on the others."""

    band: Band
    tokens: tuple[int, int, int]  # the fragments' token counts: min, median, max
    parser: testing.Measured
    right_branching: testing.Measured
    seq2seq: testing.Measured | None  # None: no baseline, or a band longer than it trains on
    seconds: float  # the parser's decoding, all fragments of the band
    seq2seq_seconds: float  # the baseline's
    unseen: testing.Measured  # the parser on the fragments training did not see
    seen: testing.Measured  # and on those it saw
    files: int  # the files the band's fragments come from


class Result(NamedTuple):
    """What a training run achieved."""

    initial_loss: float
    final_loss: float
    train_fragments: tuple[int, ...]  # in each band
    bands: tuple[BandResult, ...]  # none when the run stopped before its last step
    compilations: int  # of the training step: one a band (0: a run read back)
    seconds: float  # training the parser
    seq2seq_seconds: float  # training the baseline
    steps: int  # trained: the run's steps, or fewer when it stopped (a budget) before its end


Inputs = tuple[Array, Array, Nodes]
"""A round's inputs (``Batch``'s first three fields): token inputs, lengths, the nodes built so far."""
Targets = tuple[Array, Array]
"""A round's targets (``Batch``'s last two): every node's label, every token's tag to each node."""


@functools.lru_cache(maxsize=8)
def learner(config: Config) -> Learner[Parser, Inputs, Targets, tuple[Array, Array]]:
    """The parser as ``fit`` trains it: ``init_parser`` of ``PRNGKey(seed)``, ``loss`` on a ``Batch`` given as
    inputs (token inputs, lengths, ``Nodes``) and targets (labels, tags). One value a config, so that every
    run of a config shares its compiled step."""

    def training_loss(parser: Parser, inputs: Inputs, targets: Targets) -> Array:
        return loss(parser, Batch(*inputs, *targets))

    def predict(parser: Parser, inputs: Inputs) -> tuple[Array, Array]:
        return rounds(parser, *inputs)

    return Learner(lambda seed: init_parser(jax.random.PRNGKey(seed), config), training_loss, predict)


@functools.lru_cache(maxsize=8)
def _optimiser(config: Config, steps: int) -> optax.GradientTransformation:
    return config.optimiser(steps)


_loss = jax.jit(loss)
_DEFAULT = Config()


def held_out_loss(parser: Parser, batches: Sequence[Sequence[Batch]]) -> float:
    """The mean over bands of the mean teacher-forced loss of their held-out minibatches (``batches.held_out``;
    a band without any is left out)."""
    means = [np.mean([float(_loss(parser, batch)) for batch in band]) for band in batches if band]
    return float(np.mean(means))


def train(
    steps: int,
    seed: int = 0,
    config: Config = _DEFAULT,
    data: Data | None = None,
    seq2seq_steps: int | None = None,
    log: Callable[[str], None] = print,
    progress: bool = True,
    *,
    out: Path | None = None,
    resume: bool = False,
    seconds: float | None = None,
    per_epoch: int = PER_EPOCH,
    validate_every: int = VALIDATE_EVERY,
) -> tuple[Parser, Config, Result]:
    """Train the parser ``steps`` batches (and the seq2seq baseline ``seq2seq_steps``, the same by
    default; 0: no baseline) on the training files' fragments, then test both and the
    right-branching tree on the held-out files' fragments, band by band. Returns the parser, the
    config with its vocabularies, and the result.

    The parser trains through ``fit`` into the run directory ``out`` (None: a temporary one): a line and a
    checkpoint every ``per_epoch`` steps, a held-out loss every ``validate_every`` epochs and at the last;
    ``resume`` continues the run there (with the same settings: others are refused), ``seconds`` is a budget
    (the run stops, checkpointed, at the first epoch's end past it; nothing is tested then, and
    ``Result.steps`` says where it stopped). SIGTERM checkpoints and raises ``Preempted``. ValueError: no
    step, a share for each band missing, no training fragment in the bands."""
    if steps < 1:
        raise ValueError(f"parsing: training needs at least one step, got {steps}")
    if len(config.train_share) != len(config.bands):
        raise ValueError(f"parsing: {len(config.train_share)} training shares for {len(config.bands)} bands")
    data = load_data(config, seed) if data is None else data
    pooled = pools(data, config)
    shares = np.array([share if pool else 0.0 for share, pool in zip(config.train_share, pooled, strict=True)])
    if not shares.sum():
        raise ValueError("parsing: no training fragment in the bands")
    config = with_vocabularies(config, data.train)
    log(
        f"{len(data.train)} training fragments ("
        + ", ".join(f"{len(p)} of {b.low}-{b.high} tokens" for p, b in zip(pooled, config.bands, strict=True))
        + f"); {len(config.kinds)} token kinds, {len(config.labels)} labels"
    )
    model, opt = learner(config), _optimiser(config, steps)
    held = held_out(data, config)
    with tempfile.TemporaryDirectory() if out is None else contextlib.nullcontext(str(out)) as directory:
        state = fit(
            model, opt, Drawn(Minibatches(pooled, shares, config), per_epoch), directory,
            description=Run(steps, seed, per_epoch, config).description(), steps=steps, seed=seed, resume=resume,
            progress=progress, validate=(lambda p: held_out_loss(p, held)) if any(held) else None,
            validate_every=validate_every, seconds=seconds,
        )  # fmt: skip
    compilations = make_update(model, opt, seed)._cache_size()  # type: ignore[attr-defined]
    parser, trained = state.model, tuple(len(p) for p in pooled)
    if state.step < steps:
        result = Result(state.losses[0], state.losses[-1], trained, (), compilations, state.seconds, 0.0, state.step)
        return parser, config, result

    seq2seq_steps = steps if seq2seq_steps is None else seq2seq_steps
    baseline, seq2seq_seconds = None, 0.0
    if seq2seq_steps:
        began = time.perf_counter()
        trainable = [f for pool in pooled for f in pool if len(f.tokens) <= config.seq2seq_tokens]
        alike = seq2seq.Config(
            width=config.width,
            hidden=config.hidden,
            heads=config.heads,
            head_features=config.head_features,
            encoder_layers=config.reader_layers,
            decoder_layers=config.builder_layers,
            batch=config.batch,
            optimisation=config.optimisation,
        )  # the tree parser's sizes and optimiser
        beside = None if out is None else Path(out) / "seq2seq"  # the baseline's own run, in the parser's
        again = resume and beside is not None and (beside / CHECKPOINT).exists()
        baseline = seq2seq.train(trainable, seq2seq_steps, config=alike, seed=seed, log=log, out=beside,
                                 resume=again, progress=progress)  # fmt: skip
        seq2seq_seconds = time.perf_counter() - began
    bands = _tested(parser, config, data, baseline, data.test)
    losses = state.losses
    return parser, config, Result(losses[0], losses[-1], trained, bands, compilations, state.seconds, seq2seq_seconds,
                                  state.step)  # fmt: skip


def _tested(
    parser: Parser, config: Config, data: Data, baseline: seq2seq.Seq2Seq | None, test: Sequence[Sequence[Fragment]]
) -> tuple[BandResult, ...]:
    """The parser, the right-branching tree and the baseline (if any, on the bands it trains on) on each band's
    ``test`` fragments; seen and unseen ones apart (seen: in ``data.train``)."""
    common = Counter(n.label for f in data.train for n in syntax.nodes(f.tree)).most_common(1)[0][0]
    root = Counter(f.tree.label for f in data.train).most_common(1)[0][0]
    seen = testing.seen_in(data.train)
    results = []
    for band, fragments in zip(config.bands, test, strict=True):
        if not fragments:
            continue
        gold, files = [f.tree for f in fragments], [testing.file_of(f) for f in fragments]
        began = time.perf_counter()
        parsed = parse(parser, config, fragments, band)
        decoding = time.perf_counter() - began
        began = time.perf_counter()
        tried = baseline is not None and band.high <= config.seq2seq_tokens
        baseline_trees = seq2seq.parse(baseline, fragments) if tried and baseline is not None else None
        baseline_decoding = time.perf_counter() - began
        sizes = np.array([len(f.tokens) for f in fragments])
        old = [(f.tokens, f.tree) in seen for f in fragments]
        unseen, seen_ones = (_among(parsed, gold, files, [s == was_seen for s in old]) for was_seen in (False, True))
        results.append(
            BandResult(
                band,
                (int(sizes.min()), int(np.median(sizes)), int(sizes.max())),
                testing.measure(parsed, gold, files),
                testing.measure([syntax.right_branching(len(f.tokens), root, common) for f in fragments], gold, files),
                None if baseline_trees is None else testing.measure(baseline_trees, gold, files),
                decoding,
                baseline_decoding,
                unseen,
                seen_ones,
                len(set(files)),
            )
        )
    return tuple(results)


def _among(predicted: list[Node | None], gold: list[Node], files: list[str], chosen: list[bool]) -> testing.Measured:
    """``testing.measure`` of the fragments ``chosen``."""
    kept = [i for i, c in enumerate(chosen) if c]
    return testing.measure([predicted[i] for i in kept], [gold[i] for i in kept], [files[i] for i in kept])


def load(directory: str | Path) -> tuple[Parser, Config]:
    """The parser of the run in ``directory`` (its last checkpoint, read back with ``restore``, checked
    against the shapes its config.json gives) and its config, vocabularies included. FileNotFoundError when
    there is no run there; ValueError naming the file that is not a parsing run's."""
    out = Path(directory)
    with holding_run(out):
        run = Run.read(out)
        state = restore(out, learner(run.config), _optimiser(run.config, run.steps), run.seed)
    return state.model, run.config


def evaluate(
    directory: str | Path, data: Data | None = None, test: Sequence[Sequence[Fragment]] | None = None
) -> Result:
    """The test of the run in ``directory``: the parser (its last checkpoint), the right-branching tree and the
    seq2seq baseline if the run trained one (its ``seq2seq`` folder), band by band, on ``test`` (by default the
    run's own: ``data.test``, ``data`` by default loaded again from its config and seed); the losses and the
    training time are the run's."""
    out = Path(directory)
    with holding_run(out):
        run = Run.read(out)
        state = restore(out, learner(run.config), _optimiser(run.config, run.steps), run.seed)
    baseline = seq2seq.load(out / "seq2seq")[0] if (out / "seq2seq" / CHECKPOINT).exists() else None
    data = load_data(run.config, run.seed) if data is None else data
    bands = _tested(state.model, run.config, data, baseline, data.test if test is None else test)
    trained = tuple(len(p) for p in pools(data, run.config))
    return Result(state.losses[0], state.losses[-1], trained, bands, 0, state.seconds, 0.0, state.step)
