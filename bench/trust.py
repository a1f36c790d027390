"""Benchmark: does ``load_solver(DIR, check=True)`` flag the predictions not to trust?

For a trained run of each task (trained here first, with the default settings, if the directory holds
none; calibrated by ``evaluate`` if its metrics.json holds no calibration), predictions with their checks
on sets in and out of the training distribution, against the exact solutions:

- Poisson: 1024 held-out in-distribution sources (TEST_SEED samples 1024 to 2047; the run's calibration
  used samples 0 to 1023), and 1024 sources of TEST_SEED of each out-of-distribution family of
  ``funcformer.poisson.families`` (exact: ``poisson.solve`` at 64 points).
- Darcy: 1024 held-out in-distribution kappa (TEST_SEED samples 1024 to 2047); the same kappa doubled
  (2 kappa, solved at M = 32, as ``bench/darcy_baselines.py``); and the first 256 of them scaled so that
  max |kappa| on the metric's 64 x 64 grid is 20 (solved at M = 64: on 8 of them, M = 32 was off by up
  to 0.2).

Printed per task, as Markdown tables:

1. per set: the truncation floor (median: the exact solution cut to 16 x 16), the relative L2 error
   (median, p95), the check's residual (median, p95), the input's distance (median), and the rank
   correlation (Spearman) of the error with the residual, with the PDE's residual in L2
   (``strong_residual``: the norm the check does not use) and with the distance;
2. per set, with "bad" meaning an error above 10x the in-distribution median error: the share of bad
   predictions that each rule flags, and the share of the others it flags (on the in-distribution set, the
   false-alarm rate). Rules: the residual above the run's threshold (the check); the residual above 10x
   its median on the calibration set (a threshold the check could have used); the distance above the
   run's threshold (the simplest baseline: the input alone); either of the run's thresholds; the strong
   residual above its own 99% quantile on the calibration set (the same rule in the other norm). Beside
   them, the median error of the check's false alarms, as a multiple of the in-distribution median;
3. the cost per sample at batch 256: the prediction, the checked prediction, and the exact solver.

One OpenBLAS thread unless OPENBLAS_NUM_THREADS says otherwise; timings are noisy on a shared machine.

    python bench/trust.py                                    # runs/default and runs/darcy (trained if missing)
    python bench/trust.py --poisson DIR --darcy DIR
    python bench/trust.py --smoke --poisson DIR --darcy DIR  # tiny runs (trained if missing), tiny sets
"""

from __future__ import annotations

import argparse
import functools
import os
import sys
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # as in bench/poisson_baselines.py (why, there)

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the repository root

import numpy as np
from _report import SMOKE_RUN, SMOKE_TEST_SIZE, duration, header, seconds_of, smoke_model  # bench/
from scipy.stats import spearmanr

from applicative.training.files import CHECKPOINT, METRICS
from funcformer import darcy, poisson
from funcformer.learning import Problem, RunConfig, default_cache, evaluate, read_run, train
from funcformer.learning.metric import grid_values, relative_l2, truncate
from funcformer.learning.solver import load_solver
from funcformer.learning.trust import QUANTILE, UntrustedPrediction, read_calibration
from funcformer.poisson.families import FAMILIES

HELD_OUT = 1024
"""In-distribution samples after the calibration's (TEST_SEED samples 1024 to 2047)."""
WIDE = 256
"""kappa scaled to +-20: samples."""
WIDE_RANGE = 20.0
WIDE_FINE = 64
BAD = 10.0
"""A prediction is bad if its error is above this times the in-distribution median error."""
BATCH = 256
MEDIANS = 10.0
"""The other residual threshold the flagging table shows: this times the median calibration residual."""


@dataclass(frozen=True)
class Case:
    """A set of inputs with their exact solutions."""

    name: str
    inputs: np.ndarray
    exact: np.ndarray


@dataclass(frozen=True)
class Measured:
    """A set's errors and checks."""

    name: str
    error: np.ndarray
    residual: np.ndarray
    distance: np.ndarray
    strong: np.ndarray
    floor: np.ndarray
    """The exact solution truncated to n x n: its error."""


