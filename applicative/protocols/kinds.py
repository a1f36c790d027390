"""Higher kinds by the brand encoding, and dimension tags.

Python has no higher-kinded type variables, so a structure ``Vec[N, A]`` is
also seen as ``Applicative[VecOf[N], A]``: the *brand* ``VecOf[N]`` is a
phantom class standing for the type constructor ``Vec N``. Generic code is
typed over brands,

    mul_mm(a: Applicative[F, Applicative[G, R]],
           b: Applicative[G, Applicative[H, R]]) -> Applicative[F, Applicative[H, R]]

and plain ``mypy --strict`` then rejects a transposed weight (it cannot solve
``G``) or a pairing of two different dimension tags, with no plugin.

A type class on the type constructor is a base class of the brand. The one
the library needs is ``Counit`` (Haskell's ``Counit f =>``): a brand whose
structures can sum their elements subclasses ``Measured``, and every
operation that sums (``dot``, ``mul_mm``, attention, ...) types the brand it
sums over with a type variable bound to ``Measured`` (``Summed``). A
structure with no counit is then rejected by mypy where it would be summed:

    class VecOf(Measured, Generic[N]): ...      # Vec has a counit
    class StreamOf: ...                         # an infinite stream has none

A dimension tag is a user-declared subclass of ``Dim``; it is a type, so it
takes part in the brand, and it is also kept at run time, so that mismatched
sizes give an error naming both tags.

>>> class Seq(Dim): ...
>>> Seq.__name__
'Seq'
"""

from __future__ import annotations

from typing import TypeVar

__all__ = [
    "A",
    "A_co",
    "B",
    "C",
    "Dim",
    "F",
    "G",
    "H",
    "I",
    "K",
    "L",
    "M",
    "Measured",
    "N",
    "R",
    "Summed",
    "Summed2",
    "check_tag",
]


class Dim:
    """Base class of dimension tags: declare ``class Seq(Dim): ...`` and use ``Seq``
    as a type (``Vec[Seq, A]``) and as a value (``vector(x, Seq)``)."""


class Measured:
    """Base class of the brands of structures with a counit (a measure to sum their elements
    against): ``class VecOf(Measured, Generic[N])``. Operations that sum ask for it in their types."""


def check_tag(tag: object, what: str) -> None:
    """Raise a clear error unless ``tag`` is a proper subclass of ``Dim`` (``Dim`` itself names no
    dimension: two structures tagged ``Dim`` would pair whatever they mean)."""
    if not (isinstance(tag, type) and issubclass(tag, Dim)) or tag is Dim:
        raise TypeError(
            f"{what}: dimension tag must be a subclass of Dim, not Dim itself (class Seq(Dim): ...), got {tag!r}"
        )


# Type variables shared by the protocol layer. Brands (F, G, H, I) and
# dimension tags (N, M, K) are invariant: a VecOf[Seq] is never a
# VecOf[Model]. Elements are covariant: a Vec of Vecs is an Applicative of
# Applicatives.
F = TypeVar("F")
G = TypeVar("G")
H = TypeVar("H")
I = TypeVar("I")  # noqa: E741  (the reference's name for the query structure)
N = TypeVar("N", bound=Dim)
M = TypeVar("M", bound=Dim)
K = TypeVar("K", bound=Dim)
L = TypeVar("L", bound=Dim)
Summed = TypeVar("Summed", bound=Measured)  # a brand an operation sums over
Summed2 = TypeVar("Summed2", bound=Measured)  # a second one (sum_mul_mmt sums over two)
A = TypeVar("A")
A_co = TypeVar("A_co", covariant=True)
B = TypeVar("B")
C = TypeVar("C")
R = TypeVar("R")
