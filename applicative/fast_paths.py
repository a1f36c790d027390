"""The dense formulas of the linear algebra (its fast paths): one einsum on the coordinates of ``Dense`` structures.

``applicative.linalg`` defines each operation generically, from ``fmap``, ``pair`` and ``counit``; under
ordinary arithmetic, when the operands are ``Dense`` structures of scalars (``applicative.protocols.dense``),
it asks this module first. ``dense_formula`` contracts their coordinate arrays in one ``jnp.einsum`` named
by a spec of structure levels ("fg,g->f": a matrix and a vector give a vector), the Gram matrix of each
contracted level folded into one operand; ``on_coordinates`` applies a sum or a scaling leaf by leaf to
structures of one shape; ``shaped`` rebuilds the result's structures around its coordinates. The first
two give None where their formula does not apply (an operand that is not dense, levels that do not meet:
trees of different shapes), and the generic definition runs; levels that cannot meet (different sizes)
raise a ValueError naming both. ``coordinates`` and ``fold_gram`` are the pieces a fast path of its own
is built from (attention's, in ``applicative.nn``), ``log_taken`` how it reports that it ran.

``USE_FAST_PATHS`` turns the formulas off (``applicative.linalg.generic_only()``), ``FAST_PATH_LOG`` lists
those that ran (``applicative.linalg.record_fast_paths()``). Everything here runs at trace time: a compiled
function holds only the einsum.
"""

from __future__ import annotations

from collections.abc import Callable
from contextvars import ContextVar
from typing import Any, cast

import jax
import jax.numpy as jnp
import numpy as np

from applicative.operands import describe
from applicative.protocols.algebra import Module, Ring, ordinary
from applicative.protocols.applicative import Applicative
from applicative.protocols.dense import Axis, Dense, nest
from applicative.stacked import sums_leafwise

__all__ = [
    "FAST_PATH_LOG",
    "USE_FAST_PATHS",
    "Level",
    "coordinates",
    "dense_formula",
    "fold_gram",
    "log_taken",
    "on_coordinates",
    "shaped",
]

Level = tuple[Axis, ...]
"""The axes of one structure level (a Compose has two)."""


USE_FAST_PATHS: ContextVar[bool] = ContextVar("use_fast_paths", default=True)
"""Whether the dense formulas run: False within ``applicative.linalg.generic_only()``."""

FAST_PATH_LOG: ContextVar[list[str] | None] = ContextVar("fast_path_log", default=None)
"""The list that the operations whose dense formula ran are appended to (``applicative.linalg.record_fast_paths()``)."""


def on_coordinates(op: str, module: Module[Any], f: Callable[..., Any], *xs: object) -> object | None:
    """``f`` leaf by leaf on the coordinates of structures of one shape, rebuilt around the result:
    a sum or scaling under ordinary arithmetic on dense structures. None unless every operand's
    dense levels are the first's (the same structures, tags, sizes and shapes) and their elements
    hold alike leaves that add leafwise (no structure whose ``pair`` is not a zip)."""
    if not (USE_FAST_PATHS.get() and ordinary(module)):
        return None
    views = [_levels(x) for x in xs]
    shells, axes, first = views[0]
    if not shells or any(other_axes != axes for _, other_axes, _ in views[1:]):
        return None
    elements = [e for _, _, e in views]
    structure: jax.tree_util.PyTreeDef = jax.tree_util.tree_structure(first)
    leaves = [jax.tree_util.tree_leaves(e) for e in elements]
    if any(jax.tree_util.tree_structure(e) != structure for e in elements[1:]) or not sums_leafwise(module, first):
        return None
    if any(jnp.shape(x) != jnp.shape(y) for other in leaves[1:] for x, y in zip(leaves[0], other, strict=True)):
        return None
    log_taken(op)
    return cast(object, nest(shells, jax.tree_util.tree_map(f, *elements)))


