"""funcformer: the generic transformer on functions of two variables, and the Poisson demo.

``Funcformer`` is ``applicative.nn``'s encoder instantiated on
``Cheb[X, Compose[ChebOf[Y], VecOf[Channel], _]]``, functions of (x, y) with
channels: ``ModelConfig`` gives its shape, ``init`` its initial weights.
``funcformer.poisson`` learns the solution operator of Poisson's equation
with it. Imports ``applicative``, never the reverse.
"""

from applicative import _sigterm as _sigterm  # first: SIGTERM while a command line starts (its docstring)
from funcformer.model import Funcformer as Funcformer
from funcformer.model import ModelConfig as ModelConfig
from funcformer.model import init as init
from funcformer.model import parameter_count as parameter_count
from funcformer.model import weights as weights

__all__ = ["Funcformer", "ModelConfig", "init", "parameter_count", "weights"]
