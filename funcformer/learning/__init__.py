"""The operator-learning layer both tasks share: one ``Problem`` value per task, everything else here.

``problem``: what a task provides (data, normalisation, exact solver); ``training``: optax training
with checkpoints and resuming; ``solver``: ``load_solver(DIR)`` (numpy (B, N, N) -> (B, N, N)) and
``evaluate`` (the test metric beside the floor and the baselines, and the trust calibration);
``trust``: ``load_solver(DIR, check=True)``'s residuals, distances and thresholds; ``metric``: the metric, the floor
and the baselines in float64 numpy; ``plots``: PNG figures; ``cli``: ``python -m funcformer.<task>``.
Datasets are cached under ``default_cache()``: $FUNCFORMER_CACHE, else ~/.cache/funcformer.
"""

from funcformer.learning._files import default_cache as default_cache
from funcformer.learning.problem import Problem as Problem
from funcformer.learning.solver import CheckedSolver as CheckedSolver
from funcformer.learning.solver import Solver as Solver
from funcformer.learning.solver import evaluate as evaluate
from funcformer.learning.solver import load_solver as load_solver
from funcformer.learning.training import Run as Run
from funcformer.learning.training import train as train

__all__ = ["CheckedSolver", "Problem", "Run", "Solver", "default_cache", "evaluate", "load_solver", "train"]
