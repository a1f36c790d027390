"""Benchmark: the Darcy task's floor, solver and baselines beside trained runs, and whether learning pays.

The metric is the task's (docs/darcy.md): relative L2 error on the uniform 64 x 64 grid against the
exact solution (collocation at M = 32), mean / median / p95 over 1024 log-permeabilities of TEST_SEED.
Everything below is measured in this one invocation:

- in distribution: the truncation floor (the exact u cut to 16 x 16); the mean predictor (the
  training set's mean u for every input); least squares: the 256 x 256 linear map from kappa's
  coefficients to u's (``numpy.linalg.lstsq`` on the first 2000 and all 8192 samples of the default
  training set); two baselines that know the exact shift symmetry (``darcy.normalise``): the
  mean of u / c and the affine least-squares map on the normalised inputs, scaled back by c; one
  row per RUN_DIR (``load_solver``).
- speed: the exact solver (``darcy.solve``: GMRES with the fast-diagonalisation preconditioner, and
  the dense LU of the (M - 1)^2 collocation system) and each run's ``load_solver``, per sample at batch
  256, one after the other; the ratio is the solver's time over the run's.
- out of distribution: kappa with twice the amplitude (2 kappa, 1024 inputs of TEST_SEED, solved
  here): its floor, the mean predictor, least squares and each run.

One OpenBLAS thread unless OPENBLAS_NUM_THREADS says otherwise; timings are noisy on a shared machine.

    python bench/darcy_baselines.py                          # the baselines only (data cached: seconds)
    python bench/darcy_baselines.py runs/darcy runs/darcy10  # and these trained runs
    python bench/darcy_baselines.py --smoke                  # tiny sets and fits: checks that it runs
"""

from __future__ import annotations

import argparse
import functools
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # as in bench/poisson_baselines.py (why, there)

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the repository root

import numpy as np
from _report import duration, errors, header, run_facts, seconds_of  # bench/, the script's directory

from funcformer.darcy import PROBLEM, TEST_SEED, normalise, solve
from funcformer.learning import RunConfig, Solver, default_cache, load_solver, read_run
from funcformer.learning.metric import apply_linear, fit_least_squares, relative_l2, summary, truncation_floor

TEST_SIZE = 1024
BATCH = 256
DENSE_SAMPLES = 32
LEAST_SQUARES_SAMPLES: tuple[int, ...] = (2000, 8192)
TRAIN_SIZE = RunConfig.of(PROBLEM).train_size
"""The training samples the baselines fit on (the default run's training set)."""


def normalised_predictors(kappa: np.ndarray, u: np.ndarray) -> dict[str, Callable[[np.ndarray], np.ndarray]]:
    """Baselines that know the exact shift symmetry: fitted to u / c on the normalised inputs
    (``darcy.normalise``), their predictions scaled back by c. The mean of u / c, and the affine
    least-squares map (an intercept column beside the flattened inputs)."""
    inputs, log2 = normalise(kappa)
    targets = (u / np.exp2(log2)[:, None, None]).reshape(len(u), -1)
    mean = targets.mean(axis=0)
    design = np.concatenate([inputs.reshape(len(u), -1), np.ones((len(u), 1))], axis=1)
    affine = np.linalg.lstsq(design, targets, rcond=None)[0]

    def scaled_back(predict: Callable[[np.ndarray], np.ndarray]) -> Callable[[np.ndarray], np.ndarray]:
        def scaled(k: np.ndarray) -> np.ndarray:
            x, log2_c = normalise(k)
            flat = predict(np.concatenate([x.reshape(len(k), -1), np.ones((len(k), 1))], axis=1))
            return flat.reshape(k.shape) * np.exp2(log2_c)[:, None, None]

        return scaled

    return {
        f"mean of u / c, scaled back ({len(u)} samples)": scaled_back(
            lambda d: np.broadcast_to(mean, (len(d), mean.size))
        ),
        f"affine least squares on the normalised inputs, scaled back ({len(u)} samples)": scaled_back(
            lambda d: d @ affine
        ),
    }


