"""Distribution and Quantum (applicative.instances.distribution): laws, expectations against
numpy, merging and the canonical form, validation, interference, gradients, jit, and attention
whose values are distributions."""

from typing import Any, cast

import hypothesis.strategies as st
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from applicative import (
    ARITHMETIC,
    Applicative,
    Dim,
    DistributionOf,
    Module,
    Pointwise,
    Real,
    Vec,
    as_vec,
    counit,
    laws,
    nn,
    to_array,
)
from applicative.instances.distribution import MIXTURE, Distribution, Quantum, mixture
from applicative.strategies import distribution_triples
from tests.applicative.dims import Model, Seq

rng = np.random.default_rng(7)
QUANTUM_NON_LAWS = ("counit additivity", "counit respects pairing")


class Support(Dim):
    """The fixed support of a value distribution, as a feature axis."""


class Query(Dim):
    """Query positions."""


# Laws


# Quantum's claimed laws are checked with every instance's (tests/applicative/test_laws.py); here, the two it drops.


@pytest.mark.parametrize("law", QUANTUM_NON_LAWS)
def test_quantum_counit_is_not_linear_and_the_suite_says_so(law: str) -> None:
    """The Born rule is quadratic in the amplitudes: fmap(fst, pair(x, y)) merges y's outcomes
    coherently (|a_i|^2 |sum_j b_j|^2, not |a_i|^2), and fmap(add) makes coinciding sums interfere."""
    plus = Quantum([0.0, 1.0], np.array([1.0, 1.0]) / np.sqrt(2))
    minus = Quantum([1.0, 2.0], np.array([1.0, -1.0]) / np.sqrt(2))  # 0 + 2 and 1 + 1 interfere
    with pytest.raises(AssertionError, match=law):
        laws.check_law(law, st.just((plus, minus, plus)), max_examples=1)


def test_quantum_pairing_counterexample() -> None:
    plus = Quantum([0.0, 1.0], np.array([1.0, 1.0]) / np.sqrt(2))
    minus = Quantum([0.0, 1.0], np.array([1.0, -1.0]) / np.sqrt(2))
    assert float(plus.counit()) == pytest.approx(0.5)
    # Tracing out |-> coherently cancels every amplitude: the marginal has norm 0.
    assert float(plus.pair(minus).fmap(lambda p: p[0]).counit()) == pytest.approx(0.0, abs=1e-15)


def test_mixture_module_laws() -> None:
    # distribution_triples() is typed as triples of any structure; it draws Distributions.
    measures = distribution_triples().map(lambda t: cast(Distribution[Any], t[0]))
    laws.check_algebra_laws(MIXTURE, measures, max_examples=15)


# Expectation


def test_expectation_matches_numpy_for_vector_outcomes() -> None:
    x, p = rng.normal(size=(5, 3)), rng.dirichlet(np.ones(5))
    d = Distribution(x, p)
    np.testing.assert_allclose(np.asarray(d.counit()), p @ x, rtol=1e-12)

    class Slow(Module[Any]):
        """ARITHMETIC, but not leafwise: exercises the generic sum_i scale(p_i, x_i)."""

        def zero(self, like: Any) -> Any:
            return ARITHMETIC.zero(like)

        def add(self, a: Any, b: Any) -> Any:
            return ARITHMETIC.add(a, b)

        def scale(self, r: Real, a: Any) -> Any:
            return ARITHMETIC.scale(r, a)

    np.testing.assert_allclose(np.asarray(counit(d, Slow())), p @ x, rtol=1e-12)


def test_expectation_of_pytree_outcomes_and_of_a_pair() -> None:
    x, y = rng.normal(size=4), rng.normal(size=(3, 2))
    p, q = rng.dirichlet(np.ones(4)), rng.dirichlet(np.ones(3))
    joint = Distribution(x, p).pair(Distribution(y, q))
    assert joint.size == 12
    ex, ey = joint.counit()
    np.testing.assert_allclose(np.asarray(ex), p @ x, rtol=1e-12)
    np.testing.assert_allclose(np.asarray(ey), q @ y, rtol=1e-12)
    product = joint.fmap(lambda t: t[0] * t[1][0]).counit()  # E[X Y_0] = E[X] E[Y_0] (independent)
    np.testing.assert_allclose(np.asarray(product), (p @ x) * (q @ y)[0], rtol=1e-12)


