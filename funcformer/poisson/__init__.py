"""The Poisson operator-learning task (docs/poisson.md) and its Funcformer demo.

``task``: sources, the spectral reference solver, the metric, cached datasets;
``training``: optax training with checkpoints and resuming; ``solver``:
``load_solver(DIR)`` (numpy (B, N, N) sources -> (B, N, N) potentials) and
``evaluate``; ``plots``: PNG figures. The CLI is ``python -m funcformer.poisson``.
"""

from funcformer.poisson.solver import evaluate as evaluate
from funcformer.poisson.solver import load_solver as load_solver
from funcformer.poisson.task import Task as Task
from funcformer.poisson.training import Run as Run
from funcformer.poisson.training import train as train

__all__ = ["Run", "Task", "evaluate", "load_solver", "train"]
