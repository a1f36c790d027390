"""The composition sweep (issue 32, part 4): structures built from structures, as users build them.

For every ordered pair (Outer, Inner) of the zoo (``Vec``, ``Cheb``, ``DenseTree``, ``Tree``, ``Graph``,
``Distribution``, ``Compose`` of a Vec and a Cheb) and two structures written the way the guides teach
(``Mesh``, a user's nodal structure whose measure is data, tests/applicative/mesh.py, and ``Fourier``, a
user's coefficient structure, not nodal, whose transforms map its values through ``stacked.along``,
tests/applicative/fourier.py), the composite Outer[Inner[float64]] is checked three ways:

    laws       every law the composite claims, on one fixed triple, the element maps affine maps of
               the inner structures (exact on a Cheb), the element Module the inner structures' own
    algebra    every operation of ``applicative.linalg`` with the composite as the matrix (or a
               stack of composites for ``each_mul_mmt`` and ``sum_mul_mmt``, the composite as one vector
               for ``dot``)
    attention  ``nn.attention`` with queries on Outer, keys and values on Inner

Each operation runs eagerly and under a fresh ``jax.jit``, and is compared, to 1e-12 in float64, with
the generic definition (``generic_only``) computed through the recursive specification: the same
operands with every ``DenseTree`` replaced by the ``Tree`` of its shape and values. One jitted function
a pair computes every operation and its specification (one compile per pair). Where every level is a
coordinate structure (no Distribution), the specification is checked against float64 numpy: each
level's coordinates (a tree's values on the 4 cells of the depth-2 dyadic grid) contracted through its
Gram matrix. Results are compared as values: DenseTrees as their Trees (whatever their capacity),
distributions as measures (outcomes merged, which jit does not do).

Sizes are small (2 to 4 elements a level; a Fourier series has 4 coefficients, all free: its products
have degree at most 4, which its 8 points integrate exactly); a Cheb has 4 coefficients of which only the first 2 are
nonzero (``Axis.exact``: products of degree below 4, where the dense formula, the exact integral,
equals the generic one, which truncates products to 4 coefficients). Attention's values on a Cheb
are constant along it for the same reason (its weights, exp of a line sampled and transformed
back, hold all 4 coefficients).

Pairs that are not meaningful say why (``NOT_MEANINGFUL``) and assert the error the library gives.

``python -m tests.applicative.test_composition`` prints the table: pair, operations checked, worst
error eager and under jit (largest |x - y| / max(1, |y|) over every leaf, against the specification)
and every failure.
"""

from __future__ import annotations

import dataclasses
import functools
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any

import hypothesis.strategies as st
import jax
import jax.numpy as jnp
import numpy as np
import numpy.polynomial.chebyshev as C
import pytest

from applicative import (
    ARITHMETIC,
    Cheb,
    Compose,
    DenseTree,
    Dim,
    Distribution,
    Graph,
    Leaf,
    Node,
    Pointwise,
    Tree,
    Vec,
    add,
    counit,
    dot,
    each_mul_mmt,
    generic_only,
    linear,
    mul_mm,
    mul_mmt,
    mul_mv,
    mul_vm,
    nn,
    outer,
    record_fast_paths,
    scale,
    sum_mul_mmt,
)
from applicative.instances.distribution import MIXTURE
from applicative.instances.tree import Shape
from applicative.laws import DENSE_LAWS, LAWS, Maps, check_law, check_laws, claimed_laws
from applicative.protocols import applicative as pairing
from applicative.protocols import functor, integration
from applicative.stacked import element
from tests.applicative.fourier import Fourier
from tests.applicative.fourier import gram as fourier_gram
from tests.applicative.mesh import Mesh

jax.config.update("jax_enable_x64", True)  # (tests/conftest.py does too; here for the script)

pytestmark = pytest.mark.slow  # about 3.5 CPU-minutes: run by CI after the suite (pyproject.toml)

TOLERANCE = 1e-12

# The zoo. Each kind has an outer and an inner form (other tags, nodes, tree shapes), so that the two
# levels of a pair never coincide; feature levels ("key", "value", "k", "head") are Vecs. Every free
# size is 4 (a Vec's, a Mesh's nodes, a DenseTree's capacity, a Cheb's coefficients): eager dispatch
# compiles each small program once per shape, and shared shapes make the sweep a third cheaper.

KINDS = ("Vec", "Cheb", "DenseTree", "Tree", "Graph", "Distribution", "Compose", "Mesh", "Fourier")
PAIRS = [(o, i) for o in KINDS for i in KINDS]


