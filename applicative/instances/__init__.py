"""The structures: ``Vec``, ``Cheb`` (and its functional core ``chebyshev``), ``Compose``, ``Tree``,
``DenseTree`` (and its functional core ``dyadic``), ``Graph`` (and ``graph_layout``), ``Distribution`` and
``Quantum``; beside them
``collocation``, the numpy float64 kit of the tasks' reference solvers (over ``chebyshev``). Instances
import the protocols, never each other (``Compose`` composes any two), but for ``DenseTree``, which
converts to and from ``Tree``, its specification."""

from applicative.instances.cheb import Cheb as Cheb
from applicative.instances.cheb import ChebOf as ChebOf
from applicative.instances.cheb import as_cheb as as_cheb
from applicative.instances.compose import Compose as Compose
from applicative.instances.compose import ComposeOf as ComposeOf
from applicative.instances.dense_tree import DenseTree as DenseTree
from applicative.instances.dense_tree import DenseTreeOf as DenseTreeOf
from applicative.instances.dense_tree import as_dense_tree as as_dense_tree
from applicative.instances.distribution import Distribution as Distribution
from applicative.instances.distribution import DistributionOf as DistributionOf
from applicative.instances.distribution import Quantum as Quantum
from applicative.instances.distribution import QuantumOf as QuantumOf
from applicative.instances.distribution import mixture as mixture
from applicative.instances.graph import EdgeMask as EdgeMask
from applicative.instances.graph import Graph as Graph
from applicative.instances.graph import GraphOf as GraphOf
from applicative.instances.graph import as_graph as as_graph
from applicative.instances.tree import Leaf as Leaf
from applicative.instances.tree import Node as Node
from applicative.instances.tree import Tree as Tree
from applicative.instances.tree import TreeOf as TreeOf
from applicative.instances.tree import as_tree as as_tree
from applicative.instances.vector import Vec as Vec
from applicative.instances.vector import VecOf as VecOf
from applicative.instances.vector import as_vec as as_vec

__all__ = [
    "Cheb",
    "ChebOf",
    "Compose",
    "ComposeOf",
    "DenseTree",
    "DenseTreeOf",
    "Distribution",
    "DistributionOf",
    "EdgeMask",
    "Graph",
    "GraphOf",
    "Leaf",
    "Node",
    "Quantum",
    "QuantumOf",
    "Tree",
    "TreeOf",
    "Vec",
    "VecOf",
    "as_cheb",
    "as_dense_tree",
    "as_graph",
    "as_tree",
    "as_vec",
    "mixture",
]
