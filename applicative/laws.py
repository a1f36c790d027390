"""The law suite: every law of every abstraction, checked with hypothesis.

A law is an equation; each abstraction's module states its laws as functions
returning both sides (``functor.identity_law`` ...). Here they are gathered
in ``LAWS`` and checked on random structures:

    check_laws(vec_triples())          # all laws for Vec, or
    check_law("pair associativity", vec_triples())

A strategy yields triples ``(x, y, z)`` of structures that can be paired (same
brand, same size for a Vec) holding scalar arrays. Equality is structural
(same pytree, same tags and sizes) with leaves close to ``rtol``/``atol``.
An instance whose ``fmap`` is exact only for some maps (Chebyshev functions
applying a nonlinearity on a grid) passes its own ``maps`` and tolerances.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import hypothesis
import hypothesis.extra.numpy as hnp
import hypothesis.strategies as st
import jax
import jax.numpy as jnp
import numpy as np

from applicative.compose import Compose
from applicative.instances.chebyshev import Cheb
from applicative.instances.distribution import distribution_triples
from applicative.instances.tree import tree_triples
from applicative.instances.vector import Vec, matrix, vector
from applicative.protocols import algebra, applicative, functor
from applicative.protocols.algebra import ARITHMETIC, Module, Pointwise
from applicative.protocols.applicative import Applicative
from applicative.protocols.counit import additivity_law, counit, homogeneity_law, pairing_law
from applicative.protocols.kinds import Dim

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
_NO_SHRINK = (hypothesis.Phase.explicit, hypothesis.Phase.reuse, hypothesis.Phase.generate)
"""The names of all structure laws."""


def assert_close(lhs: object, rhs: object, *, rtol: float = 1e-10, atol: float = 1e-10, what: str = "") -> None:
    """Assert two pytrees have the same structure (tags and sizes included) and close leaves."""
    left, right = jax.tree_util.tree_structure(lhs), jax.tree_util.tree_structure(rhs)
    if str(left) != str(right):
        raise AssertionError(f"{what}: structures differ:\n  {left}\n  {right}")
    for a, b in zip(jax.tree_util.tree_leaves(lhs), jax.tree_util.tree_leaves(rhs), strict=True):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=rtol, atol=atol, err_msg=what)


def check_law(
    law: str,
    structures: st.SearchStrategy[Triple],
    *,
    maps: Maps = Maps(),
    rtol: float = 1e-10,
    atol: float = 1e-10,
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
    rtol: float = 1e-10,
    atol: float = 1e-10,
    max_examples: int = 20,
) -> None:
    """Check every law in ``LAWS``."""
    for law in LAWS:
        check_law(law, structures, maps=maps, rtol=rtol, atol=atol, max_examples=max_examples)


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
    m: Module[T], values: st.SearchStrategy[T], *, rtol: float = 1e-10, atol: float = 1e-10, max_examples: int = 30
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


# Strategies for the library's instances.


class Law(Dim):
    """The dimension tag of law-test vectors."""


class LawInner(Dim):
    """The inner dimension tag of law-test matrices."""


def _arrays(shape: tuple[int, ...], dtype: type = np.float64) -> st.SearchStrategy[np.ndarray]:
    return hnp.arrays(dtype, shape, elements=st.floats(-10, 10, allow_nan=False, width=64))


def _triples(shapes: st.SearchStrategy[tuple[int, ...]], build: Callable[[np.ndarray], X]) -> st.SearchStrategy[Triple]:
    def three(shape: tuple[int, ...]) -> st.SearchStrategy[Triple]:
        return st.tuples(*(_arrays(shape).map(build) for _ in range(3)))

    return shapes.flatmap(three)


def vec_triples(max_size: int = 6) -> st.SearchStrategy[Triple]:
    """Triples of ``Vec[Law, Array]`` of one random size."""
    return _triples(st.tuples(st.integers(1, max_size)), lambda a: vector(a, Law))


def matrix_triples(max_size: int = 5) -> st.SearchStrategy[Triple]:
    """Triples of ``Vec[Law, Vec[LawInner, Array]]``, seen as Vecs whose elements are Vecs."""
    sizes = st.tuples(st.integers(1, max_size), st.integers(1, max_size))
    return _triples(sizes, lambda a: matrix(a, Law, LawInner))


def compose_triples(max_size: int = 5) -> st.SearchStrategy[Triple]:
    """Triples of ``Compose[VecOf[Law], VecOf[LawInner], Array]``: a grid of scalars."""
    sizes = st.tuples(st.integers(1, max_size), st.integers(1, max_size))
    return _triples(sizes, lambda a: Compose(matrix(a, Law, LawInner)))


def _rowwise(f: Element) -> Element:
    return lambda row: row.fmap(f)


# Every new resolution compiles its DCTs afresh: the Chebyshev strategies draw
# from a few resolutions, odd and even, one of them a constant.
CHEB_SIZES = st.sampled_from([(1,), (4,), (7,)])
CHEB2_SIZES = st.sampled_from([(1, 3), (4, 2), (3, 5)])


def cheb_triples() -> st.SearchStrategy[Triple]:
    """Triples of ``Cheb[Law, Array]`` of one random resolution."""
    return _triples(CHEB_SIZES, lambda a: Cheb.from_numpy(a, Law))


def cheb2_triples() -> st.SearchStrategy[Triple]:
    """Triples of ``Cheb[Law, Cheb[LawInner, Array]]``: functions of two variables."""
    return _triples(CHEB2_SIZES, lambda a: Cheb.from_numpy(a, Law, LawInner))


def vec_cheb_triples() -> st.SearchStrategy[Triple]:
    """Triples of ``Compose`` of a Vec of functions: C functions of one variable."""

    def build(a: np.ndarray) -> X:
        # Stacked storage: the Vec's elements are functions whose coefficients run along axis 1.
        functions = Cheb(jnp.asarray(a), LawInner, a.shape[1], 2 * a.shape[1])
        return Compose(Vec.stack(functions, Law))

    return _triples(CHEB2_SIZES, build)


def cheb_vec_triples() -> st.SearchStrategy[Triple]:
    """Triples of ``Compose`` of a function with Vec values: a function with C channels."""
    return _triples(CHEB2_SIZES, lambda a: Compose(Cheb.stack(matrix(a, Law, LawInner).data, Law)))


# fmap is exact on Chebyshev functions for affine maps; nonlinear ones are
# checked separately, with their bounds (tests/test_chebyshev.py).
AFFINE = Maps(lambda a: 2.0 * a - 1.0, lambda a: 0.5 * a + 3.0)

INSTANCES: dict[str, tuple[Callable[[], st.SearchStrategy[Triple]], Maps]] = {
    "Vec": (vec_triples, Maps()),
    "Vec of Vec": (matrix_triples, Maps(_rowwise(Maps.f), _rowwise(Maps.g), Pointwise(ARITHMETIC))),
    "Compose Vec Vec": (compose_triples, Maps()),
    "Cheb": (cheb_triples, AFFINE),
    "Cheb of Cheb": (cheb2_triples, Maps(_rowwise(AFFINE.f), _rowwise(AFFINE.g), Pointwise(ARITHMETIC))),
    "Compose Vec Cheb": (vec_cheb_triples, AFFINE),
    "Compose Cheb Vec": (cheb_vec_triples, AFFINE),
    "Tree": (tree_triples, Maps()),
    "Distribution": (distribution_triples, Maps()),
}
"""Law-test strategies of the library's instances, and the element maps to use, by name."""

__all__ = [
    "INSTANCES",
    "LAWS",
    "MODULE_LAWS",
    "RING_LAWS",
    "Maps",
    "assert_close",
    "cheb2_triples",
    "cheb_triples",
    "cheb_vec_triples",
    "check_algebra_laws",
    "check_law",
    "check_laws",
    "compose_triples",
    "matrix_triples",
    "vec_cheb_triples",
    "vec_triples",
]
