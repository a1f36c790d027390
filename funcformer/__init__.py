"""funcformer: the fast Chebyshev backend of the generic transformer, and the Poisson demo.

``Funcformer`` is ``applicative.nn``'s encoder on ``Cheb∘Cheb`` (functions of
two variables, with channels) written directly on coefficient arrays;
``generic`` rebuilds a one-channel model as that generic encoder, the
specification the fast backend is tested against. ``funcformer.poisson``
learns the solution operator of Poisson's equation with it.
Imports ``applicative``, never the reverse.
"""

from funcformer.generic import generic as generic
from funcformer.model import Config as Config
from funcformer.model import Funcformer as Funcformer
from funcformer.model import init as init
from funcformer.model import parameter_count as parameter_count
