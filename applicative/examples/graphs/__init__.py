"""The graphs example: a relational transformer on ``Graph`` learns the CLRS benchmark's graph algorithms.

``clrs`` is the benchmark made by code (its samplers, tasks and score; ``algorithms``, its twelve graph
algorithms' outputs; ported sample for sample); ``model`` the encode-process-decode model
(``nn.RelationalAttention`` over the pairs of a graph's nodes, the weights shared by its processing steps);
``training`` a run through the learning layer, ``applicative.training.fit``; ``cli`` the command line,
``python -m applicative.examples.graphs``. docs/graphs.md has the results beside the published ones.
"""

from applicative.examples.graphs.clrs import ALGORITHMS as ALGORITHMS
from applicative.examples.graphs.clrs import sample as sample
from applicative.examples.graphs.clrs import score as score
from applicative.examples.graphs.model import Config as Config
from applicative.examples.graphs.training import evaluate as evaluate
from applicative.examples.graphs.training import train as train

__all__ = ["ALGORITHMS", "Config", "evaluate", "sample", "score", "train"]