def ready(problem: Problem[Any], directory: Path, smoke: bool = False) -> None:
    """Train the default run into ``directory`` if it holds none; calibrate it if it is not. With ``smoke``,
    a tiny run (``_report.smoke_model``, ``SMOKE_RUN``), calibrated on ``SMOKE_TEST_SIZE`` samples."""
    if not (directory / CHECKPOINT).exists():
        print(f"\n(training the {'tiny' if smoke else 'default'} {problem.title} run into {directory})")
        run = RunConfig.of(problem, model=smoke_model(problem.model), **SMOKE_RUN) if smoke else RunConfig.of(problem)
        train(run, directory, progress=False)
    run = read_run(directory, problem)
    if read_calibration(directory / METRICS, run.data_config.n) is None:
        print(f"\n(calibrating {directory}: evaluate)")
        if smoke:
            evaluate(directory, problem, test_size=SMOKE_TEST_SIZE)
        else:
            evaluate(directory, problem)


def poisson_cases(task: poisson.DataConfig) -> list[Case]:
    held_out = poisson.sources(task, poisson.TEST_SEED, 2 * HELD_OUT)[HELD_OUT:]
    cases = [Case("in distribution (held out)", held_out, poisson.solve(held_out, task.solver_points))]
    for name, family in FAMILIES.items():
        if name != "in_distribution":
            f = family(task.n, poisson.TEST_SEED, HELD_OUT)
            cases.append(Case(name.replace("_", " "), f, poisson.solve(f, task.solver_points)))
    return cases


def darcy_cases(task: darcy.DataConfig) -> list[Case]:
    data = darcy.PROBLEM.dataset(default_cache(), task, darcy.TEST_SEED, 2 * HELD_OUT)
    kappa, exact = data.inputs[HELD_OUT:], data.exact()[HELD_OUT:]
    doubled = 2.0 * kappa
    wide = kappa[:WIDE] * (WIDE_RANGE / np.abs(grid_values(kappa[:WIDE])).max(axis=(1, 2)))[:, None, None]
    return [
        Case("in distribution (held out)", kappa, exact),
        Case("2 kappa", doubled, darcy.solve(doubled, task.solver_degree)),
        Case(f"kappa scaled to +-{WIDE_RANGE:.0f} (exact at M = {WIDE_FINE})", wide, darcy.solve(wide, WIDE_FINE)),
    ]


def spearman(a: np.ndarray, b: np.ndarray) -> float:
    return float(spearmanr(a, b).statistic)


def measured(case: Case, checked: Callable[[np.ndarray], Any], strong: Callable[..., np.ndarray]) -> Measured:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UntrustedPrediction)
        result = checked(case.inputs)
    error = relative_l2(result.u, case.exact)
    floor = relative_l2(truncate(case.exact, result.u.shape[-1]), case.exact)
    return Measured(case.name, error, result.residual, result.distance, strong(case.inputs, result.u), floor)


