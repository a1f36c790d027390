"""Cheb against numpy.polynomial.chebyshev in float64: evaluation, integrals,
products, dot products and the Gram-matrix fast paths; fmap's accuracy; errors;
the generic transformer on Cheb∘Cheb, Vec∘Cheb and Cheb∘Vec."""

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import numpy.polynomial.chebyshev as C
import pytest

from applicative import (
    Cheb,
    CoefficientSoftmax,
    Compose,
    Dim,
    Vec,
    counit,
    dot,
    generic_only,
    lift_a2,
    matrix,
    mul_mm,
    mul_mmt,
    mul_mv,
    mul_vm,
    nn,
    outer,
    vector,
)
from applicative.instances.chebyshev import gram
from tests.dims import Hidden, Model, Seq


class X(Dim):
    """The first variable."""


class Y(Dim):
    """The second variable."""


class Z(Dim):
    """A third variable."""


rng = np.random.default_rng(3)
TOL = {"rtol": 1e-12, "atol": 1e-12}


def padded(c: np.ndarray, n: int) -> np.ndarray:
    """The first n coefficients of c, zero-padded (numpy trims trailing zeros)."""
    return np.pad(c, (0, max(0, n - len(c))))[:n]


def integral(c: np.ndarray) -> float:
    """The integral over [-1, 1] of a Chebyshev series, by numpy."""
    antiderivative = C.chebint(c)
    return float(C.chebval(1.0, antiderivative) - C.chebval(-1.0, antiderivative))


def test_gram_matrix_is_the_integral_of_products() -> None:
    n = 9
    expected = np.array([[integral(C.chebmul(np.eye(n)[i], np.eye(n)[j])) for j in range(n)] for i in range(n)])
    np.testing.assert_allclose(gram(n), expected, **TOL)
    assert gram(n)[0, 0] == 2.0
    assert gram(n)[1, 2] == 0.0  # n + m odd: the reference's closed form is 0/0 at |n - m| = 1


def test_evaluation_matches_chebval_and_chebval2d() -> None:
    c, c2 = rng.normal(size=9), rng.normal(size=(5, 7))
    x, y = rng.uniform(-1, 1, 50), rng.uniform(-1, 1, 50)
    np.testing.assert_allclose(Cheb.from_numpy(c, X)(x), C.chebval(x, c), **TOL)
    np.testing.assert_allclose(Cheb.from_numpy(c2, X, Y)(x, y), C.chebval2d(x, y, c2), **TOL)
    np.testing.assert_allclose(Cheb.from_numpy(c, X)(1.0), C.chebval(1.0, c), **TOL)  # endpoints included


def test_integrals_match_chebint() -> None:
    c, c2 = rng.normal(size=8), rng.normal(size=(4, 6))
    np.testing.assert_allclose(Cheb.from_numpy(c, X).counit(), integral(c), **TOL)
    inner = np.array([integral(row) for row in c2])  # integrate over y first, then x
    np.testing.assert_allclose(counit(Compose(Cheb.from_numpy(c2, X, Y))), integral(inner), **TOL)


def test_products_within_the_resolution_match_chebmul() -> None:
    n = 12
    a, b = np.zeros(n), np.zeros(n)
    a[:6], b[:6] = rng.normal(size=6), rng.normal(size=6)  # degree 5: the product has degree 10 < n
    product = lift_a2(lambda p, q: p * q, Cheb.from_numpy(a, X), Cheb.from_numpy(b, X))
    np.testing.assert_allclose(product.to_numpy(), padded(C.chebmul(a, b), n), **TOL)


def test_fmap_is_exact_for_affine_maps_and_polynomials() -> None:
    c = rng.normal(size=10)
    f = Cheb.from_numpy(c, X)
    np.testing.assert_allclose(f.fmap(lambda v: 2 * v + 1).to_numpy(), 2 * c + np.eye(10)[0], **TOL)
    low = np.concatenate([c[:4], np.zeros(6)])
    cube = Cheb.from_numpy(low, X).fmap(lambda v: v**3)
    np.testing.assert_allclose(cube.to_numpy(), padded(C.chebpow(low, 3), 10), **TOL)


