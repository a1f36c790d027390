"""``Cheb[T, A]``: functions on [-1, 1] as Chebyshev series, the continuous vector.

A ``Cheb`` holds the coefficients c_0 .. c_{N-1} of f = sum_n c_n T_n along
an axis tag ``T``, stacked like a ``Vec`` (every leaf has a leading axis of
length N), so ``Cheb[X, Cheb[Y, A]]`` stores the N x M matrix C with
f(x, y) = sum C[i, j] T_i(x) T_j(y), the ``numpy.polynomial.chebyshev.chebval2d``
convention. The arithmetic is ``applicative.instances.chebyshev``'s.

    fmap f    samples at P >= 2N Chebyshev points, applies f, and transforms back with a DCT
              (exact for linear f and for polynomial results of degree < P; truncated to N coefficients)
    pair      pairs coefficients (same tag and resolution)
    pure b    the constant function b: coefficients (b, 0, ..., 0)
    counit    the exact integral over [-1, 1]: sum_n c_n w_n, w_n = 2 / (1 - n^2) (n even), 0 (n odd)

Fast paths and the generic definitions. As a ``Dense`` structure a Cheb is one
axis whose Gram matrix is G_nm = integral of T_n T_m, so under ordinary
arithmetic the linear algebra integrates products *exactly*: dot(f, g) = f^T G g,
mul_mm(a, b) = A G B. The generic definitions multiply through ``fmap``, which
truncates a product to N coefficients before integrating: they agree with the
fast paths when the product's degree is below N (inputs of degree below N / 2)
and converge to them as N grows. The exact integral is the intended meaning
(tests/applicative/test_chebyshev.py checks both against ``numpy.polynomial.chebyshev``).

Built with ``Cheb.from_array(c, *tags)`` (coefficients, one tag per axis; also
a ``numpy.polynomial`` series, converted to the Chebyshev basis), ``Cheb.from_function(f, tag, size)``,
``Cheb.of(coefficients, tag)`` (a list of equal-shaped coefficients: a Vec
each gives a function with vector values), ``Cheb.stack(elements, tag)``
(already stacked) or ``Cheb.fit(x, y, tag, size)`` (least squares through samples);
read by evaluation ``f(x)`` and ``to_array(f)`` (the coefficients).

Arithmetic and calculus (``applicative.protocols.operators``; ``chebyshev``'s functional core,
each checked against ``numpy.polynomial.chebyshev`` in tests/applicative/test_operators.py and
tests/applicative/test_cheb_calculus.py):

    f + g, f - g, r * f, f / r, -f   the coefficients added and scaled (the Module Pointwise(ARITHMETIC):
                                     ``chebadd``); f and g of one tag and size, else ``pair``'s error
    f * g                            refused: ``dot(f, g)`` integrates f g exactly; the pointwise product
                                     ``lift_a2(operator.mul, f, g)`` is truncated to N coefficients
    f.derivative(order, along)       d^m f/dx^m (along the axis tagged ``along``, default this one):
                                     size N kept, the top m coefficients zero (``chebder``, padded)
    f.antiderivative(order, along)   the m-fold antiderivative vanishing at -1, size N + m, exact
                                     (``chebint(c, m, lbnd=-1)``); the definite integral is ``counit``
    Cheb.fit(x, y, tag, size, w)     least squares through samples y at x in [-1, 1] (``chebfit``,
                                     degree size - 1, weights on the unsquared residuals); fewer samples
                                     than coefficients, or x outside [-1, 1], is a ValueError

Elements ride along the coefficient axis: a function with vector values (coefficients of shape
(N, C)) adds, differentiates and fits each component. All of it runs under ``jit`` and ``grad``.

Coefficients are floating: bool and integer ones are promoted to the default float at construction
(float64 under x64); float32 stays float32. Complex coefficients are kept, and the linear algebra is
then bilinear, like ``numpy.dot``: dot(f, g) is the integral of f g, with no complex conjugate.
Rejected, with an error naming the constructor: coefficients that are not numbers (object or string
dtypes, ragged lists), no coefficients (an empty axis, size 0), fewer sample points than
coefficients, a power series on a domain other than [-1, 1], a tag that is not a proper subclass of
``Dim``. ``Cheb(data, tag, size, points)`` itself is unchecked (JAX rebuilds series through it); an
operation on a series whose data does not have ``size`` coefficients raises.

``fmap`` of ReLU converges to ReLU as N grows: for f(x) = x, the maximum
error of ``fmap(relu)`` over [-1, 1] was 0.049, 0.023, 0.011, 0.0056, 0.0028
at N = 8, 16, 32, 64, 128 (order N^-1, at the kink), and the L2 error 1.7e-2,
5.6e-3, 1.9e-3, 6.6e-4, 2.3e-4 (order N^-1.5), as for the series of |x|.

>>> import numpy as np
>>> from applicative import Dim, dot
>>> class X(Dim): ...
>>> f = Cheb.from_array(np.array([0.0, 1.0]), X)   # f(x) = x
>>> float(f(0.5)), round(float(dot(f, f)), 6)      # integral of x^2 over [-1, 1]
(0.5, 0.666667)
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Generic, cast, overload

import jax
import jax.numpy as jnp
import numpy as np
from jax.typing import ArrayLike

from applicative.instances import chebyshev
from applicative.protocols.algebra import Module, arithmetic
from applicative.protocols.applicative import Applicative
from applicative.protocols.dense import Axis, Dense
from applicative.protocols.integration import Counit
from applicative.protocols.kinds import A_co, B, Dim, M, Measured, N, check_tag
from applicative.protocols.operators import VectorSpace
from applicative.records import record, static
from applicative.stacked import (
    along,
    check_stacked,
    floating,
    largest,
    nested,
    numeric,
    stack,
    stacked_size,
    sums_leafwise,
    vmap,
    weighted_sum,
)

__all__ = ["Cheb", "ChebOf", "as_cheb"]


class ChebOf(Measured, Generic[N]):
    """Brand of ``Cheb`` with axis tag ``N``: ``Cheb[N, A]`` is an ``Applicative[ChebOf[N], A]``."""


@record
class Cheb(Dense[ChebOf[N], A_co], Counit[ChebOf[N], A_co], VectorSpace):
    """A function on [-1, 1] along axis ``tag``, as ``size`` Chebyshev coefficients.

    A vector space under ``+``, ``-``, ``-f``, ``r * f`` and ``f / r`` (coefficients added and scaled;
    a series of another tag or size is ``pair``'s ValueError, a scalar added or a product of two series
    a TypeError). Calculus: ``derivative`` keeps the size (top coefficients zero), ``antiderivative``
    (vanishing at -1) adds ``order`` coefficients, ``Cheb.fit`` solves least squares through samples;
    the integral over [-1, 1] is ``counit``."""

    data: A_co
    """The coefficients: the element pytree with a leading axis of length ``size`` on every leaf."""
    tag: type[N] = static()
    size: int = static()
    points: int = static()
    """How many Chebyshev points ``fmap`` samples (2 * size by default)."""

    # Construction

    @staticmethod
    def stack(elements: B, tag: type[M], points: int | None = None) -> Cheb[M, B]:
        """The series whose coefficients are ``elements`` sliced along the leading axis of every leaf."""
        check_tag(tag, "Cheb.stack")
        what = f"Cheb.stack[{tag.__name__}]"
        data = along(elements, lambda leaf: floating(numeric(leaf, what)), what)
        n = stacked_size(data, what)
        return Cheb(data, tag, n, _points(what, n, points))

    @staticmethod
    def of(coefficients: Sequence[B], tag: type[M], points: int | None = None) -> Cheb[M, B]:
        """The series sum_n c_n T_n of a list of equal-shaped coefficients c_n (structures or arrays:
        ``Cheb.of([v0, v1], X)`` with Vecs v_n is a function with vector values), stacked for you."""
        check_tag(tag, "Cheb.of")
        return Cheb.stack(stack(coefficients, f"Cheb.of[{tag.__name__}]"), tag, points)

    @overload
    @staticmethod
    def from_array(c: object, t1: type[M], /, *, points: int | None = None) -> Cheb[M, jax.Array]: ...
    @overload
    @staticmethod
    def from_array(
        c: object, t1: type[M], t2: type[N], /, *, points: int | None = None
    ) -> Cheb[M, Cheb[N, jax.Array]]: ...
    @staticmethod
    def from_array(c: object, *tags: type[Dim], points: int | None = None) -> Any:
        """The series of a coefficient array, one tag per axis (2-D: the ``chebval2d`` matrix), or of a
        ``numpy.polynomial`` series (``Chebyshev``, ``Polynomial``, ``Legendre``, ...) converted to its
        Chebyshev coefficients on [-1, 1]: a series whose domain is [-1, 1] or is not rescaled (domain
        equal to window, as Laguerre's default); one on another interval is rejected."""
        what = "Cheb.from_array"
        if isinstance(c, _SERIES):
            default = np.allclose(c.domain, [-1, 1]) and np.allclose(c.window, [-1, 1])
            if not (np.allclose(c.domain, [-1, 1]) or np.allclose(c.domain, c.window)):
                name = type(c).__name__
                raise ValueError(f"{what}: a {name} series on domain {c.domain}, window {c.window}; need [-1, 1]")
            if not (default and isinstance(c, np.polynomial.Chebyshev)):  # exact: polynomials compose
                c = c.convert(domain=[-1, 1], kind=np.polynomial.Chebyshev, window=[-1, 1])
            c = c.coef
        array = floating(numeric(c, what))
        if 0 in array.shape:
            raise ValueError(f"{what}: every axis needs at least one coefficient, got shape {array.shape}")
        return nested(what, array, tags, lambda data, tag, n: Cheb(data, tag, n, _points(what, n, points)))

    @staticmethod
    def from_function(f: Callable[[jax.Array], jax.Array], tag: type[M], size: int) -> Cheb[M, jax.Array]:
        """Sample ``f`` at 2 * size Chebyshev points and keep ``size`` coefficients of the interpolant."""
        x = jnp.asarray(chebyshev.points(_points("Cheb.from_function", size, None)))
        return Cheb.from_array(chebyshev.to_coefficients(f(x), size), tag)

    @staticmethod
    def fit(
        x: ArrayLike,
        y: ArrayLike,
        tag: type[M],
        size: int,
        weights: ArrayLike | None = None,
        points: int | None = None,
    ) -> Cheb[M, jax.Array]:
        """The least-squares series of ``size`` coefficients (degree size - 1) through samples: y[k] at
        x[k] in [-1, 1], y of shape (samples, ...) (trailing axes are the element's: a function with
        vector values), optional ``weights`` on the unsquared residuals. ``chebyshev.fit``, i.e.
        ``numpy.polynomial.chebyshev.chebfit(x, y, size - 1, w=weights)``; jit- and grad-able."""
        what = "Cheb.fit"
        check_tag(tag, what)
        p = _points(what, size, points)
        w = None if weights is None else numeric(weights, what)
        return Cheb(chebyshev.fit(numeric(x, what), numeric(y, what), size, w, what=what), tag, size, p)

    # Functor, Applicative, Counit

    def fmap(self, f: Callable[[A_co], B]) -> Cheb[N, B]:
        self._check("fmap")
        what = f"Cheb[{self.tag.__name__}].fmap"
        values = along(self.data, lambda leaf: chebyshev.to_values(leaf, self.points), what)
        mapped = vmap(f, values)
        coefficients = along(mapped, lambda leaf: chebyshev.to_coefficients(leaf, self.size), what)
        return Cheb(coefficients, self.tag, self.size, self.points)

    def pair(self, other: Applicative[ChebOf[N], B]) -> Cheb[N, tuple[A_co, B]]:
        if not isinstance(other, Cheb):
            raise TypeError(f"pair: Cheb[{self.tag.__name__}] paired with {type(other).__name__}")
        if other.tag is not self.tag or other.size != self.size:
            raise ValueError(f"pair: dimension mismatch: {self.axes()[0]} vs {other.axes()[0]}")
        return Cheb((self.data, other.data), self.tag, self.size, self.points)

    def pure(self, b: B) -> Cheb[N, B]:
        def constant(leaf: ArrayLike) -> jax.Array:
            leaf = floating(jnp.asarray(leaf))
            return jnp.zeros((self.size, *leaf.shape), leaf.dtype).at[0].set(leaf)

        return Cheb(along(b, constant, f"Cheb[{self.tag.__name__}].pure"), self.tag, self.size, self.points)

    def counit(self, module: Module[A_co] | None = None) -> A_co:
        """The integral over [-1, 1]."""
        self._check("counit")
        m = module if module is not None else arithmetic()
        return weighted_sum(m, jnp.asarray(chebyshev.integral_weights(self.size)), self.data, self.size)

    # Dense: one axis, the Chebyshev basis with its exact Gram matrix (see the module docstring
    # for how the dense formulas relate to the generic definitions).

    def axes(self) -> tuple[Axis]:
        return (Axis("Cheb", self.tag, self.size, chebyshev.gram(self.size), exact=(self.size + 1) // 2),)

    def elements(self) -> A_co:
        return self.data

    def with_elements(self, elements: B) -> Cheb[N, B]:
        return Cheb(elements, self.tag, self.size, self.points)

    # Evaluation

    def __call__(self, *at: ArrayLike) -> Any:
        """Evaluate at points: f(x) for a 1-D series, f(x, y) pointwise (``chebval2d``) for a 2-D
        one. Points of shape S give values of shape S (or, for structured values such as a
        ``Vec``, that structure with S in front of every leaf)."""
        self._check("__call__")
        arrays = [numeric(p, f"Cheb[{self.tag.__name__}].__call__") for p in at]
        if len(arrays) != self.dims:
            raise ValueError(f"Cheb: a {self.dims}-D function is called with {len(arrays)} coordinates")
        for a in arrays:
            if not isinstance(a, jax.core.Tracer) and bool(jnp.any(jnp.abs(a) > 1.0)):
                raise ValueError(f"Cheb[{self.tag.__name__}]: evaluation outside [-1, 1] (max |x| {jnp.abs(a).max()})")
        shape = jnp.broadcast_shapes(*(a.shape for a in arrays))
        flat = [jnp.broadcast_to(a, shape).ravel() for a in arrays]
        values = vmap(self._at, *flat)
        return jax.tree_util.tree_map(lambda leaf: leaf.reshape(shape + leaf.shape[1:]), values)

    def _at(self, x: jax.Array, *rest: jax.Array) -> Any:
        value = along(self.data, lambda leaf: chebyshev.evaluate(leaf, x), f"Cheb[{self.tag.__name__}].__call__")
        return value._at(*rest) if isinstance(value, Cheb) else value

    def largest(self) -> jax.Array:
        """The largest value at the points ``fmap`` samples (a softmax's shift: ``applicative.nn.Sampled``)."""
        self._check("largest")
        what = f"Cheb[{self.tag.__name__}].largest"
        return largest(along(self.data, lambda leaf: chebyshev.to_values(leaf, self.points), what))

    # Calculus (the integral over [-1, 1] is ``counit``)

    def derivative(self, order: int = 1, along: type[Dim] | None = None) -> Cheb[N, A_co]:
        """d^order f / dx^order along this series' axis (or the nested axis tagged ``along``: d/dy of a
        Cheb[X, Cheb[Y, A]]), as a series of the same size, the top ``order`` coefficients zero
        (``chebder`` padded), so ``f + f.derivative()`` is defined. Elements ride along (a function with
        vector values differentiates each component)."""
        return self._linear("derivative", along, order, lambda c, axis: chebyshev.derivative(c, order, axis), 0)

    def antiderivative(self, order: int = 1, along: type[Dim] | None = None) -> Cheb[N, A_co]:
        """The order-fold antiderivative along this series' axis (or the nested one tagged ``along``) that
        vanishes at -1, with ``order`` more coefficients, exactly (``chebint(c, order, lbnd=-1)``); its
        ``points`` grow to at least twice the new size. For order 1, F(1) = ``counit()``."""
        return self._linear(
            "antiderivative", along, order, lambda c, axis: chebyshev.antiderivative(c, order, axis), order
        )

    def _linear(
        self, op: str, along: type[Dim] | None, order: int, f: Callable[[jax.Array, int], jax.Array], grow: int
    ) -> Cheb[N, A_co]:
        """``f`` applied to the coefficient axis tagged ``along`` of every leaf, that level's size + ``grow``."""
        what = f"Cheb[{self.tag.__name__}].{op}"
        self._check(op)
        levels: list[Cheb[Any, Any]] = []
        inner: Any = self
        while isinstance(inner, Cheb):  # nested levels: each leaf holds every level's axis, outermost first
            levels.append(inner)
            inner = inner.data
        sizes = tuple(level.size for level in levels)
        for leaf in jax.tree_util.tree_leaves(inner):
            if jnp.shape(leaf)[: len(sizes)] != sizes:
                raise ValueError(f"{what}: coefficients of shape {jnp.shape(leaf)} for axes of sizes {sizes}")
        tags = [level.tag for level in levels]
        tag = self.tag if along is None else along
        if tags.count(tag) != 1:
            names = ", ".join(t.__name__ for t in tags)
            name = getattr(tag, "__name__", repr(tag))
            raise ValueError(f"{what}: {'no' if tag not in tags else 'more than one'} axis {name} (axes: {names})")
        if not isinstance(order, int | np.integer) or isinstance(order, bool) or order < 0:
            raise ValueError(f"{what}: order must be a non-negative integer, got {order!r}")
        if not sums_leafwise(arithmetic(), inner):
            raise TypeError(
                f"{what}: the values hold structures whose leaves are not coordinates (trees, distributions)"
            )
        axis = tags.index(tag)
        out: Any = jax.tree_util.tree_map(lambda leaf: f(leaf, axis), inner)
        for depth, level in reversed(list(enumerate(levels))):
            size = level.size + (grow if depth == axis else 0)
            out = Cheb(out, level.tag, size, max(level.points, 2 * size) if depth == axis and grow else level.points)
        return cast(Cheb[N, A_co], out)

    @property
    def dims(self) -> int:
        """1 for a function of one variable, 2 for Cheb of Cheb, ..."""
        return 1 + (self.data.dims if isinstance(self.data, Cheb) else 0)

    def to_chebyshev(self) -> np.polynomial.chebyshev.Chebyshev:
        """The ``numpy.polynomial.chebyshev.Chebyshev`` of a 1-D series of scalars."""
        if self.dims != 1 or not isinstance(self.data, jax.Array):
            raise ValueError("to_chebyshev: only for a function of one variable with scalar values; use to_array")
        return np.polynomial.chebyshev.Chebyshev(np.asarray(self.data, np.float64))

    def __repr__(self) -> str:
        return f"Cheb[{self.tag.__name__}](size={self.size}, data={self.data!r})"

    def _check(self, op: str) -> None:
        """The data holds ``size`` coefficients and ``points`` resolves them (trace-time shapes only)."""
        what = f"Cheb[{self.tag.__name__}].{op}"
        check_stacked(self.data, self.size, what)
        _points(what, self.size, self.points)


_SERIES = (
    np.polynomial.Chebyshev,
    np.polynomial.Polynomial,
    np.polynomial.Legendre,
    np.polynomial.Laguerre,
    np.polynomial.Hermite,
    np.polynomial.HermiteE,
)
"""The ``numpy.polynomial`` series ``Cheb.from_array`` converts."""


def _points(what: str, size: int, points: int | None) -> int:
    """The sample points of a series of ``size`` coefficients (2 * size by default); a clear error
    unless size >= 1 and size <= points."""
    if not isinstance(size, int | np.integer) or isinstance(size, bool) or size < 1:
        raise ValueError(f"{what}: a series needs at least one coefficient, got size {size!r}")
    p = 2 * size if points is None else points
    if not isinstance(p, int | np.integer) or isinstance(p, bool) or p < size:
        raise ValueError(f"{what}: {p!r} sample points cannot resolve {size} coefficients")
    return p


def as_cheb(x: Applicative[ChebOf[N], B]) -> Cheb[N, B]:
    """The Cheb behind a generic result whose brand says it is one (checked): ``as_cheb(model(f))(0.5)``."""
    if not isinstance(x, Cheb):
        raise TypeError(f"as_cheb: expected a Cheb, got {type(x).__name__}")
    return x
