"""A generated test that cannot be tuned to (issue 62): hypothesis draws two structures holding trees of
random shapes (a tree, a ``Vec`` of trees, a tree of trees, a ``Compose`` of trees; the trees of each of
one shape or of several), a JAX operation that selects or batches whole trees of the two (cond, switch,
select, where with a scalar predicate or one per tree, vmap, scan, stack then index, concatenate then
slice, device_put, remat), eagerly or under ``jit``, then a product in the same trace (``dot`` or
``mul_mv`` with a probe tree, or attention with each tree as keys and values).

The result equals the float64 reference computed here from the nested pairs of the trees the operation
selects (never from the library's result), or the operation is refused, naming a tree's shape or
metadata. The default run draws ``DRAWS`` examples; ``-m slow`` draws ``SLOW_DRAWS``."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import hypothesis
import hypothesis.strategies as st
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from applicative import Compose, DenseTree, Dim, Vec, as_dense_tree, dot, mul_mv, nn, to_array
from applicative.examples.trees import random_shape
from applicative.instances import dyadic
from applicative.instances.tree import Shape
from applicative.stacked import stack

DRAWS, SLOW_DRAWS = 2, 20  # per operation
CAPACITY = 6  # of every tree of values; a tree of trees holds OUTER (3 leaves) in 4 slots
OUTER: Shape = ((None, None), None)
UNIT = 1 << 60


class S(Dim):
    """Positions of a sequence (the outer level of a Compose)."""


class T(Dim):
    """The inner level of a Compose."""


class K(Dim):
    """Features of a key, a query and a value."""


Nested = Any  # nested pairs of floats: a tree's reference


def pieces(nested: Nested, start: int = 0, length: int = UNIT) -> list[tuple[int, int, float]]:
    """The leaves of nested pairs as (start, length, value) on [0, 1), in units of 2^-60."""
    if isinstance(nested, tuple):
        half = length // 2
        return pieces(nested[0], start, half) + pieces(nested[1], start + half, half)
    return [(start, length, float(nested))]


def integral(a: Nested, b: Nested) -> float:
    """The integral over [0, 1) of the product of two trees, exactly on the overlaps of their leaves."""
    total = 0.0
    for sa, la, va in pieces(a):
        for sb, lb, vb in pieces(b):
            if (overlap := min(sa + la, sb + lb) - max(sa, sb)) > 0:
                total += overlap / UNIT * va * vb
    return total


QUERIES = np.array([[0.3, -0.2], [1.0, 0.5]])
PROBE: Nested = ((1.0, 2.0), (3.0, -4.0))


def attention_reference(keys: Nested) -> np.ndarray:
    """Attention of QUERIES to a tree whose leaf x has the key and the value (x, 1 - x): a softmax over the
    leaves weighted by their measure 2^-depth (the integral over [0, 1)), scores scaled by sqrt(2)."""
    leaves = pieces(keys)
    measure = np.array([length / UNIT for _, length, _ in leaves])
    kv = np.array([[x, 1.0 - x] for _, _, x in leaves])
    s = QUERIES @ kv.T / np.sqrt(2.0)
    e = measure * np.exp(s - s.max(axis=1, keepdims=True))
    return np.asarray((e / e.sum(axis=1, keepdims=True)) @ kv)


def fill(shape: Shape, values: list[float]) -> Nested:
    """The nested pairs of ``shape`` holding ``values``, left to right."""
    it = iter(values)

    def build(s: Shape) -> Nested:
        return next(it) if s is None else (build(s[0]), build(s[1]))

    return build(shape)


KINDS = ("a tree", "a Vec of trees", "a tree of trees", "a Compose of trees")
POSITIONS = {"a tree": 1, "a Vec of trees": 3, "a tree of trees": 3, "a Compose of trees": 4}


def build(kind: str, trees: list[Nested]) -> Any:
    """The structure of ``kind`` holding these trees (nested pairs) at its positions, in order."""
    made = [DenseTree.from_nested(jax.tree_util.tree_map(jnp.float64, t), CAPACITY) for t in trees]
    if kind == "a tree":
        return made[0]
    if kind == "a Vec of trees":
        return Vec.of(made, S)
    if kind == "a tree of trees":
        return DenseTree.of(OUTER, made, 4)
    return Compose(Vec.of([Vec.of(made[:2], T), Vec.of(made[2:], T)], S))


def positions(kind: str, x: Any) -> list[Any]:
    """A result's values at the structure's positions, in order (a tree's leaves left to right)."""
    if kind == "a tree":
        return [x]
    if kind == "a tree of trees":
        return list(as_dense_tree(x).leaves())
    if kind == "a Vec of trees":
        return [x[i] for i in range(3)]
    return [x.outer[i][j] for i in range(2) for j in range(2)]


# Products, each computed in the operation's trace: of the structure, and its reference at one position.


def by_probe(kind: str, z: Any) -> Any:
    probe = DenseTree.from_nested(PROBE, CAPACITY)
    return dot(z, probe) if kind == "a tree" else mul_mv(z, probe)


def by_attention(kind: str, z: Any) -> Any:
    queries = Vec.from_array(QUERIES, S, K)

    def one(t: DenseTree[jax.Array]) -> jax.Array:
        features = t.fmap(lambda x: Vec.from_array(jnp.stack([x, 1.0 - x]), K))
        return to_array(nn.attention(queries, features, features))

    return one(z) if kind == "a tree" else z.fmap(one)


def read(kind: str, result: Any) -> list[np.ndarray]:
    """A product's result as one float64 array per position of the structure."""
    return [np.asarray(v, np.float64).ravel() for v in positions(kind, result)]


PRODUCTS: dict[str, tuple[Callable[[str, Any], Any], Callable[[Nested], np.ndarray]]] = {
    "a product with a probe tree": (by_probe, lambda t: np.array([integral(t, PROBE)])),
    "attention to each tree": (by_attention, lambda t: attention_reference(t).ravel()),
}


# Operations: each returns its results (one or more structures' products) and, for each, which of the two
# structures' trees it holds at each position ("x" or "y", and the position).


@dataclass(frozen=True)
class Draw:
    kind: str
    op: str
    product: str
    jitted: bool
    x: list[Nested]
    y: list[Nested]
    flag: bool  # a scalar predicate
    index: int  # a switch's branch, a stack's row
    mask: tuple[bool, ...]  # a predicate per position


Selection = list[tuple[str, int]]


def operate(d: Draw, x: Any, y: Any, product: Callable[[Any], Any]) -> tuple[list[Any], list[Selection]]:
    """The products of the structure(s) the draw's operation makes of x and y, and what each holds."""
    n = POSITIONS[d.kind]
    take = {"x": [("x", i) for i in range(n)], "y": [("y", i) for i in range(n)]}

    def per_leaf(f: Callable[..., Any], *xs: Any) -> Any:
        return jax.tree_util.tree_map(f, *xs)

    if d.op == "cond":
        return [product(jax.lax.cond(d.flag, lambda: x, lambda: y))], [take["x" if d.flag else "y"]]
    if d.op == "switch":
        branch = d.index % 3
        return [product(jax.lax.switch(branch, [lambda: x, lambda: y, lambda: x]))], [take["y" if branch == 1 else "x"]]
    if d.op == "select":
        chosen = per_leaf(lambda a, b: jax.lax.select(jnp.asarray(d.flag), a, b), x, y)
        return [product(chosen)], [take["x" if d.flag else "y"]]
    if d.op == "where":
        return [product(per_leaf(lambda a, b: jnp.where(d.flag, a, b), x, y))], [take["x" if d.flag else "y"]]
    if d.op == "where per tree":
        mask = jnp.asarray(d.mask[:n] if d.kind != "a tree of trees" else (*d.mask[:3], d.mask[0]))
        if d.kind == "a tree":
            picked = per_leaf(lambda a, b: jnp.where(mask[0], a, b), x, y)
        elif d.kind == "a tree of trees":  # one predicate per slot of the outer tree (both of its shape)
            picked = x.with_elements(per_leaf(lambda a, b: jnp.where(_column(mask, a), a, b), x.data, y.data))
        elif d.kind == "a Vec of trees":
            picked = per_leaf(lambda a, b: jnp.where(_column(mask, a), a, b), x, y)
        else:
            grid = mask.reshape(2, 2)
            picked = per_leaf(lambda a, b: jnp.where(_column(grid, a), a, b), x, y)
        return [product(picked)], [[("x" if d.mask[i] else "y", i) for i in range(n)]]
    if d.op == "vmap":
        both = jax.vmap(product)(stack([x, y]))
        return [jax.tree_util.tree_map(lambda r: r[0], both), jax.tree_util.tree_map(lambda r: r[1], both)], [
            take["x"],
            take["y"],
        ]
    if d.op == "scan":

        def step(carry: Any, item: Any) -> tuple[Any, Any]:
            return item, product(carry)

        last, outs = jax.lax.scan(step, x, stack([y, x]))
        first = jax.tree_util.tree_map(lambda r: r[0], outs)
        second = jax.tree_util.tree_map(lambda r: r[1], outs)
        return [first, second, product(last)], [take["x"], take["y"], take["x"]]
    if d.op == "stack then index":
        row = d.index % 3
        return [product(per_leaf(lambda leaf: leaf[row], stack([x, y, x])))], [take["y" if row == 1 else "x"]]
    if d.op == "concatenate then slice":
        if d.kind == "a tree":  # whole trees: one row of the two concatenated
            row = d.index % 2
            joined = per_leaf(lambda a, b: jnp.concatenate([a[None], b[None]])[row], x, y)
            return [product(joined)], [take["y" if row else "x"]]
        if d.kind == "a tree of trees":  # the outer slots of both (one outer shape), a window of them
            k = d.index % 4  # slots k.. of x, then 0..k-1 of y: every slot once, leaf i at slot i
            window = per_leaf(lambda a, b: jnp.concatenate([a, b])[k : k + 4], x, y)
            return [product(window)], [[("y" if i < k else "x", i) for i in range(3)]]
        k = d.index % (n if d.kind == "a Vec of trees" else 2)  # along the outer positions
        if d.kind == "a Vec of trees":
            window = per_leaf(lambda a, b: jnp.concatenate([a, b])[k : k + 3], x, y)
            return [product(window)], [[("x", k + i) if k + i < 3 else ("y", k + i - 3) for i in range(3)]]
        window = per_leaf(lambda a, b: jnp.concatenate([a, b])[k : k + 2], x, y)
        rows = [("x", k + i) if k + i < 2 else ("y", k + i - 2) for i in range(2)]
        return [product(window)], [[(src, 2 * r + j) for src, r in rows for j in range(2)]]
    if d.op == "device_put":
        return [product(jax.device_put(x))], [take["x"]]
    assert d.op == "remat"
    return [jax.checkpoint(product)(x)], [take["x"]]


def _column(mask: jax.Array, leaf: jax.Array) -> jax.Array:
    return mask.reshape(mask.shape + (1,) * (leaf.ndim - mask.ndim))


OPS = (
    "cond", "switch", "select", "where", "where per tree", "vmap", "scan",
    "stack then index", "concatenate then slice", "device_put", "remat",
)  # fmt: skip

# A refusal names a tree's shape or its pytree metadata (JAX prints the structures it will not mix).
REFUSED = re.compile(r"DenseTree|one shape|several shapes|different shapes|slots")


@st.composite
def draws(draw: st.DrawFn, op: str) -> Draw:
    kind = draw(st.sampled_from(KINDS))
    n = POSITIONS[kind]
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))

    def shape() -> Shape:
        return random_shape(rng, int(rng.integers(1, CAPACITY + 1)))

    def trees(one: bool) -> list[Nested]:
        shapes = [shape()] * n if one else [shape() for _ in range(n)]
        return [fill(s, list(rng.normal(size=len(dyadic.depths_of(s))))) for s in shapes]

    one = draw(st.booleans())  # trees of one shape in x; in y too, mostly (else JAX refuses to mix them)
    return Draw(
        kind=kind,
        op=op,
        product=draw(st.sampled_from(list(PRODUCTS))),
        jitted=draw(st.booleans()),
        x=trees(one),
        y=trees(one if draw(st.integers(0, 3)) else not one),
        flag=draw(st.booleans()),
        index=draw(st.integers(0, 11)),
        mask=tuple(draw(st.lists(st.booleans(), min_size=4, max_size=4))),
    )


