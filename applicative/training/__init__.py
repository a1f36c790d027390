"""The learning layer: one loop, one checkpoint format and one dataset store for every model on every structure,
as ``flax.training`` is Flax's. It knows no model and no task: a model is a ``Learner`` value, its data a
``Source``, and a run a directory.

``learner``: ``Learner``, a model as the loop trains it (parameters from a seed, a loss on a minibatch, a
prediction, optionally an augmentation); ``data``: where minibatches come from (``Arrays``, a training set
held whole; ``Drawn``, minibatches made from (seed, step)); ``loop``: ``fit``; ``validation``: its held-out
curve (named metrics, early stopping, the best); ``steps``: the jitted step and the minibatch order (pure
functions); ``checkpoints``: ``State`` and the one checkpoint format, ``restore`` of a finished run;
``tensorboard``: a run's curve as TensorBoard events, where tensorboardX is installed; ``files``: atomic files
and the run directory's lock; ``store``: datasets on disk, checked;
``processes``, ``rendezvous`` (with ``hosting`` and ``wire``) and ``lifeline``: one run on several processes
(``jax.distributed``), their meeting, the proof that each belongs to the run, a dead one named within seconds,
SIGTERM as preemption; ``stopping``: SIGTERM outside the loop, exit status 75 at any moment;
``optimisers``: ``warmup_cosine`` and ``step_decay``; ``precision``: ``bfloat16``, mixed precision;
``losses``: ``values_relative_l2``; ``symmetry``: the square's eight symmetries as an augmentation
(``dihedral``); ``command``: the flags and exit statuses every training command line shares; ``settings``: a
run's settings as one typed record, its flags, config.json and the rule of ``--resume``.
"""

from applicative.training import command as command
from applicative.training import settings as settings
from applicative.training.checkpoints import State as State
from applicative.training.checkpoints import restore as restore
from applicative.training.data import Arrays as Arrays
from applicative.training.data import Drawn as Drawn
from applicative.training.data import Source as Source
from applicative.training.learner import Learner as Learner
from applicative.training.loop import Preempted as Preempted
from applicative.training.loop import TrainingDiverged as TrainingDiverged
from applicative.training.loop import fit as fit
from applicative.training.losses import values_relative_l2 as values_relative_l2
from applicative.training.optimisers import step_decay as step_decay
from applicative.training.optimisers import warmup_cosine as warmup_cosine
from applicative.training.precision import bfloat16 as bfloat16
from applicative.training.symmetry import dihedral as dihedral
from applicative.training.symmetry import symmetrised as symmetrised

__all__ = [
    "Arrays",
    "Drawn",
    "Learner",
    "Preempted",
    "Source",
    "State",
    "TrainingDiverged",
    "bfloat16",
    "command",
    "dihedral",
    "fit",
    "restore",
    "settings",
    "step_decay",
    "symmetrised",
    "values_relative_l2",
    "warmup_cosine",
]
