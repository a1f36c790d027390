"""Operations that sum need a counit: a user's structure without one (its brand is not Measured)
is rejected by mypy where it would be summed, and accepted where nothing is summed."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

import jax

from applicative import Applicative, Dim, Vec, add, counit, dot, mul_mv, mul_vm
from applicative.nn import attention

A = TypeVar("A")
B = TypeVar("B")


class StreamOf:
    """Brand of an infinite stream (no measure to sum against)."""


class Stream(Applicative[StreamOf, A]):
    def __init__(self, head: A) -> None:
        self.head = head

    def fmap(self, f: Callable[[A], B]) -> Stream[B]:
        return Stream(f(self.head))

    def pair(self, other: Applicative[StreamOf, B]) -> Stream[tuple[A, B]]:
        assert isinstance(other, Stream)
        return Stream((self.head, other.head))

    def pure(self, b: B) -> Stream[B]:
        return Stream(b)


class Model(Dim): ...


s: Stream[jax.Array] = Stream(jax.numpy.ones(()))
rows: Vec[Model, Stream[jax.Array]] = Vec.stack(s, Model)
add(s, s)  # nothing is summed: fine
dot(s, s)  # E: Value of type variable "Summed" of "dot" cannot be "StreamOf"
counit(s)  # E: Value of type variable "Summed" of "counit" cannot be "StreamOf"
mul_mv(rows, s)  # E: Value of type variable "Summed" of "mul_mv" cannot be "StreamOf"
mul_vm(s, Stream(s))  # E: Value of type variable "Summed" of "mul_vm" cannot be "StreamOf"
attention(rows, rows, rows)  # E: Value of type variable "H" of "attention" cannot be "StreamOf"
