"""A run's training data as the model sees it, and its output scale.

The model sees the problem's normalised inputs x' and is trained on the targets u / (c * scale)
(``Problem.normalise``; c the normalisation's factor, ``scale`` the run's ``output_scale``),
computed once on the host in float64 and stored as float32.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from funcformer.learning.cache import default_cache
from funcformer.learning.metric import series_norm
from funcformer.learning.problem import Problem
from funcformer.learning.settings import RunConfig

__all__ = ["HELD_OUT", "SCALE_SAMPLES", "SCALE_SEED", "held_out_arrays", "output_scale", "training_arrays"]

SCALE_SEED = 12345
"""The seed of the inputs ``output_scale`` averages over (no split uses it)."""
SCALE_SAMPLES = 1024
"""How many inputs ``output_scale`` averages over."""
HELD_OUT = 256
"""How many of them a run's learning curve measures (``held_out_arrays``)."""


def output_scale(problem: Problem[Any], config: Any) -> float:
    """The typical ||u|| / c, c the normalisation's factor (Poisson: ||u|| / ||f||), as a mean over 1024
    inputs of ``SCALE_SEED``: the model predicts u in this unit, so its outputs start at the right
    size. ``loop.train`` computes it once, when a run starts, and stores it in the checkpoint
    (``checkpoints.State.scale``)."""
    data = problem.dataset(default_cache(), config, SCALE_SEED, SCALE_SAMPLES, False)
    _, log2_factors = problem.normalise(data.inputs)
    return float(np.mean(series_norm(data.u) / np.exp2(log2_factors)))


def training_arrays(run: RunConfig, scale: float) -> tuple[np.ndarray, np.ndarray]:
    """The training set as float32 (model inputs x' (train_size, n, n), targets u / (c * scale)
    (train_size, n, n)); a ValueError if an input's normalisation factor is not positive and finite."""
    data = run.problem.dataset(default_cache(), run.data_config, run.seed, run.train_size, False)
    return _as_model_sees(run, data.inputs, data.u, scale, "training set")


def held_out_arrays(run: RunConfig, scale: float, count: int = HELD_OUT) -> tuple[np.ndarray, np.ndarray]:
    """``count`` held-out samples as the model sees them (``training_arrays``'s form): the first of the inputs
    ``output_scale`` averages over (``SCALE_SEED``, which no training set or test set uses), the error on which
    is the run's learning curve (``State.held_out``)."""
    data = run.problem.dataset(default_cache(), run.data_config, SCALE_SEED, SCALE_SAMPLES, False)
    return _as_model_sees(run, data.inputs[:count], data.u[:count], scale, "held-out set")


def _as_model_sees(
    run: RunConfig, raw_inputs: np.ndarray, u: np.ndarray, scale: float, what: str
) -> tuple[np.ndarray, np.ndarray]:
    data_u = u
    inputs, log2_factors = run.problem.normalise(raw_inputs)
    factors = np.exp2(log2_factors)
    if not np.all(np.isfinite(factors) & (factors > 0)):
        raise ValueError(
            f"{run.problem.title} {what}: an input's normalisation factor is not positive and finite"
        )
    targets = data_u / (factors * scale)[:, None, None]
    return inputs.astype(np.float32), targets.astype(np.float32)
