"""SparseMask: a mask of attention given by the pairs it lets through, so that attention over a sparse
structure (a graph's edges) runs in memory linear in the pairs, not in queries x keys.

A mask is a structure of structures of bools, one row per query over the keys (``applicative.nn``'s
``attention``); most of a sparse one is False. A ``SparseMask`` is such a mask held as its pairs:

    pairs()   (query, key, valid): for every pair slot, the query's and the key's coordinate (their
              position along the queries' and the keys' flattened levels) and whether the slot holds a
              pair (padding does not); pairs may come in any order, each at most once
    dense()   the same mask as a structure of structures of bools: the generic definition's operand
    levels()  the axes of its rows and columns, those of the queries and keys it is for

Attention takes a ``SparseMask`` where it takes a mask: its generic definition runs on ``dense()``, and
its formula for a weight per position (``applicative.nn._sparse_attention``) on the pairs alone; the two
are tested equal. ``Graph.edges()`` is one (``applicative.instances.graph``).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any

import jax

from applicative.protocols.dense import Axis

__all__ = ["SparseMask"]


class SparseMask(ABC):
    """A mask of attention held as the (query, key) pairs it lets through."""

    @abstractmethod
    def pairs(self) -> tuple[jax.Array, jax.Array, jax.Array]:
        """(query coordinate, key coordinate, valid) of every pair slot (int32, int32, bool; one axis)."""

    @abstractmethod
    def dense(self) -> Any:
        """The mask as a structure (the queries) of structures (the keys) of bools."""

    @abstractmethod
    def levels(self) -> tuple[tuple[Axis, ...], tuple[Axis, ...]]:
        """The axes of its rows and of its columns (``Dense.axes``): the queries' and the keys' levels whose
        coordinates ``pairs`` indexes (attention takes the pairs only where they are its operands')."""
