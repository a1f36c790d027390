"""A user's coefficient structure, written as docs/legendre.md teaches: Fourier series on the circle.

``Fourier[N, A]`` holds the first ``size`` coefficients of a real trigonometric series of the variable
``N`` on [0, 2 pi), in the basis

    phi_0 = 1,  phi_{2k-1} = cos kx,  phi_{2k} = sin kx      (k = 1, 2, ...),

stacked along the leading axis of every leaf (values of type ``A``: scalars, or any structure, a tree
among them). It is the composition sweep's structure that is *not nodal*: its coordinates are
coefficients, not values at positions.

    fmap f    values at the P equispaced points x_p = 2 pi p / P, f at each, projected back by the
              trapezoid rule, c_n = (norm_n / P) sum_p phi_n(x_p) f(x_p) (norm 1 for phi_0, else 2):
              exact for a composite of degree below P - size / 2 (a product of two series, when P >= 2 size)
    pure b    the constant function b: (b, 0, ..., 0)
    counit    the integral over the circle, 2 pi c_0
    Dense     one axis, the basis's Gram matrix diag(2 pi, pi, pi, ...) (an orthogonal basis), given as
              its diagonal; not ``nodal``: a diagonal that is no weight per position (the softmax of a
              row of coefficients is not the softmax of each coefficient)

Every map along the coefficient axis (the transforms, ``pure``'s pad, the constructor's conversion)
goes through ``applicative.stacked.along``, never ``jax.tree_util.tree_map`` over every leaf: a tree
among the values is reached through its own ``restack``, which maps its values and keeps its layout.
Elements that are not coordinates (distributions) are refused when the series is built.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any, Generic, TypeVar

import jax
import jax.numpy as jnp
import numpy as np

from applicative import Applicative, Axis, Counit, Dense, Dim, Measured, Module, arithmetic, record, static
from applicative.stacked import along, largest, stack, vmap, weighted_sum

__all__ = ["Fourier", "FourierOf", "basis", "gram", "transform"]

N = TypeVar("N", bound=Dim)  # the variable
T = TypeVar("T", bound=Dim)
A = TypeVar("A", covariant=True)  # the element type
B = TypeVar("B")


class FourierOf(Measured, Generic[N]):
    """The brand of Fourier[N, A]. Measured: a Fourier series has a counit."""


def basis(size: int, x: np.ndarray) -> np.ndarray:
    """The first ``size`` basis functions at the points ``x`` (points x size)."""
    n = np.arange(size)
    k = (n + 1) // 2
    return np.where(n == 0, 1.0, np.where(n % 2 == 1, np.cos(k * x[:, None]), np.sin(k * x[:, None])))


@functools.cache
def transform(size: int, points: int) -> tuple[np.ndarray, np.ndarray]:
    """At the ``points`` equispaced points: the values of the basis functions (points x size) and the
    projection back (size x points)."""
    if points <= size:
        raise ValueError(f"{points} points cannot resolve {size} Fourier coefficients")
    x = 2 * np.pi * np.arange(points) / points
    values = basis(size, x)
    norm = np.where(np.arange(size) == 0, 1.0, 2.0) / points
    return values, norm[:, None] * values.T


@functools.cache
def gram(size: int) -> np.ndarray:
    """The Gram matrix's diagonal: the integrals of the squared basis functions, 2 pi, then pi."""
    return np.where(np.arange(size) == 0, 2 * np.pi, np.pi)


def _along_coefficients(matrix: np.ndarray, elements: Any, what: str) -> Any:
    """``matrix`` applied along the leading (stacked) axis of the elements, through ``along``."""
    return along(elements, lambda leaf: jnp.tensordot(jnp.asarray(matrix, leaf.dtype), leaf, axes=1), what)


@record
class Fourier(Dense[FourierOf[N], A], Counit[FourierOf[N], A]):
    """A function on the circle of the variable ``tag``: its first ``size`` Fourier coefficients."""

    data: A
    tag: type[N] = static()
    size: int = static()
    points: int = static()  # where fmap evaluates: more than ``size``

    @staticmethod
    def of(coefficients: Sequence[B], tag: type[T], points: int | None = None) -> Fourier[T, B]:
        """The series sum_n c_n phi_n of a list of alike coefficients (numbers or structures)."""
        what = f"Fourier.of[{tag.__name__}]"
        size = len(coefficients)
        data = along(stack(list(coefficients), what), jnp.asarray, what)
        return Fourier(data, tag, size, 2 * size if points is None else points)

    @staticmethod
    def from_function(f: Callable[[jax.Array], B], size: int, tag: type[T]) -> Fourier[T, B]:
        """The first ``size`` coefficients of f, a map from a point to an element, at 2 size points."""
        _, project = transform(size, 2 * size)
        x = 2 * np.pi * np.arange(2 * size) / (2 * size)
        return Fourier(_along_coefficients(project, vmap(f, jnp.asarray(x)), "Fourier"), tag, size, 2 * size)

    def fmap(self, f: Callable[[A], B]) -> Fourier[N, B]:
        values, project = transform(self.size, self.points)
        at_points = _along_coefficients(values, self.data, f"{self}.fmap")
        mapped = vmap(f, at_points, size=self.points)
        return Fourier(_along_coefficients(project, mapped, f"{self}.fmap"), self.tag, self.size, self.points)

    def pair(self, other: Applicative[FourierOf[N], B]) -> Fourier[N, tuple[A, B]]:
        if not isinstance(other, Fourier):
            raise TypeError(f"pair: {self} paired with a {type(other).__name__}")
        if other.tag is not self.tag or other.size != self.size:
            raise ValueError(f"pair: {self} vs {other}")
        return Fourier((self.data, other.data), self.tag, self.size, self.points)

    def pure(self, b: B) -> Fourier[N, B]:
        """The constant function b: (b, 0, ..., 0)."""

        def constant(leaf: Any) -> jax.Array:
            leaf = jnp.asarray(leaf)
            return jnp.zeros((self.size, *leaf.shape), leaf.dtype).at[0].set(leaf)

        return Fourier(along(b, constant, f"{self}.pure"), self.tag, self.size, self.points)

    def counit(self, module: Module[A] | None = None) -> A:
        """The integral over the circle, 2 pi c_0, in ``module``."""
        weights = np.zeros(self.size)
        weights[0] = 2 * np.pi
        m = module if module is not None else arithmetic()
        return weighted_sum(m, jnp.asarray(weights), self.data, self.size)

    def axes(self) -> tuple[Axis]:
        return (Axis("Fourier", self.tag, self.size, gram(self.size)),)

    def elements(self) -> A:
        return self.data

    def with_elements(self, elements: B) -> Fourier[N, B]:
        return Fourier(elements, self.tag, self.size, self.points)

    def largest(self) -> jax.Array:
        """The largest value at the points fmap evaluates at (``nn.Sampled``: the softmax's shift)."""
        values, _ = transform(self.size, self.points)
        return largest(_along_coefficients(values, self.data, f"{self}.largest"))

    def __str__(self) -> str:
        return f"Fourier[{self.tag.__name__}] of {self.size} coefficients"
