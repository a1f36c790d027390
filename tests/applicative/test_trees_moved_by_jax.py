"""A tree chosen, batched or taken from a stack is the tree it holds (issue 62): JAX rebuilds a structure
from one input's pytree metadata and another's leaves (``cond``, ``where``, ``tree_map`` of two, ``scan``,
``stack``), and nothing a dense formula reads about a tree's shape may come from the metadata of the
other input (docs/design.md, "What decides a formula travels with the values").

Each case selects or batches whole trees and takes a product in the same trace, eagerly and under
``jit``; the reference is a float64 integral computed here from the nested pairs of the trees the case
selects, never from the library's result: the trees are piecewise-constant functions on [0, 1) and
dot(a, b) the integral of their product. Also here: trees leave a process whole (pickle, deepcopy,
device_get, the learning layer's file), and ``jacrev`` of a function of a tree."""

from __future__ import annotations

import copy
import pickle
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from applicative import Compose, DenseTree, Dim, Vec, dot, mul_mv, record_fast_paths, to_array
from applicative.instances.tree import Nested
from applicative.stacked import stack
from applicative.training.checkpoints import load_pytree, save_pytree


class S(Dim):
    """A sequence's positions."""


class T(Dim):
    """The positions of a grid's inner sequences."""


A: Nested[float] = (1.0, ((2.0, 3.0), 4.0))  # leaves at depths 1, 3, 3, 2
B: Nested[float] = ((1.0, -1.0), (2.0, -2.0))  # four leaves at depth 2
C: Nested[float] = (((0.5, 1.5), -1.0), 3.0)  # depths 3, 3, 2, 1
P: Nested[float] = ((1.0, 2.0), (3.0, 4.0))  # the probe: dot(B, P) = -0.75
CAPACITY = 6
UNIT = 1 << 60  # the interval [0, 1) in units of 2^-60: every leaf's start and length is an integer


def pieces(nested: Any, start: int = 0, length: int = UNIT) -> list[tuple[int, int, float]]:
    """The leaves of a tree of nested pairs as (start, length, value) on [0, 1), in units of 2^-60."""
    if isinstance(nested, tuple):
        half = length // 2
        return pieces(nested[0], start, half) + pieces(nested[1], start + half, half)
    return [(start, length, float(nested))]


def integral(a: Any, b: Any) -> float:
    """The integral over [0, 1) of the product of two trees of nested pairs, exactly on their overlaps."""
    total = 0.0
    for sa, la, va in pieces(a):
        for sb, lb, vb in pieces(b):
            overlap = min(sa + la, sb + lb) - max(sa, sb)
            if overlap > 0:
                total += overlap / UNIT * va * vb
    return total


def tree(nested: Nested[float]) -> DenseTree[jax.Array]:
    return DenseTree.from_nested(jax.tree_util.tree_map(jnp.float32, nested), CAPACITY)


TP = tree(P)
MODES: dict[str, Callable[[Callable[..., Any]], Callable[..., Any]]] = {"eager": lambda f: f, "jit": jax.jit}


def rows(v: Any) -> np.ndarray:
    return np.asarray(to_array(v), np.float64)


@pytest.mark.parametrize("mode", list(MODES))
def test_a_tree_taken_from_a_stack_and_chosen_by_cond_or_where_is_the_tree_chosen(mode: str) -> None:
    # Cases 1 and 5 of the issue: a row of a stack of one shape, then a choice between it and another tree.
    run = MODES[mode]
    row = Vec.of([tree(A), tree(A)], S)[0]
    tb = tree(B)
    chosen = {
        "cond": run(lambda r, t: dot(jax.lax.cond(False, lambda: r, lambda: t), TP)),
        "where": run(lambda r, t: dot(jax.tree_util.tree_map(lambda x, y: jnp.where(False, x, y), r, t), TP)),
        "select": run(lambda r, t: dot(jax.tree_util.tree_map(lambda x, y: jax.lax.select(False, x, y), r, t), TP)),
        "switch": run(lambda r, t: dot(jax.lax.switch(2, [lambda: r, lambda: r, lambda: t]), TP)),
    }
    for name, f in chosen.items():
        assert float(f(row, tb)) == pytest.approx(integral(B, P), rel=1e-6), name
    assert integral(B, P) == -0.75
    built = run(lambda r, t: to_array(mul_mv(Vec.of([r, t], S), TP)))
    np.testing.assert_allclose(built(row, tb), [integral(A, P), integral(B, P)], rtol=1e-6)


