"""Construction checks: a model's parts agree with each other when it is built, not on first use.

A module whose parts meet (a ``Linear``'s weight and bias, an ``MLP``'s two maps, a head's query and
key) checks when it is built that they meet on one structure: the same kind, dimension tag and size
(``Vec[Model] of size 64``), as its ``Dense`` levels show them. A mismatch raises a ValueError that
names the module and both parts; without the check it would fail on first use, naming a linear
algebra operation (``mul_mmt``), or not at all. A block or a layer also checks that each part is of
its kind (``of_kind``: a None attention, an MLP in a norm's place, a TypeError naming the module, the
field, what it must be and what it got).

The checks read only static structure (kinds, tags, sizes: pytree metadata), never values, so they
add nothing to a compiled function. They run in the module's ``__post_init__``, that is when a user
(or an initialiser) builds it, and never when JAX rebuilds it (``applicative.records``: every output
of ``jit``, ``grad``, ``vmap``, ``tree_map`` and ``eval_shape``, around tracers or placeholders, is
made without ``__init__``): a training step's rebuilt model, optimiser state and gradients cost no
check. A module of one's own is checked the same way: a ``@record`` whose ``__post_init__`` raises.

A part is checked only where it is a ``Dense`` structure all of whose leaves are arrays (concrete or
traced: a tracer is a ``jax.Array``); a module built around anything else (``ShapeDtypeStruct``
templates, None) is built unchecked in that part.

>>> import numpy as np
>>> from applicative import Dim, Vec
>>> class Model(Dim): ...
>>> class Hidden(Dim): ...
>>> agree("Linear", ("the bias is", level(Vec.from_array(np.zeros(3), Hidden))),
...       ("the weight's outputs are", level(Vec.from_array(np.zeros((4, 2)), Model, Hidden))))
Traceback (most recent call last):
...
ValueError: Linear: the bias is a Vec[Hidden] of size 3 but the weight's outputs are a Vec[Model] of size 4
"""

from __future__ import annotations

import jax
import numpy as np

from applicative.operands import check_nesting
from applicative.protocols.algebra import ARITHMETIC
from applicative.protocols.dense import Axis, Dense

__all__ = [
    "Level",
    "agree",
    "level",
    "nested",
    "of_kind",
    "stacked",
    "visible",
]

Level = tuple[Axis, ...]
"""The axes of one structure level (a ``Compose`` has two), outermost first."""


def _array(leaf: object) -> bool:
    return isinstance(leaf, jax.Array | np.ndarray)


def visible(x: object) -> bool:
    """Whether ``x`` is a ``Dense`` structure whose leaves are all arrays (concrete or traced): the
    only parts checked. JAX's placeholders (None, object(), ShapeDtypeStruct, axis numbers) are not."""
    return isinstance(x, Dense) and all(_array(leaf) for leaf in jax.tree_util.tree_leaves(x))


def stacked(x: object) -> object:
    """The elements of a ``Dense`` structure of modules (a Vec of heads), stacked in one module; None
    where that does not show (see ``visible``)."""
    return x.elements() if visible(x) and isinstance(x, Dense) and x.axes() is not None else None


def level(x: object, depth: int = 0) -> Level | None:
    """The axes of ``x``'s structure ``depth`` levels in (0: the outermost; a weight indexed [out][in]
    has its outputs at 0, its inputs at 1); None where they do not show (see ``visible``)."""
    if not visible(x):
        return None
    seen: object = x
    for _ in range(depth):
        if not isinstance(seen, Dense) or seen.axes() is None:
            return None
        seen = seen.elements()
    if not isinstance(seen, Dense):
        return None
    return seen.axes()


def _key(axes: Level) -> tuple[tuple[str, type | None, int], ...]:
    # Kind, tag and size: static. A measure that is data (a tree's shape) is not compared: two trees
    # of one capacity meet through the generic definitions, which refine them.
    return tuple((axis.kind, axis.tag, axis.size) for axis in axes)


def _describe(axes: Level) -> str:
    return "a " + " x ".join(map(str, axes))


def agree(module: str, *parts: tuple[str, Level | None]) -> None:
    """Raise a ValueError naming ``module`` unless ``parts`` are one structure: each is a subject with
    its verb ("the bias is", "the weight's outputs are") and its ``level``; the message names the
    first that shows and the first that disagrees with it. Parts that do not show are skipped."""
    shown = [(subject, axes) for subject, axes in parts if axes is not None]
    for subject, axes in shown[1:]:
        first, first_axes = shown[0]
        if _key(axes) != _key(first_axes):
            raise ValueError(f"{module}: {first} {_describe(first_axes)} but {subject} {_describe(axes)}")


def of_kind(module: str, *parts: tuple[str, object, type | tuple[type, ...]]) -> None:
    """Raise a TypeError naming ``module`` unless each part (field, value, class or classes; ``type(None)``
    where the field may be None) is an instance of its class: a module built of parts of the wrong
    kind (a None attention, an MLP in a norm's place) is refused."""
    for field, value, kind in parts:
        if not isinstance(value, kind):
            kinds = kind if isinstance(kind, tuple) else (kind,)
            expected = " or ".join(k.__name__ for k in kinds if k is not type(None))
            expected += " or None" if type(None) in kinds else ""
            given = "None" if value is None else type(value).__name__
            raise TypeError(f"{module}: {field} must be of type {expected}, got {given}")


def nested(module: str, *parts: tuple[str, object, int]) -> None:
    """Raise a TypeError naming ``module`` unless each shown part (name, value, levels) is nested as
    deep as its count of structure levels says, with scalars below (a weight is a structure of
    structures of scalars, a bias a structure of scalars); parts that do not show are skipped."""
    check_nesting(module, ARITHMETIC, *((name, x, levels) for name, x, levels in parts if visible(x)))