class Row(Dim): ...


class Col(Dim): ...


class X(Dim): ...


class Y(Dim): ...


class Chan(Dim): ...


class Chan2(Dim): ...


class U(Dim): ...


class V(Dim): ...


class S(Dim): ...


class T(Dim): ...


class FX(Dim): ...


class FY(Dim): ...


class Key(Dim): ...


class Val(Dim): ...


class K(Dim): ...


class Head(Dim): ...


VEC = {"outer": (Row, 4), "inner": (Col, 4), "key": (Key, 2), "value": (Val, 2), "k": (K, 2), "head": (Head, 2)}
CHEB = {"outer": X, "inner": Y}
FOURIER = {"outer": FX, "inner": FY}
COMPOSE = {"outer": (Chan, U), "inner": (Chan2, V)}  # Vec (2) of Cheb (4)
MESH = {"outer": (S, (0.0, 0.2, 0.7, 1.0)), "inner": (T, (0.0, 0.4, 0.5, 1.0))}
DENSE_TREE: dict[str, Shape] = {"outer": (None, (None, None)), "inner": ((None, None), None)}
TREE: dict[str, Shape] = {"outer": ((None, None), None), "inner": (None, (None, None))}
CAPACITY = 4  # DenseTrees of 3 leaves and a padding slot; Graphs of 3 nodes and a padding slot
GRAPH = {"outer": [[0, 1, 2], [1, 2, 0]], "inner": [[0, 2], [1, 1]]}  # a directed cycle; two edges into node 1
PROBABILITIES = {"outer": (0.25, 0.75), "inner": (0.6, 0.4)}


def count(kind: str, role: str) -> int:
    """How many elements a structure of this kind holds (a Cheb: its 2 free coefficients)."""
    fixed = {"Cheb": 2, "DenseTree": 3, "Tree": 3, "Graph": 3, "Distribution": 2, "Compose": 4, "Fourier": 4}
    if kind == "Vec":
        return VEC[role][1]
    if kind == "Mesh":
        return len(MESH[role][1])
    return fixed[kind]


def zero_like(e: Any) -> Any:
    # A Cheb's zero coefficients. Distributions have no zero of their own size (the point mass at 0
    # has one outcome, and coefficients are stacked): a Cheb of distributions is not meaningful
    # (NOT_MEANINGFUL), built only to check its error, its coefficients repeated (``cheb``).
    return e if isinstance(e, Distribution) else ARITHMETIC.zero(e)


def cheb(coefficients: list[Any], tag: type[Dim], constant: bool) -> Cheb[Any, Any]:
    """A Cheb of 4 coefficients, the given two first and zeros after (``constant``: only the first)."""
    c0, c1 = coefficients
    z = zero_like(c0)
    pad = [c1, c0] if isinstance(c0, Distribution) else [z, z]
    return Cheb.of([c0, z if constant and not isinstance(c0, Distribution) else c1, *pad], tag)


def tree_of(shape: Shape, values: Iterator[Any]) -> Tree[Any]:
    """The Tree of ``shape`` holding ``values`` at its leaves, left to right."""
    return Leaf(next(values)) if shape is None else Node(tree_of(shape[0], values), tree_of(shape[1], values))


def build(kind: str, role: str, elements: list[Any], spec: bool, constant: bool = False) -> Any:
    """The structure of this kind and role holding ``elements``; ``spec``: a DenseTree as the Tree of its
    shape and values (the recursive specification); ``constant``: a Cheb constant along its variable."""
    if kind == "Vec":
        return Vec.of(elements, VEC[role][0])
    if kind == "Cheb":
        return cheb(elements, CHEB[role], constant)
    if kind == "DenseTree":
        return tree_of(DENSE_TREE[role], iter(elements)) if spec else DenseTree.of(DENSE_TREE[role], elements, CAPACITY)
    if kind == "Tree":
        return tree_of(TREE[role], iter(elements))
    if kind == "Graph":  # (its own specification: no other structure gives its generic definitions)
        return Graph.from_edges(GRAPH[role], elements, capacity=CAPACITY, edge_capacity=CAPACITY)
    if kind == "Distribution":
        return Distribution(elements, np.array(PROBABILITIES[role]))
    if kind == "Compose":
        channel, variable = COMPOSE[role]
        functions = [cheb(elements[:2], variable, constant), cheb(elements[2:], variable, constant)]
        return Compose(Vec.of(functions, channel))
    if kind == "Mesh":
        tag, nodes = MESH[role]
        return Mesh.of(elements, tag, nodes)
    if kind == "Fourier":
        return Fourier.of(elements, FOURIER[role])
    raise ValueError(kind)


