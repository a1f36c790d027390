"""Training and testing the trees example through the learning layer (``applicative.training.fit``).

    train(steps, seed, config, out)   a run into ``out`` (None: a temporary directory), then its tests: ``Result``
    evaluate(directory)               a finished (or stopped) run read back (``restore``), tested again: ``Report``
    lines(result), report_lines(report)   what the command line prints

A run is a directory of ``fit``'s: config.json, the run's description (``describe``: the steps, the seed, the
steps of an epoch and every field of ``Config``), and checkpoint.npz, written every epoch and at the end. Its
minibatches come from ``data.draws`` (a function of (seed, step)), so a run stopped by a kill, SIGTERM or a
``seconds`` budget and resumed repeats an uninterrupted one bit for bit. Each epoch prints a line with the
held-out error: the leaf error of the model on the first ``test_batch`` trees of the first test set.
"""

from __future__ import annotations

import dataclasses
import json
import math
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import Array

from applicative import DenseTree
from applicative.examples.trees.data import draws, pool, test_sets
from applicative.examples.trees.model import (
    CLASSES,
    Config,
    TreeModel,
    baseline,
    learner,
    optimiser,
    predict,
    targets,
    with_values,
)
from applicative.training import State, fit, restore
from applicative.training.files import holding_run, read_config
from applicative.training.settings import from_dict, setting, to_dict
from applicative.training.steps import make_update

__all__ = [
    "DEFAULT",
    "PER_EPOCH",
    "STEPS",
    "Report",
    "Result",
    "Score",
    "config_of",
    "describe",
    "evaluate",
    "lines",
    "report_lines",
    "restored",
    "settings",
    "train",
]

STEPS = 150  # the default run's training steps
PER_EPOCH = 20  # steps of an epoch: a line, a held-out error and a checkpoint each
DEFAULT = Config()  # the default run's settings

_predict = jax.jit(predict)  # one compilation for every batch of test trees at one capacity


class Score(NamedTuple):
    """Leaf accuracies over all leaves of one test set."""

    name: str
    trees: int
    leaves: tuple[int, int, int]  # the trees' leaf counts: min, median, max
    accuracy: float
    baseline: float  # the plain-mean rule
    disputed: float  # the model on the leaves where the plain-mean rule is wrong


class Result(NamedTuple):
    """What a training run achieved."""

    initial_loss: float
    final_loss: float
    train_leaves: tuple[int, int, int]  # the training pool's leaf counts: min, median, max
    tests: tuple[Score, ...]  # the held-out syntax trees by band, then the random shapes
    compilations: int  # of the training step, for every shape it met (one)
    seconds: float
    steps: int = 0  # taken so far: fewer than asked when a budget or a kill stopped the run


class Report(NamedTuple):
    """A run read back and tested again (``evaluate``)."""

    steps: int  # taken so far
    of: int  # asked for
    initial_loss: float
    final_loss: float
    held_out: tuple[tuple[int, float], ...]  # (epoch, held-out leaf error)
    tests: tuple[Score, ...]
    seconds: float  # of training, all sessions


@dataclasses.dataclass(frozen=True)
class Run:
    """A run's settings, everything that decides its result: its description (config.json) and its command
    line's flags (``applicative.training.settings``)."""

    steps: int = setting(STEPS, help="training steps")
    seed: int = setting(0, help="random seed")
    per_epoch: int = setting(PER_EPOCH, help="steps an epoch")
    config: Config = setting(Config(), help="fields of Config as JSON")


def describe(steps: int, seed: int, config: Config, per_epoch: int = PER_EPOCH) -> str:
    """A run's description, config.json: a JSON object of its steps, seed, steps per epoch and ``config``."""
    return json.dumps({"example": "trees", **to_dict(Run(steps, seed, per_epoch, config))}, indent=2)


def settings(description: str) -> Run:
    """The settings of a run's description (``describe``). ValueError naming what is not one."""
    run = json.loads(description)
    if not isinstance(run, dict) or run.get("example") != "trees":
        raise ValueError("not a run of the trees example")
    missing = sorted({"steps", "seed", "config", "per_epoch"} - run.keys())
    if missing:
        raise ValueError(f"the run's description lacks {', '.join(missing)}")
    return from_dict(Run, run, besides=("example",))


