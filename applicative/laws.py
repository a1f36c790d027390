"""The law suite: every law of every abstraction, checked with hypothesis.

A law is an equation; each abstraction's module states its laws as functions
returning both sides (``functor.identity_law`` ...). Here they are gathered
in ``LAWS`` and checked on random structures:

    check_laws(vec_triples())          # every law Vec claims, or
    check_law("pair associativity", vec_triples())

(strategies for the library's own instances are in ``applicative.strategies``).
An instance claims every law of the abstractions it implements (Functor,
Applicative, Counit) unless its class says otherwise in ``laws_claimed``
(``Quantum``'s counit is a measurement, not linear); ``check_laws`` checks
exactly the claimed ones and returns their names.

A strategy yields triples ``(x, y, z)`` of structures that can be paired (same
brand, same size for a Vec) holding scalar arrays. Equality is structural
(same pytree, same tags and sizes) with leaves close to ``rtol``/``atol``.

Tolerances follow the dtype unless given: ``default_tolerance`` is 1e-10 for
float64 and 1000 ulps for narrower floats (1.2e-4 for float32, JAX's default
dtype, where a correct instance's sums differ from the exact ones by a few
ulps; 1e-2 at most). Integers compare to 1e-10, i.e. exactly.
An instance whose ``fmap`` is exact only for some maps (Chebyshev functions
applying a nonlinearity on a grid) passes its own ``maps`` and tolerances.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import hypothesis
import hypothesis.strategies as st
import jax
import jax.numpy as jnp
import numpy as np

from applicative.protocols import algebra, applicative, functor
from applicative.protocols.algebra import ARITHMETIC, Module
from applicative.protocols.applicative import Applicative
from applicative.protocols.integration import Counit, additivity_law, counit, homogeneity_law, pairing_law

__all__ = [
    "LAWS",
    "MODULE_LAWS",
    "RING_LAWS",
    "Maps",
    "Triple",
    "assert_close",
    "check_algebra_laws",
    "check_law",
    "check_laws",
    "claimed_laws",
    "default_tolerance",
]

# Law-test structures are existential in brand and element: Any is "some type".
X = Applicative[Any, Any]
Triple = tuple[X, X, X]
Element = Callable[[Any], Any]
T = TypeVar("T")


@dataclass(frozen=True)
class Maps:
    """The element maps the laws are checked with, and the element Module."""

    f: Element = lambda a: 2.0 * a - 1.0
    g: Element = jnp.tanh
    module: Module[Any] = ARITHMETIC


def _laws(m: Maps) -> dict[str, Callable[[X, X, X], tuple[object, object]]]:
    return {
        "functor identity": lambda x, y, z: functor.identity_law(x),
        "functor composition": lambda x, y, z: functor.composition_law(x, m.f, m.g),
        "pair naturality": lambda x, y, z: applicative.naturality_law(x, y, m.f, m.g),
        "pair associativity": lambda x, y, z: applicative.associativity_law(x, y, z),
        "pair left unit": lambda x, y, z: applicative.left_unit_law(y, 0.0),
        "pair right unit": lambda x, y, z: applicative.right_unit_law(y, 0.0),
        "pure naturality": lambda x, y, z: applicative.pure_naturality_law(y, counit(x, m.module), m.g),
        "counit additivity": lambda x, y, z: additivity_law(m.module, x, y),
        "counit homogeneity": lambda x, y, z: homogeneity_law(m.module, -1.5, x),
        "counit respects pairing": lambda x, y, z: pairing_law(m.module, x, y),
    }


LAWS: tuple[str, ...] = tuple(_laws(Maps()))
"""The names of all structure laws."""
FUNCTOR_LAWS, APPLICATIVE_LAWS, COUNIT_LAWS = LAWS[:2], LAWS[2:7], LAWS[7:]


def claimed_laws(structure: object) -> tuple[str, ...]:
    """The laws a structure (or its class) claims, in ``LAWS`` order: its class's ``laws_claimed``,
    or by default every law of the abstractions it implements."""
    cls = structure if isinstance(structure, type) else type(structure)
    declared: frozenset[str] | None = getattr(cls, "laws_claimed", None)
    if declared is not None:
        if unknown := declared - set(LAWS):
            raise ValueError(f"{cls.__name__}.laws_claimed names unknown laws {sorted(unknown)}; the laws are {LAWS}")
        return tuple(law for law in LAWS if law in declared)
    claimed: tuple[str, ...] = ()
    if issubclass(cls, functor.Functor):
        claimed += FUNCTOR_LAWS
    if issubclass(cls, Applicative):
        claimed += APPLICATIVE_LAWS
    if issubclass(cls, Counit):
        claimed += COUNIT_LAWS
    return claimed


_NO_SHRINK = (hypothesis.Phase.explicit, hypothesis.Phase.reuse, hypothesis.Phase.generate)


def default_tolerance(dtype: Any) -> float:
    """The laws' default rtol and atol at ``dtype``: 1e-10, or 1000 ulps of a narrower float (at most 1e-2)."""
    kind = np.dtype(dtype)
    if not np.issubdtype(kind, np.inexact):
        return 1e-10
    return float(min(max(1e-10, 1000.0 * np.finfo(kind).eps), 1e-2))


