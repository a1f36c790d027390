"""Benchmark: baselines for the Poisson task beside trained Funcformer runs, in and out of distribution.

The metric is the task's (docs/poisson.md): relative L2 error on the uniform 64 x 64 grid against the
fine solution ``solve(f)``, mean / median / p95 over 1024 sources of TEST_SEED. Everything below is
measured in this one invocation:

- in distribution: the truncation floor (the exact u cut to 16 x 16); the exact spectral solver's time
  (``poisson.solve`` at 64 points: the reference itself, error 0 by definition); the mean
  predictor (the training set's mean u for every source); least squares: the 256 x 256 linear map from f
  to u coefficients fitted by ``numpy.linalg.lstsq`` on the first k sources of the default training set
  (``RunConfig.of(PROBLEM).seed``, ``RunConfig.of(PROBLEM).train_size``, the set ``train`` fits on); one row per RUN_DIR
  (``load_solver``). Then the prediction time per source at batch 1 and 256, beside the exact
  solver at the same batch, as ratios.
- out of distribution: each family of ``funcformer.poisson.families`` (1024 sources of TEST_SEED): its
  truncation floor, least squares fitted on 1000 in-distribution sources, and each RUN_DIR.

Timings are medians of repeated calls, one predictor after another (interleaving them let XLA's busy
worker threads slow the numpy solver), with one OpenBLAS thread unless OPENBLAS_NUM_THREADS says
otherwise; on a shared machine they are noisy.

    python bench/poisson_baselines.py                          # baselines only: seconds, datasets cached
    python bench/poisson_baselines.py runs/default runs/best   # and these trained runs (30 s)
    python bench/poisson_baselines.py --smoke                  # tiny sets and fits: checks that it runs
"""

from __future__ import annotations

import argparse
import functools
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

# One OpenBLAS thread unless the caller chose (numpy's OpenBLAS reads it when it loads, so before the
# imports): with two threads on this 2-core machine while another process kept a core and a half busy,
# numpy's lstsq of 100 x 256 took about 1 s instead of 6 ms (its threads wait on each other while the
# cores are taken). The spectral solver's batched matmuls took the same time with one thread or two.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the repository root

import numpy as np
from _report import duration, errors, header, run_facts, seconds_of  # bench/, the script's directory

from funcformer.learning import RunConfig, default_cache, load_solver, read_run
from funcformer.learning.problem import Dataset
from funcformer.learning.solver import Solver
from funcformer.poisson import (
    PROBLEM,
    TEST_SEED,
    DataConfig,
    relative_l2,
    solve,
    summary,
    truncate,
)
from funcformer.poisson.families import FAMILIES, apply_linear, fit_least_squares

TEST_SIZE = 1024
LEAST_SQUARES_SAMPLES: tuple[int, ...] = (50, 90, 100, 110, 200, 1000, 8192)
OOD_SAMPLES = 1000
"""Least squares out of distribution is fitted on this many in-distribution sources."""
BATCHES: tuple[int, ...] = (1, 256)
CALLS = 512
"""Timed calls at batch 1 (at batch b, max(5, CALLS / b))."""
TRAIN_SIZE = RunConfig.of(PROBLEM).train_size
"""The training sources least squares fits on (the default run's training set)."""


def in_distribution(
    test: Dataset[DataConfig], train: Dataset[DataConfig], solvers: dict[str, Solver], directories: dict[str, Path]
) -> dict[str, np.ndarray]:
    """Table 1 (accuracy, fit or training cost, time at batch 1024); returns least squares' maps by k."""
    f, n = test.inputs, test.data_config.n
    print(f"\n## In distribution: {TEST_SIZE} test sources (TEST_SEED), relative L2 error\n")
    print(f"| predictor | mean | median | p95 | fit / training | parameters | per source, batch {TEST_SIZE} |")
    print("|---|---|---|---|---|---|---|")
    print(f"| truncation floor: exact u cut to {n} x {n} | {errors(test.truncation_floor())} | | | |")
    solve_seconds = seconds_of(lambda: solve(f, test.data_config.solver_points), 5) / len(f)
    print(
        f"| exact spectral solver (`solve`, fine {test.data_config.solver_points}): the reference | 0 | 0 | 0 | none | "
        f"| {duration(solve_seconds)} |"
    )
    mean_u = np.mean(train.u, axis=0)
    mean_errors = relative_l2(np.broadcast_to(mean_u, f.shape), test.exact())
    print(f"| mean predictor (mean u of {len(train.u)} training sources) | {errors(summary(mean_errors))} | | 256 | |")

    maps: dict[str, np.ndarray] = {}
    for k in LEAST_SQUARES_SAMPLES:
        fk, uk = train.inputs[:k], train.u[:k]
        fit_seconds = seconds_of(functools.partial(fit_least_squares, fk, uk), 3)
        m = fit_least_squares(fk, uk)
        maps[f"least squares, k = {k}"] = m
        per_source = seconds_of(functools.partial(apply_linear, m, f), 20) / len(f)
        s = summary(relative_l2(apply_linear(m, f), test.exact()))
        print(
            f"| least squares on k = {k} training sources | {errors(s)} | {duration(fit_seconds)} "
            f"| {m.size:,} | {duration(per_source)} |"
        )

    for name, solver in solvers.items():
        solver(f)  # compile
        per_source = seconds_of(functools.partial(solver, f), 3) / len(f)
        s = summary(relative_l2(solver(f), test.exact()))
        parameters, train_seconds, steps = run_facts(directories[name], PROBLEM)
        print(
            f"| Funcformer `{name}` | {errors(s)} | {steps:,} steps, {train_seconds:.0f} s | {parameters:,} "
            f"| {duration(per_source)} |"
        )
    print(
        "\nfit: `numpy.linalg.lstsq` of the flattened (k, 256) sources against the (k, 256) truncated "
        f"targets (median of 3); per source: the batch's time / {TEST_SIZE}."
    )
    return maps


