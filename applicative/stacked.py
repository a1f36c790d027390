"""The stacked storage convention, for authors of structures (``Vec``, ``Cheb`` and the finite
distributions use it).

A structure of n elements stores them as one element pytree with a leading
axis of length n on every leaf: a Vec of 3 scalars holds one array of shape
(3,), a Vec of 3 Vecs of 4 scalars one of shape (3, 4), a Vec of 3 pairs a
pair of arrays. Then

    fmap f    = vmap(f, data): jax.vmap on the stacked elements, keeping what a stack of
                structures whose shape is data shares (``vmap`` below)
    pair      = the tuple of the two stacked pytrees
    pure b    = b broadcast along a new leading axis (for a sampled structure: a Vec,
                a grid, a tree's leaves; a coefficient structure's pure is the constant
                function, b times the coefficients of 1: b in the first slot, zeros after)
    counit    = weighted_sum(module, weights, data, n)

``weighted_sum`` is one weighted reduction per leaf where the Module allows it
(ordinary arithmetic, lifted pointwise or not: ``sums_leafwise``), or else a
fold of the Module's ``scale`` and ``add`` over the elements (``element(data,
i)``), so a counit written with it is right for every Module it receives.
A structure whose leaves are not all coordinates (its shape is data, as a
tree's layout, or its ``pair`` is not a zip, as a distribution's) subclasses
``Shaped`` (``ProductPairing`` for the latter): its shape is never an element.
Sums of it are never taken leaf by leaf, and a linear map along a structure
(``along``: a Chebyshev transform, a pad, an evaluation) reaches it through its
own ``restack``, which keeps its shape and maps its values only; ``stack`` builds a stack of it
through its ``stacked_from``, and ``vmap`` maps a stack of it through its ``unstacked`` and
``stacking``, so that what its elements share (trees of one shape) is kept where JAX would
have rebuilt it from leaves.

Nested inputs need no knowledge of this layout: ``stack(elements)`` stacks a
list of equal-shaped elements (structures, arrays, numbers) into the stacked
pytree, so ``Vec.of([f, g], Seq)`` is a Vec of two functions and a user's
structure is built as ``Periodic(stack(elements), X, len(elements))``; a
structure of Vecs comes from a constructor that samples a function returning
Vecs (``fmap`` and ``from_function`` vmap it). ``element(data, i)`` is the
inverse, a ``Shaped`` structure among the elements answering by its own
``element`` (the trees of a stack of one shape keep it).

A leaf that is a structure's shape, not a value (a tree's layout, an extended
dtype) is read on the host by ``to_host`` (its stored words), and ``tangent(x)``
makes ``x`` a tangent for ``jax.jvp``: such leaves float0, as JAX wants them.

Validation, shared by the structures. A constructor passes its data through
``numeric`` (numbers only: an object or string array, a ragged list is a clear
error naming the constructor; ``floating`` promotes bools and integers where
the values must be real numbers, as a Chebyshev series' coefficients). An
operation that reads the stacked elements (``fmap``, ``counit``, indexing) calls
``check_stacked`` on the data and size it holds; the constructor cannot, because
JAX rebuilds structures through it around leaves not laid out as elements: the
inner levels of a nested structure carry the outer axes in front, ``jax.vmap``'s
outputs their batch axis, an optimiser's state reduced statistics (a check there
also doubled the time to rebuild a Funcformer and its Adam state, 0.53 to 1.1 ms).

>>> import jax.numpy as jnp
>>> from applicative import arithmetic
>>> float(weighted_sum(arithmetic(), jnp.array([0.5, 0.25]), jnp.array([2.0, 4.0]), 2))
2.0
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any, Literal, TypeVar, cast, overload

__all__ = [
    "ProductPairing",
    "Shaped",
    "along",
    "check_stacked",
    "element",
    "floating",
    "largest",
    "nested",
    "numeric",
    "stack",
    "stacked_size",
    "sums_leafwise",
    "tangent",
    "to_host",
    "vmap",
    "weighted_sum",
]

import jax
import jax.numpy as jnp
import numpy as np

from applicative.protocols.algebra import Module, Pointwise, ordinary
from applicative.protocols.applicative import ProductPairing, Shaped
from applicative.protocols.kinds import Dim, check_tag

T = TypeVar("T")


@overload
def numeric(x: object, what: str, *, host: Literal[False] = False) -> jax.Array: ...
@overload
def numeric(x: object, what: str, *, host: bool) -> jax.Array | np.ndarray: ...
def numeric(x: object, what: str, *, host: bool = False) -> jax.Array | np.ndarray:
    """``x`` (an array, a number, a list of numbers) as a JAX array (``host``: data not already on a
    device as a numpy array, to be laid out on the host first); a clear error naming ``what`` for
    anything else: object or string dtypes, ragged lists, other objects. Dtypes are kept (bool and
    integer data are legitimate: masks, token ids)."""
    if isinstance(x, jax.Array):  # tracers too: their dtype is numeric
        return x
    if any(isinstance(leaf, str | bytes) for leaf in jax.tree_util.tree_leaves(x)):  # (JAX reads "a" as a dtype)
        raise TypeError(f"{what}: expected an array of numbers, got text {x!r}")
    try:
        array = np.asarray(x) if host or isinstance(x, np.ndarray | np.generic) else jnp.asarray(x)
    except (TypeError, ValueError) as error:
        raise TypeError(f"{what}: expected an array of numbers, got {type(x).__name__} ({error})") from None
    if not (array.dtype == np.bool_ or jnp.issubdtype(array.dtype, np.number)):
        raise TypeError(
            f"{what}: expected an array of numbers (bool, integer, float or complex), got dtype {array.dtype}"
        )
    return np.asarray(array) if host else jnp.asarray(array)


def floating(x: jax.Array) -> jax.Array:
    """``x`` promoted to the default float (float64 under x64) if it holds bools or integers;
    floating and complex arrays are kept (float32 stays float32)."""
    return x if jnp.issubdtype(x.dtype, jnp.inexact) else x.astype(jnp.result_type(float))


def stacked_size(data: object, what: str) -> int:
    """The common length of the leading axes of ``data``'s leaves; a clear error if there is none."""
    sizes = {jnp.shape(leaf)[0] if jnp.ndim(leaf) else None for leaf in jax.tree_util.tree_leaves(data)}
    if len(sizes) != 1 or None in sizes:
        raise ValueError(
            f"{what}: leaves need one common leading axis, got lengths {sizes} (this takes elements already "
            "stacked; for a list of elements use .of, for an array .from_array)"
        )
    return cast(int, sizes.pop())


