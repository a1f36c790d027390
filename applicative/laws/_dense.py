"""The ``Dense`` hook's checks: the linear algebra's dense formulas against the generic definitions.

An instance that implements ``Dense`` (``applicative.protocols.dense``) declares its axes (a size, a
Gram matrix, ``Axis.exact``, ``nodal``), and the linear algebra then runs its dense formulas on the
coordinates instead of the generic definitions through ``fmap``, ``pair`` and ``counit``.
``check_dense`` checks, on random triples of structures of scalars (x, y, z) brought to one shape, that
the two agree: the axes' declarations hold (Gram matrices symmetric and positive definite, or
semidefinite where the measure is data; ``Axis.exact`` None or from 1 to the size; a nodal axis's
Gram matrix None or a diagonal), the Gram matrices give the counit, dot(x, fmap (const 1) x) =
counit x (once the counit keeps its own laws on x and y), and every formula the hook provides runs
and equals its generic definition (``generic_only``) on vectors, two different asymmetric matrices
and structures of matrices: ``DENSE_LAWS`` names each check, and ``check_dense``'s docstring states
them.

A failure is an AssertionError that names the check, shows the hook's value and the generic one and
the drawn (x, y, z); a formula that did not run where it must (or ran where it must not) is one too,
and a structure that is not a ``Dense`` structure of scalars a TypeError. Each result is judged at
the scale of its terms, as ``check_dense``'s docstring states.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar, cast

import hypothesis.strategies as st
import jax
import jax.numpy as jnp
import numpy as np

from applicative.laws._compare import _report, _shown, assert_close, default_tolerance
from applicative.laws._structure import Triple, X, claimed_laws, drawn_examples
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
from applicative.protocols.algebra import ARITHMETIC
from applicative.protocols.applicative import Applicative
from applicative.protocols.dense import Axis, Dense, to_array
from applicative.protocols.integration import additivity_law, counit, homogeneity_law, pairing_law
from applicative.stacked import to_host

__all__ = ["DENSE_LAWS", "check_dense", "check_dense_on"]

T = TypeVar("T")

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
                              its sign) is caught; attention(t a, b, a / 2), queries, keys and values apart
                              (t bounding its logits by the size),
                              whose dense formula runs where every axis is nodal and nowhere else

    Each result is judged at its own scale and its terms': it agrees when max |dense - generic| <= atol + rtol s
    over each of its arrays, s the larger of max |generic| and m^k, m the largest |coordinate| of x, y, z and
    k the operation's degree in them (dot 2, mul_mv 3, ..., sum_mul_mmt 6): not entry by entry, since a
    product whose entries span ten decades rounds its small entries at the size of its large ones; and not
    at the result's scale alone, since a sum that cancels, 1e-10 from terms of 1e6, rounds at the size of
    its terms (a Chebyshev integral of an odd function, exactly 0, is such a sum); rtol and atol
    ``default_tolerance`` of the dtype unless given."""
    for xyz in drawn_examples(structures, max_examples):
        check_dense_on(xyz, rtol=rtol, atol=atol)


def check_dense_on(xyz: Triple, *, rtol: float | None, atol: float | None) -> None:
    """Check the ``Dense`` hook on one triple, as ``check_dense`` does on each it draws."""
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
    # the operands' size: an operation of degree k sums terms up to about largest^k
    largest = max(float(jnp.max(jnp.abs(to_array(v)), initial=0.0)) for v in (x, y, z))
    for op, (degree, compute) in _operations(x, y, z).items():
        if op == "attention" and not all(axis.nodal for axis in axes):
            _declined(op, compute)  # (its dense formula is for a measure that is a weight per position)
            continue
        with generic_only():
            generic = compute()
        _agree(f"dense {op}", f"{op} by the dense formula", _dense(op, compute), "its generic definition",
               generic, xyz, rtol, atol, terms=largest**degree)  # fmt: skip


