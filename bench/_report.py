"""What the baseline benchmarks share: timing, formatting, a run's facts, the header, the smoke runs' sizes."""

from __future__ import annotations

import dataclasses
import json
import os
import platform
import shlex
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jax
import numpy as np

from applicative.training import TrainingDiverged
from applicative.training.files import METRICS
from funcformer.learning import Problem, RunConfig, default_cache, load, read_run, train
from funcformer.learning.metric import relative_l2, summary
from funcformer.learning.solver import as_solver
from funcformer.model import ModelConfig, parameter_count

SMOKE_MODEL: dict[str, Any] = {"channels": 2, "heads": 1, "head_channels": 1, "hidden_channels": 2, "layers": 1}
"""``--smoke``'s model sizes, over a trial's or a task's model: one layer of 2 channels."""
SMOKE_RUN: dict[str, Any] = {"steps": 2, "batch": 2, "train_size": 4, "warmup": 0, "learning_rate": 1e-2}
"""``--smoke``'s run settings, over a trial's: 2 steps of 2 samples from a training set of 4, at the default
learning rate (the same for every script, so that their smoke runs compile the same steps: JAX's persistent
compilation cache, where one is set, then compiles each once)."""
SMOKE_TEST_SIZE = 8
"""``--smoke``'s test samples."""


def smoke_model(model: ModelConfig) -> ModelConfig:
    """``model`` (its mixers, axes and normalisation) at ``SMOKE_MODEL``'s sizes."""
    return ModelConfig(**{**dataclasses.asdict(model), **SMOKE_MODEL})


def seconds_of(fn: Callable[[], Any], repeats: int, warmup: int = 1) -> float:
    """Median seconds of ``repeats`` calls after ``warmup`` calls (every predictor here returns numpy)."""
    for _ in range(warmup):
        fn()
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def duration(seconds: float) -> str:
    if seconds >= 1.0:
        return f"{seconds:.1f} s"
    if seconds >= 1e-3:
        return f"{seconds * 1e3:.2f} ms"
    return f"{seconds * 1e6:.2f} us"


def errors(s: dict[str, float]) -> str:
    return f"{s['mean']:.2e} | {s['median']:.2e} | {s['p95']:.2e}"


def run_facts(directory: Path, problem: Problem[Any]) -> tuple[int, float, int]:
    """(parameters, training seconds, steps) of a ``problem`` run: from its metrics.json, else its checkpoint."""
    metrics = directory / METRICS
    if metrics.exists():
        m = json.loads(metrics.read_text())
        if all(key in m for key in ("parameters", "train_seconds", "steps")):
            return int(m["parameters"]), float(m["train_seconds"]), int(m["steps"])
    run = read_run(directory, problem)
    state = load(directory, run)
    return parameter_count(state.model), state.seconds, state.step


def header(runs: list[str]) -> None:
    print(f"$ python {shlex.join([sys.argv[0], *runs])}")
    load_average = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    print(
        f"numpy {np.__version__}, jax {jax.__version__} on {jax.devices()[0].platform}; "
        f"{platform.machine()} {platform.system()}, {os.cpu_count()} CPU cores, load average {load_average}; "
        f"OPENBLAS_NUM_THREADS={os.environ['OPENBLAS_NUM_THREADS']}. Timings: medians of repeats, noisy on a "
        "shared machine."
    )


def trial(problem: Problem[Any], model: dict[str, Any], options: dict[str, Any], test_size: int = 256) -> str:
    """Train ``RunConfig.of(problem, model=ModelConfig(**model), **options)`` in a temporary directory; its
    test relative L2 error (mean, median, p95 over ``test_size`` held-out samples, through the run's solver)
    and wall time (the training set's generation, if not cached, included)."""
    run = RunConfig.of(problem, model=ModelConfig(**model), **options)
    with tempfile.TemporaryDirectory() as out:
        start = time.perf_counter()
        try:
            state = train(run, out, progress=False)
        except TrainingDiverged:
            return f"diverged                        {time.perf_counter() - start:5.0f} s"
        seconds = time.perf_counter() - start
        test = problem.dataset(default_cache(), run.data_config, problem.test_seed, test_size, True)
        # as_solver, not load_solver: ``problem`` may be a variant of a task's PROBLEM (another normalisation)
        solver = as_solver(state.model, state.scale, run, Path(out))
        s = summary(relative_l2(solver(test.inputs), test.exact()))
    return f"{s['mean']:.4f}  {s['median']:.4f}  {s['p95']:.4f}  {seconds:5.0f} s"
