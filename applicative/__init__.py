"""applicative: transformers written once against Functor, Applicative, Counit and Ring.

The protocol layer (``Functor``, ``Applicative``, ``Counit``, ``Module``,
``Ring``, and ``Dense``, the hook of the fast paths), the structures that
instantiate it (``Vec``, ``Cheb``, ``Compose``, ``Tree``, ``DenseTree``,
``Graph``, ``Distribution``, ``Quantum``), and the linear algebra written once over them (``dot``,
``mul_mm``, ...). Neural networks are in ``applicative.nn``, the law suite in
``applicative.laws`` (its strategies in ``applicative.strategies``).
"""

from applicative import _sigterm as _sigterm  # first: SIGTERM while a command line starts (its docstring)
from applicative.instances import Cheb as Cheb
from applicative.instances import ChebOf as ChebOf
from applicative.instances import Compose as Compose
from applicative.instances import ComposeOf as ComposeOf
from applicative.instances import DenseTree as DenseTree
from applicative.instances import DenseTreeOf as DenseTreeOf
from applicative.instances import Distribution as Distribution
from applicative.instances import DistributionOf as DistributionOf
from applicative.instances import Graph as Graph
from applicative.instances import GraphOf as GraphOf
from applicative.instances import Leaf as Leaf
from applicative.instances import Node as Node
from applicative.instances import Quantum as Quantum
from applicative.instances import QuantumOf as QuantumOf
from applicative.instances import Tree as Tree
from applicative.instances import TreeOf as TreeOf
from applicative.instances import Vec as Vec
from applicative.instances import VecOf as VecOf
from applicative.instances import as_cheb as as_cheb
from applicative.instances import as_dense_tree as as_dense_tree
from applicative.instances import as_graph as as_graph
from applicative.instances import as_tree as as_tree
from applicative.instances import as_vec as as_vec
from applicative.instances import mixture as mixture
from applicative.linalg import add as add
from applicative.linalg import dot as dot
from applicative.linalg import each_mul_mmt as each_mul_mmt
from applicative.linalg import generic_only as generic_only
from applicative.linalg import linear as linear
from applicative.linalg import mul_mm as mul_mm
from applicative.linalg import mul_mmt as mul_mmt
from applicative.linalg import mul_mv as mul_mv
from applicative.linalg import mul_vm as mul_vm
from applicative.linalg import outer as outer
from applicative.linalg import record_fast_paths as record_fast_paths
from applicative.linalg import scale as scale
from applicative.linalg import sum_mul_mmt as sum_mul_mmt
from applicative.nn import causal_mask as causal_mask
from applicative.nn import one_hot as one_hot
from applicative.nn import padding_mask as padding_mask
from applicative.nn import sinusoidal_positions as sinusoidal_positions
from applicative.protocols import ARITHMETIC as ARITHMETIC
from applicative.protocols import Applicative as Applicative
from applicative.protocols import Arithmetic as Arithmetic
from applicative.protocols import Axis as Axis
from applicative.protocols import Counit as Counit
from applicative.protocols import Dense as Dense
from applicative.protocols import Dim as Dim
from applicative.protocols import Functor as Functor
from applicative.protocols import Measured as Measured
from applicative.protocols import Module as Module
from applicative.protocols import Pointwise as Pointwise
from applicative.protocols import Real as Real
from applicative.protocols import Ring as Ring
from applicative.protocols import Shaped as Shaped
from applicative.protocols import SparseMask as SparseMask
from applicative.protocols import VectorSpace as VectorSpace
from applicative.protocols import ap as ap
from applicative.protocols import arithmetic as arithmetic
from applicative.protocols import counit as counit
from applicative.protocols import lift_a2 as lift_a2
from applicative.protocols import to_array as to_array
from applicative.records import record as record
from applicative.records import static as static

__all__ = [
    "ARITHMETIC",
    "Applicative",
    "Arithmetic",
    "Axis",
    "Cheb",
    "ChebOf",
    "Compose",
    "ComposeOf",
    "Counit",
    "Dense",
    "DenseTree",
    "DenseTreeOf",
    "Dim",
    "Distribution",
    "DistributionOf",
    "Functor",
    "Graph",
    "GraphOf",
    "Leaf",
    "Measured",
    "Module",
    "Node",
    "Pointwise",
    "Quantum",
    "QuantumOf",
    "Real",
    "Ring",
    "Shaped",
    "SparseMask",
    "Tree",
    "TreeOf",
    "Vec",
    "VecOf",
    "VectorSpace",
    "add",
    "ap",
    "arithmetic",
    "as_cheb",
    "as_dense_tree",
    "as_graph",
    "as_tree",
    "as_vec",
    "causal_mask",
    "counit",
    "dot",
    "each_mul_mmt",
    "generic_only",
    "lift_a2",
    "linear",
    "mixture",
    "mul_mm",
    "mul_mmt",
    "mul_mv",
    "mul_vm",
    "one_hot",
    "outer",
    "padding_mask",
    "record",
    "record_fast_paths",
    "scale",
    "sinusoidal_positions",
    "static",
    "sum_mul_mmt",
    "to_array",
]
