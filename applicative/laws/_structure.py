"""The structure laws: every law of Functor, Applicative and Counit, checked on random triples.

Each abstraction's module states its laws as functions returning both sides (``functor.identity_law``
...: the docstring is the equation); here each is named, in ``LAWS`` order, and given its inputs, a
drawn triple (x, y, z) and the element maps (``Maps``: f, g, and the Module the counits sum in):

    functor identity          fmap(id, x) = x
    functor composition       fmap(g . f, x) = fmap(g, fmap(f, x))
    pair naturality           pair(fmap(f, x), fmap(g, y)) = fmap(f x g, pair(x, y))
    pair associativity        fmap(assoc, pair(pair(x, y), z)) = pair(x, pair(y, z))
    pair left unit            fmap(snd, pair(y.pure(u), y)) = y                    u = 0.0
    pair right unit           fmap(fst, pair(y, y.pure(u))) = y                    u = 0.0
    pure naturality           fmap(f, y.pure(a)) = y.pure(f(a))                    a = counit(x), f = Maps.g
    counit additivity         counit(x + y) = counit(x) + counit(y)
    counit homogeneity        counit(r x) = r counit(x)                            r = -1.5
    counit respects pairing   counit(fmap(fst, pair(x, y))) = counit(x)

A structure claims every law of the abstractions it implements unless its class says otherwise
(``laws_claimed``, names from ``LAWS``: a ValueError names any other); ``claimed_laws`` reads the
claim. ``check_law`` checks one law on ``max_examples`` triples (no shrinking: each JAX example is
slow to trace, the failing one is reported as drawn), ``check_law_on`` on one triple (``check_laws``
checks every law on the same ``drawn_examples``); a failure is an AssertionError that names the
law, states it as an equation and shows the drawn (x, y, z) and both sides (``assert_close``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import hypothesis
import hypothesis.strategies as st
import jax
import jax.numpy as jnp

from applicative.laws._compare import _report, assert_close
from applicative.protocols import applicative, functor
from applicative.protocols.algebra import ARITHMETIC, Module
from applicative.protocols.applicative import Applicative
from applicative.protocols.integration import Counit, additivity_law, counit, homogeneity_law, pairing_law

__all__ = ["LAWS", "Maps", "Triple", "check_law", "check_law_on", "claimed_laws", "drawn_examples", "leafwise"]

# Law-test structures are existential in brand and element: Any is "some type".
X = Applicative[Any, Any]
Triple = tuple[X, X, X]
Element = Callable[[Any], Any]


def leafwise(f: Callable[[jax.Array], jax.Array]) -> Element:
    """``f`` on every array leaf of an element: a map of scalars, or of elements that are pytrees
    (a Vec of features, a function)."""
    return lambda element: jax.tree_util.tree_map(f, element)


_AFFINE, _TANH = leafwise(lambda a: 2.0 * a - 1.0), leafwise(jnp.tanh)


@dataclass(frozen=True)
class Maps:
    """The element maps the laws are checked with, and the element Module. The default maps act leaf
    by leaf, so elements may be scalars or any pytree of arrays (a Legendre of Vecs)."""

    f: Element = _AFFINE
    g: Element = _TANH
    module: Module[Any] = ARITHMETIC


Equation = Callable[[X, X, X], tuple[object, object]]


def _laws(m: Maps) -> dict[str, tuple[Callable[..., object], Equation]]:
    """Each law: the function that states it (its docstring is the equation) and both sides on (x, y, z)."""
    return {
        "functor identity": (functor.identity_law, lambda x, y, z: functor.identity_law(x)),
        "functor composition": (functor.composition_law, lambda x, y, z: functor.composition_law(x, m.f, m.g)),
        "pair naturality": (applicative.naturality_law, lambda x, y, z: applicative.naturality_law(x, y, m.f, m.g)),
        "pair associativity": (applicative.associativity_law, lambda x, y, z: applicative.associativity_law(x, y, z)),
        "pair left unit": (applicative.left_unit_law, lambda x, y, z: applicative.left_unit_law(y, 0.0)),
        "pair right unit": (applicative.right_unit_law, lambda x, y, z: applicative.right_unit_law(y, 0.0)),
        "pure naturality": (
            applicative.pure_naturality_law,
            lambda x, y, z: applicative.pure_naturality_law(y, counit(x, m.module), m.g),
        ),
        "counit additivity": (additivity_law, lambda x, y, z: additivity_law(m.module, x, y)),
        "counit homogeneity": (homogeneity_law, lambda x, y, z: homogeneity_law(m.module, -1.5, x)),
        "counit respects pairing": (pairing_law, lambda x, y, z: pairing_law(m.module, x, y)),
    }


_WHERE = {
    "functor composition": "f, g the element maps (Maps.f, Maps.g)",
    "pair naturality": "f, g the element maps (Maps.f, Maps.g)",
    "pair left unit": "u = 0.0",
    "pair right unit": "u = 0.0",
    "pure naturality": "a = counit(x), f = Maps.g",
    "counit homogeneity": "r = -1.5",
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

S = TypeVar("S")


def drawn(strategy: st.SearchStrategy[S]) -> S:
    """An example the strategy draws, as ``check_laws`` draws its first: not shrunk (``hypothesis.find``
    shrinks what it finds, which for a structure takes seconds of draws: 17 s of a Quantum's)."""
    return drawn_examples(strategy, 1)[0]


def drawn_examples(strategy: st.SearchStrategy[S], count: int) -> list[S]:
    """``count`` examples the strategy draws (fewer where it holds fewer, at least one), not shrunk: the
    triples ``check_laws`` checks every law on, so that the laws share their examples' shapes (and JAX
    compiles each operation once a shape, not once a law)."""
    found: list[S] = []

    @hypothesis.settings(max_examples=count, deadline=None, database=None, phases=_NO_SHRINK)
    @hypothesis.given(strategy)
    def draw(example: S) -> None:
        found.append(example)

    draw()
    return found


def check_law(
    law: str,
    structures: st.SearchStrategy[Triple],
    *,
    maps: Maps = Maps(),
    rtol: float | None = None,
    atol: float | None = None,
    max_examples: int = 20,
) -> None:
    """Check one law on ``max_examples`` random triples. A failure raises an AssertionError that names
    the law, states it as an equation, and shows the drawn (x, y, z) and both sides."""
    for xyz in drawn_examples(structures, max_examples):  # (not shrunk: the failing one is reported as drawn)
        check_law_on(law, xyz, maps=maps, rtol=rtol, atol=atol)


def check_law_on(law: str, xyz: Triple, *, maps: Maps, rtol: float | None, atol: float | None) -> None:
    """Check one law on one triple, as ``check_law`` does on each it draws."""
    statement, equation = _laws(maps)[law]
    lhs, rhs = equation(*xyz)
    try:
        assert_close(lhs, rhs, rtol=rtol, atol=atol, what=law)
    except AssertionError as error:
        where = f" ({_WHERE[law]})" if law in _WHERE else ""
        equation_text = (statement.__doc__ or "").strip().rstrip(".")
        failure = f"law {law!r} fails: {equation_text}{where}"
        raise AssertionError(_report(failure, error, x=xyz[0], y=xyz[1], z=xyz[2], left=lhs, right=rhs)) from None
