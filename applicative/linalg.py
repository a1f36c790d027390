"""Linear algebra written once (the reference's Part 3), for any applicative with a counit.

Each operation sums over one structure (two for ``sum_mul_mmt``); its type names that brand
``Summed``, a type variable bound to ``Measured``, so mypy rejects a structure with no counit there.

Each operation is defined from ``fmap``, ``pair`` and ``counit`` alone. Under
ordinary arithmetic, when its operands are ``Dense`` structures of scalars
(``applicative.protocols.dense``), it is computed instead by one dense
formula: the coordinates contracted through the Gram matrix G of the
contracted axes (the identity for a Vec, so there the two are equal). With
matrices as structures of rows (``Vec.from_array(x, Row, Col)`` is ``Vec[Row, Vec[Col, _]]``):

    operation          generic definition                                     dense formula
    dot(a, b)          counit (fmap (uncurry mul) (pair a b))                 a^T G b
    outer(a, b)        fmap (\\x -> fmap (x *) b) a                             a b^T
    mul_mv(m, v)       fmap (`dot` v) m                                       M G v
    mul_vm(v, m)       counit (fmap (\\(x, row) -> fmap (x *) row) (pair v m))  v^T G M
    mul_mm(a, b)       fmap (`mul_vm` b) a                                    A G B
    mul_mmt(a, b)      fmap (mul_mv a) b                                      B G A^T  (a applied to each row of b)
    sum_mul_mmt(a, b)  counit (fmap (uncurry mul_mmt) (pair a b))             sum_f B_f G A_f^T
    add(a, b)          fmap (uncurry add) (pair a b)                          a + b
    scale(r, a)        fmap (r *) a                                           r a
    linear(w, c, x)    add c (mul_mv w x)

Gram matrices fold into the first operand (the weights of a linear map, so
that under ``vmap`` they are applied once). How each instance's dense
formula relates to its generic definition is stated by the instance; every
relation is tested, and so is that the dense formula actually runs
(``record_fast_paths``). ``generic_only()`` forces the generic definitions.

``mul_mmt`` follows the reference (``mulMMT = fmap . mulMV``): the second
argument gives the outer structure, so attention scores are
``mul_mmt(keys, queries)``, one row per query.

Every operation checks its operands' nesting at trace time (Python on shapes, nothing added to a
compiled function): a non-structure (an array where a Vec belongs), a vector where a matrix belongs,
or, under ordinary arithmetic, a matrix where a vector belongs raises a TypeError naming the
operation and the argument. Nesting is visible up front through ``Dense`` structures; in other
structures (trees, distributions) the nested operations of the generic definition check theirs
(``mul_mv`` calls ``dot`` on each row), and ``*`` refuses to multiply structures.
``scale`` takes a scalar r (0-d), never an array that would broadcast against the coordinates.

>>> import numpy as np
>>> from applicative import Dim, Vec, mul_mm, to_array
>>> class Seq(Dim): ...
>>> class Model(Dim): ...
>>> class Hidden(Dim): ...
>>> x, w = Vec.from_array(np.ones((2, 3)), Seq, Model), Vec.from_array(np.ones((3, 4)), Model, Hidden)
>>> to_array(mul_mm(x, w)).shape
(2, 4)
"""

from __future__ import annotations

import contextlib
import operator
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from typing import Any, TypeVar, cast

import jax
import jax.numpy as jnp
import numpy as np

from applicative.protocols.algebra import Arithmetic, Module, Pointwise, Real, Ring, arithmetic, ordinary
from applicative.protocols.applicative import Applicative, Shaped
from applicative.protocols.dense import Axis, Dense, nest
from applicative.protocols.integration import counit
from applicative.protocols.kinds import F, G, H, I, R, Summed, Summed2
from applicative.stacked import sums_leafwise

__all__ = [
    "add",
    "dot",
    "generic_only",
    "linear",
    "mul_mm",
    "mul_mmt",
    "mul_mv",
    "mul_vm",
    "outer",
    "record_fast_paths",
    "scale",
    "sum_mul_mmt",
]

T = TypeVar("T")


def dot(a: Applicative[Summed, R], b: Applicative[Summed, R], ring: Ring[R] | None = None) -> R:
    """The inner product sum_i a_i b_i (the integral of a b for functions)."""
    r = _ring(ring)
    check_nesting("dot", r, ("a", a, 1), ("b", b, 1))
    if (fast := _dense("dot", "f,f->", r, a, b)) is not None:
        return cast(R, fast[0])
    return counit(a.pair(b).fmap(lambda p: r.mul(p[0], p[1])), r)


