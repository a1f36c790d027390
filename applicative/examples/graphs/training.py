"""Training and testing a CLRS graph task through the learning layer (``applicative.training.fit``).

    train(algorithm, steps, seed, config, out)   a run into ``out`` (None: a temporary directory): ``Result``
    evaluate(directory, best)         a finished (or stopped) run read back (``restore``), tested again
    predict(directory, edges, ...)    the run's answer on a user's graph
    lines(result), report_lines(report)   what the command line prints

A run trains on the benchmark's training set (CLRS-30: the first 1,000 graphs of 16 nodes of seed 1, held
whole: ``Arrays``), or with ``sizes`` (Ibarz et al.'s are 4, 7, 11, 13, 16) on minibatches drawn afresh from
the benchmark's samplers, each of graphs of one of those sizes (``training_data``); it is tested on its test
set (32 graphs of 64 nodes of seed 3), out of distribution; each epoch (``train_samples // batch`` steps)
prints the score on its validation set (32 graphs of 16 nodes of seed 2), kept in the checkpoint. Beside the
model's score, the trivial answer's: every node pointing to itself, every mask empty (a mask_one on node 0).
A run is a directory of ``fit``'s: config.json (``describe``: the algorithm, the steps, the seed, the epoch and
every field of ``Config``), checkpoint.npz, and best.npz, the state of its best validation score (the benchmark's
model selection: ``evaluate(directory, best=True)``); stopped (a kill, SIGTERM, ``seconds``) and resumed, it
repeats an uninterrupted one bit for bit.
"""

from __future__ import annotations

import dataclasses
import json
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax

from applicative.examples.graphs import clrs
from applicative.examples.graphs.model import (
    Config,
    GraphModel,
    Inputs,
    Targets,
    batch_of,
    learner,
    most_extra,
    predict,
)
from applicative.training import Arrays, Drawn, Source, State, fit, restore, warmup_cosine
from applicative.training.files import holding_run, read_config
from applicative.training.settings import from_dict, setting, to_dict

__all__ = [
    "STEPS",
    "Report",
    "Result",
    "answer",
    "describe",
    "evaluate",
    "lines",
    "report_lines",
    "settings",
    "tested",
    "train",
]

STEPS = 3000


Interval = tuple[float, float]


class Result(NamedTuple):
    algorithm: str
    test: float  # the benchmark's score on its test set (64 nodes)
    test_interval: Interval  # its 95% bootstrap interval over the test graphs
    trivial: float  # the trivial answer's
    validation: float  # on the validation set (16 nodes)
    initial_loss: float
    final_loss: float
    seconds: float
    steps: int
    tested: str  # the test set: "32 graphs of 64 nodes (CLRS-30's)"
    validated: str  # the validation set


class Report(NamedTuple):
    algorithm: str
    steps: int  # of the state tested
    of: int
    test: float
    test_interval: Interval
    trivial: float
    held_out: tuple[tuple[int, float], ...]
    seconds: float
    tested: str
    best: bool = False  # the state of the best validation score (best.npz), not the last


@dataclasses.dataclass(frozen=True)
class Run:
    """A run's settings, everything that decides its result: its description (config.json) and its command
    line's flags (``applicative.training.settings``)."""

    algorithm: str = setting(help=f"one of: {', '.join(clrs.ALGORITHMS)}")
    steps: int = setting(STEPS, help="training steps")
    seed: int = setting(0, help="random seed")
    config: Config = setting(Config(), help="fields of Config as JSON")


def describe(algorithm: str, steps: int, seed: int, config: Config) -> str:
    """A run's description, config.json."""
    return json.dumps({"example": "graphs", **to_dict(Run(algorithm, steps, seed, config))}, indent=2)


def settings(description: str) -> Run:
    """The settings of a run's description; ValueError if it is not one."""
    run = json.loads(description)
    if not isinstance(run, dict) or run.get("example") != "graphs":
        raise ValueError("not a run of the graphs example")
    return from_dict(Run, run, besides=("example",))