def test_relu_through_the_dct_converges() -> None:
    xs = np.linspace(-1, 1, 4001)

    def max_error(n: int) -> float:
        relu = Cheb.from_numpy(np.eye(n)[1], X).fmap(jax.nn.relu)  # relu(x)
        return float(np.abs(np.asarray(relu(xs)) - np.maximum(xs, 0)).max())

    errors = [max_error(n) for n in (16, 32, 64)]
    assert errors[0] < 0.03  # 0.023 measured
    rates = np.log2(np.array(errors[:-1]) / np.array(errors[1:]))
    assert np.all(rates > 0.9), rates  # first order, at the kink


def test_composition_law_holds_approximately_for_smooth_maps() -> None:
    # fmap truncates each result to N coefficients: composing smooth maps is exact
    # only up to that truncation; for smooth inputs and maps it is spectrally small.
    f = Cheb.from_function(lambda x: 0.5 * jnp.sin(2 * x), X, 32)
    once = f.fmap(lambda v: jnp.tanh(jnp.exp(v)))
    twice = f.fmap(jnp.exp).fmap(jnp.tanh)
    np.testing.assert_allclose(once.to_numpy(), twice.to_numpy(), atol=1e-10)


def test_dot_products_are_exact_integrals() -> None:
    a, b = rng.normal(size=10), rng.normal(size=10)
    expected = integral(C.chebmul(a, b))
    np.testing.assert_allclose(dot(Cheb.from_numpy(a, X), Cheb.from_numpy(b, X)), expected, **TOL)


