"""The suite's entry point: ``check_laws``, every law a structure claims and, where it has one, its hook.

    check_laws(triples)   the laws the structures claim (``claimed_laws`` of the first one drawn, in
                          ``LAWS`` order), each as ``check_law`` checks it, all on the same
                          ``max_examples`` triples (drawn once: JAX compiles an operation once a
                          shape, and the laws share their shapes), then, for a ``Dense`` structure of
                          scalars, its hook (as ``check_dense`` checks it, on the first
                          ``dense_examples`` of those triples); returns the names checked, the claimed
                          laws followed by ``DENSE_LAWS`` where the hook was checked

A failure is the first check's AssertionError (each names its law, states it, shows the drawn
structures); nothing after it runs.
"""

from __future__ import annotations

import hypothesis.strategies as st

from applicative.laws._dense import DENSE_LAWS, _dense_scalars, check_dense_on
from applicative.laws._structure import Maps, Triple, check_law_on, claimed_laws, drawn_examples

__all__ = ["check_laws"]


def check_laws(
    structures: st.SearchStrategy[Triple],
    *,
    maps: Maps = Maps(),  # noqa: B008  (a frozen dataclass: immutable)
    rtol: float | None = None,
    atol: float | None = None,
    max_examples: int = 20,
    dense_examples: int = 5,
) -> tuple[str, ...]:
    """Check every law the structures claim (``claimed_laws`` of the first one drawn) on ``max_examples``
    triples and, for a ``Dense`` structure of scalars, its hook (as ``check_dense`` does, on the first
    ``dense_examples`` of them: each runs eleven operations both ways); return the names of the laws checked."""
    triples = drawn_examples(structures, max(max_examples, dense_examples))
    claimed = claimed_laws(triples[0][0])
    for law in claimed:
        for xyz in triples[:max_examples]:
            check_law_on(law, xyz, maps=maps, rtol=rtol, atol=atol)
    if _dense_scalars(triples[0][0]) is None:
        return claimed
    for xyz in triples[:dense_examples]:
        check_dense_on(xyz, rtol=rtol, atol=atol)
    return claimed + DENSE_LAWS