def _operations(x: X, y: X, z: X) -> dict[str, tuple[int, Callable[[], object]]]:
    """The operations a Dense hook may run its dense formulas for, each with its degree in x, y, z, on
    them and the matrices a = outer(x, y) + outer(z, x), b = outer(y, z) + outer(x, x) (made by the generic
    definitions, alike for both sides whatever the hook does)."""
    with generic_only():
        a, b = add(outer(x, y), outer(z, x)), add(outer(y, z), outer(x, x))
        # structures of matrices (the heads of attention's projections): x_i a and y_i b
        c, d = x.fmap(lambda r: scale(r, a)), y.fmap(lambda r: scale(r, b))
        # attention's queries scaled so that its scores (a's rows against b's) are at most 1: a softmax of
        # scores in the thousands tells rounding (a GPU's TF32) from a wrong formula no better than a coin,
        # where at this size a transposed or swapped operand still moves every weight by a factor up to e
        tame = 1.0 / max(1.0, float(jnp.max(jnp.abs(to_array(mul_mmt(a, b))))))
    return {
        "dot": (2, lambda: dot(x, y)),
        "outer": (2, lambda: outer(x, y)),
        "mul_mv": (3, lambda: mul_mv(a, z)),
        "mul_vm": (3, lambda: mul_vm(z, a)),
        "mul_mm": (4, lambda: mul_mm(a, b)),
        "mul_mmt": (4, lambda: mul_mmt(a, b)),
        "each_mul_mmt": (5, lambda: each_mul_mmt(c, b)),
        "sum_mul_mmt": (6, lambda: sum_mul_mmt(c, d)),
        "add": (1, lambda: add(x, y)),
        "scale": (1, lambda: scale(-1.5, x)),
        "attention": (2, lambda: attention(scale(tame, a), b, scale(0.5, a))),  # softmax's weights: degree 0
    }


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
    rtol: float | None, atol: float | None, *, terms: float = 0.0,
) -> None:  # fmt: skip
    try:
        # Compared as their dense levels' axes and their leaves: pytree metadata that only records
        # where a shape came from (a DenseTree's origin) may differ.
        if _levels(dense) != _levels(generic):
            raise AssertionError(f"{law}: the results' axes differ: {_levels(dense)} and {_levels(generic)}")
        _close_at_scale(jax.tree_util.tree_leaves(dense), jax.tree_util.tree_leaves(generic), rtol, atol, terms)
    except AssertionError as error:
        failure = f"the Dense hook fails {law!r}: {dense_name} is {_shown_value(dense)}, {generic_name} is " \
                  f"{_shown_value(generic)}"  # fmt: skip
        raise AssertionError(_report(failure, error, x=xyz[0], y=xyz[1], z=xyz[2])) from None


def _close_at_scale(dense: list[Any], generic: list[Any], rtol: float | None, atol: float | None, terms: float) -> None:
    """Each dense leaf against its generic one as a whole: max |dense - generic| <= atol + rtol s, s the larger
    of max |generic| and ``terms`` (the size of the terms it sums), the tolerances the dtype's
    (``default_tolerance``) unless given (``check_dense``'s docstring says why)."""
    if len(dense) != len(generic):
        raise AssertionError(f"the results hold {len(dense)} and {len(generic)} arrays")
    for i, (a, b) in enumerate(zip(dense, generic, strict=True)):
        x, y = to_host(a), to_host(b)
        if x.shape != y.shape:
            raise AssertionError(f"array {i}: shapes {x.shape} and {y.shape}")
        default = default_tolerance(np.result_type(x, y))
        scale = float(np.max(np.abs(y), initial=0.0, where=np.isfinite(y)))
        scale = max(scale, terms)
        bound = (default if atol is None else atol) + (default if rtol is None else rtol) * scale
        wide = np.result_type(x, y, np.float64)
        error = np.abs(x.astype(wide) - y.astype(wide))
        error = np.where(np.isnan(x) & np.isnan(y), 0.0, np.where(np.isnan(error), np.inf, error))  # NaN meets NaN
        if x.size and not float(np.max(error)) <= bound:
            worst = np.unravel_index(int(np.argmax(error)), x.shape)
            raise AssertionError(
                f"array {i}: largest |dense - generic| = {float(error[worst]):.3g} at index {tuple(map(int, worst))}, "
                f"above atol + rtol * (the scale of the result and of its terms, {scale:.3g}) = {bound:.3g}"
            )


def _shown_value(value: object) -> str:
    leaves = jax.tree_util.tree_leaves(value)
    if len(leaves) == 1 and jnp.ndim(leaves[0]) == 0:
        return f"{float(jnp.real(leaves[0])):.6g}"
    with np.printoptions(precision=6, threshold=12, edgeitems=2):
        return _shown(value)