def config_of(fields: dict[str, Any]) -> Config:
    """The ``Config`` of JSON fields (``dataclasses.asdict``'s, or a user's subset: the others default);
    ValueError naming a field it does not have."""
    return from_dict(Config, fields)


def _valid(trees: DenseTree[Array]) -> np.ndarray:
    """Which slots of a stack of trees hold leaves (trees, capacity)."""
    return np.asarray(jax.vmap(lambda t: t.valid())(trees))


def _leaf_counts(valid: np.ndarray) -> tuple[int, int, int]:
    """The least, median and largest leaf count of a stack of trees, from ``_valid``."""
    leaves = valid.sum(-1)
    return int(leaves.min()), int(np.median(leaves)), int(leaves.max())


def _answers(model: TreeModel, trees: DenseTree[Array], values: Array, config: Config) -> tuple[np.ndarray, ...]:
    """(predicted, labels, valid) of the stack ``trees`` holding ``values`` (trees, capacity), predicted
    ``config.test_batch`` trees at a time (batches of one size: one compilation)."""
    n = len(values)
    labels, valid = np.asarray(targets(trees, values)), _valid(trees)
    predicted = []
    for i in range(0, n, config.test_batch):
        chunk = jnp.arange(i, i + config.test_batch) % n
        batch = jax.tree_util.tree_map(lambda leaf, c=chunk: leaf[c], trees)
        predicted.append(np.asarray(_predict(model, with_values(batch, values[chunk]))))
    return np.concatenate(predicted)[:n], labels, valid


def _values(trees: DenseTree[Array], key: Array, config: Config) -> Array:
    """Standard normal values for every slot of the stack ``trees``, drawn from ``key``."""
    return jax.random.normal(key, (len(jax.tree_util.tree_leaves(trees)[0]), config.capacity), jnp.float32)


def _score(name: str, model: TreeModel, trees: DenseTree[Array], key: Array, config: Config) -> Score:
    """Leaf accuracies of the model and of the baseline over every valid leaf of ``trees``."""
    values = _values(trees, key, config)
    predicted, labels, valid = _answers(model, trees, values, config)
    right = (predicted == labels)[valid]
    base = (baseline(np.asarray(values), valid) == labels)[valid]
    disputed = float(right[~base].mean()) if not base.all() else math.nan
    return Score(name, len(labels), _leaf_counts(valid), float(right.mean()), float(base.mean()), disputed)


def _scores(model: TreeModel, tests: dict[str, DenseTree[Array]], seed: int, config: Config) -> tuple[Score, ...]:
    """``_score`` of every test set, their values drawn from keys split from the third of the seed's keys."""
    keys = jax.random.split(jax.random.split(jax.random.PRNGKey(seed), 3)[2], len(tests))
    named = zip(tests.items(), keys, strict=True)
    return tuple(_score(name, model, trees, key, config) for (name, trees), key in named)


def _held_out(tests: dict[str, DenseTree[Array]], seed: int, config: Config) -> Callable[[TreeModel], float]:
    """The held-out error: the leaf error of a model on the first ``test_batch`` trees of the first test set,
    holding the values its test gives them (``_scores``)."""
    first = next(iter(tests.values()))
    key = jax.random.split(jax.random.split(jax.random.PRNGKey(seed), 3)[2], len(tests))[0]
    rows = np.arange(min(config.test_batch, len(jax.tree_util.tree_leaves(first)[0])))
    trees, values = jax.tree_util.tree_map(lambda leaf: leaf[rows], first), _values(first, key, config)[rows]

    def error(model: TreeModel) -> float:
        predicted, labels, valid = _answers(model, trees, values, config)
        return float(1.0 - (predicted == labels)[valid].mean())

    return error