def optimiser(config: Config, steps: int) -> optax.GradientTransformation:
    """Adam at ``learning_rate``, gradients clipped at norm 1; with ``decay="cosine"`` the rate falls from
    ``learning_rate`` at step 0 to 0 at step ``steps`` (the run's), as half a cosine (``warmup_cosine``, no
    warm-up)."""
    if config.decay == "cosine":
        return warmup_cosine(steps, config.learning_rate, warmup=0, floor=0.0)
    return optax.chain(optax.clip_by_global_norm(1.0), optax.adam(config.learning_rate))


def _sets(algorithm: str, config: Config) -> dict[str, list[clrs.Sample]]:
    return {
        "train": [] if config.sizes else clrs.sample(algorithm, config.train_nodes, config.train_samples, 1),
        "validation": clrs.sample(algorithm, config.train_nodes, config.held_out, 2),
        "test": clrs.sample(algorithm, config.test_nodes, config.test_samples, 3),
    }


def training_data(algorithm: str, config: Config, train: list[clrs.Sample]) -> Source:
    """What ``fit`` trains on: the training set ``train`` held whole, or with ``config.sizes`` minibatches drawn
    afresh, each of graphs of one of those sizes (Ibarz et al.'s online sampling), a function of (seed, step);
    an "epoch" ``train_samples // batch`` steps either way. With ``positions="random"``, randomised positions,
    with ``densities="varied"`` each drawn graph's edge probability one of ``clrs.varied``'s, and with an
    ``overrun`` each graph's steps beyond ``steps_on`` (``_extra``), drawn once for a set held whole."""
    if not config.sizes:
        positions = np.random.RandomState(0) if config.positions == "random" else None
        extra = _extra(config, config.train_nodes, len(train), np.random.RandomState(1))
        return Arrays(*batch_of(train, algorithm, positions, extra), config.batch)

    densities = clrs.varied(algorithm) if config.densities == "varied" else ()

    def draw(seed: int, step: int) -> tuple[Inputs, Targets]:
        rng = np.random.RandomState(np.random.SeedSequence([seed, step]).generate_state(1))
        n = int(config.sizes[rng.randint(len(config.sizes))])
        samples = clrs.drawn(algorithm, n, config.batch, rng, densities)
        inputs, targets = batch_of(samples, algorithm, rng if config.positions == "random" else None)
        return inputs._replace(extra=jnp.asarray(_extra(config, n, config.batch, rng))), targets

    return Drawn(draw, config.train_samples // config.batch)


def _extra(config: Config, n: int, count: int, rng: np.random.RandomState) -> np.ndarray:
    """Each of ``count`` training graphs' steps beyond ``steps_on``: uniform in 0..``most_extra`` with an
    ``overrun``, else 0 (and no draw from ``rng``)."""
    if not config.overrun:
        return np.zeros(count, np.int32)
    return rng.randint(0, most_extra(config, n) + 1, size=count).astype(np.int32)


Answers = list[dict[str, np.ndarray]]
"""Each sample's predicted outputs, by name (``clrs.score``'s ``predicted``)."""


def _answers(model: GraphModel, config: Config, algorithm: str, samples: list[clrs.Sample]) -> Answers:
    inputs, _ = batch_of(samples, algorithm)
    out = _predict(model, config, algorithm, inputs)
    return [{k: np.asarray(v[i]) for k, v in out.items()} for i in range(len(samples))]


def _score(model: GraphModel, config: Config, algorithm: str, samples: list[clrs.Sample]) -> float:
    return clrs.score(algorithm, _answers(model, config, algorithm, samples), samples)


def _tested(model: GraphModel, config: Config, algorithm: str, samples: list[clrs.Sample]) -> tuple[float, Interval]:
    """The score on the test set and its 95% bootstrap interval over the graphs."""
    answers = _answers(model, config, algorithm, samples)
    return clrs.score(algorithm, answers, samples), clrs.interval(algorithm, answers, samples)


def _predict(model: GraphModel, config: Config, algorithm: str, inputs: Inputs) -> Targets:
    out: Targets = _jitted(config, algorithm)(model, inputs)
    return out


def _jitted(config: Config, algorithm: str) -> Any:
    return _JITTED.setdefault((config, algorithm), jax.jit(lambda m, x: predict(m, config, algorithm, x)))


_JITTED: dict[tuple[Config, str], Any] = {}


def trivial(algorithm: str, samples: list[clrs.Sample]) -> float:
    """The score of the trivial answer: every pointer to itself, every mask empty, a mask_one on node 0."""
    answers = []
    for s in samples:
        n = s.adjacency.shape[0]
        one: dict[str, np.ndarray] = {}
        for output in clrs.ALGORITHMS[algorithm].outputs:
            if output.kind == "pointer":
                one[output.name] = np.arange(n) if output.location == "node" else np.tile(np.arange(n)[:, None], (1, n))
            elif output.kind == "mask_one":
                one[output.name] = np.eye(n)[0]
            else:
                one[output.name] = np.zeros((n,) if output.location == "node" else (n, n))
        answers.append(one)
    return clrs.score(algorithm, answers, samples)


def train(
    algorithm: str,
    steps: int = STEPS,
    seed: int = 0,
    config: Config | None = None,
    out: Path | None = None,
    *,
    resume: bool = False,
    seconds: float | None = None,
    log: bool = True,
    progress: bool = False,
) -> Result:
    """Train the task ``algorithm`` for ``steps`` minibatches (``training_data``) into ``out`` (an epoch: a
    checkpoint, a line and the validation score; best.npz at each new best score), then score its last state on
    the test set.
    ValueError naming an algorithm the benchmark does not have."""
    if algorithm not in clrs.ALGORITHMS:
        raise ValueError(f"{algorithm!r} is not one of the benchmark's graph algorithms: {', '.join(clrs.ALGORITHMS)}")
    config = Config() if config is None else config
    if out is None:
        with tempfile.TemporaryDirectory(prefix="graphs-") as directory:
            return train(algorithm, steps, seed, config, Path(directory), seconds=seconds, log=log, progress=progress)
    start = time.perf_counter()
    sets = _sets(algorithm, config)
    model = learner(config, algorithm)

    def held_out(m: GraphModel) -> float:
        return 1.0 - _score(m, config, algorithm, sets["validation"])

    state = fit(model, optimiser(config, steps), training_data(algorithm, config, sets["train"]), out,
                description=describe(algorithm, steps, seed, config), steps=steps, seed=seed, resume=resume,
                progress=progress, log=log, validate=held_out, keep_best=True, seconds=seconds)  # fmt: skip
    return Result(
        algorithm,
        *_tested(state.model, config, algorithm, sets["test"]),
        trivial(algorithm, sets["test"]),
        _score(state.model, config, algorithm, sets["validation"]),
        state.losses[0],
        state.losses[-1],
        time.perf_counter() - start,
        state.step,
        tested(config),
        f"{config.held_out} graphs of {config.train_nodes} nodes",
    )


def tested(config: Config) -> str:
    """The test set in words: "32 graphs of 64 nodes (CLRS-30's)"."""
    clrs30 = " (CLRS-30's)" if (config.test_samples, config.test_nodes) == (32, 64) else ""
    return f"{config.test_samples} graphs of {config.test_nodes} nodes{clrs30}"


def restored(directory: Path, best: bool = False) -> tuple[State[GraphModel], str, int, int, Config]:
    """The run in ``directory`` read back: its state (last, or of its best validation score) and its
    (algorithm, steps, seed, config)."""
    run = settings(read_config(directory))
    algorithm, steps, seed, config = run.algorithm, run.steps, run.seed, run.config
    state = restore(directory, learner(config, algorithm), optimiser(config, steps), seed, best=best)
    return state, algorithm, steps, seed, config


def evaluate(directory: Path, best: bool = False) -> Report:
    """The run in ``directory``, tested again on the benchmark's test set: its last state or, with ``best``, the
    state of its best validation score (best.npz, the benchmark's model selection), its step that state's."""
    with holding_run(directory):
        state, algorithm, steps, _, config = restored(directory, best)
    test = clrs.sample(algorithm, config.test_nodes, config.test_samples, 3)
    score, spread = _tested(state.model, config, algorithm, test)
    held_out, baseline = tuple(state.held_out), trivial(algorithm, test)
    return Report(algorithm, state.step, steps, score, spread, baseline, held_out, state.seconds, tested(config), best)


def answer(directory: Path, nodes: int, edges: Sequence[tuple[int, int]], source: int = -1,
           weights: Sequence[float] | None = None) -> dict[str, np.ndarray]:  # fmt: skip
    """The trained run's outputs on a user's graph: ``nodes`` nodes, these (sender, receiver) edges (weights 1 by
    default; on a task of undirected graphs, each runs both ways), the source node where the task has one.
    ValueError naming what is wrong: no node, an edge naming a node that does not exist, a task on DAGs given
    a cycle, a source outside the nodes; FileNotFoundError where ``directory`` holds no run."""
    from applicative import Graph
    from applicative.instances import graph_layout

    algorithm = settings(read_config(directory)).algorithm
    pairs = np.asarray(edges, np.int64).reshape(-1, 2).T
    Graph.from_edges(pairs, np.zeros(max(nodes, 0)), capacity=max(nodes, 1), edge_capacity=max(pairs.shape[1], 1))
    graphs = clrs.ALGORITHMS[algorithm].graphs
    if graphs.acyclic:
        graph_layout.topological_order(nodes, pairs[0], pairs[1], f"{algorithm} (a task on acyclic graphs)")
    if graphs.source and not 0 <= source < nodes:
        raise ValueError(f"{algorithm} needs a source node between 0 and {nodes - 1}, got {source}")
    a = np.zeros((nodes, nodes))
    a[pairs[0], pairs[1]] = 1.0 if weights is None else np.asarray(weights, np.float64)
    if not graphs.directed:  # the task's graphs are undirected: an edge runs both ways
        a = np.maximum(a, a.T)
    sample = clrs.Sample(a, source if graphs.source else -1, {})
    state, _, _, _, config = restored(directory)
    out = _predict(state.model, config, algorithm, _inputs_only(sample, algorithm))
    return {k: np.asarray(v[0]) for k, v in out.items()}


def _inputs_only(sample: clrs.Sample, algorithm: str) -> Inputs:
    outputs = clrs.ALGORITHMS[algorithm].outputs
    n = sample.adjacency.shape[0]
    blank = {o.name: np.zeros((n,) if o.location == "node" else (n, n)) for o in outputs}
    inputs, _ = batch_of([sample._replace(outputs=blank)], algorithm)
    return inputs


def lines(result: Result) -> Iterator[str]:
    yield f"{result.algorithm}: loss {result.initial_loss:.3f} -> {result.final_loss:.4f} in {result.steps} steps"
    low, high = result.test_interval
    yield (f"test ({result.tested}): {result.test:.4f} (95% interval {low:.4f}-{high:.4f}; trivial answer "
           f"{result.trivial:.4f}); validation ({result.validated}): {result.validation:.4f}")  # fmt: skip
    yield f"in {result.seconds:.1f} s"


def report_lines(report: Report) -> Iterator[str]:
    if report.best:
        yield f"{report.algorithm}: the state of the best validation score, after step {report.steps} of {report.of}"
    else:
        stopped = "" if report.steps == report.of else f" (stopped: --resume goes on to {report.of})"
        yield f"{report.algorithm}: {report.steps} steps in {report.seconds:.1f} s of training{stopped}"
    low, high = report.test_interval
    yield (f"test ({report.tested}): {report.test:.4f} (95% interval {low:.4f}-{high:.4f}; trivial answer "
           f"{report.trivial:.4f})")  # fmt: skip
    if report.held_out:
        epoch, error = report.held_out[-1]
        yield f"validation error {error:.4f} after epoch {epoch} (each epoch's: plot DIR)"
