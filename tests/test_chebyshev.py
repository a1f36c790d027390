"""Cheb against numpy.polynomial.chebyshev in float64: evaluation, integrals,
products, dot products; fmap's accuracy; conversions and errors; the generic
transformer on Cheb∘Cheb, Vec∘Cheb and Cheb∘Vec. (The linear algebra's dense
formulas and their relation to the generic definitions: tests/test_fast_paths.py.)"""

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import numpy.polynomial.chebyshev as C
import pytest

from applicative import Cheb, Compose, Dim, Vec, counit, dot, lift_a2, nn, to_array
from applicative.instances.chebyshev import gram, to_coefficients
from applicative.nn import CoefficientSoftmax
from tests.dims import Hidden, Model, Seq
from tests.tolerance import Tolerance


class X(Dim):
    """The first variable."""


class Y(Dim):
    """The second variable."""


class Z(Dim):
    """A third variable."""


rng = np.random.default_rng(3)
TOL: Tolerance = {"rtol": 1e-12, "atol": 1e-12}


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
    np.testing.assert_allclose(Cheb.from_array(c, X)(x), C.chebval(x, c), **TOL)
    np.testing.assert_allclose(Cheb.from_array(c2, X, Y)(x, y), C.chebval2d(x, y, c2), **TOL)
    np.testing.assert_allclose(Cheb.from_array(c, X)(1.0), C.chebval(1.0, c), **TOL)  # endpoints included


def test_integrals_match_chebint() -> None:
    c, c2 = rng.normal(size=8), rng.normal(size=(4, 6))
    np.testing.assert_allclose(Cheb.from_array(c, X).counit(), integral(c), **TOL)
    inner = np.array([integral(row) for row in c2])  # integrate over y first, then x
    np.testing.assert_allclose(counit(Compose(Cheb.from_array(c2, X, Y))), integral(inner), **TOL)


def test_products_within_the_resolution_match_chebmul() -> None:
    n = 12
    a, b = np.zeros(n), np.zeros(n)
    a[:6], b[:6] = rng.normal(size=6), rng.normal(size=6)  # degree 5: the product has degree 10 < n
    product = lift_a2(lambda p, q: p * q, Cheb.from_array(a, X), Cheb.from_array(b, X))
    np.testing.assert_allclose(to_array(product), padded(C.chebmul(a, b), n), **TOL)


def test_fmap_is_exact_for_affine_maps_and_polynomials() -> None:
    c = rng.normal(size=10)
    f = Cheb.from_array(c, X)
    np.testing.assert_allclose(to_array(f.fmap(lambda v: 2 * v + 1)), 2 * c + np.eye(10)[0], **TOL)
    low = np.concatenate([c[:4], np.zeros(6)])
    cube = Cheb.from_array(low, X).fmap(lambda v: v**3)
    np.testing.assert_allclose(to_array(cube), padded(C.chebpow(low, 3), 10), **TOL)


def test_relu_through_the_dct_converges() -> None:
    xs = np.linspace(-1, 1, 4001)

    def max_error(n: int) -> float:
        relu = Cheb.from_array(np.eye(n)[1], X).fmap(jax.nn.relu)  # relu(x)
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
    np.testing.assert_allclose(to_array(once), to_array(twice), atol=1e-10)


def test_dot_products_are_exact_integrals() -> None:
    a, b = rng.normal(size=10), rng.normal(size=10)
    expected = integral(C.chebmul(a, b))
    np.testing.assert_allclose(dot(Cheb.from_array(a, X), Cheb.from_array(b, X)), expected, **TOL)


def test_conversions_round_trip() -> None:
    c = rng.normal(size=6)
    series = C.Chebyshev(c)
    f = Cheb.from_array(series, X)
    np.testing.assert_array_equal(to_array(f), c)
    assert f.to_chebyshev() == series
    x = C.chebpts1(12)[::-1]  # our points run from +1 down
    np.testing.assert_allclose(to_coefficients(C.chebval(x, c), 6), c, **TOL)
    np.testing.assert_allclose(to_array(Cheb.from_function(lambda t: jnp.asarray(C.chebval(t, c)), X, 6)), c, **TOL)


def test_nested_inputs_from_lists_need_no_layout() -> None:
    # A sequence of functions and a function with vector values, each built from a list of its parts.
    rows, channels = rng.normal(size=(3, 5)), rng.normal(size=(5, 2))
    functions = Vec.of([Cheb.from_array(row, X) for row in rows], Seq)
    vector_valued = Cheb.of([Vec.from_array(c, Model) for c in channels], X)
    x = np.array([-0.9, 0.2, 0.7])
    for i, row in enumerate(rows):
        np.testing.assert_allclose(functions[i](x), C.chebval(x, row), **TOL)
    np.testing.assert_allclose(to_array(vector_valued(0.3)), C.chebval(0.3, channels), **TOL)
    assert (functions.size, functions[0].size, vector_valued.size, vector_valued.points) == (3, 5, 5, 10)
    with pytest.raises(
        ValueError, match=r"Vec.of\[Seq\]: element 1 is .*Cheb\[\(<class '.*X'>, 4, 8\)\].*element 0 is"
    ):
        Vec.of([Cheb.from_array(np.ones(5), X), Cheb.from_array(np.ones(4), X)], Seq)
    with pytest.raises(
        ValueError, match=r"Cheb.of\[X\]: element 1 has leaf shapes \[\(3,\)\], element 0 has \[\(2,\)\]"
    ):
        Cheb.of([np.ones(2), np.ones(3)], X)