def check_stacked(data: object, size: int, what: str) -> None:
    """Raise unless every array leaf of ``data`` has a leading axis of length ``size``.

    Called by a structure's operations (at trace time, on shapes only), not by its constructor: JAX
    rebuilds structures around leaves that are not laid out this way (the output of ``jax.vmap``
    carries the batch axis in front, an optimiser's statistics may be reduced), and those are
    legitimate pytrees as long as no operation reads them as elements."""
    for leaf in jax.tree_util.tree_leaves(data):
        if isinstance(leaf, jax.Array | np.ndarray) and (leaf.ndim == 0 or leaf.shape[0] != size):
            raise ValueError(
                f"{what}: {size} elements, but a leaf of the data has shape {leaf.shape} (its leading axis must "
                "be the elements'; a batch of structures, such as the output of jax.vmap, is mapped with "
                "jax.vmap, not used as one structure)"
            )


def nested(
    what: str, array: jax.Array, tags: tuple[type[Dim], ...], shell: Callable[[Any, type[Dim], int], Any]
) -> Any:
    """The structure of structures holding ``array``, one tag per axis: ``shell(data, tag, size)``
    builds each level, from the innermost axis out (every level's leaves carry the outer axes too)."""
    for tag in tags:
        check_tag(tag, what)
    if not tags or array.ndim != len(tags):
        names = ", ".join(t.__name__ for t in tags)
        raise ValueError(f"{what}({names}): a {array.ndim}-D array needs {array.ndim} tags, one per axis")
    out: Any = array
    for axis in reversed(range(len(tags))):
        out = shell(out, tags[axis], array.shape[axis])
    return out


