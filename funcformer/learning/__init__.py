"""The Funcformer's operator learning: a task hands it one ``Problem`` value; the loop, the checkpoints and the
datasets' store are every model's (``applicative.training``).

``problem``: what a task provides (data, normalisation, exact solver), and its datasets, made and cached
once; ``arrays``: a user's data as a ``Problem`` (``from_arrays``, ``from_values``); ``settings``:
``RunConfig``, a run's settings (config.json); ``data``: the training set as the model sees it and the
output scale; ``steps``: the Funcformer's loss, optimiser and ``Learner``; ``checkpoints``: ``load`` of a
task's run; ``loop``: ``train``; ``solver``: ``load_solver(DIR, problem)`` (numpy (B, P, Q) -> (B, P, Q),
any coefficient count); ``trust``: ``load_solver(DIR, problem, check=True)``'s residuals, distances and
thresholds; ``evaluation``: ``evaluate`` (the test metric beside the floor and the baselines, the speed, and
the trust calibration, written to the run's metrics.json); ``metric``: the metric, the floor and the
baselines in float64 numpy; ``plots``: PNG figures; ``cli``: ``python -m funcformer.<task>``. Datasets are
cached under ``default_cache()`` (``cache``): $FUNCFORMER_CACHE, else ~/.cache/funcformer.
"""

from funcformer.learning.arrays import from_arrays as from_arrays
from funcformer.learning.arrays import from_values as from_values
from funcformer.learning.arrays import lobatto_coefficients as lobatto_coefficients
from funcformer.learning.cache import default_cache as default_cache
from funcformer.learning.checkpoints import load as load
from funcformer.learning.evaluation import evaluate as evaluate
from funcformer.learning.loop import train as train
from funcformer.learning.problem import Problem as Problem
from funcformer.learning.settings import RunConfig as RunConfig
from funcformer.learning.settings import read_run as read_run
from funcformer.learning.solver import CheckedSolver as CheckedSolver
from funcformer.learning.solver import Solver as Solver
from funcformer.learning.solver import load_solver as load_solver

__all__ = [
    "CheckedSolver",
    "Problem",
    "RunConfig",
    "Solver",
    "default_cache",
    "evaluate",
    "from_arrays",
    "from_values",
    "load",
    "load_solver",
    "lobatto_coefficients",
    "read_run",
    "train",
]