def test_a_jit_serves_a_cond_between_two_stacks_of_one_shape_each_with_its_own() -> None:
    # Case 2: one compiled function, first called picking the first stack, then the second.
    picked = jax.jit(lambda p, a, b: to_array(mul_mv(jax.lax.cond(p, lambda: a, lambda: b), TP)))
    va, vb = Vec.of([tree(A), tree(A)], S), Vec.of([tree(B), tree(B)], S)
    np.testing.assert_allclose(picked(True, va, vb), [integral(A, P)] * 2, rtol=1e-6)
    np.testing.assert_allclose(picked(False, va, vb), [integral(B, P)] * 2, rtol=1e-6)
    assert picked._cache_size() == 1  # type: ignore[attr-defined]
    # The first used once before the cond picks the second (it read -0.875 for each, the first's shape).
    def both(a: Any, b: Any) -> tuple[jax.Array, jax.Array]:
        return to_array(mul_mv(a, TP)), to_array(mul_mv(jax.lax.cond(False, lambda: a, lambda: b), TP))

    first, second = jax.jit(both)(va, vb)
    np.testing.assert_allclose(first, [integral(A, P)] * 2, rtol=1e-6)
    np.testing.assert_allclose(second, [integral(B, P)] * 2, rtol=1e-6)


@pytest.mark.parametrize("mode", list(MODES))
def test_a_vmap_over_the_librarys_stack_of_stacks_reads_each_with_its_own_shape(mode: str) -> None:
    # Case 3: two sequences, each of one shape, of different shapes, stacked by the library and vmapped.
    batch = stack([Vec.of([tree(A), tree(A)], S), Vec.of([tree(B), tree(C)], S), Vec.of([tree(B), tree(B)], S)])
    products = MODES[mode](jax.vmap(lambda v: to_array(mul_mv(v, TP))))
    expected = [[integral(A, P)] * 2, [integral(B, P), integral(C, P)], [integral(B, P)] * 2]
    np.testing.assert_allclose(products(batch), expected, rtol=1e-6)


@pytest.mark.parametrize("mode", list(MODES))
def test_a_cond_inside_a_vmap_over_a_sequences_trees_picks_each_tree(mode: str) -> None:
    # Case 4: inside a vmap over a Vec's trees, a cond between a row of another stack and the mapped tree.
    row = Vec.of([tree(A), tree(A)], S)[0]
    sequence = Vec.of([tree(B), tree(C)], S)

    def each(p: jax.Array, t: DenseTree[jax.Array]) -> jax.Array:
        chosen: DenseTree[jax.Array] = jax.lax.cond(p, lambda: row, lambda: t)
        return dot(chosen, TP)

    mapped = MODES[mode](jax.vmap(each))
    for p, first in (([False, False], B), ([True, False], A)):
        np.testing.assert_allclose(mapped(jnp.array(p), sequence.data), [integral(first, P), integral(C, P)], rtol=1e-6)


@pytest.mark.parametrize("mode", list(MODES))
def test_a_scan_carrying_a_tree_holds_the_tree_it_was_given(mode: str) -> None:
    # The carry starts as a row of one stack and becomes each tree of a sequence of several shapes.
    row = Vec.of([tree(A), tree(A)], S)[0]
    sequence = Vec.of([tree(B), tree(C), tree(A)], S)

    def step(carry: DenseTree[jax.Array], t: DenseTree[jax.Array]) -> tuple[DenseTree[jax.Array], jax.Array]:
        return t, dot(carry, TP)

    last, products = MODES[mode](lambda r, s: jax.lax.scan(step, r, s))(row, sequence.data)
    np.testing.assert_allclose(products, [integral(x, P) for x in (A, B, C)], rtol=1e-6)
    assert float(dot(last, TP)) == pytest.approx(integral(A, P), rel=1e-6)


@pytest.mark.parametrize("mode", list(MODES))
def test_a_where_with_a_predicate_per_tree_picks_each_whole_tree(mode: str) -> None:
    """Over sequences of trees of several shapes each, or of one shape each, the same: right. Over two of one
    shape each, of different shapes, the result's rows differ where its metadata (the first's) says one
    shape: eagerly its rows are read (right); under jit that is refused at run time, naming it."""
    run = MODES[mode]

    def where(p: jax.Array, a: Any, b: Any) -> Any:
        return jax.tree_util.tree_map(lambda x, y: jnp.where(p.reshape(p.shape + (1,) * (x.ndim - 1)), x, y), a, b)

    picked = run(lambda p, a, b: to_array(mul_mv(where(p, a, b), TP)))
    p = jnp.array([True, False])
    for a, b, expected in (
        ((A, B), (C, A), (A, A)),  # several shapes each
        ((A, A), (A, A), (A, A)),  # one shape, the same
        ((B, C), (A, A), (B, A)),  # several, and one shape: two kinds, JAX refuses to mix them...
    ):
        va, vb = Vec.of([tree(x) for x in a], S), Vec.of([tree(x) for x in b], S)
        if a == (B, C):
            with pytest.raises(ValueError, match=r"Custom node type mismatch|one shape along the last 1 stack axes"):
                picked(p, va, vb)  # (...naming the one shape in the structure it prints)
            continue
        np.testing.assert_allclose(picked(p, va, vb), [integral(x, P) for x in expected], rtol=1e-6)
    va, vb = Vec.of([tree(A), tree(A)], S), Vec.of([tree(B), tree(B)], S)
    if mode == "eager":
        np.testing.assert_allclose(picked(p, va, vb), [integral(A, P), integral(B, P)], rtol=1e-6)
    else:
        with pytest.raises(Exception, match=r"said to be one shape along its last 1 stack axes holds trees of several"):
            np.asarray(picked(p, va, vb))