def outer(a: Applicative[F, R], b: Applicative[G, R], ring: Ring[R] | None = None) -> Applicative[F, Applicative[G, R]]:
    """The outer product (a b^T)_ij = a_i b_j."""
    r = _ring(ring)
    check_nesting("outer", r, ("a", a, 1), ("b", b, 1))
    if (fast := _dense("outer", "f,g->fg", r, a, b)) is not None:
        return _shaped(*fast)
    return a.fmap(lambda x: b.fmap(lambda y: r.mul(x, y)))


def mul_mv(
    m: Applicative[F, Applicative[Summed, R]], v: Applicative[Summed, R], ring: Ring[R] | None = None
) -> Applicative[F, R]:
    """Matrix times vector: (m v)_i = dot(m_i, v)."""
    r = _ring(ring)
    check_nesting("mul_mv", r, ("m", m, 2), ("v", v, 1))
    if (fast := _dense("mul_mv", "fg,g->f", r, m, v)) is not None:
        return _shaped(*fast)
    return m.fmap(lambda row: dot(row, v, r))


def mul_vm(
    v: Applicative[Summed, R], m: Applicative[Summed, Applicative[G, R]], ring: Ring[R] | None = None
) -> Applicative[G, R]:
    """Vector times matrix: v^T m = sum_i v_i m_i, a counit over the rows."""
    r = _ring(ring)
    check_nesting("mul_vm", r, ("v", v, 1), ("m", m, 2))
    if (fast := _dense("mul_vm", "f,fg->g", r, v, m)) is not None:
        return _shaped(*fast)
    scaled_rows = v.pair(m).fmap(lambda p: p[1].fmap(lambda x: r.mul(p[0], x)))
    return counit(scaled_rows, Pointwise(r))


def mul_mm(
    a: Applicative[F, Applicative[Summed, R]], b: Applicative[Summed, Applicative[H, R]], ring: Ring[R] | None = None
) -> Applicative[F, Applicative[H, R]]:
    """Matrix product: (a b)_i = mul_vm(a_i, b)."""
    r = _ring(ring)
    check_nesting("mul_mm", r, ("a", a, 2), ("b", b, 2))
    if (fast := _dense("mul_mm", "fg,gh->fh", r, a, b)) is not None:
        return _shaped(*fast)
    return a.fmap(lambda row: mul_vm(row, b, r))


def mul_mmt(
    a: Applicative[F, Applicative[Summed, R]], b: Applicative[H, Applicative[Summed, R]], ring: Ring[R] | None = None
) -> Applicative[H, Applicative[F, R]]:
    """Apply ``a`` to each row of ``b``: mul_mmt(a, b)_j = mul_mv(a, b_j), i.e. b a^T."""
    r = _ring(ring)
    check_nesting("mul_mmt", r, ("a", a, 2), ("b", b, 2))
    if (fast := _dense("mul_mmt", "fg,hg->hf", r, a, b)) is not None:
        return _shaped(*fast)
    return b.fmap(lambda row: mul_mv(a, row, r))


def sum_mul_mmt(
    a: Applicative[Summed, Applicative[G, Applicative[Summed2, R]]],
    b: Applicative[Summed, Applicative[I, Applicative[Summed2, R]]],
    ring: Ring[R] | None = None,
) -> Applicative[I, Applicative[G, R]]:
    """sum_f mul_mmt(a_f, b_f): contract over the outer structure and the innermost one.

    Multi-head attention's output projection, sum over heads of W_h o_h (W_o times the
    concatenated heads): written as one contraction, it is one matmul for a Vec.
    """
    r = _ring(ring)
    check_nesting("sum_mul_mmt", r, ("a", a, 3), ("b", b, 3))
    if (fast := _dense("sum_mul_mmt", "fgh,fih->ig", r, a, b)) is not None:
        return _shaped(*fast)
    products = a.pair(b).fmap(lambda p: mul_mmt(p[0], p[1], r))
    lifted: Pointwise[I, Applicative[G, R]] = Pointwise(Pointwise(r))
    return counit(products, lifted)


def linear(
    w: Applicative[G, Applicative[Summed, R]],
    c: Applicative[G, R],
    x: Applicative[Summed, R],
    ring: Ring[R] | None = None,
) -> Applicative[G, R]:
    """The affine map x -> W x + c (weights indexed [out][in], as in the reference)."""
    r = _ring(ring)
    check_nesting("linear", r, ("w", w, 2), ("c", c, 1), ("x", x, 1))
    return add(c, mul_mv(w, x, r), r)


def add(a: Applicative[F, T], b: Applicative[F, T], module: Module[T] | None = None) -> Applicative[F, T]:
    """The pointwise sum of two structures (of scalars, or of anything ``module`` adds)."""
    m = module if module is not None else arithmetic()
    check_nesting("add", None, ("a", a, 1), ("b", b, 1))
    if (fast := _on_coordinates("add", m, operator.add, a, b)) is not None:
        return cast(Applicative[F, T], fast)
    return a.pair(b).fmap(lambda p: m.add(*_alike("add", m, p[0], p[1])))


