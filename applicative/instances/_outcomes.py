"""The outcomes of a finite distribution: stacking, concreteness, canonical keys and merging.

Outcomes are a pytree whose every leaf has a leading axis of length n (one row an outcome), with a
weight each, the last axis of an array of shape (..., n). They are compared *by value*: an outcome's
key is the tuple of its leaves' numbers, leaves in pytree order, complex numbers as (real, imag) and
-0.0 as 0.0, so that two outcomes are equal when every leaf holds equal numbers.

    _stack(outcomes, what)    a list of outcomes stacked along a new leading axis (on the host where
                              they are not JAX arrays: numpy keeps float64); anything else as stacked
    _merge(outcomes, w)       equal outcomes merged, their weights summed (a scatter-add: the weights
                              may be traced), sorted by key; unchanged if already canonical
    _equal_outcomes(xs, n)    E[i, j] = (outcome i == outcome j), an n x n bool array, for traced
                              outcomes, which cannot be merged
    _check_precision(...)     outcomes distinct as given stay distinct in the dtype JAX stores them in

Merging reads the outcomes' values: they must be concrete (``_is_traced`` tells). Errors are
ValueErrors naming what was given: an empty list of outcomes, an outcome that holds NaN (which
equals nothing, so cannot be merged), and two outcomes that only float64 tells apart where JAX's
64-bit types are off (they would merge silently).
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from applicative.stacked import numeric, to_host


def _is_traced(tree: object) -> bool:
    return any(isinstance(leaf, jax.core.Tracer) for leaf in jax.tree_util.tree_leaves(tree))


def _stack(outcomes: object, what: str) -> Any:
    """A list of outcomes stacked along a new leading axis; anything else is taken as already stacked.
    On the host where they are not JAX arrays already: numpy keeps their own precision (float64 also
    where JAX's 64-bit types are off), for ``_check_precision``."""
    if isinstance(outcomes, list):
        if not outcomes:
            raise ValueError(f"{what}: a distribution needs at least one outcome")

        def stack(*leaves: object) -> jax.Array | np.ndarray:
            rows = [numeric(x, what, host=True) for x in leaves]
            return jnp.stack(rows) if any(isinstance(r, jax.Array) for r in rows) else np.stack(rows)

        return jax.tree_util.tree_map(stack, *outcomes)
    return jax.tree_util.tree_map(lambda leaf: numeric(leaf, what, host=True), outcomes)


def _shown(key: tuple[Any, ...]) -> object:
    return key[0] if len(key) == 1 else key


def _check_precision(name: str, given: object, stacked: object, n: int) -> None:
    """Outcomes distinct as given stay distinct in JAX's dtypes: with 64-bit types off, float64 outcomes
    become float32, and two that only float64 tells apart would merge silently. A clear error instead."""
    pairs = zip(jax.tree_util.tree_leaves(given), jax.tree_util.tree_leaves(stacked), strict=True)
    if all(a.dtype == b.dtype for a, b in pairs):  # (no host copy of device outcomes)
        return
    exact, kept = _keys(given, n), _keys(stacked, n)
    first: dict[tuple[Any, ...], int] = {}
    for i, key in enumerate(kept):
        j = first.setdefault(key, i)
        if exact[j] != exact[i]:
            dtypes = ", ".join(sorted({str(leaf.dtype) for leaf in jax.tree_util.tree_leaves(stacked)}))
            a, b = _shown(exact[j]), _shown(exact[i])
            raise ValueError(
                f"{name}: outcomes {j} and {i} are distinct as given ({a} and {b}) but equal in {dtypes}, "
                "the dtype JAX stores them in (its 64-bit types are off), and would merge; "
                "enable them (jax.config.update('jax_enable_x64', True)) or give outcomes that stay distinct"
            )


def _row_values(leaf: object, n: int) -> list[list[Any]]:
    """Each outcome's numbers in one leaf, as Python scalars (complex as real, imag; -0.0 as 0.0)."""
    rows = to_host(leaf).reshape(n, -1)
    if np.iscomplexobj(rows):
        rows = np.stack([rows.real, rows.imag], axis=-1).reshape(n, -1)
    if np.issubdtype(rows.dtype, np.inexact):
        if np.isnan(rows).any():
            raise ValueError("cannot merge outcomes: an outcome holds NaN, which equals nothing")
        rows = rows + 0.0  # -0.0 + 0.0 is 0.0: outcomes compare by value
    values: list[list[Any]] = rows.tolist()
    return values


def _keys(outcomes: object, n: int) -> list[tuple[Any, ...]]:
    """The canonical key of every outcome: its leaf values, leaves in pytree order."""
    per_leaf = [_row_values(leaf, n) for leaf in jax.tree_util.tree_leaves(outcomes)]
    return [tuple(v for rows in per_leaf for v in rows[i]) for i in range(n)]


def _merge(outcomes: Any, weights: jax.Array) -> tuple[Any, jax.Array]:
    """Merge equal outcomes (summing weights) and sort them by key; unchanged if already canonical.

    Outcomes must be concrete; weights may be traced (the sums are a scatter-add)."""
    n = weights.shape[-1]
    if n == 0:
        return outcomes, weights
    keys = _keys(outcomes, n)
    order = sorted(range(n), key=keys.__getitem__)
    distinct = [i for k, i in enumerate(order) if k == 0 or keys[i] != keys[order[k - 1]]]
    if len(distinct) == n and order == list(range(n)):
        return outcomes, weights
    group = {keys[i]: g for g, i in enumerate(distinct)}
    segment = np.array([group[k] for k in keys])
    chosen = np.array(distinct)
    merged = jnp.zeros((*weights.shape[:-1], len(distinct)), weights.dtype).at[..., segment].add(weights)
    return jax.tree_util.tree_map(lambda leaf: jnp.asarray(leaf)[chosen], outcomes), merged


def _equal_outcomes(outcomes: Any, n: int) -> jax.Array:
    """E[i, j] = (outcome i == outcome j), by value, for traced outcomes."""
    equal = jnp.ones((n, n), bool)
    for leaf in jax.tree_util.tree_leaves(outcomes):
        rows = jnp.reshape(leaf, (n, -1))
        equal = equal & jnp.all(rows[:, None, :] == rows[None, :, :], axis=-1)
    return equal