@pytest.mark.parametrize("mode", list(MODES))
def test_a_batch_of_sequences_each_of_one_shape_is_one_shape_sequence_by_sequence(mode: str) -> None:
    """Two sequences of three trees, each of one shape, stacked: one shape along the inner axis only (of two
    shapes), or along both (of one). A map that keeps every tree keeps that (checked on the host); vmapped,
    each sequence is one shape (its products with its own first tree run the dense formula)."""
    run = MODES[mode]
    for second in (B, A):
        batch = stack([Vec.of([tree(A)] * 3, S), Vec.of([tree(second)] * 3, S)])
        same = jax.tree_util.tree_map(lambda leaf: leaf, batch)
        assert structure(same) == structure(batch)
        with record_fast_paths() as taken:
            products = run(jax.vmap(lambda v: to_array(mul_mv(v, v[0]))))(batch)
        assert taken == ["mul_mv"]
        np.testing.assert_allclose(products, [[integral(A, A)] * 3, [integral(second, second)] * 3], rtol=1e-6)
        doubled = run(lambda b: b.data.fmap(lambda x: 2.0 * x))(batch)  # (the library's map of every tree)
        assert structure(doubled) == structure(batch.data)
        rows = jax.vmap(lambda v: to_array(mul_mv(v, TP)))(Vec(doubled, S, 3))
        np.testing.assert_allclose(rows, [[2 * integral(A, P)] * 3, [2 * integral(second, P)] * 3], rtol=1e-6)


@pytest.mark.parametrize("mode", list(MODES))
def test_a_where_that_mixes_the_trees_of_one_sequence_of_a_batch_is_read_or_refused(mode: str) -> None:
    """A grid (a Compose) of two sequences of three trees, each sequence of one shape: a where that mixes the
    trees of the second sequence only is read with the trees' own shapes eagerly (the claim is checked on
    the host and dropped), and refused at run time under jit (where its leaves are traced)."""
    run = MODES[mode]

    def grid(*rows: tuple[Nested[float], ...]) -> Compose[Any, Any, DenseTree[jax.Array]]:
        return Compose(Vec.of([Vec.of([tree(x) for x in row], T) for row in rows], S))

    batch, other = grid((A, A, A), (B, B, B)), grid((C, C, C), (A, A, A))
    mask = jnp.array([[True, True, True], [True, False, True]])  # the second sequence becomes (B, A, B)

    def mixed(a: Any, b: Any) -> jax.Array:
        picked = jax.tree_util.tree_map(lambda x, y: jnp.where(mask.reshape(2, 3, *(1,) * (x.ndim - 2)), x, y), a, b)
        return to_array(mul_mv(picked, TP))

    expected = [[integral(A, P)] * 3, [integral(B, P), integral(A, P), integral(B, P)]]
    if mode == "eager":
        np.testing.assert_allclose(mixed(batch, other), expected, rtol=1e-6)
    else:
        with pytest.raises(Exception, match=r"said to be one shape along its last 1 stack axes holds trees of several"):
            np.asarray(run(mixed)(batch, other))


@pytest.mark.parametrize("mode", list(MODES))
def test_a_stack_of_trees_of_several_shapes_added_to_itself_keeps_its_capacity(mode: str) -> None:
    # Inside the library's map over the stack each tree meets itself (one leaf, one object): a zip.
    mixed = Vec.of([tree(A), tree(B)], S)
    doubled = MODES[mode](lambda v: v + v)(mixed)
    assert doubled.data.capacity == CAPACITY
    np.testing.assert_allclose(to_array(mul_mv(doubled, TP)), [2 * integral(A, P), 2 * integral(B, P)], rtol=1e-6)


