"""Cross-structure attention: queries on one structure, keys and values on another,
against direct computations."""

import numpy as np
import numpy.polynomial.chebyshev as C
import scipy.fft

from applicative import Cheb, Dim, Tree, Vec, as_cheb, as_vec, nn, to_array
from tests.applicative.dims import Hidden, Model, Seq


class X(Dim):
    """The variable of the query function."""


rng = np.random.default_rng(5)


def _softmax_attention(q: np.ndarray, k: np.ndarray, v: np.ndarray) -> np.ndarray:
    s = q @ k.T / np.sqrt(k.shape[1])
    p = np.exp(s - s.max(axis=-1, keepdims=True))
    attended: np.ndarray = (p / p.sum(axis=-1, keepdims=True)) @ v
    return attended


def test_function_queries_attend_over_vector_keys() -> None:
    # Queries: a function of x with values in R^4 (Cheb[X, Vec[Model]]); keys and values:
    # a sequence of 5 vectors. The result is a function of x with values in R^3.
    n = 16
    q_coefficients = np.zeros((n, 4))
    q_coefficients[:3] = rng.normal(size=(3, 4))  # a quadratic query path
    k, v = rng.normal(size=(5, 4)), rng.normal(size=(5, 3))
    queries = Cheb.stack(Vec.from_array(q_coefficients, X, Model).data, X)
    out = as_cheb(nn.attention(queries, Vec.from_array(k, Seq, Model), Vec.from_array(v, Seq, Hidden)))
    assert out.tag is X
    assert as_vec(out.data).tag is Hidden

    # Direct: attention at the 2N Chebyshev points fmap samples, back to N coefficients with scipy's DCT.
    points = C.chebpts1(2 * n)[::-1]
    at_points = _softmax_attention(C.chebval(points, q_coefficients).T, k, v)
    expected = scipy.fft.dct(at_points, type=2, axis=0)[:n] / (2 * n)
    expected[0] /= 2
    np.testing.assert_allclose(to_array(out), expected, rtol=1e-12, atol=1e-12)

    # And the function it represents is close to the exact attention everywhere on [-1, 1]:
    # only the Chebyshev truncation separates them (4e-5 measured at N = 16).
    x = np.linspace(-1, 1, 101)
    exact = _softmax_attention(C.chebval(x, q_coefficients).T, k, v)
    np.testing.assert_allclose(to_array(out(x)), exact, atol=1e-4)


def test_tree_leaves_attend_over_a_vector_sequence() -> None:
    # Queries: the leaves of a tree, each a vector; keys and values: a sequence of vectors.
    # Each leaf's result is ordinary attention of its query over the sequence.
    leaf_queries = rng.normal(size=(3, 4))
    q0, q1, q2 = (Vec.from_array(q, Model) for q in leaf_queries)
    queries = Tree.from_nested((q0, (q1, q2)))
    k, v = rng.normal(size=(5, 4)), rng.normal(size=(5, 3))
    out = nn.attention(queries, Vec.from_array(k, Seq, Model), Vec.from_array(v, Seq, Hidden))
    assert isinstance(out, Tree)
    assert out.shape == queries.shape
    got = np.stack([np.asarray(to_array(leaf)) for leaf in out.leaves()])
    np.testing.assert_allclose(got, _softmax_attention(leaf_queries, k, v), rtol=1e-12, atol=1e-12)
