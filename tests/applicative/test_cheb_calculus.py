"""Chebyshev calculus against numpy.polynomial.chebyshev in float64: derivative (chebder),
antiderivative (chebint, lbnd=-1) and least-squares fit (chebfit), as functions on coefficient
arrays (applicative.instances.chebyshev) and as Cheb methods, with vector values, on nested series,
under jit and grad; and the errors."""

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import numpy.polynomial.chebyshev as C
import pytest

from applicative import Cheb, Dim, Vec, to_array
from applicative.instances import chebyshev
from tests.applicative.dims import Model
from tests.applicative.tolerance import Tolerance


class X(Dim):
    """The first variable."""


class Y(Dim):
    """The second variable."""


class Z(Dim):
    """An axis no series here has."""


rng = np.random.default_rng(6)
TOL: Tolerance = {"rtol": 1e-12, "atol": 1e-12}


def padded(c: np.ndarray, n: int, axis: int = 0) -> np.ndarray:
    """c zero-padded to n coefficients along ``axis`` (numpy's chebder drops them)."""
    pad = [(0, 0)] * c.ndim
    pad[axis] = (0, n - c.shape[axis])
    return np.pad(c, pad)


def close(actual: Any, expected: np.ndarray) -> None:
    """Equal to 1e-12 relative to the largest coefficient (derivatives grow like N^2 per order)."""
    actual = np.asarray(actual)
    assert actual.shape == expected.shape
    np.testing.assert_allclose(actual, expected, rtol=0, atol=1e-12 * max(1.0, float(np.abs(expected).max())))


# The functional core.


@pytest.mark.parametrize("n", [1, 2, 12])
@pytest.mark.parametrize("order", [0, 1, 3])
def test_derivative_and_antiderivative_are_chebder_and_chebint(n: int, order: int) -> None:
    c = rng.normal(size=(n, 2))  # two series side by side (axis 0 the coefficients)
    close(chebyshev.derivative(c, order), padded(C.chebder(c, order), n) if order else c)
    close(chebyshev.antiderivative(c, order), C.chebint(c, order, lbnd=-1))
    close(chebyshev.derivative(c.T, order, axis=1), (padded(C.chebder(c, order), n) if order else c).T)
    close(chebyshev.antiderivative(c.T, order, axis=-1), C.chebint(c, order, lbnd=-1).T)


def test_antiderivative_vanishes_at_minus_one_and_reaches_the_integral_at_one() -> None:
    c = rng.normal(size=7)
    a = np.asarray(chebyshev.antiderivative(c))
    assert abs(C.chebval(-1.0, a)) < 1e-14
    np.testing.assert_allclose(C.chebval(1.0, a), chebyshev.integral_weights(7) @ c, **TOL)
    close(chebyshev.derivative(a)[:7], c)  # the derivative undoes it


# (Each shape of samples compiles its least-squares solve once, about half a second: the tests share
# 30 samples and 10 coefficients.)
SAMPLES = rng.uniform(-1, 1, size=30)


@pytest.mark.parametrize("weighted", [False, True])
def test_fit_is_chebfit(weighted: bool) -> None:
    x = SAMPLES
    y = np.cos(3 * x)[:, None] + rng.normal(scale=0.1, size=(30, 2))  # two noisy series
    w = rng.uniform(0.5, 2.0, size=30) if weighted else None
    close(chebyshev.fit(x, y, 10, w), C.chebfit(x, y, 9, w=w))
    close(chebyshev.fit(x, y[:, 0], 10, w), C.chebfit(x, y[:, 0], 9, w=w))
    # Exact data of degree below n is recovered; as many samples as coefficients interpolate.
    c = rng.normal(size=10)
    close(chebyshev.fit(x, C.chebval(x, c[:6]), 10, w), padded(c[:6], 10))
    nodes = chebyshev.points(10)  # at Chebyshev points, where interpolation is well conditioned
    close(chebyshev.fit(nodes, C.chebval(nodes, c), 10), c)


# The Cheb methods.


def test_cheb_derivative_keeps_the_size_and_antiderivative_adds_order_coefficients() -> None:
    c = rng.normal(size=6)
    f = Cheb.from_array(c, X)
    df, d2f = f.derivative(), f.derivative(order=2)
    assert (df.tag, df.size, df.points) == (X, 6, 12)
    close(to_array(df), padded(C.chebder(c), 6))
    close(to_array(d2f), padded(C.chebder(c, 2), 6))
    close(to_array(f + df), C.chebadd(c, padded(C.chebder(c), 6)))  # same size: they add
    big_f = f.antiderivative()
    assert (big_f.tag, big_f.size, big_f.points) == (X, 7, 14)
    close(to_array(big_f), C.chebint(c, lbnd=-1))
    close(to_array(f.antiderivative(order=2)), C.chebint(c, 2, lbnd=-1))
    np.testing.assert_allclose(C.chebval(1.0, to_array(big_f)), float(f.counit()), **TOL)  # F(1) = integral


def test_values_ride_along_the_coefficient_axis() -> None:
    c = rng.normal(size=(5, 3))  # a function with values in R^3
    f = Cheb.stack(jnp.asarray(c), X)
    close(to_array(f.derivative()), padded(C.chebder(c), 5))
    close(to_array(f.antiderivative()), C.chebint(c, lbnd=-1))
    g = Cheb.of([Vec.from_array(row, Model) for row in c], X)  # the same with Vec values
    dg = g.derivative()
    assert isinstance(dg.data, Vec)
    assert dg.data.tag is Model
    close(to_array(dg), padded(C.chebder(c), 5))