def scale(r: Real, a: Applicative[F, T], module: Module[T] | None = None) -> Applicative[F, T]:
    """The structure scaled by a real: fmap (scale r) a. ``r`` is a scalar (a number or a 0-d array)."""
    m = module if module is not None else arithmetic()
    if isinstance(r, Applicative) or jnp.ndim(r) != 0:
        got = type(r).__name__ if isinstance(r, Applicative) else f"an array of shape {jnp.shape(r)}"
        raise TypeError(f"scale: r must be a scalar (a number or a 0-d array), got {got}")
    check_nesting("scale", None, ("a", a, 1))
    if (fast := _on_coordinates("scale", m, lambda leaf: r * leaf, a)) is not None:
        return cast(Applicative[F, T], fast)
    return a.fmap(lambda x: m.scale(r, x))


# The dense formulas.

_use_fast_paths: ContextVar[bool] = ContextVar("use_fast_paths", default=True)
_fast_path_log: ContextVar[list[str] | None] = ContextVar("fast_path_log", default=None)


@contextlib.contextmanager
def generic_only() -> Iterator[None]:
    """Within this block every operation runs its generic definition.

    It acts when a function is traced: a function that ``jax.jit`` has traced before keeps its
    compiled path (JAX caches traces per function), so jit a fresh one, ``jax.jit(lambda x: f(x))``.
    """
    token = _use_fast_paths.set(False)
    try:
        yield
    finally:
        _use_fast_paths.reset(token)


@contextlib.contextmanager
def record_fast_paths() -> Iterator[list[str]]:
    """Within this block (at trace time), the names of the operations that ran their dense formula.

    >>> import numpy as np
    >>> from applicative import Dim, Vec, dot
    >>> class Seq(Dim): ...
    >>> v = Vec.from_array(np.ones(3), Seq)
    >>> with record_fast_paths() as taken:
    ...     _ = dot(v, v)
    >>> taken
    ['dot']
    """
    taken: list[str] = []
    token = _fast_path_log.set(taken)
    try:
        yield taken
    finally:
        _fast_path_log.reset(token)


def _log(op: str) -> None:
    if (taken := _fast_path_log.get()) is not None:
        taken.append(op)


def _ring(ring: Ring[R] | None) -> Ring[R]:
    return ring if ring is not None else arithmetic()


def _on_coordinates(op: str, module: Module[Any], f: Callable[..., Any], *xs: object) -> object | None:
    """``f`` leaf by leaf on the coordinates of structures of one shape, rebuilt around the result:
    a sum or scaling under ordinary arithmetic on dense structures. None unless every operand's
    dense levels are the first's (the same structures, tags, sizes and shapes) and their elements
    hold alike leaves that add leafwise (no structure whose ``pair`` is not a zip)."""
    if not (_use_fast_paths.get() and ordinary(module)):
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
    _log(op)
    return cast(object, nest(shells, jax.tree_util.tree_map(f, *elements)))


def _levels(x: object) -> tuple[list[Dense[Any, Any]], list[Level], object]:
    """The dense levels of ``x`` (outermost first), their axes, and the elements below them."""
    shells: list[Dense[Any, Any]] = []
    axes: list[Level] = []
    while isinstance(x, Dense) and (level := x.axes()) is not None:
        shells.append(x)
        axes.append(level)
        x = x.elements()
    return shells, axes, x


# The operand checks (trace-time Python: they never reach a compiled function).

_NESTING = {
    1: "a structure (a vector)",
    2: "a structure of structures (rows of columns)",
    3: "a structure of structures of structures (a stack of matrices)",
}


def check_nesting(op: str, ring: Ring[Any] | None, *operands: tuple[str, object, int]) -> None:
    """Raise a TypeError naming ``op`` unless each operand is nested as deep as its count of structure
    levels says, as far as its ``Dense`` levels show without computing; under ordinary arithmetic
    (``ring``), the elements below those levels must not be structures either (``*`` cannot multiply
    them). Structures whose elements are hidden are checked as the generic definition meets them."""
    for name, x, levels in operands:
        seen = x
        for depth in range(levels):
            if not isinstance(seen, Applicative):
                got = f"a {type(x).__name__}" if depth == 0 else _nesting(x)
                raise TypeError(f"{op}: argument {name} is {got}; expected {_NESTING[levels]}")
            if not isinstance(seen, Dense) or seen.axes() is None:
                break
            seen = seen.elements()
        else:
            if isinstance(ring, Arithmetic) and isinstance(seen, Applicative):
                raise TypeError(f"{op}: argument {name} is {_nesting(x)}; expected {_NESTING[levels]} of scalars")