Level = tuple[str, str]
"""(kind, role) of one structure level."""


def nested(levels: list[Level], seed: int, spec: bool, constant: bool = False) -> Any:
    """The structure of these levels (outermost first) holding float64 normal draws; the same seed
    gives the same values, as the library's structure or as its specification."""
    rng = np.random.default_rng(seed)

    def make(rest: list[Level], top: bool) -> Any:
        if not rest:
            return jnp.asarray(rng.normal())
        (kind, role), inner = rest[0], rest[1:]
        return build(kind, role, [make(inner, False) for _ in range(count(kind, role))], spec, constant and top)

    return make(levels, True)


def operands(o: str, i: str, spec: bool) -> tuple[dict[str, Any], dict[str, BaseException]]:
    """The operands of every operation of the pair (Outer o, Inner i), the composite m = o[i[float]]
    among them, and the errors of those that could not be built."""
    out, inn = (o, "outer"), (i, "inner")
    k, head, key, value = ("Vec", "k"), ("Vec", "head"), ("Vec", "key"), ("Vec", "value")
    levels: dict[str, list[Level]] = {
        "m": [out, inn],
        "m2": [out, inn],
        "vo": [out],
        "vi": [inn],
        "w": [inn, k],  # i[Vec_K]: m w
        "p": [k, out],  # Vec_K[o]: p m
        "b": [k, inn],  # Vec_K[i]: m applied to each row of b, and b to each row of m
        "heads": [head, out, inn],  # a stack of composites
        "hb": [head, k, inn],
        "queries": [out, key],
        "keys": [inn, key],
        "values": [inn, value],
    }
    built: dict[str, Any] = {}
    errors: dict[str, BaseException] = {}
    for seed, (name, ls) in enumerate(levels.items()):
        try:
            built[name] = nested(ls, seed, spec, constant=name == "values")
        except Exception as error:  # (reported by the operations that need it)
            errors[name] = error
    return built, errors


# The operations: the composite as the matrix (or the stack) operand; each names its operands.

OPS: dict[str, tuple[tuple[str, ...], Callable[..., Any]]] = {
    "dot": (("m", "m2"), lambda m, m2: dot(Compose(m), Compose(m2))),  # the composite as one vector
    "outer": (("vo", "vi"), outer),
    "mul_mv": (("m", "vi"), mul_mv),
    "mul_vm": (("vo", "m"), mul_vm),
    "mul_mm": (("m", "w"), mul_mm),
    "mul_mm'": (("p", "m"), mul_mm),
    "mul_mmt": (("m", "b"), mul_mmt),
    "mul_mmt'": (("b", "m"), mul_mmt),
    "each_mul_mmt": (("heads", "b"), each_mul_mmt),
    "sum_mul_mmt": (("heads", "hb"), sum_mul_mmt),
    "add": (("m", "m2"), add),
    "scale": (("m",), lambda m: scale(-1.5, m)),
    "linear": (("m", "vo", "vi"), linear),
    "attention": (("queries", "keys", "values"), nn.attention),
}


def run(
    x: dict[str, Any],
    errors: dict[str, BaseException],
    unbuilt: dict[str, BaseException],
    dense: set[str] | None = None,
) -> dict[str, Any]:
    """Every operation on the operands; one that raises is recorded in ``errors`` (at trace time under
    jit) and left out, and so is one whose operand could not be built (with that error). ``dense``
    collects the operations that ran a dense formula somewhere (``record_fast_paths``)."""
    results = {}
    for name, (args, op) in OPS.items():
        if missing := [a for a in args if a in unbuilt]:
            errors[name] = unbuilt[missing[0]]
            continue
        try:
            with record_fast_paths() as taken:
                results[name] = op(*(x[a] for a in args))
        except Exception as error:  # (recorded, and reported by the caller)
            errors[name] = error
            continue
        if taken and dense is not None:
            dense.add(name)
    return results


# Not meaningful, with the reason and the error the library gives (asserted).

