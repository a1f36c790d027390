"""The operator-learning layer every task shares: a task hands it one ``Problem`` value.

``problem``: what a task provides (data, normalisation, exact solver), and its datasets, made and cached
once; ``arrays``: a user's data as a ``Problem`` (``from_arrays``, ``from_values``); ``settings``:
``RunConfig``, a run's settings (config.json); ``learner``: ``Learner``, any model as the loop trains it
(parameters from a seed, a loss on a minibatch, a prediction, optionally an augmentation; ``symmetry``: the
square's eight, ``dihedral``); ``data``: the training set as the model sees it and the
output scale; ``steps``: the loss, the optimiser and the jitted step (pure functions); ``checkpoints``:
``save`` and ``load``; ``loop``: ``train``; ``solver``: ``load_solver(DIR, problem)`` (numpy
(B, P, Q) -> (B, P, Q), any coefficient count); ``trust``: ``load_solver(DIR, problem, check=True)``'s
residuals, distances and thresholds; ``evaluation``: ``evaluate`` (the test metric beside the floor and
the baselines, the speed, and the trust calibration, written to the run's metrics.json); ``metric``: the
metric, the floor and the baselines in float64 numpy; ``plots``: PNG figures; ``processes``: one run on
several processes (``jax.distributed``), process 0 owning its directory; ``cli``:
``python -m funcformer.<task>``. Datasets are cached under ``default_cache()``: $FUNCFORMER_CACHE, else
~/.cache/funcformer.
"""

from funcformer.learning._files import default_cache as default_cache
from funcformer.learning.arrays import from_arrays as from_arrays
from funcformer.learning.arrays import from_values as from_values
from funcformer.learning.arrays import lobatto_coefficients as lobatto_coefficients
from funcformer.learning.checkpoints import State as State
from funcformer.learning.checkpoints import load as load
from funcformer.learning.evaluation import evaluate as evaluate
from funcformer.learning.learner import Learner as Learner
from funcformer.learning.loop import Preempted as Preempted
from funcformer.learning.loop import TrainingDiverged as TrainingDiverged
from funcformer.learning.loop import fit as fit
from funcformer.learning.loop import train as train
from funcformer.learning.problem import Problem as Problem
from funcformer.learning.settings import RunConfig as RunConfig
from funcformer.learning.settings import read_run as read_run
from funcformer.learning.solver import CheckedSolver as CheckedSolver
from funcformer.learning.solver import Solver as Solver
from funcformer.learning.solver import load_solver as load_solver

__all__ = [
    "CheckedSolver",
    "Learner",
    "Preempted",
    "Problem",
    "RunConfig",
    "Solver",
    "State",
    "TrainingDiverged",
    "default_cache",
    "evaluate",
    "fit",
    "from_arrays",
    "from_values",
    "load",
    "load_solver",
    "lobatto_coefficients",
    "read_run",
    "train",
]
