"""Vec: construction, the primitives against numpy float64, errors, jit and grad."""

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.tree_util import Partial

from applicative import Compose, Dim, Vec, ap, counit, dot, generic_only, lift_a2, mul_mv, to_array
from tests.applicative.dims import Hidden, Model, Seq

rng = np.random.default_rng(0)


def test_vector_and_matrix_round_trip() -> None:
    x, m = rng.normal(size=5), rng.normal(size=(5, 3))
    v, w = Vec.from_array(x, Seq), Vec.from_array(m, Seq, Model)
    assert (v.tag, v.size, w.tag, w.size, w[0].tag, w[0].size) == (Seq, 5, Seq, 5, Model, 3)
    np.testing.assert_array_equal(to_array(v), x)
    np.testing.assert_array_equal(to_array(w), m)
    np.testing.assert_array_equal(to_array(w[2]), m[2])


def test_fmap_pair_pure_counit_match_numpy() -> None:
    x, y = rng.normal(size=6), rng.normal(size=6)
    v, u = Vec.from_array(x, Seq), Vec.from_array(y, Seq)
    np.testing.assert_allclose(to_array(v.fmap(jnp.sin)), np.sin(x), rtol=1e-14)
    a, b = v.pair(u).data
    np.testing.assert_array_equal(a, x)
    np.testing.assert_array_equal(b, y)
    np.testing.assert_array_equal(to_array(v.pure(2.5)), np.full(6, 2.5))
    np.testing.assert_allclose(v.counit(), x.sum(), rtol=1e-14)
    np.testing.assert_allclose(to_array(lift_a2(lambda p, q: p * q + 1, v, u)), x * y + 1, rtol=1e-14)
    # An operation that is not symmetric: lift_a2 f x y applies f(x_i, y_i), in that order.
    np.testing.assert_allclose(to_array(lift_a2(lambda p, q: p - 2 * q, v, u)), x - 2 * y, rtol=1e-14)


def test_nested_structures_map_and_sum_rowwise() -> None:
    m = rng.normal(size=(4, 3))
    w = Vec.from_array(m, Seq, Model)
    np.testing.assert_allclose(to_array(w.fmap(lambda row: row.fmap(jnp.exp))), np.exp(m), rtol=1e-14)
    np.testing.assert_allclose(to_array(w.fmap(lambda row: row.counit())), m.sum(axis=1), rtol=1e-14)
    np.testing.assert_allclose(to_array(w.counit()), m.sum(axis=0), rtol=1e-14)
    np.testing.assert_allclose(counit(Compose(w)), m.sum(), rtol=1e-14)


def test_pure_of_a_structure_broadcasts_it() -> None:
    row = Vec.from_array(rng.normal(size=3), Model)
    grid = Vec.from_array(np.zeros(4), Seq).pure(row)
    np.testing.assert_array_equal(to_array(grid), np.tile(to_array(row), (4, 1)))
    assert grid[1].tag is Model


def test_ap_applies_pytree_functions() -> None:
    scales = rng.normal(size=4)
    x = rng.normal(size=4)
    fs = Vec.from_array(scales, Seq).fmap(lambda s: Partial(jnp.multiply, s))
    np.testing.assert_allclose(to_array(ap(fs, Vec.from_array(x, Seq))), scales * x, rtol=1e-14)


def test_stack_takes_any_pytree_of_equal_leading_axes() -> None:
    v = Vec.stack((jnp.ones((3, 2)), jnp.zeros(3)), Seq)
    assert v.size == 3
    with pytest.raises(ValueError, match=r"Vec.stack\[Seq\].*leading axis"):
        Vec.stack((jnp.ones((3, 2)), jnp.zeros(4)), Seq)


def test_of_stacks_a_list_of_elements() -> None:
    # Vec.of(list) is Vec.from_array(np.stack(list)), for arrays and for pytrees of arrays.
    rows = rng.normal(size=(4, 3))
    v = Vec.of([Vec.from_array(row, Model) for row in rows], Seq)
    np.testing.assert_array_equal(to_array(v), rows)
    assert (v.tag, v.size, v[0].tag, v[0].size) == (Seq, 4, Model, 3)
    pairs = Vec.of([(1.0, np.ones(2)), (2.0, np.zeros(2))], Seq)
    np.testing.assert_array_equal(pairs.data[0], [1.0, 2.0])
    np.testing.assert_array_equal(pairs.data[1], [[1.0, 1.0], [0.0, 0.0]])
    with pytest.raises(ValueError, match=r"Vec.of\[Seq\]: needs at least one element, got an empty list"):
        Vec.of([], Seq)
    with pytest.raises(ValueError, match=r"Vec.of\[Seq\]: needs a list of elements, got ndarray"):
        Vec.of(np.ones(3), Seq)  # type: ignore[arg-type]
    with pytest.raises(
        ValueError, match=r"Vec.of\[Seq\]: element 1 has leaf shapes \[\(3,\)\], element 0 has \[\(2,\)\]"
    ):
        Vec.of([np.ones(2), np.ones(3)], Seq)
    with pytest.raises(TypeError, match="dimension tag must be a subclass of Dim"):
        Vec.of([1.0], int)  # type: ignore[type-var]


