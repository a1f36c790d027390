"""Equality of structures up to a tolerance, and the law suite's failure reports.

    assert_close(lhs, rhs)   lhs and rhs are one pytree (one structure, tags and sizes included) whose
                             leaves are close entry by entry: |lhs - rhs| <= atol + rtol |rhs|
                             (``np.testing.assert_allclose``); else an AssertionError that names
                             ``what`` and shows both structures, or the entries that differ

Two structures whose shape is data (``Shaped`` and ``Dense``: trees) at one place are compared as
functions, on one shape: ``fmap fst`` and ``fmap snd`` of their ``pair``, their common refinement, so
that a tree and its refinement, or one at another capacity, are equal (a stack of trees, which does
not pair, is compared as it is).

Tolerances follow the dtype unless given: ``default_tolerance`` is 1e-10 for float64 and 1000 ulps
for narrower floats (1.2e-4 for float32; 1e-2 at most); integers compare to 1e-10, i.e. exactly. Where
the backend's float32 matrix products round their operands (``rounded_products``: TF32 on NVIDIA GPUs
since Ampere, bfloat16 passes on TPUs, at JAX's default precision), a float32 tolerance is at least
``ROUNDED_PRODUCTS`` (5e-3): their errors are about 1e-3, not a few ulps.
A failure's report (``_report``) states the failure, shows the values it concerns (arrays
abbreviated, a value's text cut at 600 characters) and ends with the comparison's own message.
"""

from __future__ import annotations

from typing import Any

import jax
import numpy as np

from applicative.protocols.applicative import Shaped
from applicative.protocols.dense import Dense
from applicative.stacked import to_host

__all__ = ["ROUNDED_PRODUCTS", "assert_close", "default_tolerance", "rounded_products"]

ROUNDED_PRODUCTS = 5e-3
"""The least tolerance of a float32 result where matrix products round their operands to 10 mantissa bits
(TF32) or fewer (bfloat16 passes): errors of about 1e-3 against float64."""

_CPU_ROUNDS = False
"""Whether the CPU's float32 products round their operands as a GPU's do: never, but in a test harness that
emulates a GPU's products on the CPU (tests/applicative/tolerance.py sets it)."""


def default_tolerance(dtype: Any) -> float:
    """The laws' default rtol and atol at ``dtype``: 1e-10, or 1000 ulps of a narrower float (at most 1e-2),
    and for float32 at least ``ROUNDED_PRODUCTS`` where ``rounded_products()``."""
    kind = np.dtype(dtype)
    if not np.issubdtype(kind, np.inexact):
        return 1e-10
    tolerance = float(min(max(1e-10, 1000.0 * np.finfo(kind).eps), 1e-2))
    if kind in (np.dtype(np.float32), np.dtype(np.complex64)) and rounded_products():
        return max(tolerance, ROUNDED_PRODUCTS)
    return tolerance


def rounded_products() -> bool:
    """Whether float32 matrix products on JAX's default backend round their operands: on any backend but the
    CPU (a GPU, a TPU) unless the default precision in force (``jax.default_matmul_precision``) is "highest"
    or "float32"."""
    precision = str(getattr(jax.config, "jax_default_matmul_precision", None)).lower().removeprefix("precision.")
    exact = precision in ("highest", "float32") or "f32_f32_f32" in precision
    return (jax.default_backend() != "cpu" or _CPU_ROUNDS) and not exact


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


def _report(failure: str, error: AssertionError, **values: object) -> str:
    """A failure, the values it concerns (arrays abbreviated) and the comparison's own message."""
    with np.printoptions(precision=6, threshold=24, edgeitems=3, linewidth=100):
        shown = "\n".join(f"  {name} = {_shown(value)}" for name, value in values.items())
    return f"{failure}\n{shown}\n{str(error).strip()}"


def _shown(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 600 else text[:600] + " ..."
