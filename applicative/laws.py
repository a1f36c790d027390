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
exactly the claimed ones and, for a ``Dense`` structure of scalars, its hook
(``check_dense``: the fast paths against the generic definitions), and returns
their names. A failure names the law, states it as an equation and shows the
drawn inputs and both sides.

A strategy yields triples ``(x, y, z)`` of structures that can be paired (same
brand, same size for a Vec) holding elements of any type the maps accept (the
default maps act leaf by leaf: scalars, Vecs, functions). Equality is structural
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
from typing import Any, TypeVar, cast

import hypothesis
import hypothesis.strategies as st
import jax
import jax.numpy as jnp
import numpy as np

from applicative.linalg import (
    add,
    dot,
    each_mul_mmt,
    generic_only,
    mul_mm,
    mul_mmt,
    mul_mv,
    mul_vm,
    outer,
    record_fast_paths,
    scale,
    sum_mul_mmt,
)
from applicative.nn import attention
from applicative.protocols import algebra, applicative, functor
from applicative.protocols.algebra import ARITHMETIC, Module
from applicative.protocols.applicative import Applicative, Shaped
from applicative.protocols.dense import Axis, Dense, to_array
from applicative.protocols.integration import Counit, additivity_law, counit, homogeneity_law, pairing_law
from applicative.stacked import to_host

__all__ = [
    "DENSE_LAWS",
    "LAWS",
    "MODULE_LAWS",
    "RING_LAWS",
    "Maps",
    "Triple",
    "assert_close",
    "check_algebra_laws",
    "check_dense",
    "check_law",
    "check_laws",
    "claimed_laws",
    "default_tolerance",
    "leafwise",
]

# Law-test structures are existential in brand and element: Any is "some type".
X = Applicative[Any, Any]
Triple = tuple[X, X, X]
Element = Callable[[Any], Any]
T = TypeVar("T")


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
    not given is ``default_tolerance`` of the pair's dtype. Two structures whose shape is data (``Shaped``
    and ``Dense``: trees) at the same place are compared as functions, on one shape (``pair``): a tree
    and its refinement, or one at another capacity, are equal."""
    lhs, rhs = _on_one_shape(lhs, rhs)
    left, right = jax.tree_util.tree_structure(lhs), jax.tree_util.tree_structure(rhs)
    if str(left) != str(right):
        raise AssertionError(f"{what}: structures differ:\n  {left}\n  {right}")
    for a, b in zip(jax.tree_util.tree_leaves(lhs), jax.tree_util.tree_leaves(rhs), strict=True):
        x, y = to_host(a), to_host(b)
        tolerance = default_tolerance(np.result_type(x, y))
        np.testing.assert_allclose(
            x, y, rtol=tolerance if rtol is None else rtol, atol=tolerance if atol is None else atol, err_msg=what
        )


def _on_one_shape(lhs: object, rhs: object) -> tuple[object, object]:
    """``lhs`` and ``rhs`` with each two trees at one place brought to one shape (``fmap fst`` and
    ``fmap snd`` of their ``pair``: their common refinement); unchanged where the places differ."""
    left, structure = jax.tree_util.tree_flatten(lhs, is_leaf=_data_shaped)
    right, other = jax.tree_util.tree_flatten(rhs, is_leaf=_data_shaped)
    if str(structure) != str(other):
        return lhs, rhs
    for i, (u, w) in enumerate(zip(left, right, strict=True)):
        if _data_shaped(u) and type(u) is type(w):
            try:
                both = u.pair(w)
            except ValueError:  # a stack of trees (the elements of another structure): compared as they are
                continue
            left[i], right[i] = both.fmap(lambda q: q[0]), both.fmap(lambda q: q[1])
    return jax.tree_util.tree_unflatten(structure, left), jax.tree_util.tree_unflatten(structure, right)


def _data_shaped(x: object) -> bool:
    return isinstance(x, Shaped) and isinstance(x, Dense)


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
    statement, equation = _laws(maps)[law]
    where = f" ({_WHERE[law]})" if law in _WHERE else ""

    # No shrinking: each JAX example is slow to trace, and the failing one is reported as found.
    @hypothesis.settings(max_examples=max_examples, deadline=None, database=None, phases=_NO_SHRINK)
    @hypothesis.given(structures)
    def run(xyz: Triple) -> None:
        lhs, rhs = equation(*xyz)
        try:
            assert_close(lhs, rhs, rtol=rtol, atol=atol, what=law)
        except AssertionError as error:
            equation_text = (statement.__doc__ or "").strip().rstrip(".")
            failure = f"law {law!r} fails: {equation_text}{where}"
            raise AssertionError(_report(failure, error, x=xyz[0], y=xyz[1], z=xyz[2], left=lhs, right=rhs)) from None

    run()


def _report(failure: str, error: AssertionError, **values: object) -> str:
    """A failure, the values it concerns (arrays abbreviated) and the comparison's own message."""
    with np.printoptions(precision=6, threshold=24, edgeitems=3, linewidth=100):
        shown = "\n".join(f"  {name} = {_shown(value)}" for name, value in values.items())
    return f"{failure}\n{shown}\n{str(error).strip()}"