def test_mismatched_sizes_and_tags_name_both() -> None:
    with pytest.raises(ValueError, match=r"Vec\[Seq\] of size 3 vs Vec\[Seq\] of size 4"):
        Vec.from_array(np.ones(3), Seq).pair(Vec.from_array(np.ones(4), Seq))
    with pytest.raises(ValueError, match=r"Vec\[Seq\] of size 3 vs Vec\[Model\] of size 3"):
        Vec.from_array(np.ones(3), Seq).pair(Vec.from_array(np.ones(3), Model))  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="Vec\\[Seq\\] paired with Compose"):
        Vec.from_array(np.ones(3), Seq).pair(Compose(Vec.from_array(np.ones((3, 3)), Seq, Model)))  # type: ignore[arg-type]


def test_bad_construction_is_rejected_clearly() -> None:
    with pytest.raises(ValueError, match=r"Vec.from_array\(Seq\): a 2-D array needs 2 tags, one per axis"):
        Vec.from_array(np.ones((2, 2)), Seq)
    with pytest.raises(ValueError, match=r"Vec.from_array\(Seq, Model\): a 1-D array needs 1 tags, one per axis"):
        Vec.from_array(np.ones(3), Seq, Model)
    with pytest.raises(TypeError, match="dimension tag must be a subclass of Dim"):
        Vec.from_array(np.ones(3), int)  # type: ignore[type-var]
    with pytest.raises(ValueError, match=r"to_array: this Vec\[Seq\] of size 3 holds 2 arrays"):
        to_array(Vec.from_array(np.ones(3), Seq).pair(Vec.from_array(np.ones(3), Seq)))


def test_a_structure_without_counit_is_named() -> None:
    with pytest.raises(TypeError, match="str has no Counit instance"):
        counit("abc")  # type: ignore[arg-type]


def test_vec_is_a_pytree_through_jit_and_grad() -> None:
    x = rng.normal(size=5)

    @jax.jit
    def energy(v: Vec[Seq, jax.Array]) -> jax.Array:
        return v.fmap(lambda a: a**2).counit()

    np.testing.assert_allclose(energy(Vec.from_array(x, Seq)), np.sum(x**2), rtol=1e-14)
    grad = jax.grad(energy)(Vec.from_array(x, Seq))
    assert isinstance(grad, Vec)
    assert grad.tag is Seq
    np.testing.assert_allclose(to_array(grad), 2 * x, rtol=1e-14)


def test_vmap_over_a_batch_of_vectors() -> None:
    batch = rng.normal(size=(7, 5))
    sums = jax.vmap(lambda row: Vec.from_array(row, Seq).fmap(jnp.abs).counit())(batch)
    np.testing.assert_allclose(sums, np.abs(batch).sum(axis=1), rtol=1e-14)


def test_float32_is_kept() -> None:
    v = Vec.from_array(np.ones(3, np.float32), Hidden)
    assert v.fmap(lambda a: 2 * a).counit().dtype == jnp.float32


# Bad input: a clear error or a correct value, never a silently wrong one.


def test_integer_and_bool_vectors_keep_their_dtype() -> None:
    # Token ids and masks are Vecs of ints and bools; their sums and products are numpy's.
    tokens = Vec.from_array(np.array([3, 1, 2]), Seq)
    assert to_array(tokens).dtype == jnp.result_type(int)
    assert int(dot(tokens, tokens)) == np.dot([3, 1, 2], [3, 1, 2])
    mask = Vec.from_array(np.array([True, False, True]), Seq)
    assert to_array(mask).dtype == jnp.bool_
    assert int(mask.counit()) == 2
    assert to_array(Vec.of([1, 2], Seq)).dtype == jnp.result_type(int)


@pytest.mark.parametrize(
    "bad",
    [np.array([1.0, "a"], dtype=object), np.array(["a", "b"]), [[1.0, 2.0], [3.0]]],
    ids=["object", "string", "ragged list"],
)
def test_data_that_is_not_numbers_is_rejected_naming_the_constructor(bad: Any) -> None:
    with pytest.raises(TypeError, match=r"Vec.from_array: expected an array of numbers"):
        Vec.from_array(bad, Seq)
    with pytest.raises(TypeError, match=r"Vec.stack\[Seq\]: expected an array of numbers"):
        Vec.stack(np.asarray(bad, dtype=object), Seq)
    if isinstance(bad, np.ndarray):  # a list of lists is a pytree, whose elements Vec.of stacks
        with pytest.raises(TypeError, match=r"Vec.of\[Seq\]: expected an array of numbers"):
            Vec.of([bad, bad], Seq)


