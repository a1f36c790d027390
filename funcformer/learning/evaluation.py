"""A trained run's evaluation on its held-out test set: its error beside the truncation floor and the
baselines, its speed beside the exact solver's, and the calibration of its checks (metrics.json).

``evaluate(DIR, problem)`` loads the run as a solver (``funcformer.learning.solver``), predicts the
test set, and writes what it measured to the run's metrics.json, which ``load_solver(DIR, problem,
check=True)`` reads its thresholds from; the metric, the floor and the baselines are
``funcformer.learning.metric``'s, the calibration ``funcformer.learning.trust``'s.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import numpy as np

from applicative.training.files import METRICS, holding_run, write_atomically
from funcformer.learning.cache import default_cache
from funcformer.learning.checkpoints import load
from funcformer.learning.metric import apply_linear, fit_least_squares, relative_l2, summary, truncation_floor
from funcformer.learning.problem import Problem, check_problem
from funcformer.learning.settings import read_run
from funcformer.learning.solver import as_checked_solver, as_solver
from funcformer.learning.trust import calibrate
from funcformer.model import parameter_count

__all__ = ["evaluate"]


def evaluate(path: str | Path, problem: Problem[Any], test_size: int = 1024) -> dict[str, Any]:
    """Test metrics of the ``problem`` run in ``path`` (written to its metrics.json): relative L2 error (mean,
    median, p95) beside the truncation floor and two baselines fitted on the run's training set (the
    mean target, and the least-squares linear map from inputs to targets), seconds per prediction
    (batch ``test_size``) vs per exact solve, and the run's trust calibration (``trust.calibrate``:
    the training set's input statistics and the test set's residual and distance thresholds, under
    ``"trust"``, which ``load_solver(path, check=True)`` reads); a run of another task is refused.
    A problem without an exact solver (``Problem.solve`` None) has ``"seconds_per_solve"`` None; one
    without a residual (``Problem.residual`` None) has no ``"trust"`` entry: there is no residual to
    take a threshold of, and ``load_solver(path, check=True)`` refuses it.
    It holds the run directory (``holding_run``): a run in another process's use is refused."""
    directory = Path(path)
    check_problem(problem, f"evaluate({directory})")
    with holding_run(directory):
        return _evaluate(directory, problem, test_size)


def _evaluate(directory: Path, problem: Problem[Any], test_size: int) -> dict[str, Any]:
    run = read_run(directory, problem)
    state = load(directory, run)
    solver = as_solver(state.model, state.scale, run, directory)
    test = run.problem.dataset(default_cache(), run.data_config, run.problem.test_seed, test_size, True)
    train = run.problem.dataset(default_cache(), run.data_config, run.seed, run.train_size, False)
    solver(test.inputs)  # compile
    start = time.perf_counter()
    predicted = solver(test.inputs)
    model_seconds = time.perf_counter() - start
    seconds_per_solve: float | None = None
    if run.problem.solve is not None:
        start = time.perf_counter()
        run.problem.solve(test.inputs, run.data_config.solver)
        seconds_per_solve = (time.perf_counter() - start) / test_size
    mean_target = np.broadcast_to(train.u.mean(axis=0), test.u.shape)
    linear = apply_linear(fit_least_squares(train.inputs, train.u), test.inputs)
    metrics: dict[str, Any] = {
        "problem": run.problem.name,
        "test": summary(relative_l2(predicted, test.exact())),
        "truncation_floor": truncation_floor(test.exact(), run.data_config.n),
        "mean_predictor": summary(relative_l2(mean_target, test.exact())),
        "least_squares": summary(relative_l2(linear, test.exact())),
        "test_size": test_size,
        "parameters": parameter_count(state.model),
        "steps": state.step,
        "train_seconds": state.seconds,
        "seconds_per_prediction": model_seconds / test_size,
        "seconds_per_solve": seconds_per_solve,
    }
    if run.problem.residual is not None:
        checked = as_checked_solver(state.model, state.scale, run, directory, None)(test.inputs)
        calibration = calibrate(
            run.problem.normalise(train.inputs)[0], run.problem.normalise(test.inputs)[0], checked.residual
        )
        metrics["trust"] = calibration.to_json()
    write_atomically(directory / METRICS, json.dumps(metrics, indent=2))
    return metrics