def accuracy(
    title: str, kappa: np.ndarray, exact: np.ndarray, predictors: dict[str, Callable[[np.ndarray], np.ndarray]]
) -> None:
    print(f"\n## {title}: {len(kappa)} inputs of TEST_SEED, relative L2 error\n")
    print("| predictor | mean | median | p95 |")
    print("|---|---|---|---|")
    print(f"| truncation floor: exact u cut to 16 x 16 | {errors(truncation_floor(exact, 16))} |")
    for name, predict in predictors.items():
        print(f"| {name} | {errors(summary(relative_l2(predict(kappa), exact)))} |")


def speed(kappa: np.ndarray, fine: int, solvers: dict[str, Solver], directories: dict[str, Path]) -> None:
    print(f"\n## Time per sample at batch {BATCH} (ratio: the GMRES solver's time / this one's)\n")
    print("| predictor | parameters | training | per sample | ratio |")
    print("|---|---|---|---|---|")
    batch = np.ascontiguousarray(kappa[:BATCH])
    gmres = seconds_of(functools.partial(solve, batch, fine), 3) / BATCH
    dense = seconds_of(functools.partial(solve, batch[:DENSE_SAMPLES], fine, dense=True), 1) / DENSE_SAMPLES
    print(f"| exact solver, GMRES + fast-diagonalisation preconditioner (`solve`) | | | {duration(gmres)} | 1 |")
    print(f"| exact solver, dense LU ({DENSE_SAMPLES} samples) | | | {duration(dense)} | {gmres / dense:.2f} |")
    for name, solver in solvers.items():
        seconds = seconds_of(functools.partial(solver, batch), 10, warmup=2) / BATCH
        parameters, train_seconds, steps = run_facts(directories[name], PROBLEM)
        print(
            f"| Funcformer `{name}` | {parameters:,} | {steps:,} steps, {train_seconds:.0f} s | {duration(seconds)} "
            f"| {gmres / seconds:.0f} |"
        )


def main() -> None:
    global TEST_SIZE, BATCH, DENSE_SAMPLES, LEAST_SQUARES_SAMPLES, TRAIN_SIZE
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("runs", nargs="*", metavar="RUN_DIR", help="trained runs (python -m funcformer.darcy train)")
    parser.add_argument("--smoke", action="store_true", help="tiny sets, fits and timings: checks that the script runs")
    args = parser.parse_args()
    if args.smoke:  # 4 test samples, least squares on 8 and all 16 training samples, 2 dense solves
        TEST_SIZE, BATCH, DENSE_SAMPLES, LEAST_SQUARES_SAMPLES, TRAIN_SIZE = 4, 4, 2, (8, 16), 16
    header([*(["--smoke"] if args.smoke else []), *args.runs])
    start = time.perf_counter()

    run = RunConfig.of(PROBLEM)
    for directory in args.runs:
        trained_on = read_run(Path(directory), PROBLEM).data_config
        if trained_on != run.data_config:
            raise SystemExit(f"{directory}: trained on {trained_on}, not the default {run.data_config}")
    test = PROBLEM.dataset(default_cache(), run.data_config, TEST_SEED, TEST_SIZE)
    train = PROBLEM.dataset(default_cache(), run.data_config, run.seed, TRAIN_SIZE, fine=False)
    directories = {directory: Path(directory) for directory in args.runs}
    solvers = {name: load_solver(path, PROBLEM) for name, path in directories.items()}

    mean_u = train.u.mean(axis=0)
    predictors: dict[str, Callable[[np.ndarray], np.ndarray]] = {
        f"mean predictor (mean u of {len(train.u)} training samples)": lambda k: np.broadcast_to(mean_u, k.shape),
    }
    for count in LEAST_SQUARES_SAMPLES:
        least_squares = fit_least_squares(train.inputs[:count], train.u[:count])
        predictors[f"least squares, kappa -> u ({count} samples)"] = functools.partial(apply_linear, least_squares)
    predictors.update(normalised_predictors(train.inputs, train.u))
    predictors.update({f"Funcformer `{name}`": solver for name, solver in solvers.items()})
    accuracy("In distribution", test.inputs, test.exact(), predictors)
    speed(test.inputs, run.data_config.solver_degree, solvers, directories)
    doubled = 2.0 * test.inputs
    solve_start = time.perf_counter()
    exact = solve(doubled, run.data_config.solver_degree)
    print(f"\n(2 kappa: {len(doubled)} samples solved in {time.perf_counter() - solve_start:.1f} s)")
    accuracy("Out of distribution, kappa with twice the amplitude", doubled, exact, predictors)
    print(f"\ntotal {time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main()