def stack(elements: Sequence[T], what: str = "stack") -> T:
    """The stacked pytree of ``elements`` (the inverse of ``element``): every leaf gains a leading axis
    of length len(elements). The elements must have one pytree structure (tags and sizes included)
    and equal leaf shapes; a clear error names the first that differs. Elements all on the host
    (numbers, numpy arrays) are stacked there and moved to the device once. A ``Shaped`` structure
    among them stacks itself (``Shaped.stacked_from``): trees stack as a stack that knows what they
    provably share (one shape), whatever each of them knew."""
    if isinstance(elements, jax.Array | str) or not isinstance(elements, Sequence):
        raise ValueError(f"{what}: needs a list of elements, got {type(elements).__name__}")
    if not elements:
        raise ValueError(f"{what}: needs at least one element, got an empty list")
    host = not any(isinstance(leaf, jax.Array) for x in elements for leaf in jax.tree_util.tree_leaves(x))
    elements = [jax.tree_util.tree_map(lambda leaf: numeric(leaf, what, host=host), x) for x in elements]
    first = jax.tree_util.tree_structure(elements[0], is_leaf=_shaped)  # (a Shaped structure checks its own)
    shapes = [jnp.shape(leaf) for leaf in jax.tree_util.tree_leaves(elements[0])]
    for i, x in enumerate(elements[1:], start=1):
        if str(structure := jax.tree_util.tree_structure(x, is_leaf=_shaped)) != str(first):
            raise ValueError(f"{what}: element {i} is {structure}, element 0 is {first}")
        if (other := [jnp.shape(leaf) for leaf in jax.tree_util.tree_leaves(x)]) != shapes:
            raise ValueError(f"{what}: element {i} has leaf shapes {other}, element 0 has {shapes}")
    return cast(T, _stacked(list(elements), what, host))


def _stacked(elements: list[Any], what: str, host: bool) -> Any:
    """``stack``'s recursion: the elements' structure level by level, a ``Shaped`` structure by its own hook."""
    first = elements[0]
    if isinstance(first, Shaped) and (built := first.stacked_from(elements, what)) is not None:
        return built
    structure: jax.tree_util.PyTreeDef
    parts, structure = jax.tree_util.tree_flatten(first, is_leaf=functools.partial(_inner_shaped, first))
    if jax.tree_util.treedef_is_leaf(structure) and parts and parts[0] is first:
        return jnp.asarray(np.stack(elements)) if host else jnp.stack(elements)
    columns: list[list[Any]] = [[] for _ in parts]
    for i, x in enumerate(elements):
        other: jax.tree_util.PyTreeDef
        own, other = jax.tree_util.tree_flatten(x, is_leaf=functools.partial(_inner_shaped, x))
        if other != structure:
            whole = [jax.tree_util.tree_structure(e) for e in (x, first)]
            raise ValueError(f"{what}: element {i} is {whole[0]}, element 0 is {whole[1]}")
        for column, part in zip(columns, own, strict=True):
            column.append(part)
    return jax.tree_util.tree_unflatten(structure, [_stacked(column, what, host) for column in columns])


def vmap(f: Callable[..., T], *stacks: Any, size: int | None = None) -> T:
    """``jax.vmap(f, axis_size=size)(*stacks)``: ``f`` on every element of stacked elements, the results
    stacked (a structure's ``fmap``), where what a ``Shaped`` structure's elements all share stays one
    value. A stack of trees of one shape is mapped tree by tree on that shape (``Shaped.unstacked``), and
    outputs that all hold one layout are stacked knowing it (``Shaped.stacking``): inside the map and out
    of it, such trees meet the tree they came from in the dense formulas and pair with it as a zip. A
    leaf that two inputs share (one layout in two trees) enters the map as one leaf, so what is one
    object outside is one inside. Without ``Shaped`` structures this is exactly ``jax.vmap``.

    What varies along the map is decided as JAX decides it: a leaf varies if it is traced by this map
    (computed from a mapped value); a value ``f`` closes over, or computes from such values alone, does
    not (JAX would broadcast it)."""
    leaves: list[Any] = []
    build_inputs = _plan(stacks, _unstacked, leaves, {})
    built: list[Callable[[list[Any], int], Any]] = []

    def body(*sliced: Any) -> list[Any]:
        out = f(*build_inputs(list(sliced), 1))
        trace = next((x._trace for x in sliced if isinstance(x, jax.core.Tracer)), None)

        def varies(leaf: Any) -> bool:
            return trace is not None and isinstance(leaf, jax.core.Tracer) and leaf._trace is trace

        out_leaves: list[Any] = []
        built.append(_plan(out, lambda x: x.stacking(varies), out_leaves, {}))
        return out_leaves

    stacked = jax.vmap(body, axis_size=size)(*leaves)
    n = size if size is not None else stacked_size(leaves, "stacked.vmap")
    return cast(T, built[-1](stacked, n))