def test_python_lists_are_arrays() -> None:
    # (mypy rejects lists, as jax.typing.ArrayLike does; at run time they are arrays.)
    np.testing.assert_array_equal(to_array(Vec.from_array([1.0, 2.0], Seq)), [1.0, 2.0])  # type: ignore[call-overload]
    nested = [[1.0, 2.0]]
    np.testing.assert_array_equal(to_array(Vec.from_array(nested, Seq, Model)), nested)  # type: ignore[call-overload]
    with pytest.raises(ValueError, match=r"Vec.stack\[Seq\]: leaves need one common leading axis.*use .of"):
        Vec.stack([1.0, 2.0], Seq)


def test_an_empty_vec_is_legitimate_and_sums_to_zero() -> None:
    empty = Vec.from_array(np.zeros(0), Seq)
    assert empty.size == 0
    assert float(empty.counit()) == 0.0
    assert float(dot(empty, empty)) == 0.0
    assert to_array(empty.fmap(jnp.exp)).shape == (0,)
    np.testing.assert_array_equal(to_array(Vec.from_array(np.zeros((0, 3)), Seq, Model).counit()), np.zeros(3))


@pytest.mark.parametrize(
    "build",
    [
        lambda tag: Vec.from_array(np.ones(3), tag),
        lambda tag: Vec.from_array(np.ones((2, 3)), Seq, tag),
        lambda tag: Vec.of([1.0, 2.0], tag),
        lambda tag: Vec.stack(np.ones(3), tag),
    ],
    ids=["from_array", "from_array inner", "of", "stack"],
)
def test_dim_itself_is_not_a_tag(build: Callable[[type[Dim]], object]) -> None:
    with pytest.raises(TypeError, match=r"Vec\.\w+.*: dimension tag must be a subclass of Dim, not Dim itself"):
        build(Dim)


def test_a_size_that_disagrees_with_the_data_is_rejected_when_used() -> None:
    # Vec(data, tag, size) is how JAX rebuilds a Vec, so it is not checked; every operation is.
    wrong = Vec(jnp.ones(3), Seq, 5)
    message = r"5 elements, but a leaf of the data has shape \(3,\)"
    for use in (wrong.counit, lambda: wrong.fmap(jnp.sin), lambda: wrong[4]):
        with pytest.raises(ValueError, match=r"Vec\[Seq\](\.\w+|\[4\]): " + message):
            use()
    with pytest.raises(ValueError, match=r"dot: a Vec\[Seq\] of size 5 holds coordinates of shape \(3,\), not \(5,\)"):
        dot(wrong, wrong)
    with pytest.raises(ValueError, match=r"mul_mv: a Vec\[Seq\] of size 5 holds coordinates of shape \(3,\)"):
        mul_mv(Vec.from_array(np.ones((2, 5)), Model, Seq), wrong)
    with generic_only(), pytest.raises(ValueError, match=r"Vec\[Seq\]\.fmap: " + message):
        dot(wrong, wrong)


def test_a_batch_of_vecs_from_vmap_is_a_pytree_but_not_one_vec() -> None:
    # vmap's output carries the batch axis in front of the Vec's: JAX handles it as a pytree, and an
    # operation on it raises rather than summing over the batch; mapped with vmap, it is right.
    batch = rng.normal(size=(4, 3))
    vecs = jax.vmap(lambda row: Vec.from_array(row, Seq))(batch)
    doubled = jax.tree_util.tree_map(lambda leaf: 2 * leaf, vecs)
    np.testing.assert_array_equal(to_array(doubled), 2 * batch)
    with pytest.raises(ValueError, match=r"Vec\[Seq\]\.counit: 3 elements, but a leaf of the data has shape \(4, 3\)"):
        vecs.counit()
    np.testing.assert_allclose(jax.vmap(lambda v: v.counit())(vecs), batch.sum(axis=1), rtol=1e-14)


def test_indexing_out_of_range_raises_instead_of_clamping() -> None:
    v = Vec.from_array(np.array([1.0, 2.0, 3.0]), Seq)
    assert float(v[-1]) == 3.0
    with pytest.raises(IndexError, match=r"Vec\[Seq\]: index 3 is out of range for size 3"):
        v[3]
    assert [float(x) for x in v] == [1.0, 2.0, 3.0]  # type: ignore[attr-defined]  # (by __getitem__) it ends