def _nesting(x: object) -> str:
    """A structure described by its visible levels: "a Vec[Seq] of size 3 holding scalars"."""
    names, axes = [], 0
    while isinstance(x, Dense) and (level := x.axes()) is not None:
        names.append(_describe(level))
        axes += len(level)
        x = x.elements()
    if not names:
        return f"a {type(x).__name__}"
    if isinstance(x, jax.Array | np.ndarray):
        held = "scalars" if x.ndim == axes else f"arrays of shape {x.shape[axes:]}"
    else:
        held = f"{type(x).__name__} elements"
    return f"a {' of '.join(names)} holding {held}"


def _alike(op: str, module: Module[Any], x: T, y: T) -> tuple[T, T]:
    """Two elements about to be added, checked under ordinary arithmetic (which adds leaf by leaf) to
    have one pytree structure and leaves that broadcast together."""
    if not isinstance(module, Arithmetic) or _one_kind(x, y):
        return x, y
    raise TypeError(f"{op}: the arguments hold different elements, {_what(x)} and {_what(y)}; expected one shape")


def _one_kind(x: object, y: object) -> bool:
    """One pytree structure and leaves that broadcast together; a ``Shaped`` structure (a tree) counts
    as one leaf, matched by its type alone: ordinary arithmetic adds it through its own ``pair``."""
    structure: jax.tree_util.PyTreeDef = jax.tree_util.tree_structure(x, is_leaf=_is_shaped)
    if structure != jax.tree_util.tree_structure(y, is_leaf=_is_shaped):
        return False
    for u, w in zip(*(jax.tree_util.tree_leaves(e, is_leaf=_is_shaped) for e in (x, y)), strict=True):
        if _is_shaped(u) or _is_shaped(w):
            if type(u) is not type(w):
                return False
            continue
        try:
            jnp.broadcast_shapes(jnp.shape(u), jnp.shape(w))
        except ValueError:
            return False
    return True


def _is_shaped(x: object) -> bool:
    return isinstance(x, Shaped)


def _what(x: object) -> str:
    if isinstance(x, Applicative) or not hasattr(x, "shape"):
        return f"a {type(x).__name__}"
    return f"an array of shape {jnp.shape(x)}"


Level = tuple[Axis, ...]
"""The axes of one structure level (a Compose has two)."""


def _coordinates(op: str, x: object, levels: int) -> tuple[jax.Array, list[Level], list[Dense[Any, Any]]] | None:
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
            f"{op}: a {' of '.join(map(_describe, axes))} holds coordinates of shape {x.shape}, not {sizes}"
        )
    return x, axes, shells


def _dense(op: str, spec: str, ring: Ring[Any], *operands: object) -> tuple[jax.Array, list[Dense[Any, Any]]] | None:
    """``op`` by its dense formula: the result's coordinates and the structures that shape it
    (outermost first), or None where the formula does not apply. ``spec`` names the structure levels
    of the operands and of the result ("fg,g->f": a matrix and a vector give a vector); a level
    found in the operands but not in the result is contracted through its Gram matrices."""
    if not (_use_fast_paths.get() and ordinary(ring)):
        return None
    inputs, output = spec.split("->")
    names = inputs.split(",")
    views = [v for x, n in zip(operands, names, strict=True) if (v := _coordinates(op, x, len(n))) is not None]
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
                array = _fold_gram(array, levels[letter], position)
            position += len(levels[letter])
        arrays.append(array)

    # Operand order decides the layout out of the contraction (the left operand's free axes come
    # first, and under vmap so does a batched operand's batch axis): on the left goes an operand
    # that is contracted entirely (the vector of a matrix-vector product, usually the batched one),
    # else the one that holds the result's outer level. Then no transpose follows the contraction.
    def place(i: int) -> int:
        return 0 if set(names[i]) <= contracted else 1 if output[:1] in names[i] else 2

    chars = iter("abcdefghijklmnopqrstuvwxyz")
    axis_chars = {letter: "".join(next(chars) for _ in level) for letter, level in levels.items()}
    order = sorted(range(len(names)), key=place)
    subscripts = ",".join("".join(axis_chars[c] for c in names[i]) for i in order)
    result = jnp.einsum(f"{subscripts}->{''.join(axis_chars[c] for c in output)}", *(arrays[i] for i in order))
    _log(op)
    return result, [shells[letter] for letter in output]


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
    raise ValueError(f"{op}: dimension mismatch: {_describe(a)} vs {_describe(b)}")


def _shaped(coordinates: jax.Array, shells: list[Dense[Any, Any]]) -> Applicative[Any, Any]:
    """The nested structure of these shapes (outermost first) holding the coordinates."""
    return cast(Applicative[Any, Any], nest(shells, coordinates))


def _fold_gram(array: jax.Array, level: Level, position: int) -> jax.Array:
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


def _describe(level: Level) -> str:
    return " x ".join(str(axis) for axis in level)
