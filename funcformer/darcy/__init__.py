"""The Darcy-flow operator-learning task (docs/darcy.md).

``task``: log-permeabilities, the spectral reference solver, the metric (Poisson's), cached datasets.
"""

from funcformer.darcy.task import Task as Task

__all__ = ["Task"]