def test_bad_input_is_rejected_clearly() -> None:
    f, g = Cheb.from_array(np.ones(4), X), Cheb.from_array(np.ones(5), X)
    with pytest.raises(ValueError, match=r"pair: dimension mismatch: Cheb\[X\] of size 4 vs Cheb\[X\] of size 5"):
        f.pair(g)
    # Mismatched operands on purpose (mypy rejects both dots: it cannot infer their brand); the errors are under test.
    with pytest.raises(ValueError, match=r"dot: dimension mismatch: Cheb\[X\] of size 4 vs Cheb\[Y\] of size 4"):
        dot(f, Cheb.from_array(np.ones(4), Y))  # type: ignore[misc]
    with pytest.raises(ValueError, match=r"dot: dimension mismatch: Cheb\[X\] of size 4 vs Vec\[X\] of size 4"):
        dot(f, Vec.from_array(np.ones(4), X))  # type: ignore[misc]
    with pytest.raises(ValueError, match=r"evaluation outside \[-1, 1\]"):
        f(np.array([0.5, 1.5]))
    with pytest.raises(ValueError, match="domain"):
        Cheb.from_array(C.Chebyshev([1.0, 2.0], domain=[0, 1]), X)
    with pytest.raises(ValueError, match=r"Cheb.from_array\(X\): a 2-D array needs 2 tags"):
        Cheb.from_array(np.ones((2, 2)), X)
    with pytest.raises(ValueError, match=r"every axis needs at least one coefficient, got shape \(0,\)"):
        Cheb.from_array(np.zeros(0), X)
    with pytest.raises(ValueError, match="called with 1 coordinates"):
        Cheb.from_array(np.ones((2, 2)), X, Y)(0.5)


class Head(Dim):
    """Attention heads."""


class Key(Dim):
    """Head features."""


def _zeros(n: int, tag: type[Dim]) -> Cheb[Any, jax.Array]:
    return Cheb.from_array(np.zeros(n), tag)


def _structures(kind: str) -> tuple[Any, Any, Any]:
    """(input, model-feature template, a template of the hidden features) for each composite."""
    n, c = 6, 4
    if kind == "Cheb∘Cheb":
        return Cheb.from_array(rng.normal(size=(n, n)), X, Y), _zeros(n, Y), _zeros(n, Z)
    if kind == "Vec∘Cheb":
        return (
            Vec.of([Cheb.from_array(rng.normal(size=n), Y) for _ in range(5)], Seq),
            _zeros(n, Y),
            _zeros(n, Z),
        )
    return (
        Cheb.of([Vec.from_array(rng.normal(size=c), Model) for _ in range(n)], X),
        Vec.from_array(np.zeros(c), Model),
        Vec.from_array(np.zeros(8), Hidden),
    )


@pytest.mark.parametrize(
    ("kind", "normalise"),
    [("Cheb∘Cheb", nn.Softmax()), ("Vec∘Cheb", nn.Softmax()), ("Cheb∘Vec", nn.Softmax()),
     ("Cheb∘Cheb", CoefficientSoftmax())],  # the reference's Funcformer normalisation
    ids=["Cheb∘Cheb", "Vec∘Cheb", "Cheb∘Vec", "Cheb∘Cheb-coefficient-softmax"],
)  # fmt: skip
def test_the_generic_transformer_runs_on_functions(kind: str, normalise: Any) -> None:
    x, model, hidden = _structures(kind)
    heads = Vec.from_array(np.zeros(2), Head)
    enc: nn.Encoder[Any, Any, Any, Any]  # the structures differ by kind
    enc = nn.init_encoder(jax.random.key(0), inputs=model, model=model, hidden=hidden, outputs=model, layers=1,
                          heads=heads, head_features=model, normalise=normalise)  # fmt: skip

    def loss(enc: Any, x: Any) -> jax.Array:
        return jnp.sum(jax.tree_util.tree_leaves(enc(x))[0] ** 2)

    (value, grads), out = jax.jit(lambda e, x: (jax.value_and_grad(loss)(e, x), e(x)))(enc, x)
    assert np.isfinite(value)
    assert all(np.all(np.isfinite(g)) for g in jax.tree_util.tree_leaves(grads))
    assert type(out) is type(x)
    # jaxlib 0.9.0 ships no type stub for PyTreeDef: mypy cannot type its ==.
    assert jax.tree_util.tree_structure(out) == jax.tree_util.tree_structure(x)  # type: ignore[operator]