def test_pairing_with_pure_is_the_identity() -> None:
    """The reference's zip pairing keeps only the first outcome here; independent pairing keeps all."""
    d = Distribution([3.0, -1.0, 0.5], [0.2, 0.3, 0.5])
    left = d.pure(7.0).pair(d).fmap(lambda t: t[1])
    right = d.pair(d.pure(0.0)).fmap(lambda t: t[0])
    laws.assert_close(left, d, what="left unit")
    laws.assert_close(right, d, what="right unit")
    assert left.size == 3


# Merging and the canonical form


def test_equal_outcomes_merge_and_sort() -> None:
    d = Distribution([2.0, 1.0, 2.0, -0.0, 0.0], [0.1, 0.2, 0.3, 0.15, 0.25])
    np.testing.assert_array_equal(np.asarray(d.outcomes), [0.0, 1.0, 2.0])
    np.testing.assert_allclose(np.asarray(d.probabilities), [0.4, 0.2, 0.4], rtol=1e-15)
    folded = d.fmap(lambda x: (x - 1.0) ** 2)  # 0 and 2 both map to 1
    np.testing.assert_array_equal(np.asarray(folded.outcomes), [0.0, 1.0])
    np.testing.assert_allclose(np.asarray(folded.probabilities), [0.2, 0.8], rtol=1e-15)


def test_equal_distributions_have_equal_pytrees() -> None:
    a = Distribution([[1.0, 2.0], [0.0, 5.0], [1.0, 2.0]], [0.25, 0.5, 0.25])
    b = Distribution([[0.0, 5.0], [1.0, 2.0]], [0.5, 0.5])
    laws.assert_close(a, b, rtol=0, atol=0)


def test_quantum_merge_adds_amplitudes() -> None:
    q = Quantum([1.0, 0.0, 1.0], [0.6, 0.0, 0.8j])
    assert q.size == 2
    np.testing.assert_allclose(np.asarray(q.amplitudes), [0.0, 0.6 + 0.8j])


def test_nan_outcomes_cannot_merge() -> None:
    with pytest.raises(ValueError, match="NaN"):
        Distribution([0.0, np.nan], [0.5, 0.5])


def test_outcomes_only_float64_tells_apart_are_refused_with_64_bit_types_off() -> None:
    # With x64 (the suite's setting) they stay distinct; with JAX's default they would be stored in
    # float32 and merge silently: an error naming them instead. Equal outcomes still merge.
    near = np.array([0.5, 0.5 + 1e-9])
    np.testing.assert_array_equal(np.asarray(Distribution(near, np.array([0.25, 0.75])).outcomes), near)
    with jax.enable_x64(False):
        for build in (lambda: Distribution(near, np.array([0.25, 0.75])), lambda: Quantum(list(near), [0.6, 0.8])):
            with pytest.raises(
                ValueError, match=r"outcomes 0 and 1 are distinct as given \(0.5 and 0.500000001\) but equal in float32"
            ):
                build()
        merged = Distribution(np.array([0.5, 0.5, 0.25]), np.array([0.25, 0.5, 0.25]))
        np.testing.assert_array_equal(np.asarray(merged.outcomes), np.array([0.25, 0.5], np.float32))
        np.testing.assert_allclose(np.asarray(merged.probabilities), [0.25, 0.75])
        distinct = Quantum(np.array([0.5, 0.5 + 1e-3]), np.array([0.6, 0.8]))  # float32 tells these apart
        assert distinct.size == 2


def test_under_jit_fmap_keeps_outcomes_unmerged_with_the_same_law() -> None:
    d = Distribution([-1.0, 1.0, 2.0], [0.2, 0.3, 0.5])
    square = jax.jit(lambda d: d.fmap(jnp.square))(d)  # traced outcomes: no merge
    assert square.size == 3
    eager = d.fmap(jnp.square)
    assert eager.size == 2
    laws.assert_close(square.merged(), eager)
    np.testing.assert_allclose(float(jax.jit(lambda d: d.fmap(jnp.square).counit())(d)), float(eager.counit()))
    with pytest.raises(ValueError, match="traced"):
        jax.jit(lambda d: d.merged())(d)


# Validation


