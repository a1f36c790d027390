"""The suite's entry point: ``check_laws``, every law a structure claims and, where it has one, its hook.

    check_laws(triples)   the laws the structures claim (``claimed_laws`` of the first one drawn, in
                          ``LAWS`` order), each by ``check_law`` on ``max_examples`` triples, then, for
                          a ``Dense`` structure of scalars, its hook (``check_dense``, on
                          ``dense_examples`` triples); returns the names checked, the claimed laws
                          followed by ``DENSE_LAWS`` where the hook was checked

A failure is the first check's AssertionError (each names its law, states it, shows the drawn
structures); nothing after it runs.
"""

from __future__ import annotations

import hypothesis.strategies as st

from applicative.laws._dense import DENSE_LAWS, _dense_scalars, check_dense
from applicative.laws._structure import Maps, Triple, check_law, claimed_laws, drawn

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
    triples and, for a ``Dense`` structure of scalars, its hook (``check_dense``, on ``dense_examples``
    triples: each runs eleven operations both ways); return the names of the laws checked."""
    first = drawn(structures)
    claimed = claimed_laws(first[0])
    for law in claimed:
        check_law(law, structures, maps=maps, rtol=rtol, atol=atol, max_examples=max_examples)
    if _dense_scalars(first[0]) is None:
        return claimed
    check_dense(structures, rtol=rtol, atol=atol, max_examples=dense_examples)
    return claimed + DENSE_LAWS