def assert_close(
    lhs: object, rhs: object, *, rtol: float | None = None, atol: float | None = None, what: str = ""
) -> None:
    """Assert two pytrees have the same structure (tags and sizes included) and close leaves; a tolerance
    not given is ``default_tolerance`` of the pair's dtype."""
    left, right = jax.tree_util.tree_structure(lhs), jax.tree_util.tree_structure(rhs)
    if str(left) != str(right):
        raise AssertionError(f"{what}: structures differ:\n  {left}\n  {right}")
    for a, b in zip(jax.tree_util.tree_leaves(lhs), jax.tree_util.tree_leaves(rhs), strict=True):
        x, y = np.asarray(a), np.asarray(b)
        tolerance = default_tolerance(np.result_type(x, y))
        np.testing.assert_allclose(
            x, y, rtol=tolerance if rtol is None else rtol, atol=tolerance if atol is None else atol, err_msg=what
        )


def check_law(
    law: str,
    structures: st.SearchStrategy[Triple],
    *,
    maps: Maps = Maps(),
    rtol: float | None = None,
    atol: float | None = None,
    max_examples: int = 20,
) -> None:
    """Check one law on ``max_examples`` random triples; raise AssertionError naming it."""
    equation = _laws(maps)[law]

    # No shrinking: each JAX example is slow to trace, and the failing one is reported as found.
    @hypothesis.settings(max_examples=max_examples, deadline=None, database=None, phases=_NO_SHRINK)
    @hypothesis.given(structures)
    def run(xyz: Triple) -> None:
        lhs, rhs = equation(*xyz)
        assert_close(lhs, rhs, rtol=rtol, atol=atol, what=law)

    run()


def check_laws(
    structures: st.SearchStrategy[Triple],
    *,
    maps: Maps = Maps(),
    rtol: float | None = None,
    atol: float | None = None,
    max_examples: int = 20,
) -> tuple[str, ...]:
    """Check every law the structures claim (``claimed_laws`` of the first one drawn); return their names."""
    first = hypothesis.find(structures, lambda _: True, settings=hypothesis.settings(database=None, phases=_NO_SHRINK))
    claimed = claimed_laws(first[0])
    for law in claimed:
        check_law(law, structures, maps=maps, rtol=rtol, atol=atol, max_examples=max_examples)
    return claimed


# Algebra laws, for a Module or Ring on values drawn from ``values``.

MODULE_LAWS: tuple[str, ...] = (
    "add associativity",
    "add commutativity",
    "zero unit",
    "scale distributivity",
    "scale compatibility",
)
RING_LAWS: tuple[str, ...] = (*MODULE_LAWS, "mul associativity", "mul distributivity")


def check_algebra_laws(
    m: Module[T],
    values: st.SearchStrategy[T],
    *,
    rtol: float | None = None,
    atol: float | None = None,
    max_examples: int = 30,
) -> None:
    """Check the Module laws of ``m`` (and the Ring laws if it is a Ring)."""
    r, s = 0.75, -2.0

    @hypothesis.settings(max_examples=max_examples, deadline=None, database=None)
    @hypothesis.given(values, values, values)
    def run(a: T, b: T, c: T) -> None:
        equations: dict[str, tuple[T, T]] = {
            "add associativity": algebra.add_associativity_law(m, a, b, c),
            "add commutativity": algebra.add_commutativity_law(m, a, b),
            "zero unit": algebra.zero_unit_law(m, a),
            "scale distributivity": algebra.scale_distributivity_law(m, r, a, b),
            "scale compatibility": algebra.scale_compatibility_law(m, r, s, a),
        }
        if isinstance(m, algebra.Ring):
            equations["mul associativity"] = algebra.mul_associativity_law(m, a, b, c)
            equations["mul distributivity"] = algebra.mul_distributivity_law(m, a, b, c)
        for law, (lhs, rhs) in equations.items():
            assert_close(lhs, rhs, rtol=rtol, atol=atol, what=f"{m!r}: {law}")

    run()