NOT_MEANINGFUL: dict[tuple[str, str], tuple[str, type[Exception], str]] = {
    (outer_kind, "Distribution"): (
        "a series (a Cheb, a Compose of a Vec and a Cheb, a user's Fourier series) is a linear map of its values: "
        "its coefficients are signed combinations of samples. Distributions under ordinary arithmetic are no "
        "vector space (a sum is the law of an independent sum: X + X' is not 2 X, and nothing undoes it), "
        "so a series cannot hold distributions: building one (through stacked.along) is a TypeError naming them",
        TypeError,
        "Distribution",
    )
    for outer_kind in ("Cheb", "Compose", "Fourier")
}
"""Pairs whose every operation must raise (type and a word of the message), and why."""

DEGENERATE_ATTENTION = (
    "keys and values on a Distribution: its pair is the independent product, so each key's weight meets "
    "every value, not its own; attention degenerates to E[values] for every query (asserted)"
)


# Comparison: results in a canonical host form, DenseTrees as Trees, Distributions merged.


class Mismatch(AssertionError):
    """Two results differ in structure (kind, tag, size, shape)."""


def canon(x: object) -> Any:
    """A nested Python form of a result: kinds, tags and shapes as text, values as float64 arrays,
    DenseTrees as their Trees, a Distribution as its outcomes merged (within 1e-9) and sorted."""
    if isinstance(x, DenseTree):
        return canon(x.to_tree())
    if isinstance(x, Leaf):
        return ("Leaf", canon(x.value))
    if isinstance(x, Node):
        return ("Node", canon(x.left), canon(x.right))
    if isinstance(x, Compose):
        return ("Compose", canon(x.outer))
    if isinstance(x, Graph):
        return ("Graph", x.edge_index().tolist(), [canon(element(x.data, i)) for i in range(x.num_nodes)])
    if isinstance(x, Vec | Cheb | Mesh | Fourier):
        size = x.size
        return (type(x).__name__, x.tag.__name__, size, [canon(element(x.data, i)) for i in range(size)])
    if isinstance(x, Distribution):
        items = sorted(((canon(o), float(p)) for o, p in x.items()), key=lambda item: tuple(flat(item[0])))
        merged: list[tuple[Any, float]] = []
        for outcome, p in items:
            if merged and np.allclose(flat(merged[-1][0]), flat(outcome), rtol=1e-9, atol=1e-9):
                merged[-1] = (merged[-1][0], merged[-1][1] + p)
            else:
                merged.append((outcome, p))
        return ("Distribution", merged)
    if isinstance(x, tuple):
        return tuple(canon(e) for e in x)
    return np.asarray(x, np.float64)


def flat(c: Any) -> list[float]:
    """The numbers of a canonical form, in order."""
    if isinstance(c, np.ndarray):
        return [float(v) for v in c.ravel()]
    if isinstance(c, tuple | list):
        return [v for e in c for v in flat(e)]
    return [float(c)] if isinstance(c, float) else []


def distance(a: Any, b: Any, at: str = "") -> float:
    """The largest |a - b| / max(1, |b|) over the numbers of two canonical forms; Mismatch if their
    structures differ."""
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        if not (isinstance(a, np.ndarray) and isinstance(b, np.ndarray)) or a.shape != b.shape:
            raise Mismatch(f"at {at or 'the top'}: {describe(a)} vs {describe(b)}")
        return float(np.max(np.abs(a - b) / np.maximum(1.0, np.abs(b)), initial=0.0))
    if isinstance(a, float) and isinstance(b, float):
        return abs(a - b) / max(1.0, abs(b))
    if isinstance(a, str | int) or isinstance(b, str | int):
        if a != b:
            raise Mismatch(f"at {at or 'the top'}: {a!r} vs {b!r}")
        return 0.0
    if type(a) is not type(b) or len(a) != len(b):
        raise Mismatch(f"at {at or 'the top'}: {describe(a)} vs {describe(b)}")
    return max((distance(x, y, f"{at}[{k}]") for k, (x, y) in enumerate(zip(a, b, strict=True))), default=0.0)


def describe(c: Any) -> str:
    if isinstance(c, np.ndarray):
        return f"an array of shape {c.shape}"
    if isinstance(c, tuple) and c and isinstance(c[0], str):
        return " ".join(str(e) for e in c if isinstance(e, str | int)) + (
            f" of {len(c[-1])}" if isinstance(c[-1], list) else ""
        )
    return f"a {type(c).__name__} of {len(c)}" if isinstance(c, tuple | list) else repr(c)


# The numpy reference: each level's coordinates and Gram matrix.


