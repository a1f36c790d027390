"""Dense: the one instance hook through which every fast path of the linear algebra runs.

Many structures hold their elements as coordinates in a basis, stacked along
array axes. Such a structure shows them by reporting

    axes()               the axes it lays in front of its elements' array leaves, outermost first,
                         each with the Gram matrix of its basis (the inner products of the basis
                         functions, i.e. the measure in coordinates); None where it cannot
    elements()           its elements, stacked: a pytree whose leaves carry those axes first
    with_elements(e)     the same shape holding other stacked elements e

    Vec of n elements         one axis of length n, Gram matrix the identity (the counting measure)
    Cheb of N coefficients    one axis of length N, G_ij = integral over [-1, 1] of T_i T_j
    Compose of two of these   both axes (the product measure)
    DenseTree of n slots      one axis of length n, Gram matrix diag(2^-depth): a measure that is data

An axis is ``nodal`` where its coordinates are values at positions (a Vec's, a
tree's; not a Cheb's coefficients): ``fmap`` acts on each alone, and its Gram
matrix is a weight per position.

Two axes meet in a product (their coordinates contracted through one Gram
matrix) only when they are provably one measure (``Axis.__eq__``): the same
kind, tag and size, and the same ``Axis.shape``, which for a measure that is
data (a tree's shape, a mesh's nodes) is the identity of that data: the same
tree, or trees built from it; equal node tuples. An axis whose ``shape`` is
None says its Gram matrix is the whole measure: two such axes meet when their
Gram matrices are one object or equal concrete arrays, never when they are
traced. Two axes that do not meet make the linear algebra take the generic
definition, which refines (two trees) or raises (a user's ``pair``); a dense
formula never runs on two measures.

Under ordinary arithmetic, ``applicative.linalg`` then computes each operation
by one dense formula, the coordinates contracted through the Gram matrices of
the contracted axes: dot(a, b) = a^T G b, mul_mv(m, v) = M G v,
mul_mm(a, b) = A G B, and sums and scalings act on the coordinates directly.
An instance never calls the linear algebra; it only describes itself. A
structure nested inside another carries the outer axes in front of its leaves;
``nest`` builds one from its shells, giving a shell whose shape is data those
axes too (a stack of trees, each row of a score matrix).

Each instance states how the dense formula relates to its generic definition
(``counit . fmap (uncurry mul) . pair``): equal for ``Vec``; for ``Cheb``, the
exact integral of the product, equal to the generic definition when the
product's degree is below N (``fmap`` truncates products to N coefficients).
It states it as data too, ``Axis.exact``, and the law suite checks the hook
(``applicative.laws.check_dense``, run by ``check_laws``):

    dot(x, fmap (const 1) x) = counit x        the Gram matrix against the counit
    each Gram matrix                           symmetric, positive definite (semidefinite
                                               where it is data: a tree's padding weighs 0)
    each dense formula = its generic definition, on elements whose coordinates
                                               beyond ``Axis.exact`` are zero

>>> import numpy as np
>>> from applicative import Dim, Vec
>>> class Seq(Dim): ...
>>> [str(axis) for axis in Vec.from_array(np.ones(3), Seq).axes()]
['Vec[Seq] of size 3']
"""

from __future__ import annotations

import functools
from abc import abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from applicative.protocols.applicative import Applicative
from applicative.protocols.kinds import A_co, B, F
from applicative.stacked import vmap

__all__ = ["Axis", "Dense", "nest", "to_array"]


