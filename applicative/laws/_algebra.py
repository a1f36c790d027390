"""The algebra laws: those of a ``Module`` (and of a ``Ring``), checked on random values.

Each law is stated where the abstraction is (``applicative.protocols.algebra``: ``add_associativity_law``
...); here they are named and checked on values a, b, c drawn from a strategy, with r = 0.75, s = -2.0:

    add associativity        (a + b) + c = a + (b + c)
    add commutativity        a + b = b + a
    zero unit                zero + a = a
    scale distributivity     r (a + b) = r a + r b
    scale compatibility      r (s a) = (r s) a
    mul associativity        (a b) c = a (b c)              a Ring's
    mul distributivity       a (b + c) = a b + a c          a Ring's

A failure is an AssertionError (``assert_close``) that names the Module and the law.
"""

from __future__ import annotations

from typing import TypeVar

import hypothesis
import hypothesis.strategies as st

from applicative.laws._compare import assert_close
from applicative.protocols import algebra
from applicative.protocols.algebra import Module

__all__ = ["MODULE_LAWS", "RING_LAWS", "check_algebra_laws"]

T = TypeVar("T")

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
