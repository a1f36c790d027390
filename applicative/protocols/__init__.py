"""The protocol layer: brands and dimension tags, Functor, Applicative, Counit, Module and Ring,
``Dense``, the hook through which the linear algebra's fast paths run, and ``VectorSpace``, the
arithmetic operators of the structures on which the pointwise Module is a vector space."""

from applicative.protocols.algebra import ARITHMETIC as ARITHMETIC
from applicative.protocols.algebra import Arithmetic as Arithmetic
from applicative.protocols.algebra import Module as Module
from applicative.protocols.algebra import Pointwise as Pointwise
from applicative.protocols.algebra import Real as Real
from applicative.protocols.algebra import Ring as Ring
from applicative.protocols.algebra import arithmetic as arithmetic
from applicative.protocols.applicative import Applicative as Applicative
from applicative.protocols.applicative import Shaped as Shaped
from applicative.protocols.applicative import ap as ap
from applicative.protocols.applicative import lift_a2 as lift_a2
from applicative.protocols.dense import Axis as Axis
from applicative.protocols.dense import Dense as Dense
from applicative.protocols.dense import to_array as to_array
from applicative.protocols.functor import Functor as Functor
from applicative.protocols.integration import Counit as Counit
from applicative.protocols.integration import counit as counit
from applicative.protocols.kinds import Dim as Dim
from applicative.protocols.kinds import Measured as Measured
from applicative.protocols.operators import VectorSpace as VectorSpace
from applicative.protocols.sparse import SparseMask as SparseMask

__all__ = [
    "ARITHMETIC",
    "Applicative",
    "Arithmetic",
    "Axis",
    "Counit",
    "Dense",
    "Dim",
    "Functor",
    "Measured",
    "Module",
    "Pointwise",
    "Real",
    "Ring",
    "Shaped",
    "SparseMask",
    "VectorSpace",
    "ap",
    "arithmetic",
    "counit",
    "lift_a2",
    "to_array",
]
