"""``Distribution[A]`` and ``Quantum[A]``: finite discrete distributions, real and complex.

A value holds n outcomes *stacked* like a ``Vec`` (every leaf of the outcome
pytree has a leading axis of length n) and a JAX array of n weights:
probabilities p_i for a ``Distribution``, complex amplitudes a_i for a
``Quantum`` state. Both are pytrees whose leaves are the outcome leaves and
the weights, so ``jax.grad`` flows to the weights.

    fmap f    maps every outcome (one ``vmap``) and merges outcomes that became
              equal, summing their weights
    pair x y  independent pairing: all (x_i, y_j) with weight w_i v_j
    pure b    the point mass at b, weight 1
    counit    Distribution: the expectation       sum_i p_i x_i
              Quantum: merge equal outcomes (sum amplitudes), then the Born rule
                       sum_k |A_k|^2 x_k,  A_k = sum of a_i over outcomes equal to x_k

Canonical form. Outcomes are compared *by value*: two outcomes are equal when
every leaf holds equal numbers (``==`` on the values, so 0.0 == -0.0; NaN
outcomes cannot be merged and raise). After merging, outcomes are sorted by
the tuple of their leaf values (complex numbers as (real, imag)), leaves in
pytree order. Equal distributions then have equal pytrees, which is what the
law suite compares. ``pair`` of canonical values is canonical without any
merging (x_i and y_j distinct and sorted give distinct pairs in lexicographic
order). Zero-weight outcomes are kept: dropping them would make the shape of
a value depend on its weights, which may be traced.

Merging needs concrete outcomes. Under ``jit`` or ``vmap`` the *outcomes* are
tracers when the value is an argument; ``fmap`` then maps without merging and
the result is an equal, non-canonical representation of the same measure
(call ``merged()`` on a concrete result). Everything computed from it agrees:
the expectation is linear in the weights, and the Born rule on traced outcomes
sums amplitudes through an equality matrix, sum_i Re(conj(a_i) sum_{j: x_j = x_i} a_j),
which equals merging first. Weights may always be traced (``jit``/``grad``
over probabilities or amplitudes with fixed outcomes merge as usual).

Validation at construction (``Distribution(outcomes, probabilities)``,
``Quantum(outcomes, amplitudes)``, outcomes as a list or stacked): outcomes are numbers (not
object or string arrays), and outcomes distinct as given stay distinct in the dtype JAX stores
them in (with its 64-bit types off, float64 outcomes that only float64 tells apart are an error
naming them, not a silent merge); weights form a 1-D array of numbers matching the outcomes, never bools;
probabilities are real (a complex dtype is rejected, even with zero imaginary parts), finite,
non-negative and sum to one; amplitudes are finite and the squared magnitudes of the *merged*
amplitudes (equal outcomes summed, as the counit sees them) sum to one, within 1e-6 (relative to
one). Value checks are skipped when the weights are tracers, and a Quantum's norm when its outcomes
are (they cannot be merged). Results of fmap/pair are not checked again (independent pairing keeps
the total mass; a ``Quantum`` fmap may not, see below).

Laws. ``Distribution`` satisfies every law of ``applicative.laws``: functor
identity and composition, pair naturality, associativity and units, pure
naturality, and the counit laws (additive, homogeneous, respects pairing).
``Quantum`` satisfies the functor and applicative laws and homogeneity, but
*not* "counit respects pairing" nor additivity in general: fmap(fst, pair(x, y))
merges the outcomes of y coherently, giving |a_i|^2 |sum_j b_j|^2 instead of
|a_i|^2, and fmap(add) makes coinciding sums x_i + y_j interfere. The Born rule
is quadratic in the amplitudes; that is the point of interference, and it is
why a Quantum fmap with a non-injective map need not preserve the norm.

Defects of the reference corrected: its ``pair`` zips the two outcome lists,
which with ``pure x = [(x, 1)]`` breaks the unit laws (pairing with a point mass
keeps only the first outcome); its ``fmap`` forgets to map the outcomes; and its
Quantum counit squares amplitudes without merging equal outcomes first, which
loses interference.

``MIXTURE`` is the Module of finite measures (add = union with weights added,
scale = scale the weights, zero = the empty measure); ``mixture(w, ds)`` is the
generic ``counit`` of the scaled components in it, sum_k w_k D_k.

>>> d = Distribution([0.0, 1.0, 2.0], [0.25, 0.25, 0.5])
>>> float(d.counit())                                   # 0.25 + 2 * 0.5
1.25
>>> d.fmap(lambda x: x * 0.0).size                      # all outcomes merge into one
1
>>> h = Quantum([0.0, 1.0], [2**-0.5, 1j * 2**-0.5])    # a beam splitter: transmit 0, reflect 1
>>> mz = h.pair(h).fmap(lambda p: abs(p[0] - p[1]))      # which detector: the two paths interfere
>>> round(float(mz.counit()), 6)                        # always detector 1 (classically: 0.5)
1.0
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar, cast, overload

import jax
import jax.numpy as jnp
import numpy as np
from jax.typing import ArrayLike

from applicative.instances._outcomes import _check_precision, _equal_outcomes, _is_traced, _merge, _stack
from applicative.protocols.algebra import Module, Real, arithmetic
from applicative.protocols.applicative import Applicative
from applicative.protocols.integration import Counit, counit
from applicative.protocols.kinds import A, A_co, B, Measured, Summed
from applicative.records import record

__all__ = [
    "MIXTURE",
    "TOLERANCE",
    "Distribution",
    "DistributionOf",
    "Mixture",
    "Quantum",
    "QuantumOf",
    "Weights",
    "mixture",
]
from applicative.stacked import ProductPairing, element, largest, numeric, stacked_size, vmap, weighted_sum

TOLERANCE = 1e-6
"""How far the total probability (or squared norm) may be from one at construction."""

W = TypeVar("W", bound="_Finite[Any]")

Weights = ArrayLike | Sequence[complex]
"""Probabilities or amplitudes: an array, or a list of numbers."""


class DistributionOf(Measured):
    """Brand of ``Distribution``: ``Distribution[A]`` is an ``Applicative[DistributionOf, A]``."""


class QuantumOf(Measured):
    """Brand of ``Quantum``: ``Quantum[A]`` is an ``Applicative[QuantumOf, A]``."""


# Weights: numbers of the right kind, one per outcome, summing to one (the outcomes: _outcomes).


def _weights(name: str, weights: object, real: bool) -> jax.Array:
    """The weights as an array of numbers, promoted to a float (real) or complex dtype: a clear error
    for bools, and for complex probabilities (``real``)."""
    w = numeric(weights, name)
    if w.dtype == jnp.bool_:
        raise TypeError(f"{name}: weights must be numbers, got bools {w.tolist()}")
    if real and jnp.iscomplexobj(w):
        raise TypeError(f"{name}: probabilities must be real numbers, got dtype {w.dtype}")
    return w.astype(jnp.result_type(w.dtype, float if real else jnp.complex64))


def _check_weights(name: str, weights: jax.Array, n: int) -> None:
    """One finite weight per outcome, and probabilities (real weights) non-negative (when concrete)."""
    if weights.ndim != 1 or weights.shape[0] != n:
        raise ValueError(f"{name}: need one weight per outcome ({n}), got weights of shape {weights.shape}")
    if n == 0:
        raise ValueError(f"{name}: needs at least one outcome")
    if isinstance(weights, jax.core.Tracer):
        return
    w = np.asarray(weights)
    if not np.all(np.isfinite(w)):
        raise ValueError(f"{name}: weights must be finite, got {w.tolist()}")
    if not np.iscomplexobj(w) and (w < 0).any():
        i = int(np.argmax(w < 0))
        raise ValueError(f"{name}: probabilities must be non-negative, entry {i} is {w[i]}")


def _check_total(name: str, weights: jax.Array) -> None:
    """Probabilities, or squared magnitudes of amplitudes, summing to one (when concrete)."""
    if isinstance(weights, jax.core.Tracer):
        return
    w = np.asarray(weights)
    total = float(np.sum(np.abs(w) ** 2 if np.iscomplexobj(w) else w))
    if abs(total - 1.0) > TOLERANCE:
        what, merged = (
            ("squared magnitudes of the amplitudes", ", equal outcomes merged")
            if np.iscomplexobj(w)
            else ("probabilities", "")
        )
        raise ValueError(f"{name}: the {what} must sum to one (within {TOLERANCE}), they sum to {total!r}{merged}")


# The two instances share their representation and most of their operations.


class _Finite(ProductPairing, Generic[A_co]):
    """Outcomes stacked along a leading axis, with one weight each (shared by both instances)."""

    outcomes: A_co
    """The outcome pytree with a leading axis of length ``size`` on every leaf."""
    weights: jax.Array
    """One weight per outcome: probabilities, or complex amplitudes."""

    @property
    def size(self) -> int:
        """The number of outcomes (distinct, once merged)."""
        return int(self.weights.shape[-1])

    @classmethod
    def _raw(cls: type[W], outcomes: object, weights: jax.Array) -> W:
        """No checks, no merging: for results already canonical, and unnormalised measures."""
        self = object.__new__(cls)
        object.__setattr__(self, "outcomes", outcomes)
        object.__setattr__(self, "weights", weights)
        return self

    def _init(self, outcomes: object, weights: Weights, real: bool) -> None:
        name = type(self).__name__
        given = _stack(outcomes, f"{name} outcomes")
        stacked = jax.tree_util.tree_map(jnp.asarray, given)
        n = stacked_size(stacked, f"{name} outcomes")
        w = _weights(name, weights, real)
        _check_weights(name, w, n)
        merged = not _is_traced(stacked)
        if merged:
            _check_precision(name, given, stacked, n)
            stacked, w = _merge(stacked, w)
        if merged or real:  # merging keeps a total probability, not a norm: that is taken after it
            _check_total(name, w)
        object.__setattr__(self, "outcomes", stacked)
        object.__setattr__(self, "weights", w)

    def _fmapped(self: W, f: Callable[[Any], Any]) -> W:
        n = self.size
        if n == 0:  # the empty measure (the zero of MIXTURE): only shapes to map
            shapes = jax.eval_shape(f, jax.tree_util.tree_map(lambda leaf: leaf[0], self.outcomes))
            mapped = jax.tree_util.tree_map(lambda s: jnp.zeros((0, *s.shape), s.dtype), shapes)
            return type(self)._raw(mapped, self.weights)
        mapped = vmap(f, self.outcomes, size=n)
        if _is_traced(mapped):
            return type(self)._raw(mapped, self.weights)
        return type(self)._raw(*_merge(mapped, self.weights))

    def _paired(self: W, other: object) -> W:
        if type(other) is not type(self):
            raise TypeError(f"pair: {type(self).__name__} paired with {type(other).__name__}")
        o = cast(_Finite[Any], other)
        n, m = self.size, o.size
        xs = jax.tree_util.tree_map(lambda leaf: jnp.repeat(leaf, m, axis=0), self.outcomes)
        ys = jax.tree_util.tree_map(lambda leaf: jnp.tile(leaf, (n,) + (1,) * (jnp.ndim(leaf) - 1)), o.outcomes)
        weights = (self.weights[:, None] * o.weights[None, :]).reshape(n * m)
        return type(self)._raw((xs, ys), weights)

    def _pure(self: W, b: object) -> W:
        point = jax.tree_util.tree_map(lambda leaf: jnp.asarray(leaf)[None], b)
        return type(self)._raw(point, jnp.ones((1,), self.weights.dtype))

    def merged(self: W) -> W:
        """The canonical representation (equal outcomes merged, sorted); needs concrete outcomes."""
        if _is_traced(self.outcomes):
            raise ValueError(
                f"{type(self).__name__}.merged: the outcomes are traced (inside jit or vmap), so equal "
                "outcomes cannot be found; merge the concrete result outside the transformation"
            )
        return type(self)._raw(*_merge(self.outcomes, self.weights))

    def largest(self) -> jax.Array:
        """The largest outcome (of numbers, or of structures of them): a softmax's shift over a distribution
        of scores (``stacked.largest``); the weights are no values."""
        return largest(self.outcomes)

    def items(self) -> list[tuple[Any, Any]]:
        """The (outcome, weight) pairs, outcomes unstacked."""
        return [(element(self.outcomes, i), self.weights[i]) for i in range(self.size)]

    def __repr__(self) -> str:
        return f"{type(self).__name__}(size={self.size}, outcomes={self.outcomes!r}, weights={self.weights!r})"


@record
class Distribution(_Finite[A_co], Applicative[DistributionOf, A_co], Counit[DistributionOf, A_co]):
    """A finite discrete probability distribution: outcomes x_i with probabilities p_i.

    ``Distribution(outcomes, probabilities)`` takes the outcomes stacked (a pytree
    whose leaves have a leading axis of length n) or as a list of outcomes,
    checks that the probabilities are non-negative and sum to one, and merges
    equal outcomes into the canonical form (see the module docstring)."""

    outcomes: A_co
    weights: jax.Array

    @overload
    def __init__(self: Distribution[A], outcomes: list[A], probabilities: Weights) -> None: ...
    @overload
    def __init__(self: Distribution[A], outcomes: A, probabilities: Weights) -> None: ...
    def __init__(self, outcomes: Any, probabilities: Weights) -> None:
        self._init(outcomes, probabilities, real=True)

    def fmap(self, f: Callable[[A_co], B]) -> Distribution[B]:
        """The law of f(X): map every outcome, merge those that became equal."""
        return cast("Distribution[B]", self._fmapped(f))

    def pair(self, other: Applicative[DistributionOf, B]) -> Distribution[tuple[A_co, B]]:
        """The independent joint law of (X, Y): outcomes (x_i, y_j) with probability p_i q_j."""
        return cast("Distribution[tuple[A_co, B]]", self._paired(other))

    def pure(self, b: B) -> Distribution[B]:
        """The point mass at b."""
        return cast(Distribution[B], self._pure(b))

    def counit(self, module: Module[A_co] | None = None) -> A_co:
        """The expectation sum_i p_i x_i, in ``module`` (ordinary arithmetic by default)."""
        m = module if module is not None else arithmetic()
        return weighted_sum(m, self.weights, self.outcomes, self.size)

    @property
    def probabilities(self) -> jax.Array:
        """p_i, one per outcome."""
        return self.weights


@record
class Quantum(_Finite[A_co], Applicative[QuantumOf, A_co], Counit[QuantumOf, A_co]):
    """A finite quantum state over outcomes x_i with complex amplitudes a_i.

    ``Quantum(outcomes, amplitudes)`` checks that sum |a_i|^2 = 1 (a normalised
    state) and merges equal outcomes by summing their amplitudes. ``fmap``
    merges coherently (interference), so with a non-injective map the norm may
    change; ``pair`` is the tensor product.

    Laws: its counit is a measurement (Born's rule), quadratic in the amplitudes, not an integral
    against a measure. It is homogeneous (relabelling outcomes x by r x scales the expectation), but
    neither additive (sums of outcomes that coincide interfere) nor invariant under pairing (tracing
    out a partner state merges it coherently): those two are not its laws, and ``laws_claimed``
    leaves them out (tests/applicative/test_distribution.py shows a counterexample to each)."""

    laws_claimed = frozenset(
        {
            "functor identity",
            "functor composition",
            "pair naturality",
            "pair associativity",
            "pair left unit",
            "pair right unit",
            "pure naturality",
            "counit homogeneity",
        }
    )

    outcomes: A_co
    weights: jax.Array

    @overload
    def __init__(self: Quantum[A], outcomes: list[A], amplitudes: Weights) -> None: ...
    @overload
    def __init__(self: Quantum[A], outcomes: A, amplitudes: Weights) -> None: ...
    def __init__(self, outcomes: Any, amplitudes: Weights) -> None:
        self._init(outcomes, amplitudes, real=False)

    def fmap(self, f: Callable[[A_co], B]) -> Quantum[B]:
        """Relabel every outcome by f; outcomes that become equal add their amplitudes (interfere)."""
        return cast("Quantum[B]", self._fmapped(f))

    def pair(self, other: Applicative[QuantumOf, B]) -> Quantum[tuple[A_co, B]]:
        """The tensor product: outcomes (x_i, y_j) with amplitude a_i b_j."""
        return cast("Quantum[tuple[A_co, B]]", self._paired(other))

    def pure(self, b: B) -> Quantum[B]:
        """The basis state b, amplitude 1."""
        return cast(Quantum[B], self._pure(b))

    def counit(self, module: Module[A_co] | None = None) -> A_co:
        """Born's rule after merging equal outcomes: sum_k |A_k|^2 x_k (see the module docstring)."""
        m = module if module is not None else arithmetic()
        if _is_traced(self.outcomes):
            together = _equal_outcomes(self.outcomes, self.size).astype(self.weights.dtype) @ self.weights
            born = jnp.real(jnp.conj(self.weights) * together)
            return weighted_sum(m, born, self.outcomes, self.size)
        state = self.merged()
        a = state.weights
        return weighted_sum(m, a.real**2 + a.imag**2, state.outcomes, state.size)

    @property
    def amplitudes(self) -> jax.Array:
        """a_i, one per outcome."""
        return self.weights

    @property
    def probabilities(self) -> jax.Array:
        """|A_k|^2 of the merged state (Born's rule), one per distinct outcome; needs concrete outcomes."""
        a = self.merged().weights
        return a.real**2 + a.imag**2


# Mixtures: the Module of finite measures.


@dataclass(frozen=True)
class Mixture(Module[Distribution[A]]):
    """Finite measures under mixing: add is the union with weights added (merged), scale multiplies
    the weights, zero is the empty measure. Not leafwise: the outcome leaves are concatenated, not
    added. Intermediate values are unnormalised measures (held in a ``Distribution``, unchecked);
    a combination whose coefficients sum to one is a distribution again.

    Its zero is *not* ``pure(0)`` (the point mass at 0, the zero of the Pointwise lifting of
    arithmetic): it is the measure with no outcomes, so that zero + D = D."""

    def zero(self, like: Distribution[A]) -> Distribution[A]:
        def none_of(leaf: jax.Array) -> jax.Array:
            return jnp.zeros((0, *jnp.shape(leaf)[1:]), jnp.result_type(leaf))

        empty = jax.tree_util.tree_map(none_of, like.outcomes)
        return Distribution._raw(empty, jnp.zeros((0,), like.weights.dtype))

    def add(self, a: Distribution[A], b: Distribution[A]) -> Distribution[A]:
        outcomes = jax.tree_util.tree_map(lambda x, y: jnp.concatenate([x, y]), a.outcomes, b.outcomes)
        weights = jnp.concatenate([a.weights, b.weights])
        if _is_traced(outcomes):
            return Distribution._raw(outcomes, weights)
        return Distribution._raw(*_merge(outcomes, weights))

    def scale(self, r: Real, a: Distribution[A]) -> Distribution[A]:
        return Distribution._raw(a.outcomes, r * a.weights)

    def __repr__(self) -> str:
        return "MIXTURE"


MIXTURE: Mixture[Any] = Mixture()
"""The Module of finite measures under mixing."""


def mixture(
    weights: Applicative[Summed, jax.Array], components: Applicative[Summed, Distribution[A]]
) -> Distribution[A]:
    """sum_k w_k D_k: the generic counit, in ``MIXTURE``, of the components scaled by the weights.

    The weights must be real, non-negative and sum to one (checked when concrete);
    E[sum_k w_k D_k] = sum_k w_k E[D_k]."""
    for leaf in jax.tree_util.tree_leaves(weights):
        _weights("mixture", leaf, real=True)  # the dtype checks: no bools, no complex numbers
    scaled = weights.pair(components).fmap(lambda p: MIXTURE.scale(p[0], p[1]))
    mixed = counit(scaled, cast(Module[Distribution[A]], MIXTURE))
    _check_weights("mixture", mixed.weights, mixed.size)
    _check_total("mixture", mixed.weights)
    return mixed