def cheb_gram(n: int) -> np.ndarray:
    def integral(c: np.ndarray) -> float:
        antiderivative = C.chebint(c)
        return float(C.chebval(1.0, antiderivative) - C.chebval(-1.0, antiderivative))

    basis = np.eye(n)
    return np.array([[integral(C.chebmul(basis[i], basis[j])) for j in range(n)] for i in range(n)])


GRID = 4
"""Tree levels are compared as their values on the 4 cells of the depth-2 dyadic grid."""


def gram(kind: str, role: str) -> np.ndarray:
    """The Gram matrix of a level in the basis ``coordinates`` uses."""
    if kind == "Vec":
        return np.eye(VEC[role][1])
    if kind == "Cheb":
        return cheb_gram(4)
    if kind == "Compose":
        return np.kron(np.eye(2), cheb_gram(4))
    if kind in ("DenseTree", "Tree"):
        return np.eye(GRID) / GRID
    if kind == "Graph":
        return np.eye(3)  # a measure of 1 a node, on the 3 nodes (padding has no coordinate)
    if kind == "Fourier":
        return np.diag(fourier_gram(4))  # the integrals of the squared basis functions: 2 pi, pi, pi, pi
    if kind == "Mesh":
        nodes = np.array(MESH[role][1])
        return np.diag(np.trapezoid(np.eye(len(nodes)), nodes, axis=1))  # the integrals of the hat functions
    raise ValueError(f"{kind} has no coordinates")


