"""applicative: transformers written once against Functor, Applicative, Counit and Ring.

The protocol layer (``Functor``, ``Applicative``, ``Counit``, ``Module``,
``Ring``), the structures that instantiate it (``Vec``, ``Compose``), and the
linear algebra written once over them (``dot``, ``mul_mm``, ...). The law
suite is ``applicative.laws``.
"""

from applicative.compose import Compose as Compose
from applicative.compose import ComposeOf as ComposeOf
from applicative.instances.chebyshev import Cheb as Cheb
from applicative.instances.chebyshev import ChebOf as ChebOf
from applicative.instances.chebyshev import CoefficientSoftmax as CoefficientSoftmax
from applicative.instances.chebyshev import chebyshev as chebyshev
from applicative.instances.distribution import Distribution as Distribution
from applicative.instances.distribution import DistributionOf as DistributionOf
from applicative.instances.distribution import Quantum as Quantum
from applicative.instances.distribution import QuantumOf as QuantumOf
from applicative.instances.distribution import distribution as distribution
from applicative.instances.distribution import mixture as mixture
from applicative.instances.distribution import quantum as quantum
from applicative.instances.sequence import causal_mask as causal_mask
from applicative.instances.sequence import one_hot as one_hot
from applicative.instances.sequence import sinusoidal_positions as sinusoidal_positions
from applicative.instances.tree import Leaf as Leaf
from applicative.instances.tree import Node as Node
from applicative.instances.tree import Tree as Tree
from applicative.instances.tree import TreeOf as TreeOf
from applicative.instances.vector import Vec as Vec
from applicative.instances.vector import VecOf as VecOf
from applicative.instances.vector import as_vec as as_vec
from applicative.instances.vector import matrix as matrix
from applicative.instances.vector import vector as vector
from applicative.linalg import FastLinalg as FastLinalg
from applicative.linalg import add as add
from applicative.linalg import dot as dot
from applicative.linalg import generic_only as generic_only
from applicative.linalg import linear as linear
from applicative.linalg import mul_mm as mul_mm
from applicative.linalg import mul_mmt as mul_mmt
from applicative.linalg import mul_mv as mul_mv
from applicative.linalg import mul_vm as mul_vm
from applicative.linalg import outer as outer
from applicative.linalg import sum_mul_mmt as sum_mul_mmt
from applicative.protocols import ARITHMETIC as ARITHMETIC
from applicative.protocols import Applicative as Applicative
from applicative.protocols import Arithmetic as Arithmetic
from applicative.protocols import Counit as Counit
from applicative.protocols import Dim as Dim
from applicative.protocols import Functor as Functor
from applicative.protocols import Module as Module
from applicative.protocols import Pointwise as Pointwise
from applicative.protocols import Real as Real
from applicative.protocols import Ring as Ring
from applicative.protocols import ap as ap
from applicative.protocols import arithmetic as arithmetic
from applicative.protocols import counit as counit
from applicative.protocols import lift_a2 as lift_a2