def _unstacked(x: Shaped) -> tuple[Any, Callable[[Any, int], Any]] | None:
    """``Shaped.unstacked`` in ``_plan``'s form (a build that takes the stack's size too, unused)."""
    if (split := x.unstacked()) is None:
        return None
    varying, build = split
    return varying, lambda row, _: build(row)


Hook = Callable[[Shaped], tuple[Any, Callable[[Any, int], Any]] | None]
"""A ``Shaped`` structure's split for ``vmap``: what goes through the map, and how to build it back."""


def _plan(x: Any, hook: Hook, leaves: list[Any], seen: dict[int, int]) -> Callable[[list[Any], int], Any]:
    """How to build ``x`` back from ``leaves`` mapped (sliced going in, stacked n times coming out), to which
    ``x``'s leaves that go through the map are added, each object once: through ``hook`` where a ``Shaped``
    structure has a split of its own, as JAX flattens everything else."""
    if isinstance(x, Shaped) and (split := hook(x)) is not None:
        varying, build = split
        inner = _plan(varying, hook, leaves, seen)
        return lambda mapped, n: build(inner(mapped, n), n)
    children, treedef = jax.tree_util.tree_flatten(x, is_leaf=functools.partial(_inner_shaped, x))
    if jax.tree_util.treedef_is_leaf(treedef) and children and children[0] is x:
        i = seen.setdefault(id(x), len(leaves))
        if i == len(leaves):
            leaves.append(x)
        return lambda mapped, n: mapped[i]
    parts = [_plan(child, hook, leaves, seen) for child in children]
    return lambda mapped, n: jax.tree_util.tree_unflatten(treedef, [part(mapped, n) for part in parts])


def _inner_shaped(outer: object, x: object) -> bool:
    """Whether ``x`` is a ``Shaped`` structure inside ``outer`` (a pytree flattened one level of them deep)."""
    return x is not outer and isinstance(x, Shaped)


def element(data: T, i: int) -> T:
    """The i-th element of stacked ``data`` (a ``Shaped`` structure among them by its own ``element``)."""
    return cast(T, jax.tree_util.tree_map(lambda x: x.element(i) if _shaped(x) else x[i], data, is_leaf=_shaped))


def along(data: T, f: Callable[[Any], Any], what: str) -> T:
    """``f``, a map of an array's leading axes (a transform between coefficients and samples, a pad,
    an evaluation; the element axes after them kept), on every coordinate of stacked elements ``data``:
    leaf by leaf, and through its own ``restack`` on a ``Shaped`` structure among them (a tree's layout
    is never transformed; its values are). ``what`` names the operation in errors."""

    def one(x: Any) -> Any:
        return x.restack(lambda inner: along(inner, f, what), what) if isinstance(x, Shaped) else f(x)

    return cast(T, jax.tree_util.tree_map(one, data, is_leaf=_shaped))


