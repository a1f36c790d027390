"""The numpy collocation kit (applicative.instances.collocation) against numpy.polynomial.chebyshev in
float64: the Lobatto points, collocation derivatives and the DCT-I, the Dirichlet derivatives and their
eigendecomposition, grid evaluation, and the 2-D norm by Gauss-Legendre quadrature; bad sizes refused."""

from collections.abc import Callable

import numpy as np
import numpy.polynomial.chebyshev as C
import pytest

from applicative.instances import collocation
from tests.applicative.tolerance import Tolerance

rng = np.random.default_rng(3)
TOL: Tolerance = {"rtol": 1e-12, "atol": 1e-12}


@pytest.mark.parametrize("m", [2, 3, 8, 33])
def test_lobatto_points_are_chebpts2_decreasing_with_exact_zero_and_symmetry(m: int) -> None:
    x = collocation.lobatto_points(m)
    np.testing.assert_allclose(x, C.chebpts2(m)[::-1], rtol=0, atol=1e-15)
    assert (x[0], x[-1]) == (1.0, -1.0)
    assert np.all(np.diff(x) < 0)
    np.testing.assert_array_equal(x, -x[::-1])  # sin of symmetric angles: exactly odd, 0 exact for odd m


@pytest.mark.parametrize("m", [2, 5, 17])
def test_lobatto_derivative_differentiates_the_interpolant_as_chebder(m: int) -> None:
    x, c = collocation.lobatto_points(m), rng.normal(size=m)  # degree m - 1: interpolated exactly
    expected = C.chebval(x, C.chebder(c))
    derivative = collocation.lobatto_derivative(m) @ C.chebval(x, c)
    np.testing.assert_allclose(derivative, expected, rtol=0, atol=1e-13 * max(1.0, np.abs(expected).max()))
    np.testing.assert_allclose(collocation.lobatto_derivative(m) @ np.ones(m), 0.0, atol=1e-15 * m**2)  # constants


@pytest.mark.parametrize("m", [2, 5, 17])
def test_lobatto_to_coefficients_inverts_evaluation_at_the_points(m: int) -> None:
    x, c = collocation.lobatto_points(m), rng.normal(size=(m, 3))
    values = C.chebvander(x, m - 1) @ c
    np.testing.assert_allclose(collocation.lobatto_to_coefficients(m) @ values, c, **TOL)
    np.testing.assert_allclose(  # the interpolant, as numpy fits it through the m points
        collocation.lobatto_to_coefficients(m) @ values[:, 0], C.chebfit(x, values[:, 0], m - 1), **TOL
    )


def test_dirichlet_derivatives_differentiate_functions_vanishing_at_the_ends() -> None:
    m = 12
    x = collocation.lobatto_points(m)[1:-1]
    c = C.chebmul([1.0, 0.0, -1.0], rng.normal(size=m - 2))  # (1 - x^2) q: zero at +-1, degree m - 1
    d1, d2 = collocation.dirichlet_derivatives(m)
    assert d1.shape == d2.shape == (m - 2, m - 2)
    for d, order in ((d1, 1), (d2, 2)):
        expected = C.chebval(x, C.chebder(c, order))
        np.testing.assert_allclose(d @ C.chebval(x, c), expected, rtol=0, atol=1e-12 * np.abs(expected).max())


@pytest.mark.parametrize("m", [5, 33])
def test_dirichlet_eigen_reconstructs_d2_with_a_real_negative_spectrum(m: int) -> None:
    _, d2 = collocation.dirichlet_derivatives(m)
    lam, v, vi = collocation.dirichlet_eigen(m)
    scale = np.abs(d2).max()
    np.testing.assert_allclose(v @ np.diag(lam) @ vi, d2, rtol=0, atol=1e-12 * scale)
    np.testing.assert_allclose(vi @ v, np.eye(m - 2), rtol=0, atol=1e-12)
    assert lam.dtype == v.dtype == np.float64
    assert np.all(lam < 0)
    assert np.all(np.diff(lam) >= 0)  # ascending
    np.testing.assert_allclose(np.sort(np.linalg.eigvals(d2).real), lam, rtol=1e-10)
    np.testing.assert_allclose(lam[-1], -(np.pi**2) / 4, rtol=1e-2)  # d^2/dx^2's first Dirichlet eigenvalue
    assert not v.flags.writeable  # cached: shared by every caller


def test_evaluate_grid_is_chebval_and_chebgrid2d_batch_first() -> None:
    x, y = rng.uniform(-1, 1, 7), rng.uniform(-1, 1, 5)
    c1, c2 = rng.normal(size=(3, 6)), rng.normal(size=(3, 6, 4))
    np.testing.assert_array_equal(collocation.vandermonde(x, 6), C.chebvander(x, 5))
    # numpy takes the coefficients first and puts their trailing (batch) axes first in the result
    np.testing.assert_allclose(collocation.evaluate_grid(c1, x), C.chebval(x, c1.T), **TOL)
    np.testing.assert_allclose(collocation.evaluate_grid(c1[0], x), C.chebval(x, c1[0]), **TOL)
    expected = C.chebgrid2d(x, y, np.moveaxis(c2, 0, -1))
    np.testing.assert_allclose(collocation.evaluate_grid(c2, x, y), expected, **TOL)
    np.testing.assert_allclose(collocation.evaluate_grid(c2[1], x, y), C.chebgrid2d(x, y, c2[1]), **TOL)
    with pytest.raises(ValueError, match=r"evaluate_grid: need coefficients of shape \(\.\.\., n, m\)"):
        collocation.evaluate_grid(c1[0], x, y)
    with pytest.raises(ValueError, match=r"vandermonde: x must be a 1-D array"):
        collocation.evaluate_grid(c1, x[None])


def test_norm2d_is_the_l2_norm_by_gauss_legendre_quadrature() -> None:
    c = rng.normal(size=(4, 6, 9))  # degree 5 in x, 8 in y: f^2 has degree 16, exact with 9 nodes
    t, w = np.polynomial.legendre.leggauss(9)
    values = C.chebgrid2d(t, t, np.moveaxis(c, 0, -1))  # (4, 9, 9)
    expected = np.sqrt(np.einsum("bkl,k,l->b", values**2, w, w))
    np.testing.assert_allclose(collocation.norm2d(c), expected, **TOL)
    assert collocation.norm2d(np.ones((1, 1))) == 2.0  # the constant 1 on an area of 4
    with pytest.raises(ValueError, match=r"norm2d: need coefficients of shape \(\.\.\., n, m\)"):
        collocation.norm2d(np.ones(3))


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: collocation.lobatto_points(1), r"lobatto_points: need an integer size >= 2, got 1"),
        (lambda: collocation.lobatto_derivative(0), r"lobatto_derivative: need an integer size >= 2, got 0"),
        (lambda: collocation.lobatto_to_coefficients(1), r"lobatto_to_coefficients: need an integer size >= 2"),
        (lambda: collocation.dirichlet_eigen(2), r"dirichlet_derivatives: need an integer size >= 3, got 2"),
        (lambda: collocation.vandermonde(np.zeros(2), 0), r"vandermonde: need an integer size >= 1, got 0"),
    ],
)
def test_bad_sizes_are_rejected_naming_the_function(call: Callable[[], object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        call()