def coordinates(x: object) -> np.ndarray:
    """One axis per structure level (a Compose's two flattened into one, a tree's values on the grid)."""
    if isinstance(x, DenseTree):
        return coordinates(x.to_tree())
    if isinstance(x, Tree):

        def cells(t: Tree[Any], n: int) -> list[np.ndarray]:
            if isinstance(t, Leaf):
                return [coordinates(t.value)] * n
            assert isinstance(t, Node)
            assert n > 1, "a tree deeper than the grid"
            return cells(t.left, n // 2) + cells(t.right, n // 2)

        return np.stack(cells(x, GRID))
    if isinstance(x, Graph):
        return np.stack([coordinates(element(x.data, i)) for i in range(x.num_nodes)])
    if isinstance(x, Compose):
        a = coordinates(x.outer)
        return a.reshape(a.shape[0] * a.shape[1], *a.shape[2:])
    if isinstance(x, Vec | Cheb | Mesh | Fourier):
        return np.stack([coordinates(element(x.data, i)) for i in range(x.size)])
    assert not isinstance(x, Distribution), "a Distribution has no coordinates"
    return np.asarray(x, np.float64)


NUMPY: dict[str, Callable[[dict[str, np.ndarray], np.ndarray, np.ndarray], np.ndarray]] = {
    # a: the operands' coordinates; go, gi: the Gram matrices of the outer and the inner level.
    "dot": lambda a, go, gi: np.array(np.sum(a["m"] * (go @ a["m2"] @ gi))),
    "outer": lambda a, go, gi: np.outer(a["vo"], a["vi"]),
    "mul_mv": lambda a, go, gi: a["m"] @ gi @ a["vi"],
    "mul_vm": lambda a, go, gi: a["vo"] @ go @ a["m"],
    "mul_mm": lambda a, go, gi: a["m"] @ gi @ a["w"],
    "mul_mm'": lambda a, go, gi: a["p"] @ go @ a["m"],
    "mul_mmt": lambda a, go, gi: a["b"] @ gi @ a["m"].T,
    "mul_mmt'": lambda a, go, gi: a["m"] @ gi @ a["b"].T,
    "each_mul_mmt": lambda a, go, gi: np.einsum("kj,ji,hoi->hko", a["b"], gi, a["heads"]),
    "sum_mul_mmt": lambda a, go, gi: np.einsum("hoi,ij,hkj->ko", a["heads"], gi, a["hb"]),
    "add": lambda a, go, gi: a["m"] + a["m2"],
    "scale": lambda a, go, gi: -1.5 * a["m"],
    "linear": lambda a, go, gi: a["vo"] + a["m"] @ gi @ a["vi"],
}
"""Every operation but attention in float64 numpy."""


def numpy_reference(o: str, i: str, x: dict[str, Any]) -> dict[str, np.ndarray]:
    """The numpy values of the operations whose operands were built, from their (host) coordinates."""
    go, gi = gram(o, "outer"), gram(i, "inner")
    a = {name: coordinates(value) for name, value in jax.device_get(x).items()}
    return {name: f(a, go, gi) for name, f in NUMPY.items() if all(n in a for n in OPS[name][0])}


# Laws: the element maps act on the inner structures (affine: exact on a Cheb), in their Module.


def rowwise(f: Callable[[jax.Array], jax.Array]) -> Callable[[Any], Any]:
    return lambda row: row.fmap(f)


def law_sides(law: str, maps: Maps, x: Any, y: Any, z: Any) -> tuple[object, object]:
    """Both sides of a law on (x, y, z), as ``applicative.laws`` states it: for a failure's diagnosis."""
    m = maps.module
    sides: dict[str, Callable[[], tuple[object, object]]] = {
        "functor identity": lambda: functor.identity_law(x),
        "functor composition": lambda: functor.composition_law(x, maps.f, maps.g),
        "pair naturality": lambda: pairing.naturality_law(x, y, maps.f, maps.g),
        "pair associativity": lambda: pairing.associativity_law(x, y, z),
        "pair left unit": lambda: pairing.left_unit_law(y, 0.0),
        "pair right unit": lambda: pairing.right_unit_law(y, 0.0),
        "pure naturality": lambda: pairing.pure_naturality_law(y, counit(x, m), maps.g),
        "counit additivity": lambda: integration.additivity_law(m, x, y),
        "counit homogeneity": lambda: integration.homogeneity_law(m, -1.5, x),
        "counit respects pairing": lambda: integration.pairing_law(m, x, y),
    }
    return sides[law]()


def equal_as_values(law: str, maps: Maps, x: Any, y: Any, z: Any) -> bool:
    """Whether a law that fails as pytrees holds as values (trees compared as functions, whatever their
    capacity; distributions as measures)."""
    try:
        left, right = law_sides(law, maps, x, y, z)
        return distance(canon(jax.device_get(left)), canon(jax.device_get(right))) <= TOLERANCE
    except Exception:
        return False


def law_maps(inner: str) -> Maps:
    # Distributions are summed as measures (MIXTURE): under ordinary arithmetic a sum of distributions
    # is the law of an independent sum, no Module (X + X' is not 2 X), and the counit laws of an outer
    # structure that pairs by a product (a Distribution of distributions) would not hold.
    module: Any = MIXTURE if inner == "Distribution" else Pointwise(ARITHMETIC)
    return Maps(rowwise(lambda a: 2.0 * a - 1.0), rowwise(lambda a: 0.5 * a + 3.0), module)


# The sweep of one pair.


@dataclasses.dataclass
class Report:
    """What the sweep of one pair found."""

    pair: tuple[str, str]
    laws: list[str] = dataclasses.field(default_factory=list)
    checked: list[str] = dataclasses.field(default_factory=list)
    eager: float = 0.0
    jit: float = 0.0
    numpy: float | None = None
    failures: list[str] = dataclasses.field(default_factory=list)
    expected_errors: list[str] = dataclasses.field(default_factory=list)
    dense: dict[str, set[str]] = dataclasses.field(default_factory=lambda: {"eager": set(), "jit": set()})
    seconds: float = 0.0
    phases: dict[str, float] = dataclasses.field(default_factory=dict)

    def lap(self, phase: str) -> None:
        """Record the CPU time since the last lap under ``phase``."""
        now = time.process_time()
        self.phases[phase] = now - self.seconds
        self.seconds = now


def short(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    first = text[0] if text else ""
    return f"{type(error).__name__}: {first[:300]}"


def expected_error(expected: tuple[str, type[Exception], str], error: BaseException | None) -> bool:
    return isinstance(error, expected[1]) and expected[2] in str(error)


@functools.cache
def sweep(o: str, i: str) -> Report:
    """Laws, operations and attention of the composite o[i[float64]], eager and under jit, against the
    specification (and numpy where every level has coordinates)."""
    start = time.process_time()
    report = Report((o, i), seconds=start)
    expected = NOT_MEANINGFUL.get((o, i))
    x, unbuilt = operands(o, i, spec=False)
    with generic_only():
        spec_x, spec_unbuilt = operands(o, i, spec=True)
    for mode, build_errors in (("", unbuilt), (" (spec)", spec_unbuilt)):
        for name, e in build_errors.items():
            if expected is not None and expected_error(expected, e):
                report.expected_errors.append(f"building {name!r}{mode}")
            else:
                report.failures.append(f"building {name!r}{mode}: {short(e)}")
    report.lap("build")

    # Laws, on one fixed triple.
    triple: tuple[Any, Any, Any] | None = None
    try:
        triple = (x["m"], x["m2"], nested([(o, "outer"), (i, "inner")], 123, spec=False))
    except Exception as e:
        if expected is None or not expected_error(expected, unbuilt.get("m", e)):
            report.failures.append(f"laws: the composite could not be built: {short(unbuilt.get('m', e))}")
    for law in claimed_laws(triple[0]) if triple is not None else ():
        assert triple is not None
        try:
            check_law(law, st.just(triple), maps=law_maps(i), rtol=TOLERANCE, atol=TOLERANCE, max_examples=1)
            report.laws.append(law)
        except Exception as error:
            if expected is not None and expected_error(expected, error):
                report.expected_errors.append(f"law {law!r}")
            else:
                note = ""
                if equal_as_values(law, law_maps(i), *triple):
                    note = " [both sides are equal as values: only their pytrees differ]"
                report.failures.append(f"law {law!r}: {short(error)}{note}")
    report.lap("laws")

    # Operations: eagerly, then one jitted function computing them all and their specification (one
    # compile per pair; should it fail as a whole, the specification is computed eagerly).
    errors: dict[str, dict[str, BaseException]] = {"spec": {}, "eager": {}, "jit": {}}
    results = {"eager": run(x, errors["eager"], unbuilt, report.dense["eager"])}
    report.lap("eager")

    def library_and_specification(y: dict[str, Any], ys: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
        library = run(y, errors["jit"], unbuilt, report.dense["jit"])
        with generic_only():
            return library, run(ys, errors["spec"], spec_unbuilt)

    try:
        results["jit"], spec = jax.jit(library_and_specification)(x, spec_x)
    except Exception as error:  # (a failure outside any one operation: compiling, running)
        report.failures.append(f"jit: {short(error)}")
        results["jit"], errors["spec"] = {}, {}
        with generic_only():
            spec = run(spec_x, errors["spec"], spec_unbuilt)
    report.lap("jit")
    reference = numpy_reference(o, i, x) if "Distribution" not in (o, i) and expected is None else {}

    for name in OPS:
        if expected is not None:  # every operation must raise the error that says why
            for mode in ("spec", "eager", "jit"):
                raised = errors[mode].get(name)
                if expected_error(expected, raised):
                    report.expected_errors.append(f"{name} ({mode})")
                else:
                    got = "no error" if raised is None else short(raised)
                    report.failures.append(f"{name} ({mode}): expected {expected[1].__name__}, got {got}")
            continue
        if name in errors["spec"]:
            report.failures.append(f"{name} (spec): {short(errors['spec'][name])}")
            continue
        if any(a in unbuilt for a in OPS[name][0]):
            report.failures.append(f"{name}: not run (an operand could not be built, above)")
            continue
        want = canon(jax.device_get(spec[name]))
        failures = len(report.failures)
        for mode in ("eager", "jit"):
            if name in errors[mode]:
                report.failures.append(f"{name} ({mode}): {short(errors[mode][name])}")
                continue
            if name not in results[mode]:
                continue  # the jitted function failed as a whole (reported above)
            try:
                off = distance(canon(jax.device_get(results[mode][name])), want)
            except Exception as error:  # (a result of another structure, or unreadable)
                report.failures.append(f"{name} ({mode}): {short(error)}")
                continue
            setattr(report, mode, max(getattr(report, mode), off))
            if not off <= TOLERANCE:
                report.failures.append(f"{name} ({mode}): off by {off:.3g}")
        if name in reference:
            off = distance(canon(reference[name]), canon(coordinates(jax.device_get(spec[name]))))
            report.numpy = max(report.numpy or 0.0, off)
            if not off <= TOLERANCE:
                report.failures.append(f"{name} (numpy vs spec): off by {off:.3g}")
        if name == "attention" and i == "Distribution" and (degenerate := attention_is_degenerate(spec_x, spec[name])):
            report.failures.append(f"attention: {degenerate}, where {DEGENERATE_ATTENTION}")
        if len(report.failures) == failures and name in results["jit"]:
            report.checked.append(name)
    report.lap("compare")
    report.seconds = time.process_time() - start
    return report


def attention_is_degenerate(x: dict[str, Any], result: Any) -> str | None:
    """None if attention over keys on a Distribution gave E[values] for every query, else what it gave."""
    mean = counit(x["values"], Pointwise(ARITHMETIC))
    try:
        off = distance(canon(jax.device_get(result)), canon(x["queries"].fmap(lambda _: mean)))
    except Mismatch as error:
        return str(error)
    return None if off <= TOLERANCE else f"off E[values] by {off:.3g}"


# The tests


@pytest.mark.parametrize(("o", "i"), PAIRS, ids=[f"{o}-of-{i}" for o, i in PAIRS])
def test_composite(o: str, i: str) -> None:
    report = sweep(o, i)
    if report.failures:
        pytest.fail(f"{o} of {i}:\n  " + "\n  ".join(report.failures), pytrace=False)


@st.composite
def mesh_triples(draw: st.DrawFn) -> tuple[Any, Any, Any]:
    """Three functions on the inner mesh, values in [-10, 10]."""
    tag, nodes = MESH["inner"]
    values = st.lists(st.floats(-10, 10), min_size=len(nodes), max_size=len(nodes))
    x, y, z = (Mesh.of([jnp.asarray(v) for v in draw(values)], tag, nodes) for _ in range(3))
    return x, y, z


def test_the_mesh_is_a_lawful_dense_structure() -> None:
    """The Mesh claims every law and passes the law suite's check of its Dense hook (few examples: the
    sweep checks it in every composite)."""
    assert check_laws(mesh_triples(), max_examples=2, dense_examples=1) == LAWS + DENSE_LAWS


@pytest.mark.parametrize("op", ["pair", "dot", "add", "mul_mv"])
def test_meshes_on_other_nodes_never_meet(op: str) -> None:
    """Two meshes of one tag and size but other nodes: pair raises a ValueError naming both, and so does
    every operation, eagerly and under jit (the dense formulas see other shapes and decline)."""
    a = Mesh.of([1.0, 2.0, 3.0], T, (0.0, 0.4, 1.0))
    b = Mesh.of([1.0, 2.0, 3.0], T, (0.0, 0.5, 1.0))
    rows = Vec.of([a, a], Row)
    calls: dict[str, Callable[[Any, Any], Any]] = {
        "pair": lambda p, q: p.pair(q),
        "dot": dot,
        "add": add,
        "mul_mv": lambda p, q: mul_mv(rows, q),
    }
    message = r"Mesh\[T\] on nodes \(0.0, 0.4, 1.0\) vs Mesh\[T\] on nodes \(0.0, 0.5, 1.0\)"
    with pytest.raises(ValueError, match=message):
        calls[op](a, b)
    with pytest.raises(ValueError, match=message):
        jax.jit(lambda p, q: calls[op](p, q))(a, b)


# The report: python -m tests.applicative.test_composition


def table(reports: list[Report]) -> str:
    lines = [
        "| outer | inner | laws | operations checked | worst error eager | worst error jit | numpy vs spec "
        "| dense formulas eager / jit | failures |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in reports:
        if r.expected_errors and not r.checked:
            ops = f"not meaningful: the {len(r.expected_errors)} checks raise as expected"
        else:
            ops = f"{len(r.checked)}/{len(OPS)}" + (
                "" if len(r.checked) == len(OPS) else f" ({', '.join(n for n in OPS if n not in r.checked)} fail)"
            )
        if r.pair[1] == "Distribution" and "attention" in r.checked:
            ops += " (attention degenerate: E[values], asserted)"
        numpy_error = "" if r.numpy is None else f"{r.numpy:.1e}"
        laws = f"{len(r.laws)}/{len(LAWS)}"
        errors = f"{r.eager:.1e} | {r.jit:.1e} | {numpy_error}" if r.checked else " |  | "
        dense = f"{len(r.dense['eager'])} / {len(r.dense['jit'])}"
        lines.append(f"| {r.pair[0]} | {r.pair[1]} | {laws} | {ops} | {errors} | {dense} | {len(r.failures)} |")
    return "\n".join(lines)


def main(pairs: list[tuple[str, str]]) -> None:
    reports = []
    for o, i in pairs:
        r = sweep(o, i)
        reports.append(r)
        phases = ", ".join(f"{phase} {t:.1f}" for phase, t in r.phases.items())
        print(f"{o} of {i}: {r.seconds:.1f} s CPU ({phases}), {len(r.failures)} failures", file=sys.stderr, flush=True)
    print(table(reports))
    for r in reports:
        for failure in r.failures:
            print(f"- {r.pair[0]} of {r.pair[1]}: {failure}")


if __name__ == "__main__":
    chosen = [tuple(arg.split("-of-")) for arg in sys.argv[1:]]
    main([(o, i) for o, i in chosen] if chosen else PAIRS)