def _half(shape: tuple[int, ...]) -> np.ndarray:
    """Random coefficients of degree below half the resolution along every axis."""
    c = rng.normal(size=shape)
    for axis, n in enumerate(shape):
        index = [slice(None)] * len(shape)
        index[axis] = slice(n // 2, None)
        c[tuple(index)] = 0.0
    return c


def _ops(n: int) -> dict[str, Any]:
    """Each operation on coefficient arrays through Cheb, its reference with the Gram matrix, its shapes."""
    w = gram(n)
    f = Cheb.from_numpy
    return {
        "dot": (lambda a, b: dot(f(a, X), f(b, X)), lambda a, b: a @ w @ b, ((n,), (n,))),
        "outer": (lambda a, b: outer(f(a, X), f(b, Y)).to_array(), np.outer, ((n,), (n,))),
        "mul_mv": (lambda m, v: mul_mv(f(m, X, Y), f(v, Y)).to_array(), lambda m, v: m @ w @ v, ((n, n), (n,))),
        "mul_vm": (lambda v, m: mul_vm(f(v, X), f(m, X, Y)).to_array(), lambda v, m: v @ w @ m, ((n,), (n, n))),
        "mul_mm": (lambda a, b: mul_mm(f(a, X, Y), f(b, Y, Z)).to_array(), lambda a, b: a @ w @ b, ((n, n), (n, n))),
        "mul_mmt": (
            lambda a, b: mul_mmt(f(a, X, Y), f(b, Z, Y)).to_array(),
            lambda a, b: b @ w @ a.T,
            ((n, n), (n, n)),
        ),
    }


@pytest.mark.parametrize("name", list(_ops(8)))
def test_fast_paths_are_exact_and_match_the_generic_definitions(name: str) -> None:
    op, reference, shapes = _ops(8)[name]
    full = [rng.normal(size=s) for s in shapes]
    np.testing.assert_allclose(op(*full), reference(*full), **TOL)  # exact for any input
    half = [_half(s) for s in shapes]
    expected = reference(*half)
    with generic_only():
        np.testing.assert_allclose(op(*half), expected, **TOL)  # fmap's products truncate above N / 2
    np.testing.assert_allclose(jax.jit(op)(*full), reference(*full), **TOL)


def test_conversions_round_trip() -> None:
    c = rng.normal(size=6)
    series = C.Chebyshev(c)
    f = Cheb.from_numpy(series, X)
    np.testing.assert_array_equal(f.to_numpy(), c)
    assert f.to_chebyshev() == series
    x = C.chebpts1(12)[::-1]  # our points run from +1 down
    np.testing.assert_allclose(Cheb.from_values(C.chebval(x, c), X, 6).to_numpy(), c, **TOL)
    np.testing.assert_allclose(Cheb.from_function(lambda t: jnp.asarray(C.chebval(t, c)), X, 6).to_numpy(), c, **TOL)


def test_bad_input_is_rejected_clearly() -> None:
    f, g = Cheb.from_numpy(np.ones(4), X), Cheb.from_numpy(np.ones(5), X)
    with pytest.raises(ValueError, match=r"Cheb\[X\] with 4 coefficients vs Cheb\[X\] with 5 coefficients"):
        f.pair(g)
    with pytest.raises(ValueError, match=r"Cheb\[X\] with 4 coefficients vs Cheb\[Y\] with 4 coefficients"):
        dot(f, Cheb.from_numpy(np.ones(4), Y))  # type: ignore[misc]
    with pytest.raises(ValueError, match=r"evaluation outside \[-1, 1\]"):
        f(np.array([0.5, 1.5]))
    with pytest.raises(ValueError, match="domain"):
        Cheb.from_numpy(C.Chebyshev([1.0, 2.0], domain=[0, 1]), X)
    with pytest.raises(ValueError, match="2-D coefficients need 2 axis tags, got 1"):
        Cheb.from_numpy(np.ones((2, 2)), X)
    with pytest.raises(ValueError, match="called with 1 coordinates"):
        Cheb.from_numpy(np.ones((2, 2)), X, Y)(0.5)


class Head(Dim):
    """Attention heads."""


class Key(Dim):
    """Head features."""


def _structures(kind: str) -> tuple[Any, Any, Any]:
    """(input, model-feature template, a template of the hidden features) for each composite."""
    n, c = 6, 4
    if kind == "Cheb∘Cheb":
        return Cheb.from_numpy(rng.normal(size=(n, n)), X, Y), Cheb.zeros(n, Y), Cheb.zeros(n, Z)
    if kind == "Vec∘Cheb":
        return (
            Vec.stack(Cheb(jnp.asarray(rng.normal(size=(5, n))), Y, n, 2 * n), Seq),
            Cheb.zeros(n, Y),
            Cheb.zeros(n, Z),
        )
    return (
        Cheb.stack(matrix(rng.normal(size=(n, c)), X, Model).data, X),
        vector(np.zeros(c), Model),
        vector(np.zeros(8), Hidden),
    )


@pytest.mark.parametrize(
    ("kind", "normalise"),
    [("Cheb∘Cheb", nn.Softmax()), ("Vec∘Cheb", nn.Softmax()), ("Cheb∘Vec", nn.Softmax()),
     ("Cheb∘Cheb", CoefficientSoftmax())],  # the reference's Funcformer normalisation
    ids=["Cheb∘Cheb", "Vec∘Cheb", "Cheb∘Vec", "Cheb∘Cheb-coefficient-softmax"],
)  # fmt: skip
def test_the_generic_transformer_runs_on_functions(kind: str, normalise: Any) -> None:
    x, model, hidden = _structures(kind)
    enc = nn.init_encoder(jax.random.key(0), inputs=model, model=model, hidden=hidden, outputs=model, layers=1,
                          heads=vector(np.zeros(2), Head), head_features=model, normalise=normalise)  # fmt: skip

    def loss(enc: Any, x: Any) -> jax.Array:
        return jnp.sum(jax.tree_util.tree_leaves(enc(x))[0] ** 2)

    (value, grads), out = jax.jit(lambda e, x: (jax.value_and_grad(loss)(e, x), e(x)))(enc, x)
    assert np.isfinite(value)
    assert all(np.all(np.isfinite(g)) for g in jax.tree_util.tree_leaves(grads))
    assert type(out) is type(x)
    assert jax.tree_util.tree_structure(out) == jax.tree_util.tree_structure(x)