def report(problem: Problem[Any], directory: Path, cases: list[Case], strong: Callable[..., np.ndarray]) -> None:
    run = read_run(directory, problem)
    calibration = read_calibration(directory / METRICS, run.data_config.n)
    assert calibration is not None
    checked = load_solver(directory, problem, check=True)
    plain = load_solver(directory, problem)
    sets = [measured(case, checked, strong) for case in cases]
    # the other rules' thresholds, from the calibration set (TEST_SEED samples 0 to 1023, as the run's)
    calibration_set = problem.dataset(default_cache(), run.data_config, problem.test_seed, calibration.samples, True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UntrustedPrediction)
        calibrated = checked(calibration_set.inputs)
    strong_threshold = float(np.quantile(strong(calibration_set.inputs, calibrated.u), QUANTILE))
    median_threshold = MEDIANS * float(np.median(calibrated.residual))

    print(f"\n## {problem.title}: `{directory}`, error and checks per set\n")
    print(
        f"Thresholds (its test set's {calibration.quantile:.0%} quantiles, {calibration.samples} samples): "
        f"residual {calibration.residual_threshold:.2e}, distance {calibration.distance_threshold:.2f}; "
        f"strong residual (here, the same rule) {strong_threshold:.2e}; {MEDIANS:.0f}x the median residual "
        f"{median_threshold:.2e}.\n"
    )
    print(
        "| set | samples | floor: median | error: median | p95 | residual: median | p95 | distance: median | "
        "Spearman(error, residual) | (error, strong residual) | (error, distance) |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    pooled = Measured(
        "all sets pooled",
        np.concatenate([s.error for s in sets]),
        np.concatenate([s.residual for s in sets]),
        np.concatenate([s.distance for s in sets]),
        np.concatenate([s.strong for s in sets]),
        np.concatenate([s.floor for s in sets]),
    )
    for s in [*sets, pooled]:
        print(
            f"| {s.name} | {len(s.error)} | {np.median(s.floor):.2e} "
            f"| {np.median(s.error):.2e} | {np.percentile(s.error, 95):.2e} "
            f"| {np.median(s.residual):.2e} | {np.percentile(s.residual, 95):.2e} | {np.median(s.distance):.2f} "
            f"| {spearman(s.error, s.residual):.2f} | {spearman(s.error, s.strong):.2f} "
            f"| {spearman(s.error, s.distance):.2f} |"
        )

    limit = BAD * float(np.median(sets[0].error))
    print(
        f"\n## {problem.title}: flagging the bad predictions (error above {BAD:.0f}x the in-distribution "
        f"median, {limit:.2e})\n"
    )
    print(
        "Each cell: the share of the bad predictions flagged / the share of the others flagged (false alarms). "
        f"Rules: the check (residual above the run's threshold); the residual above {MEDIANS:.0f}x its median "
        "on the calibration set (another threshold); the distance above the run's threshold (the baseline: the "
        f"input alone); either of the run's two thresholds; the strong residual above its own {QUANTILE:.0%} "
        "quantile on the calibration set. Last column: the median error of the check's false alarms, as a "
        "multiple of the in-distribution median error.\n"
    )
    print(
        f"| set | bad | the check | residual > {MEDIANS:.0f}x median | distance (baseline) | either | strong residual "
        "| false alarms' error |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for s in [*sets, pooled]:
        bad = s.error > limit
        flagged = s.residual > calibration.residual_threshold
        far = s.distance > calibration.distance_threshold
        rules = [flagged, s.residual > median_threshold, far, flagged | far, s.strong > strong_threshold]

        def share(flags: np.ndarray, among: np.ndarray) -> str:
            return f"{np.mean(flags[among]):.1%}" if among.any() else "-"

        cells = " | ".join(f"{share(f, bad)} / {share(f, ~bad)}" for f in rules)
        false_alarms = flagged & ~bad
        ratio = f"{np.median(s.error[false_alarms]) / (limit / BAD):.1f}x" if false_alarms.any() else "-"
        print(f"| {s.name} | {np.count_nonzero(bad)} of {len(bad)} | {cells} | {ratio} |")

    batch = np.ascontiguousarray(cases[0].inputs[:BATCH])

    def quiet_checked() -> Any:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UntrustedPrediction)
            return checked(batch)

    assert problem.solve is not None, "the tasks have exact solvers"
    times = {
        "prediction (`load_solver(DIR)`)": seconds_of(functools.partial(plain, batch), 5, warmup=2),
        "checked prediction (`load_solver(DIR, check=True)`)": seconds_of(quiet_checked, 5, warmup=2),
        "exact solver (`solve`)": seconds_of(functools.partial(problem.solve, batch, run.data_config.solver), 3),
    }
    print(f"\n## {problem.title}: time per sample at batch {BATCH}\n")
    print("| | per sample |")
    print("|---|---|")
    for name, seconds in times.items():
        print(f"| {name} | {duration(seconds / BATCH)} |")


def main() -> None:
    global HELD_OUT, WIDE, BATCH
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--poisson", type=Path, help="a Poisson run (default runs/default)")
    parser.add_argument("--darcy", type=Path, help="a Darcy run (default runs/darcy)")
    parser.add_argument(
        "--smoke",
        action="store_true",
        help="tiny runs where none is (one layer of 2 channels, 2 steps, calibrated on 8 samples) and sets of "
        "8 samples: checks that the script runs. Needs --poisson and --darcy (not to leave tiny runs as the defaults)",
    )
    args = parser.parse_args()
    if args.smoke and (args.poisson is None or args.darcy is None):
        parser.error("--smoke needs --poisson and --darcy: the tiny runs it trains are not the default runs")
    args.poisson = args.poisson or Path("runs/default")
    args.darcy = args.darcy or Path("runs/darcy")
    header([*(["--smoke"] if args.smoke else []), f"--poisson={args.poisson}", f"--darcy={args.darcy}"])
    if args.smoke:
        HELD_OUT, WIDE, BATCH = SMOKE_TEST_SIZE, 2, SMOKE_TEST_SIZE  # 2 wide kappa: some take seconds at M = 64
    start = time.perf_counter()
    for problem, directory in ((poisson.PROBLEM, args.poisson), (darcy.PROBLEM, args.darcy)):
        ready(problem, directory, args.smoke)
    report(poisson.PROBLEM, args.poisson, poisson_cases(poisson.DataConfig()), poisson.strong_residual)
    report(darcy.PROBLEM, args.darcy, darcy_cases(darcy.DataConfig()), darcy.strong_residual)
    print(f"\ntotal {time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main()
