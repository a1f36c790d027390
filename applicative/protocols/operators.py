"""``VectorSpace``: ``f + g``, ``f - g``, ``-f``, ``r * f``, ``f * r`` and ``f / r`` on structures.

The operators are the Module ``Pointwise(ARITHMETIC)`` (``applicative.protocols.algebra``), so
they mean what ``applicative.add`` and ``applicative.scale`` compute:

    f + g = fmap (uncurry (+)) (pair f g)          f - g = fmap (uncurry (-)) (pair f g)
    r * f = f * r = fmap (r *) f                   f / r = fmap (/ r) f          -f = fmap negate f

An element that is itself a structure (a Vec of Vecs, a Cheb of Chebs, the inner structures of
a ``Compose``) is added and scaled by its own operators, an array element by ``jax.numpy``'s.

Only structures on which that Module is a vector space have them: ``Vec``, ``Cheb``, ``Compose``,
``Tree`` and ``DenseTree`` subclass ``VectorSpace``. ``Distribution`` and ``Quantum`` do not:
their ``pair`` is the independent product, so there ``x + x`` in ``Pointwise(ARITHMETIC)`` is the
law of the sum of two independent copies of x, not 2x; ``+`` on them is Python's TypeError.

Never a broadcast. ``f + g`` pairs f and g, so structures of different kinds, tags or sizes
raise the error their ``pair`` gives (``pair: dimension mismatch: Vec[Seq] of size 3 vs
Vec[Seq] of size 4``). Trees of different shapes add on their common refinement, which is what a
tree's ``pair`` is (the sum of two piecewise-constant functions on [0, 1]); a ``DenseTree`` sum
then has the refinement's capacity. Elements must match too: a structure of 3-vectors plus one of
scalars raises rather than broadcasting. Refused, with a TypeError saying what to write:

    f + 1.0, 1.0 + f, f - 1.0   a scalar broadcast over a structure: write ``f + f.pure(1.0)``
    sum(fs)                     ``sum`` starts from 0: write ``sum(fs[1:], start=fs[0])``
    f * g, f / g                no product of structures here: ``dot(f, g)`` is the integral of f g,
                                ``lift_a2(operator.mul, f, g)`` the pointwise product (truncated to N
                                coefficients on a Cheb, as ``fmap`` truncates)
    f * x, x * f (x an array)   a scale factor is a scalar (a number or a 0-d array)

Scalars on the left reach ``__rmul__``: Python numbers, numpy scalars (the class sets
``__array_ufunc__ = None``, so numpy defers to it) and JAX arrays and tracers (which defer to an
operand they do not know). Structures are pytrees, so the operators work under ``jit``, ``grad``
and ``vmap``; ``__eq__`` and ``__hash__`` are left as they are (identity).

Fast path. On a ``Dense`` structure whose ``pair`` is a zip (``Vec``, ``Cheb``), the stacked
elements are added or scaled leaf by leaf at once instead of through ``fmap``: literally the
definition on a ``Vec`` (``fmap`` is ``vmap``), and on a ``Cheb`` the same series (its ``fmap``
of a linear map samples and transforms back, exact up to rounding). A ``Compose`` adds its outer
structures, whose elements are the inner ones: Compose(x) + Compose(y) = Compose(x + y), the
definition by naturality of ``pair``.

>>> import numpy as np
>>> from applicative import Dim, Vec, to_array
>>> class Seq(Dim): ...
>>> f, g = Vec.from_array(np.array([1.0, 2.0]), Seq), Vec.from_array(np.array([3.0, 5.0]), Seq)
>>> to_array(2.0 * f + g).tolist(), to_array(-(g - f) / 2).tolist()
([5.0, 9.0], [-1.0, -1.5])
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any, ClassVar, Never, NoReturn, Self, TypeAlias, cast

import jax
import jax.numpy as jnp
import numpy as np

from applicative.protocols.applicative import Applicative, Shaped
from applicative.protocols.dense import Dense

__all__ = ["Scalar", "VectorSpace"]

Scalar: TypeAlias = complex | np.number[Any] | jax.Array
"""A scale factor: a number or a 0-d array (checked at run time: an array of any other shape is refused)."""


class VectorSpace:
    """A structure whose ``Pointwise(ARITHMETIC)`` is a vector space, with its operators (module docstring).

    A subclass must be an ``Applicative``. The two hooks below compute every operator (``op``, one of
    "+", "-", "-x" (negation), "*", "/", names it in messages); a structure overrides them where its
    elements are reached another way (``Compose``: through its outer structure).
    """

    __array_ufunc__: ClassVar[None] = None  # numpy defers to __rmul__ instead of broadcasting over f

    def __add__(self, other: Self) -> Self:
        """f + g = fmap (uncurry (+)) (pair f g): a structure of the same kind, tag and size (or a tree's
        refinement); a scalar or an array raises (it would broadcast)."""
        return self._zip_with("+", operator.add, _structure("+", self, other))

    def __sub__(self, other: Self) -> Self:
        """f - g = fmap (uncurry (-)) (pair f g), as ``+``."""
        return self._zip_with("-", operator.sub, _structure("-", self, other))

    def __neg__(self) -> Self:
        """-f = fmap negate f."""
        return self._map_with("-x", operator.neg)

    def __mul__(self, r: Scalar) -> Self:
        """f * r = fmap (r *) f, r a number or a 0-d array; a structure or a larger array raises."""
        s = _scalar("*", self, r)
        return self._map_with("*", lambda x: s * x)

    def __rmul__(self, r: Scalar) -> Self:
        """r * f = f * r."""
        s = _scalar("*", r, self)
        return self._map_with("*", lambda x: s * x)

    def __truediv__(self, r: Scalar) -> Self:
        """f / r = fmap (/ r) f, r a number or a 0-d array."""
        s = _scalar("/", self, r)
        return self._map_with("/", lambda x: x / s)

    # A scalar on the left of + or - would be broadcast: refused (typed Never, so mypy refuses it too).

    def __radd__(self, other: Never) -> NoReturn:
        """Refused: a scalar or array plus a structure would broadcast (``sum(fs)`` starts from 0)."""
        raise _refused("+", other, self)

    def __rsub__(self, other: Never) -> NoReturn:
        """Refused, as ``__radd__``."""
        raise _refused("-", other, self)

    # The hooks.

    def _zip_with(self, op: str, fn: Callable[[Any, Any], Any], other: Applicative[Any, Any]) -> Self:
        """fmap (uncurry fn) (pair self other), with ``fn`` applied leaf by leaf to the elements."""
        paired = cast(Applicative[Any, Any], self).pair(other)
        where = f"{type(self).__name__} {op} {type(other).__name__}"
        if (dense := _stacked(paired)) is not None:
            x, y = dense.elements()
            return cast(Self, dense.with_elements(_zip_elements(where, fn, x, y, _count(dense))))
        return cast(Self, paired.fmap(lambda p: _zip_elements(where, fn, p[0], p[1], 0)))

    def _map_with(self, op: str, fn: Callable[[Any], Any]) -> Self:
        """fmap fn self, with ``fn`` applied leaf by leaf to the elements."""
        structure = cast(Applicative[Any, Any], self)
        where = f"-{type(self).__name__}" if op == "-x" else f"{type(self).__name__} {op} r"
        if (dense := _stacked(structure)) is not None:
            return cast(Self, dense.with_elements(_map_elements(where, fn, dense.elements())))
        return cast(Self, structure.fmap(lambda x: _map_elements(where, fn, x)))


def _is_structure(x: object) -> bool:
    return isinstance(x, Applicative)


def _stacked(x: Applicative[Any, Any]) -> Dense[Any, Any] | None:
    """``x`` if it is a Dense structure whose leaves are all coordinates (neither it nor its elements
    ``Shaped``): then its elements' leaves are coordinates, which add and scale at once; None
    otherwise (then through fmap)."""
    if not isinstance(x, Dense) or isinstance(x, Shaped) or x.axes() is None:
        return None
    nodes = jax.tree_util.tree_leaves(x.elements(), is_leaf=lambda n: isinstance(n, Shaped))
    return None if any(isinstance(node, Shaped) for node in nodes) else x


def _count(x: Dense[Any, Any]) -> int:
    """How many axes ``x`` lays in front of its elements' leaves (stripped from shapes in messages)."""
    return len(x.axes() or ())


