"""Cheb against numpy.polynomial.chebyshev in float64: evaluation, integrals,
products, dot products; fmap's accuracy; conversions and errors; the generic
transformer on Cheb∘Cheb, Vec∘Cheb and Cheb∘Vec; the functional core's derivative as
a matrix. (The numpy collocation kit: tests/applicative/test_collocation.py; the linear
algebra's dense formulas and their relation to the generic definitions:
tests/applicative/test_fast_paths.py.)"""

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import numpy.polynomial.chebyshev as C
import pytest

from applicative import Cheb, Compose, Dim, Vec, counit, dot, lift_a2, nn, outer, to_array
from applicative.instances import chebyshev
from applicative.instances.chebyshev import gram, to_coefficients
from applicative.nn import CoefficientSoftmax
from tests.applicative.dims import Hidden, Model, Seq
from tests.applicative.tolerance import Tolerance


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
    options = nn.AttentionOptions(heads=heads, model=model, head_features=model, normalise=normalise)
    enc = nn.init_encoder(jax.random.key(0), options, inputs=model, hidden=hidden, outputs=model, layers=1)

    def loss(enc: Any, x: Any) -> jax.Array:
        return jnp.sum(jax.tree_util.tree_leaves(enc(x))[0] ** 2)

    (value, grads), out = jax.jit(lambda e, x: (jax.value_and_grad(loss)(e, x), e(x)))(enc, x)
    assert np.isfinite(value)
    assert all(np.all(np.isfinite(g)) for g in jax.tree_util.tree_leaves(grads))
    assert type(out) is type(x)
    # jaxlib 0.9.0 ships no type stub for PyTreeDef: mypy cannot type its ==.
    assert jax.tree_util.tree_structure(out) == jax.tree_util.tree_structure(x)  # type: ignore[operator]


# Bad input: a clear error or a correct value, never a silently wrong one.

INTEGER_SERIES: dict[str, Callable[[np.ndarray], Cheb[X, jax.Array]]] = {
    "from_array": lambda c: Cheb.from_array(c, X),
    "from_array of a list": lambda c: Cheb.from_array(c.tolist(), X),
    "of": lambda c: Cheb.of(list(c), X),
    "stack": lambda c: Cheb.stack(jnp.asarray(c), X),
}


@pytest.mark.parametrize("build", list(INTEGER_SERIES))
@pytest.mark.parametrize("coefficients", [np.array([1, 2]), np.array([True, True, False])], ids=["int", "bool"])
def test_integer_and_bool_coefficients_are_promoted_to_the_default_float(build: str, coefficients: np.ndarray) -> None:
    f = INTEGER_SERIES[build](coefficients)
    c = coefficients.astype(np.float64)
    assert to_array(f).dtype == jnp.result_type(float)
    np.testing.assert_allclose(f(0.5), C.chebval(0.5, c), **TOL)
    np.testing.assert_allclose(dot(f, f), integral(C.chebmul(c, c)), **TOL)
    np.testing.assert_allclose(f.counit(), integral(c), **TOL)
    np.testing.assert_allclose(to_array(f.fmap(lambda x: 0.5 * x)), 0.5 * c, **TOL)
    np.testing.assert_allclose(to_array(outer(f, f)), np.outer(c, c), **TOL)
    np.testing.assert_allclose(to_array(f.pure(3)), padded(np.array([3.0]), len(c)), **TOL)


def test_the_issue_example_one_plus_two_x() -> None:
    f = Cheb.from_array(np.array([1, 2]), X)  # 1 + 2x
    assert float(f(0.5)) == 2.0
    np.testing.assert_allclose(dot(f, f), 14 / 3, **TOL)  # the integral of (1 + 2x)^2 over [-1, 1]


def test_complex_coefficients_are_kept_and_the_dot_product_is_bilinear() -> None:
    c, d = rng.normal(size=4) + 1j * rng.normal(size=4), rng.normal(size=4) + 1j * rng.normal(size=4)
    f, g = Cheb.from_array(c, X), Cheb.from_array(d, X)
    assert to_array(f).dtype == jnp.complex128
    np.testing.assert_allclose(f(0.3), C.chebval(0.3, c), **TOL)
    product = C.chebint(C.chebmul(c, d))  # no complex conjugate, as numpy.dot
    np.testing.assert_allclose(dot(f, g), C.chebval(1.0, product) - C.chebval(-1.0, product), **TOL)