def largest(x: object) -> jax.Array:
    """The largest value of a structure of scalars, or of stacked values: a softmax's shift, which keeps
    ``exp`` in range (any shift gives the same softmax). A structure with a ``largest`` of its own answers
    (a series: its values at the points ``fmap`` samples; a tree: its leaves, not its padding); otherwise
    the largest entry of its array leaves, a ``Shaped`` structure among them answering by its own
    ``largest``: a tree's layout (a distribution's weights) is never read as a value. A TypeError names a
    ``Shaped`` structure that has none."""
    own = getattr(x, "largest", None)
    if callable(own):
        return cast(jax.Array, own())
    if isinstance(x, Shaped):
        name = type(x).__name__
        raise TypeError(f"largest: a structure of type {name} has no largest value (its leaves are not values)")
    parts = jax.tree_util.tree_leaves(x, is_leaf=_shaped)
    return jnp.max(jnp.stack([largest(part) if _shaped(part) else jnp.max(part) for part in parts]))


def to_host(leaf: object) -> np.ndarray:
    """A concrete leaf as a numpy array; one of an extended dtype (a tree's layout, a PRNG key), which
    numpy cannot hold, as its stored words (``jax.random.key_data``): to compare or hash by value."""
    if isinstance(leaf, jax.Array) and jnp.issubdtype(leaf.dtype, jax.dtypes.extended):
        return np.asarray(jax.random.key_data(leaf))
    return np.asarray(leaf)


def tangent(x: T) -> T:
    """``x`` as a tangent for ``jax.jvp`` (or a cotangent): every leaf whose values are not real or complex
    numbers (a tree's layout, an integer) replaced by JAX's tangent of it, float0 zeros of its shape, so that
    ``jax.jvp(f, (t,), (stacked.tangent(dt),))`` takes a tree ``dt = t.with_elements(values)`` (a tangent tree
    holds no shape: it is read on its tree, ``DenseTree``'s module docstring, "Gradients")."""

    def one(leaf: Any) -> Any:
        if isinstance(leaf, jax.Array | np.ndarray) and not jnp.issubdtype(leaf.dtype, jnp.inexact):
            return np.zeros(jnp.shape(leaf), jax.dtypes.float0)
        return leaf

    return cast(T, jax.tree_util.tree_map(one, x))


def _shaped(x: object) -> bool:
    return isinstance(x, Shaped)


def _leafwise(module: Module[T]) -> bool:
    # Ordinary arithmetic adds and scales leaf by leaf, and so does its pointwise lifting to
    # structures that zip; any other Module is folded element by element.
    if isinstance(module, Pointwise):
        return _leafwise(module.inner)
    return ordinary(module)


def sums_leafwise(module: Module[T], data: object) -> bool:
    """Whether stacked elements may be summed leaf by leaf in ``module``: it is ordinary arithmetic
    (lifted pointwise or not) and the elements hold no ``Shaped`` structure (whose leaves are not
    all coordinates)."""
    if not _leafwise(module):
        return False
    return not any(_shaped(node) for node in jax.tree_util.tree_leaves(data, is_leaf=_shaped))


def weighted_sum(module: Module[T], weights: jax.Array | None, data: T, n: int) -> T:
    """sum_i w_i x_i over the n stacked elements x_i of ``data`` (w_i = 1 when ``weights`` is None)."""
    if sums_leafwise(module, data):
        if weights is None:
            return cast(T, jax.tree_util.tree_map(lambda leaf: jnp.sum(leaf, axis=0), data))
        # A product and a sum, not a tensordot: both fuse with their neighbours, and so does the
        # gradient (a tensordot's is an outer product, materialised: attention's n x n weights).
        return cast(T, jax.tree_util.tree_map(lambda leaf: jnp.sum(_along(_like(weights, leaf), leaf) * leaf, 0), data))
    if weights is None:
        return functools.reduce(module.add, (element(data, i) for i in range(n)))
    return functools.reduce(module.add, (module.scale(weights[i], element(data, i)) for i in range(n)))


def _along(weights: jax.Array, leaf: jax.Array) -> jax.Array:
    """The weights shaped to scale ``leaf`` along its leading axis."""
    return jnp.reshape(weights, (-1,) + (1,) * (jnp.ndim(leaf) - 1))


def _like(weights: jax.Array, leaf: jax.Array) -> jax.Array:
    # Float elements keep their dtype (float32 stays float32); integer elements are promoted.
    return weights.astype(leaf.dtype) if jnp.issubdtype(leaf.dtype, jnp.inexact) else weights