def _zip_elements(where: str, fn: Callable[[Any, Any], Any], x: Any, y: Any, axes: int) -> Any:
    """fn on two elements (stacked: ``axes`` axes in front of every array leaf), leaf by leaf, a
    structure by its own operator: they must have one pytree structure and equal leaf shapes."""
    tree: jax.tree_util.PyTreeDef = jax.tree_util.tree_structure(x, is_leaf=_is_structure)
    if tree != jax.tree_util.tree_structure(y, is_leaf=_is_structure):
        raise _differ(where, x, y, axes)
    out = []
    xs, ys = (jax.tree_util.tree_leaves(e, is_leaf=_is_structure) for e in (x, y))
    for u, v in zip(xs, ys, strict=True):
        if _is_structure(u) or _is_structure(v):
            out.append(fn(_space(where, u, v, axes), _space(where, v, u, axes)))
        elif jnp.shape(u) != jnp.shape(v):
            raise _differ(where, u, v, axes)
        else:
            out.append(fn(u, v))
    return jax.tree_util.tree_unflatten(tree, out)


def _map_elements(where: str, fn: Callable[[Any], Any], x: Any) -> Any:
    """fn on an element, leaf by leaf, a structure by its own operator."""

    def one(u: Any) -> Any:
        return fn(_space(where, u, u, 0)) if _is_structure(u) else fn(u)

    return jax.tree_util.tree_map(one, x, is_leaf=_is_structure)