@dataclass(frozen=True)
class Axis:
    """One array axis of a dense structure: which structure and tag, its size, and the Gram matrix of
    its basis. Two axes meet in a product only if they are equal: provably one measure (``__eq__``).

    What an instance puts in it so that two of its values meet correctly: its name, tag and size; its
    Gram matrix; and, if that matrix is computed from the structure's data (a mesh's trapezoid
    weights, a tree's 2^-depth), a ``shape`` equal exactly when the measures are equal: a hashable
    value (the mesh's nodes as a tuple of floats, kept as static pytree metadata so that no other
    structure's operation ever transforms them), or an identity that the data carries with it (a
    ``DenseTree``'s layout, by identity). A constant Gram matrix (a Vec's, a Cheb's) leaves ``shape``
    None and is compared itself, by object (a cached array: free) or by value."""

    kind: str
    """The structure's name, for messages: "Vec", "Cheb"."""
    tag: type | None
    """The dimension tag (None for a structure without one, a tree)."""
    size: int
    gram: np.ndarray | jax.Array | None = field(default=None, compare=False, repr=False)
    """The Gram matrix (size x size), or its diagonal (size,); None: the identity. A diagonal may
    be data (a traced array), as a tree's measure is."""
    shape: object = field(default=None, repr=False)
    """The identity of a measure that is data (compared with ``==``: equal exactly when the measures
    are); None where the Gram matrix alone is the measure (then the matrices themselves are compared)."""
    exact: int | None = field(default=None, compare=False, repr=False)
    """How many leading coordinates along this axis may be nonzero for the dense formulas to equal the
    generic definitions. None: every coordinate (a Vec, a tree; a Legendre series, whose counit 2 c_0
    sees only the constant term of a product, which its quadrature projects exactly). A Cheb declares
    (N + 1) // 2: its ``fmap`` truncates a product to N coefficients, the dropped ones integrate to
    nonzero values, so the two agree for products of degree below N. The law suite
    (``applicative.laws.check_dense``) checks the relation on such elements."""
    nodal: bool = field(default=False, compare=False, repr=False)
    """Whether the coordinates along this axis are the structure's values at its positions, each
    position weighing its Gram diagonal (a measure that is a weight per position): ``fmap`` maps each
    position's element alone, and the Gram matrix is None or a diagonal. True for a Vec's elements and
    a tree's slots; False for coefficients (a Cheb's: its ``fmap`` samples the function, and a
    Legendre series' Gram matrix is diagonal but not its weights). Attention's softmax then runs on
    the coordinates (``applicative.nn``, docs/design.md); the law suite checks the claim."""

    def __eq__(self, other: object) -> bool:
        """Whether the two axes are provably one measure: the same kind, tag and size, and either the
        same ``shape`` (not None) or, where ``shape`` is None, Gram matrices that are both None, one
        object, or equal concrete arrays. Traced Gram matrices without a ``shape`` are never equal:
        their values cannot be compared while tracing."""
        if not isinstance(other, Axis):
            return NotImplemented
        if (self.kind, self.tag, self.size) != (other.kind, other.tag, other.size) or self.shape != other.shape:
            return False
        return self.shape is not None or _same_gram(self.gram, other.gram)

    def __hash__(self) -> int:
        return hash((self.kind, self.tag, self.size))

    def __str__(self) -> str:
        tag = "" if self.tag is None else f"[{self.tag.__name__}]"
        return f"{self.kind}{tag} of size {self.size}"


def _same_gram(a: np.ndarray | jax.Array | None, b: np.ndarray | jax.Array | None) -> bool:
    if a is b:
        return True
    if a is None or b is None or isinstance(a, jax.core.Tracer) or isinstance(b, jax.core.Tracer):
        return False
    return bool(np.array_equal(np.asarray(a), np.asarray(b)))


class Dense(Applicative[F, A_co]):
    """An applicative whose elements are coordinates along array axes, with the Gram matrix of each
    axis's basis: the hook of ``applicative.linalg``'s fast paths."""

    @abstractmethod
    def axes(self) -> tuple[Axis, ...] | None:
        """The axes this structure lays in front of its elements' leaves, outermost first (None: none)."""

    @abstractmethod
    def elements(self) -> A_co:
        """The elements, stacked: a pytree whose leaves carry ``axes()`` in front."""

    @abstractmethod
    def with_elements(self, elements: B) -> Dense[F, B]:
        """The same shape (tags, sizes) holding other stacked elements: one structure, even where
        this one is nested in another (``nest`` stacks it under the outer levels)."""


def nest(shells: Sequence[Dense[Any, Any]], elements: Any) -> Any:
    """The nested structure of ``shells`` (outermost first, each with one level's shape) holding
    ``elements``, whose leaves carry every level's axes in front. An inner shell is built under
    ``stacked.vmap`` over the outer axes when its shape is data, so its shape carries them too (and the
    stack knows it: a stack of trees of one shape)."""
    if not shells:
        return elements
    outer, inner = shells[0], shells[1:]
    if inner:

        def build(e: Any) -> Any:
            return nest(inner, e)

        if any(axis.shape is not None for shell in inner for axis in shell.axes() or ()):
            for _ in outer.axes() or ():
                build = functools.partial(vmap, build)
        elements = build(elements)
    return outer.with_elements(elements)


def to_array(x: Applicative[Any, Any]) -> jax.Array:
    """The coordinates of a dense structure whose elements are scalars, as one array
    (``to_array(Vec.from_array(x, Row, Column))`` is x; a ``Cheb``'s are its coefficients; a
    ``DenseTree``'s its values in every slot, padding included)."""
    if not isinstance(x, Dense):
        raise TypeError(f"to_array: a {type(x).__name__} has no array form (it is not a Dense structure)")
    axes: list[Axis] = []
    inner: Any = x
    while isinstance(inner, Dense) and (level := inner.axes()) is not None:
        axes += level
        inner = inner.elements()
    leaves = jax.tree_util.tree_leaves(inner)
    if len(leaves) != 1:
        what = " x ".join(map(str, axes)) if axes else type(x).__name__
        shapes = sum(jnp.issubdtype(leaf.dtype, jax.dtypes.extended) for leaf in leaves)
        if shapes:  # a structure whose shape is data below the levels read: trees of several shapes
            raise ValueError(
                f"to_array: this {what} holds {len(leaves) - shapes} arrays of values and {shapes} of structures' "
                "shapes (a tree's layout), not one array: its elements are structures of several shapes (trees "
                "of several shapes: each has its own coordinates), whose values are read one by one (or refine "
                "them to one shape first)"
            )
        raise ValueError(f"to_array: this {what} holds {len(leaves)} arrays, not one")
    return jnp.asarray(leaves[0])