def timing(test: Dataset[DataConfig], least_squares: np.ndarray, solvers: dict[str, Solver]) -> None:
    """Table 2: seconds per source at batch 1 and 256, each beside the exact solver at that batch."""
    print("\n## Prediction time per source (ratio: time / the exact solver's time at the same batch)\n")
    columns = " | ".join(f"batch {b} | ratio" for b in BATCHES)
    print(f"| predictor | {columns} |")
    print("|---|" + "---|---|" * len(BATCHES))
    rows: dict[str, list[str]] = {}
    for batch in BATCHES:
        f = np.ascontiguousarray(test.inputs[:batch])
        cases: dict[str, Callable[[], Any]] = {
            "exact spectral solver": functools.partial(solve, f, test.data_config.solver_points),
            f"least squares, k = {OOD_SAMPLES}": functools.partial(apply_linear, least_squares, f),
        }
        for name, solver in solvers.items():
            cases[f"Funcformer `{name}`"] = functools.partial(solver, f)
        # One predictor after another, not interleaved: right after a jax call, XLA's worker threads
        # still hold the cores for a while, which tripled the numpy solver's time at batch 1.
        times = {name: seconds_of(fn, max(5, CALLS // batch), warmup=2) for name, fn in cases.items()}
        base = times["exact spectral solver"]
        for name, seconds in times.items():
            rows.setdefault(name, []).append(f"{duration(seconds / batch)} | {seconds / base:.2f}")
    for name, cells in rows.items():
        print(f"| {name} | {' | '.join(cells)} |")
    print(f"\nmedian of max(5, {CALLS} / batch) calls after 2 warm-ups, one predictor after another.")


def out_of_distribution(task: DataConfig, least_squares: np.ndarray, solvers: dict[str, Solver]) -> None:
    """Table 3: each family's floor, least squares and the runs."""
    print(f"\n## Out of distribution: {TEST_SIZE} sources (TEST_SEED) of each family, relative L2 error\n")
    print("| family | predictor | mean | median | p95 |")
    print("|---|---|---|---|---|")
    for family_name, family in FAMILIES.items():
        f = family(task.n, TEST_SEED, TEST_SIZE)
        u = solve(f, task.solver_points)
        rows = {
            "truncation floor": truncate(u, task.n),
            f"least squares, k = {OOD_SAMPLES}": apply_linear(least_squares, f),
        }
        for name, solver in solvers.items():
            rows[f"Funcformer `{name}`"] = solver(f)
        for name, predicted in rows.items():
            print(f"| {family_name} | {name} | {errors(summary(relative_l2(predicted, u)))} |")


def main() -> None:
    global TEST_SIZE, LEAST_SQUARES_SAMPLES, OOD_SAMPLES, BATCHES, CALLS, TRAIN_SIZE
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("runs", nargs="*", metavar="RUN_DIR", help="trained runs (python -m funcformer.poisson train)")
    parser.add_argument("--smoke", action="store_true", help="tiny sets, fits and timings: checks that the script runs")
    args = parser.parse_args()
    if args.smoke:  # 8 test sources, least squares on 4 and all 16 training sources, a few calls
        TEST_SIZE, LEAST_SQUARES_SAMPLES, OOD_SAMPLES, BATCHES, CALLS, TRAIN_SIZE = 8, (4, 16), 16, (1, 4), 8, 16
    header([*(["--smoke"] if args.smoke else []), *args.runs])
    start = time.perf_counter()

    run = RunConfig.of(PROBLEM)
    task = run.data_config
    for directory in args.runs:
        trained_on = read_run(Path(directory), PROBLEM).data_config
        if trained_on != task:
            raise SystemExit(f"{directory}: trained on {trained_on}, not the default {task}")
    test = PROBLEM.dataset(default_cache(), task, TEST_SEED, TEST_SIZE)
    train = PROBLEM.dataset(default_cache(), task, run.seed, TRAIN_SIZE, fine=False)
    if max(LEAST_SQUARES_SAMPLES) > len(train.inputs):
        raise SystemExit(f"the training set has {len(train.inputs)} sources, fewer than {max(LEAST_SQUARES_SAMPLES)}")
    directories = {directory: Path(directory) for directory in args.runs}
    solvers = {name: load_solver(path, PROBLEM) for name, path in directories.items()}

    maps = in_distribution(test, train, solvers, directories)
    least_squares = maps[f"least squares, k = {OOD_SAMPLES}"]
    timing(test, least_squares, solvers)
    out_of_distribution(task, least_squares, solvers)
    print(f"\ntotal {time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main()