def test_a_tree_leaves_a_process_whole() -> None:
    """pickle, copy.deepcopy and jax.device_get round-trip a tree and a structure holding trees exactly (the
    layout's element type, a typed key, pickles as its words), and so does the learning layer's file."""
    trees = {"tree": tree(A), "batch": Vec.of([tree(B), tree(C)], S), "one shape": Vec.of([tree(A), tree(A)], S)}
    for name, x in trees.items():
        for how, moved in (
            ("pickle", pickle.loads(pickle.dumps(x))),
            ("deepcopy", copy.deepcopy(x)),
            ("device_get", jax.device_get(x)),
        ):
            for got, want in zip(jax.tree_util.tree_leaves(moved), jax.tree_util.tree_leaves(x), strict=True):
                np.testing.assert_array_equal(_words(got), _words(want), err_msg=f"{name}, {how}")
            assert structure(moved) == structure(x), (name, how)
    one = pickle.loads(pickle.dumps(tree(A)))
    assert one.shape == A_SHAPE
    copied = jax.tree_util.tree_map(jnp.array, tree(A))  # (its layout another array of the same words)
    assert copied.layout is not tree(A).layout
    for back in (one, copied):  # read back or copied, a tree meets its kin as a zip, on the host's reading
        assert (back + tree(A)).capacity == CAPACITY
    assert float(dot(one, tree(A))) == pytest.approx(integral(A, A))


def test_structures_holding_trees_are_saved_and_loaded_in_the_learning_layers_format(tmp_path: Path) -> None:
    x = (Vec.of([tree(B), tree(C)], S), tree(A), jax.random.key(7))
    path = tmp_path / "trees.npz"
    save_pytree(path, x, "two trees and a key")
    for like in (x, jax.eval_shape(lambda: x)):  # a value, or its shapes alone
        batch, one, key = load_pytree(path, like, "two trees and a key")
        assert one.shape == A_SHAPE
        assert [batch[i].shape for i in range(2)] == [B_SHAPE, C_SHAPE]
        np.testing.assert_allclose(rows(mul_mv(batch, TP)), np.array([integral(B, P), integral(C, P)]), rtol=1e-6)
        np.testing.assert_array_equal(jax.random.key_data(key), jax.random.key_data(x[2]))
    with pytest.raises(ValueError, match=r"trees.npz holds 'two trees and a key', not 'other'"):
        load_pytree(path, x, "other")
    with pytest.raises(ValueError, match=r"trees.npz holds 5 arrays, the structure it is read into has 2"):
        load_pytree(path, {"tree": tree(A)}, "two trees and a key")


def test_the_jacobian_of_a_function_of_a_tree_is_taken_of_its_values() -> None:
    """``jax.jacrev(f, allow_int=True)`` of a tree raised "Mismatch custom node data: (8) != (8, one shape)";
    no metadata differs now, and JAX's jacrev stops at the typed key the layout is, as it does for any pytree
    holding a PRNG key (its own NotImplementedError: JAX 0.9 to 0.12). The Jacobian of a function of a
    tree is taken of its values, the tree closed over (docs/trees.md), and equals ``jax.grad``'s."""
    t = tree(A)

    def f(u: DenseTree[jax.Array]) -> jax.Array:
        return dot(u, TP)

    jacobian = jax.jacrev(lambda values: f(t.with_elements(values)))(t.data)
    gradient = jax.grad(f, allow_int=True)(t)
    np.testing.assert_allclose(jacobian, gradient.data, rtol=1e-6)
    leaf_integrals = []  # d/dx_i of the integral of x p: the integral of p over leaf i
    for i in range(4):
        leaves, structure = jax.tree_util.tree_flatten(A)
        leaves = [1.0 if j == i else 0.0 for j in range(len(leaves))]
        leaf_integrals.append(integral(jax.tree_util.tree_unflatten(structure, leaves), P))
    np.testing.assert_allclose(np.asarray(t.with_elements(jacobian).leaves()), leaf_integrals, rtol=1e-6)
    def total(x: Any) -> jax.Array:
        floats = [jnp.sum(leaf) for leaf in jax.tree_util.tree_leaves(x) if jnp.issubdtype(leaf.dtype, jnp.floating)]
        return jnp.sum(jnp.stack(floats))

    for holding_a_key in (t, {"x": jnp.ones(2), "key": jax.random.key(0)}):
        with pytest.raises(NotImplementedError):
            jax.jacrev(total, allow_int=True)(holding_a_key)


A_SHAPE = (None, ((None, None), None))
B_SHAPE = ((None, None), (None, None))
C_SHAPE = (((None, None), None), None)


def structure(x: Any) -> jax.tree_util.PyTreeDef:
    treedef: jax.tree_util.PyTreeDef = jax.tree_util.tree_structure(x)
    return treedef


def _words(leaf: Any) -> np.ndarray:
    if isinstance(leaf, jax.Array) and jnp.issubdtype(leaf.dtype, jax.dtypes.extended):
        return np.asarray(jax.random.key_data(leaf))
    return np.asarray(leaf)