def train(
    steps: int,
    seed: int = 0,
    config: Config = DEFAULT,
    out: Path | None = None,
    *,
    per_epoch: int = PER_EPOCH,
    resume: bool = False,
    seconds: float | None = None,
    log: bool = True,
    progress: bool = False,
) -> Result:
    """Train on ``steps`` batches drawn from a pool of the training files' syntax trees (``data.draws``) into the
    run directory ``out`` (None: a temporary one), or go on with the run there (``resume``), then test on the
    held-out files' syntax trees, band by band (``config.test_bands``), and on random shapes. With ``log``, a
    line of the data and a line an epoch of ``per_epoch`` steps (its loss, its held-out error, also kept in the
    checkpoint: ``State.held_out``); ``seconds``: a budget (the run stops, checkpointed, at the first epoch's end
    past it; ``Result.steps`` says where). ``Result.compilations`` counts the compilations of the training step
    (``applicative.training.steps.make_update``) in this process: 1, whatever the shapes. ValueError: leaf counts
    above the capacity, no tree to train or test on, a run in ``out`` of other settings; FileExistsError: ``out``
    holds a run and ``resume`` is not set."""
    if out is None:
        with tempfile.TemporaryDirectory(prefix="trees-") as directory:
            return train(steps, seed, config, Path(directory), per_epoch=per_epoch, seconds=seconds, log=log,
                         progress=progress)  # fmt: skip
    start = time.perf_counter()
    trees, tests = pool(config, seed), test_sets(config, seed)
    if log:
        print(
            f"{len(jax.tree_util.tree_leaves(trees)[0])} training syntax trees; tests: "
            + ", ".join(f"{len(jax.tree_util.tree_leaves(t)[0])} {name}" for name, t in tests.items())
            + f" (parsed and laid out in {time.perf_counter() - start:.1f} s)"
        )
    model, opt = learner(config), optimiser(config, steps)
    state = fit(model, opt, draws(trees, config, per_epoch), out, description=describe(steps, seed, config, per_epoch),
                steps=steps, seed=seed, resume=resume, progress=progress, log=log,
                validate=_held_out(tests, seed, config), seconds=seconds)  # fmt: skip
    compilations = make_update(model, opt, seed)._cache_size()  # type: ignore[attr-defined]
    return Result(
        state.losses[0],
        state.losses[-1],
        _leaf_counts(_valid(trees)),
        _scores(state.model, tests, seed, config),
        compilations,
        time.perf_counter() - start,
        state.step,
    )


def restored(directory: Path) -> tuple[State[TreeModel], int, int, Config, int]:
    """The run in ``directory`` read back: its state (``restore``) and its (steps, seed, config, per_epoch).
    FileNotFoundError: no run there; ValueError: not a run of this example, or a checkpoint not its own."""
    run = settings(read_config(directory))
    steps, seed, config, per_epoch = run.steps, run.seed, run.config, run.per_epoch
    return restore(directory, learner(config), optimiser(config, steps), seed), steps, seed, config, per_epoch


def evaluate(directory: Path) -> Report:
    """The run in ``directory`` (finished or stopped), its model tested again as ``train`` tests it: the same
    test trees and values, the same scores."""
    with holding_run(directory):
        state, steps, seed, config, _ = restored(directory)
    tests = _scores(state.model, test_sets(config, seed), seed, config)
    return Report(state.step, steps, state.losses[0], state.losses[-1], tuple(state.held_out), tests, state.seconds)


def _score_lines(scores: tuple[Score, ...]) -> Iterator[str]:
    for score in scores:
        yield (
            f"{score.trees} {score.name} (median {score.leaves[1]}): leaf accuracy {score.accuracy:.3f} "
            f"(plain-mean baseline {score.baseline:.3f}; where it is wrong: {score.disputed:.3f})"
        )


def _loss_line(initial: float, final: float) -> str:
    return f"loss {initial:.3f} -> {final:.4f} (chance ln 2 = {math.log(CLASSES):.3f})"


def lines(result: Result) -> Iterator[str]:
    """What ``train`` achieved, line by line."""
    yield _loss_line(result.initial_loss, result.final_loss)
    low, median, high = result.train_leaves
    yield f"trained on syntax trees of {low} to {high} leaves (median {median})"
    yield from _score_lines(result.tests)
    yield f"in {result.seconds:.1f} s, the training step compiled {result.compilations} time(s) for every shape"


def report_lines(report: Report) -> Iterator[str]:
    """What ``evaluate`` found, line by line."""
    stopped = "" if report.steps == report.of else f" (stopped: --resume goes on to {report.of})"
    yield f"{report.steps} steps in {report.seconds:.1f} s of training{stopped}"
    yield _loss_line(report.initial_loss, report.final_loss)
    if report.held_out:
        epoch, error = report.held_out[-1]
        yield f"held-out leaf error {error:.4f} after epoch {epoch} (each epoch's: plot DIR)"
    yield from _score_lines(report.tests)