def test_nested_series_differentiate_along_the_tagged_axis() -> None:
    c = rng.normal(size=(4, 5))  # f(x, y) = sum c_ij T_i(x) T_j(y)
    f = Cheb.from_array(c, X, Y)
    close(to_array(f.derivative()), padded(C.chebder(c, axis=0), 4, axis=0))
    close(to_array(f.derivative(along=Y)), padded(C.chebder(c, axis=1), 5, axis=1))
    fy = f.antiderivative(along=Y)
    assert fy.size == 4
    assert isinstance(fy.data, Cheb)
    assert fy.data.size == 6
    close(to_array(fy), C.chebint(c, lbnd=-1, axis=1))
    # d/dx d/dy in either order
    close(to_array(f.derivative().derivative(along=Y)), np.asarray(to_array(f.derivative(along=Y).derivative())))


def test_cheb_fit_with_vector_values() -> None:
    x = SAMPLES
    y = np.stack([np.sin(2 * x), np.exp(x)], axis=-1)
    f = Cheb.fit(x, y, X, 10)
    assert (f.tag, f.size, f.points) == (X, 10, 20)
    close(to_array(f), C.chebfit(x, y, 9))
    w = np.linspace(1.0, 2.0, 30)
    close(to_array(Cheb.fit(x, y, X, 10, weights=w, points=40)), C.chebfit(x, y, 9, w=w))
    assert Cheb.fit(x, y, X, 10, points=40).points == 40


def test_calculus_under_jit_and_grad() -> None:
    x, y = SAMPLES, np.tanh(2 * SAMPLES)
    g, h = rng.normal(size=10), rng.normal(size=11)

    @jax.jit
    @jax.value_and_grad
    def functional(y: jax.Array) -> jax.Array:
        """A linear functional of the fit's derivative and antiderivative."""
        f = Cheb.fit(x, y, X, 10)
        return jnp.dot(g, to_array(f.derivative())) + jnp.dot(h, to_array(f.antiderivative()))

    def reference(c: np.ndarray) -> Any:
        return g @ padded(C.chebder(c), 10) + h @ C.chebint(c, lbnd=-1)

    value, grad = functional(jnp.asarray(y))
    np.testing.assert_allclose(float(value), reference(C.chebfit(x, y, 9)), **TOL)
    # The fit is linear in y: the gradient is the functional of the fits of unit samples.
    np.testing.assert_allclose(np.asarray(grad), reference(C.chebfit(x, np.eye(30), 9)), **TOL)
    # Derivative and antiderivative are linear maps: their gradients are their transposes.
    f = Cheb.from_array(rng.normal(size=6), X)
    d2 = jax.grad(lambda f: jnp.dot(g[:6], to_array(f.derivative(order=2))))(f)
    np.testing.assert_allclose(to_array(d2), [g[:6] @ padded(C.chebder(e, 2), 6) for e in np.eye(6)], **TOL)


# Errors name the function and the sizes.


def test_calculus_errors_name_what_was_wrong() -> None:
    f = Cheb.from_array(np.ones((3, 4)), X, Y)
    x = np.linspace(-1, 1, 10)
    cases: list[tuple[Any, type[Exception], str]] = [
        (lambda: f.derivative(along=Z), ValueError, r"Cheb\[X\]\.derivative: no axis Z \(axes: X, Y\)"),
        (lambda: f.antiderivative(along=Z), ValueError, r"Cheb\[X\]\.antiderivative: no axis Z"),
        (lambda: f.derivative(order=-1), ValueError, r"Cheb\[X\]\.derivative: order must be a non-negative"),
        (
            lambda: f.derivative(order=1.5),  # type: ignore[arg-type]
            ValueError,
            r"order must be a non-negative integer, got 1.5",
        ),
        (lambda: chebyshev.derivative(np.ones(3), axis=1), ValueError, r"axis 1 is out of range for .* \(3,\)"),
        (lambda: chebyshev.antiderivative(np.ones(3), -1), ValueError, r"chebyshev.antiderivative: order"),
        (
            lambda: Cheb.fit(x[:3], np.ones(3), X, 5),
            ValueError,
            r"Cheb\.fit: 3 samples cannot determine 5 coefficients",
        ),
        (lambda: Cheb.fit(2 * x, np.ones(10), X, 5), ValueError, r"Cheb\.fit: sample points outside \[-1, 1\]"),
        (
            lambda: Cheb.fit(x, np.ones(9), X, 5),
            ValueError,
            r"y needs one sample per point .* \(10\), got shape \(9,\)",
        ),
        (lambda: Cheb.fit(x, np.ones(10), X, 5, weights=np.ones(3)), ValueError, r"weights must be one per sample"),
        (lambda: Cheb.fit(np.ones((2, 5)), np.ones(10), X, 5), ValueError, r"x must be a 1-D array"),
        (lambda: Cheb.fit(x, np.ones(10), X, 0), ValueError, r"Cheb\.fit: a series needs at least one coefficient"),
        (lambda: Cheb.fit(x, np.ones(10), X, 5, points=3), ValueError, r"3 sample points cannot resolve 5"),
        (
            lambda: Cheb.fit(x, ["a"] * 10, X, 5),  # type: ignore[arg-type]
            TypeError,
            r"Cheb\.fit: expected an array of numbers",
        ),
        (lambda: chebyshev.fit(x, np.ones(10), 11), ValueError, r"chebyshev\.fit: 10 samples cannot determine 11"),
    ]
    for call, error, match in cases:
        with pytest.raises(error, match=match):
            call()