@pytest.mark.parametrize(
    "bad",
    [np.array([1.0, "a"], dtype=object), np.array(["a", "b"]), [[1.0, 2.0], [3.0]]],
    ids=["object", "string", "ragged list"],
)
def test_coefficients_that_are_not_numbers_are_rejected_naming_the_constructor(bad: Any) -> None:
    with pytest.raises(TypeError, match=r"Cheb.from_array: expected an array of numbers"):
        Cheb.from_array(bad, X)
    with pytest.raises(TypeError, match=r"Cheb.stack\[X\]: expected an array of numbers"):
        Cheb.stack(np.asarray(bad, dtype=object), X)


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda: Cheb.from_array(np.zeros(0), X), r"Cheb.from_array: every axis needs at least one coefficient"),
        (lambda: Cheb.from_array(np.zeros((2, 0)), X, Y), r"Cheb.from_array: every axis needs at least one"),
        (lambda: Cheb.from_array([], X), r"Cheb.from_array: every axis needs at least one coefficient"),
        (lambda: Cheb.of([], X), r"Cheb.of\[X\]: needs at least one element"),
        (lambda: Cheb.stack(jnp.zeros(0), X), r"Cheb.stack\[X\]: a series needs at least one coefficient"),
        (lambda: Cheb.from_function(jnp.sin, X, 0), r"Cheb.from_function: a series needs at least one coefficient"),
        (lambda: Cheb.from_function(jnp.sin, X, -2), r"Cheb.from_function: a series needs at least one coefficient"),
        (lambda: Cheb.from_function(jnp.sin, X, 2.5), r"Cheb.from_function: .* got size 2.5"),  # type: ignore[arg-type]
        (lambda: Cheb.from_array(np.ones(4), X, points=3), r"Cheb.from_array: 3 sample points cannot resolve 4"),
    ],
)
def test_empty_series_and_too_few_points_are_rejected(build: Callable[[], object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        build()


def test_numpy_series_of_any_kind_are_converted_exactly() -> None:
    f = Cheb.from_array(np.polynomial.Polynomial([1, 2]), X)  # 1 + 2x: the same coefficients
    np.testing.assert_allclose(to_array(f), [1.0, 2.0], **TOL)
    x = np.linspace(-1, 1, 11)
    for kind in (np.polynomial.Polynomial, np.polynomial.Legendre, np.polynomial.Hermite, np.polynomial.Laguerre):
        p = kind(rng.normal(size=5))
        np.testing.assert_allclose(Cheb.from_array(p, X)(x), p(x), **TOL)
    with pytest.raises(ValueError, match=r"Cheb.from_array: a Polynomial series on domain \[0\. 1\.\]"):
        Cheb.from_array(np.polynomial.Polynomial([1.0, 2.0], domain=[0, 1]), X)


def test_a_size_that_disagrees_with_the_data_is_rejected_when_used() -> None:
    # Cheb(data, tag, size, points) is how JAX rebuilds a series, so it is not checked; operations are.
    wrong = Cheb(jnp.ones(3), X, 5, 10)
    message = r"5 elements, but a leaf of the data has shape \(3,\)"
    for op, use in (("__call__", lambda: wrong(0.5)), ("counit", wrong.counit), ("fmap", lambda: wrong.fmap(jnp.sin))):
        with pytest.raises(ValueError, match=rf"Cheb\[X\]\.{op}: " + message):
            use()
    with pytest.raises(ValueError, match=r"dot: a Cheb\[X\] of size 5 holds coordinates of shape \(3,\), not \(5,\)"):
        dot(wrong, wrong)
    with pytest.raises(ValueError, match=r"Cheb\[X\]\.fmap: 2 sample points cannot resolve 3 coefficients"):
        Cheb(jnp.ones(3), X, 3, 2).fmap(jnp.sin)


def test_dim_itself_is_not_a_tag() -> None:
    for build in (
        lambda: Cheb.from_array(np.ones(2), Dim),
        lambda: Cheb.of([1.0, 2.0], Dim),
        lambda: Cheb.stack(np.ones(2), Dim),
        lambda: Cheb.from_function(jnp.sin, Dim, 4),
    ):
        with pytest.raises(TypeError, match=r"Cheb\.\w+.*: dimension tag must be a subclass of Dim, not Dim itself"):
            build()


# derivative_matrix: the derivative as a numpy matrix (the Darcy solver's).


@pytest.mark.parametrize("n", [1, 4, 20])
@pytest.mark.parametrize("order", [0, 1, 2])
def test_derivative_matrix_is_chebder_in_exact_integers(n: int, order: int) -> None:
    eye = np.eye(n)
    expected = np.zeros((n, n))
    expected[: max(n - order, 0)] = C.chebder(eye, order, axis=0)[: max(n - order, 0)]
    np.testing.assert_allclose(chebyshev.derivative_matrix(n, order), expected, rtol=0, atol=1e-12)
    exact = chebyshev.derivative_matrix(n, order)
    np.testing.assert_array_equal(exact, np.round(exact))  # integers, where chebder's recurrence rounds
    np.testing.assert_array_equal(exact, np.asarray(chebyshev.derivative(eye, order)))


def test_derivative_matrix_rejects_bad_sizes_and_orders() -> None:
    with pytest.raises(ValueError, match=r"derivative_matrix: need an integer size >= 1, got 0"):
        chebyshev.derivative_matrix(0)
    with pytest.raises(ValueError, match=r"derivative_matrix: order must be a non-negative integer"):
        chebyshev.derivative_matrix(3, -1)