def dense_formula(
    op: str, spec: str, ring: Ring[Any], *operands: object, contract_as: str | None = None
) -> tuple[jax.Array, list[Dense[Any, Any]]] | None:
    """``op`` by its dense formula: the result's coordinates and the structures that shape it
    (outermost first), or None where the formula does not apply. ``spec`` names the structure levels
    of the operands and of the result ("fg,g->f": a matrix and a vector give a vector); a level
    found in the operands but not in the result is contracted through its Gram matrices.

    ``contract_as`` (the result's levels in another order) is the order the contraction produces them
    in, transposed into the result's after it; the operands are ordered for it. The two are the same
    numbers; under ``vmap`` they decide which operand the compiler lays out again for its matmul
    (``each_mul_mmt``: the sequence, in the kernel that computes it, not every head's weights)."""
    if not (USE_FAST_PATHS.get() and ordinary(ring)):
        return None
    inputs, result = spec.split("->")
    output = result if contract_as is None else contract_as
    if sorted(output) != sorted(result):
        raise ValueError(f"{op}: contract_as={contract_as!r} does not reorder the levels of {result!r}")
    names = inputs.split(",")
    views = [v for x, n in zip(operands, names, strict=True) if (v := coordinates(op, x, len(n))) is not None]
    if len(views) < len(names):
        return None
    levels: dict[str, Level] = {}
    shells: dict[str, Dense[Any, Any]] = {}
    for letters, (_, axes, structures) in zip(names, views, strict=True):
        for letter, level, structure in zip(letters, axes, structures, strict=True):
            if not _meet(op, levels.setdefault(letter, level), level):
                return None  # trees of different shapes: the generic definition refines them
            shells.setdefault(letter, structure)
    contracted = set(inputs) - set(output) - {","}

    # A contracted level's Gram matrices fold into one operand that holds it: full matrices into the
    # first (the weights of a linear map, applied once under vmap), diagonals (a scaling, one pass)
    # into the smallest (attention's values, not its n x n weights).
    def host(letter: str) -> int:
        holders = [i for i, n in enumerate(names) if letter in n]
        diagonal = all(axis.gram is None or jnp.ndim(axis.gram) == 1 for axis in levels[letter])
        return min(holders, key=lambda i: views[i][0].size) if diagonal else holders[0]

    hosts = {letter: host(letter) for letter in contracted}
    arrays = []
    for i, (letters, (array, _, _)) in enumerate(zip(names, views, strict=True)):
        position = 0
        for letter in letters:
            if hosts.get(letter) == i:
                array = fold_gram(array, levels[letter], position)
            position += len(levels[letter])
        arrays.append(array)

    # Operand order decides the layout out of the contraction (the left operand's free axes come
    # first, and under vmap so does a batched operand's batch axis): on the left goes an operand
    # that is contracted entirely (the vector of a matrix-vector product, usually the batched one),
    # else the one that holds the contraction's outer level. Then no transpose follows the
    # contraction, unless ``contract_as`` asks for one.
    def place(i: int) -> int:
        return 0 if set(names[i]) <= contracted else 1 if output[:1] in names[i] else 2

    chars = iter("abcdefghijklmnopqrstuvwxyz")
    axis_chars = {letter: "".join(next(chars) for _ in level) for letter, level in levels.items()}
    order = sorted(range(len(names)), key=place)
    subscripts = ",".join("".join(axis_chars[c] for c in names[i]) for i in order)
    out = jnp.einsum(f"{subscripts}->{''.join(axis_chars[c] for c in output)}", *(arrays[i] for i in order))
    if output != result:
        index = {char: i for i, char in enumerate("".join(axis_chars[c] for c in output))}
        out = jnp.transpose(out, [index[char] for c in result for char in axis_chars[c]])
    log_taken(op)
    return out, [shells[letter] for letter in result]


def shaped(array: jax.Array, shells: list[Dense[Any, Any]]) -> Applicative[Any, Any]:
    """The nested structure of these shapes (outermost first) holding the coordinates ``array``."""
    return cast(Applicative[Any, Any], nest(shells, array))


def coordinates(op: str, x: object, levels: int) -> tuple[jax.Array, list[Level], list[Dense[Any, Any]]] | None:
    """The coordinate array of ``x``, the axes of its first ``levels`` structure levels and those
    structures; None unless every level is Dense and the elements below them are scalars. A clear
    error if the coordinates' shape is not the axes' sizes (a size that disagrees with the data)."""
    axes: list[Level] = []
    shells: list[Dense[Any, Any]] = []
    for _ in range(levels):
        if not isinstance(x, Dense) or (level := x.axes()) is None:
            return None
        axes.append(level)
        shells.append(x)
        x = x.elements()
    if not isinstance(x, jax.Array | np.ndarray) or x.ndim != sum(len(level) for level in axes):
        return None
    x = jnp.asarray(x)  # numpy coordinates take the formula they take under jit (as tracers)
    if x.shape != (sizes := tuple(axis.size for level in axes for axis in level)):
        raise ValueError(
            f"{op}: a {' of '.join(map(describe, axes))} holds coordinates of shape {x.shape}, not {sizes}"
        )
    return x, axes, shells


def _meet(op: str, a: Level, b: Level) -> bool:
    """Whether two levels are one (then a product contracts them); False where they differ only in
    measures that are data (trees of different shapes or capacities, which the generic definition
    refines); a clear error for any other mismatch."""
    if a == b:
        return True
    if len(a) == len(b) and all(
        x.kind == y.kind and x.tag == y.tag and (x.size == y.size or x.shape is not None)
        for x, y in zip(a, b, strict=True)
    ):
        return False
    raise ValueError(f"{op}: dimension mismatch: {describe(a)} vs {describe(b)}")


def fold_gram(array: jax.Array, level: Level, position: int) -> jax.Array:
    """The array with the Gram matrix of each axis of ``level`` (starting at ``position``) applied along it."""
    for i, axis in enumerate(level, start=position):
        if axis.gram is not None:
            dtype = array.dtype if jnp.issubdtype(array.dtype, jnp.inexact) else jnp.result_type(float)
            gram = jnp.asarray(axis.gram, dtype)
            if gram.ndim == 1:  # a diagonal: scale along the axis
                array = array * jnp.reshape(gram, (-1,) + (1,) * (array.ndim - i - 1))
                continue
            # G is symmetric: contracting either of its indices is the same.
            array = jnp.moveaxis(jnp.tensordot(array, gram, axes=[[i], [0]]), -1, i)
    return array


def _levels(x: object) -> tuple[list[Dense[Any, Any]], list[Level], object]:
    """The dense levels of ``x`` (outermost first), their axes, and the elements below them."""
    shells: list[Dense[Any, Any]] = []
    axes: list[Level] = []
    while isinstance(x, Dense) and (level := x.axes()) is not None:
        shells.append(x)
        axes.append(level)
        x = x.elements()
    return shells, axes, x


def log_taken(op: str) -> None:
    """Record that ``op``'s fast path ran (``applicative.linalg.record_fast_paths()``)."""
    if (taken := FAST_PATH_LOG.get()) is not None:
        taken.append(op)
