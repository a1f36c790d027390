"""A user's structure with a measure that is data: piecewise-linear functions on a non-uniform mesh.

``Mesh[N, A]`` holds the values f(x_i) of a piecewise-linear function of the variable ``N`` at
nodes 0 <= x_0 < x_1 < ... < x_{n-1} <= 1 (values of type ``A``: scalars, or any structure). Its
counit is the trapezoid rule, the exact integral of the piecewise-linear interpolant,

    counit(f) = sum_i w_i f(x_i),   w_i = (x_{i+1} - x_{i-1}) / 2 (one-sided at the two ends),

and its ``Dense`` hook is one axis whose Gram matrix is the diagonal of those weights (the lumped
mass matrix), so dot(f, g) = sum_i w_i f(x_i) g(x_i), the trapezoid rule of the product: the
dense formulas are the generic definitions exactly. Its coordinates are values at the nodes, and
``fmap`` maps each alone: the axis is ``nodal``, so attention's softmax runs on them, the weights a
bias on each key.

Written like ``DensePeriodic`` in docs/new_structure.md (section 6), with one design rule: the
nodes are part of the structure's *shape*, never an element. They are static pytree metadata (a
hashable tuple of floats), so no other structure's ``fmap``, transform, sum or gradient ever
touches them, and the same tuple is the axis's ``Axis.shape``, so two meshes meet in the dense
formulas only when their nodes are equal. ``pair`` raises a ValueError naming both meshes when
they are not.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from typing import Any, Generic, TypeVar

import jax
import jax.numpy as jnp
import numpy as np

from applicative import Applicative, Axis, Counit, Dense, Dim, Measured, Module, arithmetic, record, static
from applicative.stacked import stack, vmap, weighted_sum

__all__ = ["Mesh", "MeshOf", "trapezoid_weights"]

N = TypeVar("N", bound=Dim)  # the variable
T = TypeVar("T", bound=Dim)
A = TypeVar("A", covariant=True)  # the element type
B = TypeVar("B")


class MeshOf(Measured, Generic[N]):
    """The brand of Mesh[N, A]. Measured: a Mesh has a counit."""


def trapezoid_weights(nodes: Sequence[float]) -> np.ndarray:
    """The trapezoid rule's weights on these nodes: w_i = (x_{i+1} - x_{i-1}) / 2, one-sided at the ends."""
    x = np.asarray(nodes, np.float64)
    gaps = np.diff(x)
    return np.concatenate([[0.0], gaps]) / 2 + np.concatenate([gaps, [0.0]]) / 2


def _checked(nodes: Sequence[float], what: str) -> tuple[float, ...]:
    """The nodes as a hashable tuple of floats; a ValueError unless at least two, increasing, in [0, 1]."""
    x = tuple(float(node) for node in nodes)
    if len(x) < 2 or any(b <= a for a, b in itertools.pairwise(x)) or x[0] < 0.0 or x[-1] > 1.0:
        raise ValueError(f"{what}: nodes must be at least two increasing points in [0, 1], got {x}")
    return x


@record
class Mesh(Dense[MeshOf[N], A], Counit[MeshOf[N], A]):
    """A piecewise-linear function of the variable ``tag``, by its values at ``nodes``."""

    data: A  # the values, stacked: every leaf has a leading axis of length len(nodes)
    tag: type[N] = static()
    nodes: tuple[float, ...] = static()  # the shape, not an element: static, hashable

    @staticmethod
    def of(values: Sequence[B], tag: type[T], nodes: Sequence[float]) -> Mesh[T, B]:
        """The function taking ``values[i]`` (numbers or structures, all alike) at ``nodes[i]``."""
        x = _checked(nodes, f"Mesh.of[{tag.__name__}]")
        if len(values) != len(x):
            raise ValueError(f"Mesh.of[{tag.__name__}]: {len(values)} values for {len(x)} nodes")
        return Mesh(stack(list(values), f"Mesh.of[{tag.__name__}]"), tag, x)

    @staticmethod
    def from_function(f: Callable[[jax.Array], B], tag: type[T], nodes: Sequence[float]) -> Mesh[T, B]:
        """f, a map from a point to an element, sampled at the nodes."""
        x = _checked(nodes, f"Mesh.from_function[{tag.__name__}]")
        return Mesh(vmap(f, jnp.asarray(x)), tag, x)

    @property
    def size(self) -> int:
        return len(self.nodes)

    def fmap(self, f: Callable[[A], B]) -> Mesh[N, B]:
        return Mesh(vmap(f, self.data, size=self.size), self.tag, self.nodes)

    def pair(self, other: Applicative[MeshOf[N], B]) -> Mesh[N, tuple[A, B]]:
        if not isinstance(other, Mesh):
            raise TypeError(f"pair: {self} paired with a {type(other).__name__}")
        if other.tag is not self.tag or other.nodes != self.nodes:
            raise ValueError(f"pair: {self} vs {other}: not one mesh")
        return Mesh((self.data, other.data), self.tag, self.nodes)

    def pure(self, b: B) -> Mesh[N, B]:
        def constant(leaf: Any) -> jax.Array:
            return jnp.broadcast_to(leaf, (self.size, *jnp.shape(leaf)))

        return Mesh(jax.tree_util.tree_map(constant, b), self.tag, self.nodes)

    def counit(self, module: Module[A] | None = None) -> A:
        """The trapezoid rule, sum_i w_i f(x_i), in ``module``."""
        weights = jnp.asarray(trapezoid_weights(self.nodes))
        return weighted_sum(module if module is not None else arithmetic(), weights, self.data, self.size)

    # Dense: one nodal axis, the hat functions with their lumped (diagonal) Gram matrix; the nodes are
    # the axis's shape, so meshes on other nodes never meet in a dense formula.

    def axes(self) -> tuple[Axis]:
        return (Axis("Mesh", self.tag, self.size, trapezoid_weights(self.nodes), shape=self.nodes, nodal=True),)

    def elements(self) -> A:
        return self.data

    def with_elements(self, elements: B) -> Mesh[N, B]:
        return Mesh(elements, self.tag, self.nodes)

    def __str__(self) -> str:
        return f"Mesh[{self.tag.__name__}] on nodes {self.nodes}"