def _space(where: str, x: object, beside: object, axes: int) -> VectorSpace:
    """An element that is a structure with operators; a clear error for one without (a distribution)
    and for an array beside a structure."""
    if isinstance(x, VectorSpace):
        return x
    if isinstance(x, Applicative):
        raise TypeError(
            f"{where}: the elements are {type(x).__name__}s, which have no arithmetic operators (their pair is "
            "not a zip, so the pointwise Module is not a vector space on them); use applicative.add and "
            "applicative.scale for Pointwise(ARITHMETIC), or fmap"
        )
    raise _differ(where, beside, x, axes)


def _differ(where: str, x: object, y: object, axes: int) -> TypeError:
    return TypeError(
        f"{where}: the elements differ, {_element(x, axes)} and {_element(y, axes)}; a sum never broadcasts"
    )


def _element(x: object, axes: int) -> str:
    """An element described for a message: its kind, or its shape (the structure's axes stripped)."""
    if isinstance(x, jax.Array | np.ndarray | np.generic | int | float | complex):
        return f"an array of shape {jnp.shape(x)[axes:]}"
    return f"a {type(x).__name__}"


def _structure(op: str, left: object, right: object) -> Applicative[Any, Any]:
    """The right operand of f + g or f - g, which must be a structure (its pair checks its kind)."""
    if not isinstance(right, Applicative):
        raise _refused(op, left, right)
    return right


def _refused(op: str, left: object, right: object) -> TypeError:
    message = f"unsupported operand type(s) for {op}: {type(left).__name__!r} and {type(right).__name__!r}"
    scalar = left if isinstance(right, VectorSpace) else right
    if isinstance(scalar, Applicative):  # a structure without operators beside one with them
        return TypeError(f"{message}: a {type(scalar).__name__} has no arithmetic operators")
    zero = type(scalar) is int and scalar == 0
    hint = "; sum(fs) starts from 0: write sum(fs[1:], start=fs[0])" if op == "+" and zero else ""
    return TypeError(
        f"{message}: adding a scalar or an array to a structure would broadcast it; add a structure of the same "
        f"shape, such as the constant f.pure(c) (f {op} f.pure(1.0)){hint}"
    )


def _scalar(op: str, left: object, right: object) -> Any:
    """The scale factor of ``left op right`` (the operand that is not ``self``), checked to be a
    number or a 0-d numeric array (a traced one too)."""
    r, structure = (right, left) if isinstance(left, VectorSpace) else (left, right)
    message = f"unsupported operand type(s) for {op}: {type(left).__name__!r} and {type(right).__name__!r}"
    if isinstance(r, Applicative):
        raise TypeError(
            f"{message}: structures are scaled by scalars, never multiplied together here; dot(f, g) is the "
            "integral of f g, lift_a2(operator.mul, f, g) the pointwise product"
        )
    if (
        not isinstance(r, int | float | complex | np.number | np.ndarray | jax.Array)
        or isinstance(r, bool)
        or not jnp.issubdtype(jnp.result_type(r), jnp.number)
    ):
        raise TypeError(f"{message}: a {type(structure).__name__} is scaled by a number or a 0-d array")
    if jnp.ndim(r) != 0:
        raise TypeError(
            f"{message}: r must be a scalar (a number or a 0-d array), got an array of shape {jnp.shape(r)}; "
            "multiplying by it would broadcast over the coordinates"
        )
    return r