@pytest.mark.parametrize(
    ("outcomes", "weights", "message"),
    [
        ([0.0, 1.0], [0.7, 0.7], r"probabilities must sum to one .* sum to 1\.4"),
        ([0.0, 1.0], [1.5, -0.5], r"non-negative, entry 1 is -0\.5"),
        ([0.0, 1.0], [1.0], r"one weight per outcome \(2\)"),
        ([0.0, 1.0], [np.inf, 0.0], "finite"),
        ([], [], "at least one outcome"),
    ],
)
def test_distribution_validation(outcomes: list[float], weights: list[float], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Distribution(outcomes, weights)


def test_quantum_validation() -> None:
    with pytest.raises(ValueError, match=r"squared magnitudes of the amplitudes must sum to one .* 2\.0"):
        Quantum([0.0, 1.0], [1.0, 1.0j])
    Quantum([0.0, 1.0], [1.0 + 0j, 0.0])  # normalised: fine


def test_pairing_different_instances_is_an_error() -> None:
    with pytest.raises(TypeError, match="Distribution paired with Quantum"):
        Distribution([0.0], [1.0]).pair(Quantum([0.0], [1.0]))  # type: ignore[arg-type]


def test_mixture_weights_must_sum_to_one() -> None:
    components = _stack([Distribution([0.0, 1.0], [0.5, 0.5])] * 2)
    with pytest.raises(ValueError, match=r"mixture: the probabilities must sum to one"):
        mixture(Vec(jnp.array([0.5, 0.6]), Seq, 2), components)


# Interference


def _mach_zehnder(phase: jax.Array | float = 0.0) -> Quantum[Any]:
    """Two beam splitters (transmit 0 with amplitude 1/sqrt 2, reflect 1 with i/sqrt 2), a phase on
    the reflected arm of the first; the detector is path XOR choice. The two histories reaching
    a detector interfere: with no phase, detector 0 never fires."""
    first = Quantum([0.0, 1.0], jnp.array([1.0, 1j * jnp.exp(1j * phase)]) / jnp.sqrt(2.0))
    second = Quantum([0.0, 1.0], jnp.array([1.0, 1j]) / np.sqrt(2.0))
    return first.pair(second).fmap(lambda p: jnp.abs(p[0] - p[1]))


def test_two_path_interference() -> None:
    detector = _mach_zehnder()
    np.testing.assert_array_equal(np.asarray(detector.outcomes), [0.0, 1.0])
    np.testing.assert_allclose(np.asarray(detector.probabilities), [0.0, 1.0], atol=1e-15)
    assert float(detector.counit()) == pytest.approx(1.0)
    # Squaring before merging (the reference's counit on unmerged paths) loses the interference:
    paths = Quantum([0.0, 1.0], np.array([1.0, 1j]) / np.sqrt(2))
    unmerged = paths.pair(paths)
    xor = np.abs(np.asarray(unmerged.outcomes[0]) - np.asarray(unmerged.outcomes[1]))
    assert float(np.abs(np.asarray(unmerged.amplitudes)) ** 2 @ xor) == pytest.approx(0.5)
    # Classically, the same splitters give each detector probability 1/2.
    coin = Distribution([0.0, 1.0], [0.5, 0.5])
    assert float(coin.pair(coin).fmap(lambda p: jnp.abs(p[0] - p[1])).counit()) == pytest.approx(0.5)


def test_interference_under_jit_uses_the_equality_matrix() -> None:
    """Inside jit the outcomes are traced: fmap cannot merge, the Born rule sums amplitudes of equal
    outcomes through an equality matrix instead, and gives the same answer."""
    paths = Quantum([0.0, 1.0], np.array([1.0, 1j]) / np.sqrt(2))
    jitted = jax.jit(lambda q: q.pair(q).fmap(lambda p: jnp.abs(p[0] - p[1])).counit())(paths)
    assert float(jitted) == pytest.approx(1.0)


def test_grad_of_a_phase() -> None:
    """P(detector 1) = (1 + cos phase) / 2, so d counit / d phase = -sin(phase) / 2."""
    phase = 0.7
    value, slope = jax.value_and_grad(lambda t: _mach_zehnder(t).counit())(phase)
    assert float(value) == pytest.approx((1 + np.cos(phase)) / 2, rel=1e-12)
    assert float(slope) == pytest.approx(-np.sin(phase) / 2, rel=1e-12)


# Gradients with respect to probabilities


def test_grad_of_an_expectation_with_respect_to_probabilities() -> None:
    x = np.array([-1.0, 1.0, 2.0, 0.5])
    p = rng.dirichlet(np.ones(4))

    def second_moment(p: jax.Array) -> jax.Array:
        return Distribution(x, p).fmap(jnp.square).counit()  # -1 and 1 merge into 1

    for f in (second_moment, jax.jit(second_moment)):
        value, g = jax.value_and_grad(f)(jnp.asarray(p))
        np.testing.assert_allclose(float(value), p @ x**2, rtol=1e-12)
        np.testing.assert_allclose(np.asarray(g), x**2, rtol=1e-12)


# Attention whose values are distributions


def _stack(ds: list[Distribution[Any]]) -> Vec[Seq, Distribution[Any]]:
    """A Vec of distributions of one support size (stacked leafwise, like any Vec element)."""
    return Vec.stack(jax.tree_util.tree_map(lambda *leaves: jnp.stack(leaves), *ds), Seq)


def _softmax_rows(q: np.ndarray, k: np.ndarray) -> np.ndarray:
    s = q @ k.T / np.sqrt(k.shape[1])
    e = np.exp(s - s.max(axis=1, keepdims=True))
    weights: np.ndarray = e / e.sum(axis=1, keepdims=True)
    return weights


def test_attention_over_fixed_support_distributions() -> None:
    """The simplest honest case, through ``nn.attention`` unchanged: a value distribution on a fixed
    support is a probability vector, i.e. a Vec over the support; attention rows are convex
    weights, so each output is again a probability vector (the mixture) on that support."""
    n, d, support = 4, 3, np.array([-1.0, 0.0, 2.0, 5.0])
    q, k = rng.normal(size=(n, d)), rng.normal(size=(n, d))
    p = rng.dirichlet(np.ones(support.size), size=n)
    out = nn.attention(Vec.from_array(q, Seq, Model), Vec.from_array(k, Seq, Model), Vec.from_array(p, Seq, Support))
    probs = np.asarray(to_array(out))
    np.testing.assert_allclose(probs, _softmax_rows(q, k) @ p, rtol=1e-12)
    for row in probs:
        expectation = Distribution(support, row).counit()
        np.testing.assert_allclose(float(expectation), row @ support, rtol=1e-12)


def test_attention_as_a_mixture_of_distributions() -> None:
    """The faithful case: values are arbitrary distributions D_k (here each on its own support);
    the output for query i is the mixture sum_k w_ik D_k, computed by the generic ``counit`` over
    the keys in the ``MIXTURE`` Module (union of outcomes, weights scaled and added; its zero is
    the empty measure, not the point mass at 0). ``nn.attention`` itself cannot take these values:
    it sums them in ``Pointwise(ARITHMETIC)``, which pairs two distributions independently (a
    product) where a mixture is a union of their outcomes. So the scores come from the library (``DotProduct`` and
    ``Softmax``), and the value step is ``mixture``: its expectation is sum_k w_ik E[D_k], which is
    attention applied to the expectations."""
    n, d, m = 3, 4, 3
    q, k = rng.normal(size=(2, d)), rng.normal(size=(n, d))
    outcomes = [rng.choice(np.arange(-3.0, 4.0), m, replace=False) for _ in range(n)]  # overlapping supports
    probs = [rng.dirichlet(np.ones(m)) for _ in range(n)]
    values = _stack([Distribution(x, p) for x, p in zip(outcomes, probs, strict=True)])
    keys = Vec.from_array(k, Seq, Model)
    d_k = jnp.asarray(float(d))
    weights = nn.Softmax()(nn.DotProduct()(Vec.from_array(q, Query, Model), keys), None, d_k)

    # mul_mm's shape with the MIXTURE Module: one mixture per query row (under vmap: the outcomes
    # are shared constants, so they stay concrete and merge; only the weights are batched).
    out = weights.fmap(lambda row: mixture(row, values))
    mixed = [as_vec(out)[i] for i in range(2)]

    w = _softmax_rows(q, k)
    expectations = np.array([p @ x for x, p in zip(outcomes, probs, strict=True)])
    for i, dist in enumerate(mixed):
        np.testing.assert_allclose(float(dist.counit()), w[i] @ expectations, rtol=1e-12)
        # The mixture's law, outcome by outcome, against numpy:
        support = np.unique(np.concatenate(outcomes))
        law = [sum(w[i, j] * probs[j][outcomes[j] == s].sum() for j in range(n)) for s in support]
        np.testing.assert_array_equal(np.asarray(dist.outcomes), support)
        np.testing.assert_allclose(np.asarray(dist.probabilities), law, rtol=1e-12)
    # E commutes with attention: nn.attention on the expectations (one feature each) agrees.
    on_expectations = nn.attention(
        Vec.from_array(q, Query, Model), keys, Vec.from_array(expectations[:, None], Seq, Support)
    )
    np.testing.assert_allclose(
        np.asarray(to_array(on_expectations))[:, 0],
        [float(dist.counit()) for dist in mixed],
        rtol=1e-12,
    )


def test_a_vec_of_distributions_sums_them_as_random_variables() -> None:
    # Pointwise addition of distributions is the law of the sum of independent variables
    # (pair is a product), so a Vec's counit must not add their outcome leaves.
    d1 = Distribution([0.0, 1.0], [0.25, 0.75])
    d2 = Distribution([0.0, 10.0], [0.5, 0.5])
    variables: list[Applicative[DistributionOf, float]] = [d1, d2]
    lifted: Pointwise[DistributionOf, float] = Pointwise(ARITHMETIC)
    total = Vec.of(variables, Seq).counit(lifted)
    assert isinstance(total, Distribution)
    outcomes, probabilities = zip(*total.merged().items(), strict=True)
    np.testing.assert_allclose(np.asarray(outcomes, float), [0.0, 1.0, 10.0, 11.0])
    np.testing.assert_allclose(np.asarray(probabilities, float), [0.125, 0.375, 0.125, 0.375])


# Bad weights: a clear error, never a silently wrong expectation.


@pytest.mark.parametrize(
    ("weights", "error", "message"),
    [
        ([2 + 0j, -1 + 0j], TypeError, r"Distribution: probabilities must be real numbers, got dtype complex128"),
        ([0.5 + 0j, 0.5 + 0j], TypeError, r"Distribution: probabilities must be real numbers"),
        ([True, False], TypeError, r"Distribution: weights must be numbers, got bools"),
        (np.array([0.5, 0.5], dtype=object), TypeError, r"Distribution: expected an array of numbers .* dtype object"),
        ([np.nan, 1.0], ValueError, r"Distribution: weights must be finite"),
        ([np.inf, 0.0], ValueError, r"Distribution: weights must be finite"),
    ],
    ids=["complex", "complex with zero imaginary parts", "bool", "object", "nan", "inf"],
)
def test_probabilities_must_be_real_finite_numbers(weights: Any, error: type[Exception], message: str) -> None:
    with pytest.raises(error, match=message):
        Distribution([0.0, 1.0], weights)


def test_integer_probabilities_are_numbers() -> None:
    assert float(Distribution([2.0], [1]).counit()) == 2.0


def test_outcomes_must_be_numbers() -> None:
    with pytest.raises(TypeError, match=r"Distribution outcomes: expected an array of numbers"):
        Distribution(["heads", "tails"], [0.5, 0.5])


def test_quantum_norm_is_that_of_the_merged_amplitudes() -> None:
    # Amplitudes that cancel when equal outcomes merge leave half the norm: rejected, not an
    # unnormalised expectation. Amplitudes that add up to a normalised state are accepted.
    with pytest.raises(ValueError, match=r"Quantum: the squared magnitudes .* sum to 0\.5.*, equal outcomes merged"):
        Quantum([0.0, 0.0, 1.0], [0.5, -0.5, np.sqrt(0.5)])
    with pytest.raises(ValueError, match=r"Quantum: the squared magnitudes .* sum to 0\.0"):
        Quantum([1.0, 1.0], [np.sqrt(0.5), -np.sqrt(0.5)])
    state = Quantum([3.0, 3.0], [0.5, 0.5])
    np.testing.assert_allclose(state.probabilities, [1.0], rtol=1e-14)
    np.testing.assert_allclose(state.counit(), 3.0, rtol=1e-14)


@pytest.mark.parametrize(
    ("amplitudes", "error", "message"),
    [
        ([True, False], TypeError, r"Quantum: weights must be numbers, got bools"),
        (np.array([1.0, 0.0], dtype=object), TypeError, r"Quantum: expected an array of numbers .* dtype object"),
        ([np.nan, 1.0], ValueError, r"Quantum: weights must be finite"),
        ([1j * np.inf, 0.0], ValueError, r"Quantum: weights must be finite"),
    ],
    ids=["bool", "object", "nan", "inf"],
)
def test_amplitudes_must_be_finite_numbers(amplitudes: Any, error: type[Exception], message: str) -> None:
    with pytest.raises(error, match=message):
        Quantum([0.0, 1.0], amplitudes)


def test_mixture_weights_must_be_real() -> None:
    components = Vec.of([Distribution([0.0], [1.0]), Distribution([1.0], [1.0])], Seq)
    with pytest.raises(TypeError, match=r"mixture: probabilities must be real numbers"):
        mixture(Vec.from_array(np.array([0.5 + 0j, 0.5]), Seq), components)
    with pytest.raises(TypeError, match=r"mixture: weights must be numbers, got bools"):
        mixture(Vec.from_array(np.array([True, False]), Seq), components)
    with pytest.raises(ValueError, match=r"mixture: probabilities must be non-negative"):
        mixture(Vec.from_array(np.array([1.5, -0.5]), Seq), components)
    np.testing.assert_allclose(mixture(Vec.from_array(np.array([0.25, 0.75]), Seq), components).counit(), 0.75)