def _shown(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 600 else text[:600] + " ..."


def check_laws(
    structures: st.SearchStrategy[Triple],
    *,
    maps: Maps = Maps(),
    rtol: float | None = None,
    atol: float | None = None,
    max_examples: int = 20,
    dense_examples: int = 5,
) -> tuple[str, ...]:
    """Check every law the structures claim (``claimed_laws`` of the first one drawn) on ``max_examples``
    triples and, for a ``Dense`` structure of scalars, its hook (``check_dense``, on ``dense_examples``
    triples: each runs eleven operations both ways); return the names of the laws checked."""
    first = hypothesis.find(structures, lambda _: True, settings=hypothesis.settings(database=None, phases=_NO_SHRINK))
    claimed = claimed_laws(first[0])
    for law in claimed:
        check_law(law, structures, maps=maps, rtol=rtol, atol=atol, max_examples=max_examples)
    if _dense_scalars(first[0]) is None:
        return claimed
    check_dense(structures, rtol=rtol, atol=atol, max_examples=dense_examples)
    return claimed + DENSE_LAWS


# The Dense hook (applicative.protocols.dense): the linear algebra's dense formulas against the
# generic definitions, as the instance declares them (Axis.exact).

DENSE_LAWS: tuple[str, ...] = (
    "dense Gram matrices",
    "dense exactness",
    "dense nodal",
    "dense counit",
    "dense dot",
    "dense outer",
    "dense mul_mv",
    "dense mul_vm",
    "dense mul_mm",
    "dense mul_mmt",
    "dense each_mul_mmt",
    "dense sum_mul_mmt",
    "dense add",
    "dense scale",
    "dense attention",
)
"""The checks of a ``Dense`` hook (``check_dense``)."""


def check_dense(
    structures: st.SearchStrategy[Triple],
    *,
    rtol: float | None = None,
    atol: float | None = None,
    max_examples: int = 20,
) -> None:
    """Check the ``Dense`` hook of structures of scalars on random triples; raise an AssertionError that
    names the check, the hook's value and the generic one. With x, y, z first brought to one shape
    (``fmap fst`` and ``fmap snd`` of their pairs: themselves for a Vec or a Cheb, the common
    refinement for trees):

        dense Gram matrices   every axis's Gram matrix is symmetric and positive definite (a diagonal
                              that is data, a tree's measure, may hold zeros: padding)
        dense exactness       every axis's ``Axis.exact`` leaves at least one coordinate to compare
        dense nodal           a ``nodal`` axis has a Gram matrix that is None or a diagonal (a weight
                              per position), and where every axis is nodal, fmap f is f on each
                              coordinate (attention's softmax runs on coordinates there)
        dense counit          dot(x, fmap (const 1) x) = counit x: the Gram matrices against the counit,
                              once the counit has kept its own laws on x and y (additivity, homogeneity,
                              respecting pairing): a counit that breaks them is reported as at fault,
                              not the hook checked against it
        dense <op>            every dense formula a ``Dense`` hook provides (dot, outer, mul_mv, mul_vm,
                              mul_mm, mul_mmt, each_mul_mmt, sum_mul_mmt, add, scale, and attention's,
                              where every axis is nodal) runs and equals its generic definition
                              (``generic_only``), on x, y, z with every coordinate beyond ``Axis.exact``
                              set to zero (products the instance's ``fmap`` represents exactly), on two
                              different matrices of them, neither symmetric, a = outer(x, y) + outer(z, x)
                              and b = outer(y, z) + outer(x, x), and on structures of matrices,
                              x_i a and y_i b (fmap): a formula that transposes or swaps its operands
                              is caught; ``scale`` by -1.5, so that a formula that ignores its factor (or
                              its sign) is caught; attention(a, b, a / 2), queries, keys and values apart,
                              whose dense formula runs where every axis is nodal and nowhere else

    Each result is judged at its own scale: it agrees when max |dense - generic| <= atol + rtol max |generic|
    over each of its arrays (not entry by entry: a product whose entries span ten decades rounds its small
    entries at the size of its large ones), rtol and atol ``default_tolerance`` of the dtype unless given."""
    settings = hypothesis.settings(max_examples=max_examples, deadline=None, database=None, phases=_NO_SHRINK)

    @settings
    @hypothesis.given(structures)
    def run(xyz: Triple) -> None:
        x, y, z = _one_shape(*xyz)
        if (axes := _dense_scalars(x)) is None:
            what = " x ".join(_levels(x)) or f"{type(x).__name__} (not Dense, or with no axes)"
            raise TypeError(f"check_dense: a {what} is not a Dense structure of scalars (a structure of "
                            "structures is checked through its elements' own strategy)")  # fmt: skip
        for axis in axes:
            _check_gram(axis)
            _check_exact(axis)
        _check_nodal(x, axes, xyz, rtol, atol)
        _check_counit(x, y, xyz, rtol, atol)
        ones = x.fmap(lambda a: jnp.ones_like(a))
        through_gram = _dense("dot", lambda: dot(x, ones))
        _agree("dense counit", "dot(x, fmap (const 1) x) through the Gram matrices", through_gram,
               "counit(x)", counit(x), xyz, rtol, atol)  # fmt: skip
        x, y, z = (_exact(v) for v in (x, y, z))
        with generic_only():  # the operands alike for both sides, whatever the hook does
            a, b = add(outer(x, y), outer(z, x)), add(outer(y, z), outer(x, x))
            # structures of matrices (the heads of attention's projections): x_i a and y_i b
            c, d = x.fmap(lambda r: scale(r, a)), y.fmap(lambda r: scale(r, b))
        operations: dict[str, Callable[[], object]] = {
            "dot": lambda: dot(x, y),
            "outer": lambda: outer(x, y),
            "mul_mv": lambda: mul_mv(a, z),
            "mul_vm": lambda: mul_vm(z, a),
            "mul_mm": lambda: mul_mm(a, b),
            "mul_mmt": lambda: mul_mmt(a, b),
            "each_mul_mmt": lambda: each_mul_mmt(c, b),
            "sum_mul_mmt": lambda: sum_mul_mmt(c, d),
            "add": lambda: add(x, y),
            "scale": lambda: scale(-1.5, x),
            "attention": lambda: attention(a, b, scale(0.5, a)),
        }
        for op, compute in operations.items():
            if op == "attention" and not all(axis.nodal for axis in axes):
                _declined(op, compute)  # (its dense formula is for a measure that is a weight per position)
                continue
            with generic_only():
                generic = compute()
            _agree(f"dense {op}", f"{op} by the dense formula", _dense(op, compute), "its generic definition",
                   generic, xyz, rtol, atol)  # fmt: skip

    run()


def _check_nodal(x: X, axes: tuple[Axis, ...], xyz: Triple, rtol: float | None, atol: float | None) -> None:
    for axis in axes:
        if axis.nodal and axis.gram is not None and jnp.ndim(axis.gram) != 1:
            raise AssertionError(f"dense nodal: {axis} is nodal but its Gram matrix is not a diagonal (a weight "
                                 "per position): set nodal=False, or give the diagonal")  # fmt: skip
    if axes and all(axis.nodal for axis in axes):
        _agree("dense nodal", "the coordinates of fmap sin", to_array(x.fmap(jnp.sin)),
               "sin of the coordinates", jnp.sin(to_array(x)), xyz, rtol, atol)  # fmt: skip


def _check_exact(axis: Axis) -> None:
    exact = axis.size if axis.exact is None else axis.exact
    if not 1 <= exact <= axis.size:
        raise AssertionError(f"dense exactness: {axis} declares Axis.exact = {axis.exact!r}: the dense formulas "
                             f"would be compared on no coordinate (or on more than its {axis.size}); it must "
                             f"be from 1 to {axis.size}, or None for every coordinate")  # fmt: skip


def _check_counit(x: X, y: X, xyz: Triple, rtol: float | None, atol: float | None) -> None:
    """The counit's own laws (those the structure claims) on x and y, before the Gram matrices are
    compared against it."""
    sides: dict[str, Callable[[], tuple[object, object]]] = {
        "counit additivity": lambda: additivity_law(ARITHMETIC, x, y),
        "counit homogeneity": lambda: homogeneity_law(ARITHMETIC, -1.5, x),
        "counit respects pairing": lambda: pairing_law(ARITHMETIC, x, y),
    }
    for law in [name for name in sides if name in claimed_laws(x)]:
        lhs, rhs = sides[law]()
        try:
            assert_close(lhs, rhs, rtol=rtol, atol=atol, what=law)
        except AssertionError as error:
            failure = f"the counit fails {law!r}, so the Dense hook cannot be checked against it: the " \
                      f"two sides are {_shown_value(lhs)} and {_shown_value(rhs)} (fix the counit first)"  # fmt: skip
            raise AssertionError(_report(failure, error, x=xyz[0], y=xyz[1], z=xyz[2])) from None


def _dense_scalars(x: object) -> tuple[Axis, ...] | None:
    """The axes of a Dense structure whose elements are scalars (one array, an axis each), else None
    (a structure of structures, a matrix, is not checked as one)."""
    if not isinstance(x, Dense) or (axes := x.axes()) is None:
        return None
    leaves = jax.tree_util.tree_leaves(x.elements())
    if len(leaves) != 1 or jnp.ndim(leaves[0]) != len(axes) or isinstance(x.elements(), Applicative):
        return None
    return axes


def _levels(x: object) -> list[str]:
    """The axes of x's dense levels, outermost first, as text."""
    axes: list[str] = []
    while isinstance(x, Dense) and (level := x.axes()) is not None:
        axes += map(str, level)
        x = x.elements()
    return axes


def _one_shape(x: X, y: X, z: X) -> Triple:
    """x, y and z refined to one shape: the components of pair(pair(x, y), z)."""
    p = x.pair(y).pair(z)
    return p.fmap(lambda q: q[0][0]), p.fmap(lambda q: q[0][1]), p.fmap(lambda q: q[1])


def _exact(x: X) -> X:
    """``x`` with its coordinates beyond each axis's ``exact`` set to zero."""
    assert isinstance(x, Dense)
    keep = jnp.ones((), bool)
    for axis in x.axes() or ():
        exact = axis.size if axis.exact is None else axis.exact
        keep = keep[..., None] & (jnp.arange(axis.size) < exact)
    return cast(X, x.with_elements(jnp.where(keep, x.elements(), 0)))


def _check_gram(axis: Axis) -> None:
    if axis.gram is None:
        return  # the identity
    g = np.asarray(axis.gram, np.float64)
    if g.shape not in ((axis.size,), (axis.size, axis.size)):
        raise AssertionError(f"dense Gram matrices: {axis}: a Gram matrix of shape {g.shape}, not {axis.size} "
                             f"or {axis.size} x {axis.size}")  # fmt: skip
    if not np.all(np.isfinite(g)):
        raise AssertionError(f"dense Gram matrices: {axis}: the Gram matrix is not finite: {g}")
    if g.ndim == 2 and not np.allclose(g, g.T, rtol=1e-12, atol=1e-12 * np.abs(g).max()):
        raise AssertionError(f"dense Gram matrices: {axis}: the Gram matrix is not symmetric "
                             f"(largest |G - G^T| = {np.abs(g - g.T).max():.3g})")  # fmt: skip
    eigenvalues = g if g.ndim == 1 else np.linalg.eigvalsh((g + g.T) / 2)
    floor = 0.0 if axis.shape is not None else np.finfo(np.float64).eps * g.size * np.abs(eigenvalues).max()
    if np.min(eigenvalues) < -floor or (axis.shape is None and np.min(eigenvalues) <= floor):
        kind = "semidefinite" if axis.shape is not None else "definite"
        raise AssertionError(f"dense Gram matrices: {axis}: the Gram matrix is not positive {kind} "
                             f"(smallest eigenvalue {np.min(eigenvalues):.6g})")  # fmt: skip


def _dense(op: str, compute: Callable[[], T]) -> T:
    """``compute()``, which must run ``op``'s dense formula."""
    with record_fast_paths() as taken:
        value = compute()
    if op not in taken:
        raise AssertionError(f"dense {op}: the dense formula did not run (the Dense hook declined {op}; "
                             f"fast paths taken: {taken})")  # fmt: skip
    return value


def _declined(op: str, compute: Callable[[], object]) -> None:
    """``compute()``, which must not run ``op``'s dense formula."""
    with record_fast_paths() as taken:
        compute()
    if op in taken:
        raise AssertionError(f"dense {op}: the dense formula ran on axes that are not all nodal")


def _agree(
    law: str, dense_name: str, dense: object, generic_name: str, generic: object, xyz: Triple,
    rtol: float | None, atol: float | None,
) -> None:  # fmt: skip
    try:
        # Compared as their dense levels' axes and their leaves: pytree metadata that only records
        # where a shape came from (a DenseTree's origin) may differ.
        if _levels(dense) != _levels(generic):
            raise AssertionError(f"{law}: the results' axes differ: {_levels(dense)} and {_levels(generic)}")
        _close_at_scale(jax.tree_util.tree_leaves(dense), jax.tree_util.tree_leaves(generic), rtol, atol)
    except AssertionError as error:
        failure = f"the Dense hook fails {law!r}: {dense_name} is {_shown_value(dense)}, {generic_name} is " \
                  f"{_shown_value(generic)}"  # fmt: skip
        raise AssertionError(_report(failure, error, x=xyz[0], y=xyz[1], z=xyz[2])) from None


def _close_at_scale(dense: list[Any], generic: list[Any], rtol: float | None, atol: float | None) -> None:
    """Each dense leaf against its generic one as a whole: max |dense - generic| <= atol + rtol max |generic|,
    the tolerances the dtype's (``default_tolerance``) unless given. Rounding is judged at the result's
    scale: a product whose entries span decades rounds its small entries at the size of its large ones."""
    if len(dense) != len(generic):
        raise AssertionError(f"the results hold {len(dense)} and {len(generic)} arrays")
    for i, (a, b) in enumerate(zip(dense, generic, strict=True)):
        x, y = to_host(a), to_host(b)
        if x.shape != y.shape:
            raise AssertionError(f"array {i}: shapes {x.shape} and {y.shape}")
        default = default_tolerance(np.result_type(x, y))
        scale = float(np.max(np.abs(y), initial=0.0, where=np.isfinite(y)))
        bound = (default if atol is None else atol) + (default if rtol is None else rtol) * scale
        wide = np.result_type(x, y, np.float64)
        error = np.abs(x.astype(wide) - y.astype(wide))
        error = np.where(np.isnan(x) & np.isnan(y), 0.0, np.where(np.isnan(error), np.inf, error))  # NaN meets NaN
        if x.size and not float(np.max(error)) <= bound:
            worst = np.unravel_index(int(np.argmax(error)), x.shape)
            raise AssertionError(
                f"array {i}: largest |dense - generic| = {float(error[worst]):.3g} at index {tuple(map(int, worst))}, "
                f"above atol + rtol * (the result's scale, max |generic| = {scale:.3g}) = {bound:.3g}"
            )


def _shown_value(value: object) -> str:
    leaves = jax.tree_util.tree_leaves(value)
    if len(leaves) == 1 and jnp.ndim(leaves[0]) == 0:
        return f"{float(jnp.real(leaves[0])):.6g}"
    with np.printoptions(precision=6, threshold=12, edgeitems=2):
        return _shown(value)


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