def outcome(d: Draw) -> str:
    """"right" or "refused" (asserted): the draw's results against the reference of the trees selected."""
    x, y = build(d.kind, d.x), build(d.kind, d.y)
    make, reference = PRODUCTS[d.product]

    selections: list[Selection] = []

    def run(x: Any, y: Any) -> list[Any]:
        results, selected = operate(d, x, y, lambda z: make(d.kind, z))
        selections[:] = selected  # (decided in Python, at trace time)
        return results

    try:
        results = (jax.jit(run) if d.jitted else run)(x, y)
        for leaf in jax.tree_util.tree_leaves(results):  # (run: an error at run time is raised here)
            leaf.block_until_ready()
    except Exception as error:  # (JAX's kinds vary: TypeError, ValueError, its runtime error)
        if not REFUSED.search(str(error)):
            raise AssertionError(f"{d}: refused without naming a tree") from error
        return "refused"
    trees = {"x": d.x, "y": d.y}
    for result, selection in zip(results, selections, strict=True):
        got = read(d.kind, result)
        expected = [reference(trees[src][i]) for src, i in selection]
        for position, (g, e) in enumerate(zip(got, expected, strict=True)):
            np.testing.assert_allclose(g, e, rtol=1e-9, atol=1e-9, err_msg=f"{d}, position {position}")
    return "right"


@pytest.mark.parametrize("count", [DRAWS, pytest.param(SLOW_DRAWS, marks=pytest.mark.slow)], ids=["default", "slow"])
@pytest.mark.parametrize("op", OPS)
def test_whole_trees_selected_or_batched_by_jax_are_read_with_their_own_shapes(op: str, count: int) -> None:
    seen: dict[str, int] = {}

    @hypothesis.settings(max_examples=count, deadline=None, database=None)
    @hypothesis.given(draws(op))
    def check(d: Draw) -> None:
        result = outcome(d)
        seen[result] = seen.get(result, 0) + 1

    check()
    assert count < SLOW_DRAWS or seen.get("right", 0) > 0  # (answered, not only refused: 0.6^20 if by chance)
