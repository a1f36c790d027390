"""Vec: construction, the primitives against numpy float64, errors, jit and grad."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.tree_util import Partial

from applicative import Compose, Vec, ap, counit, lift_a2, matrix, vector
from tests.dims import Hidden, Model, Seq

rng = np.random.default_rng(0)


def test_vector_and_matrix_round_trip() -> None:
    x, m = rng.normal(size=5), rng.normal(size=(5, 3))
    v, w = vector(x, Seq), matrix(m, Seq, Model)
    assert (v.tag, v.size, w.tag, w.size, w[0].tag, w[0].size) == (Seq, 5, Seq, 5, Model, 3)
    np.testing.assert_array_equal(v.to_array(), x)
    np.testing.assert_array_equal(w.to_array(), m)
    np.testing.assert_array_equal(w[2].to_array(), m[2])


def test_fmap_pair_pure_counit_match_numpy() -> None:
    x, y = rng.normal(size=6), rng.normal(size=6)
    v, u = vector(x, Seq), vector(y, Seq)
    np.testing.assert_allclose(v.fmap(jnp.sin).to_array(), np.sin(x), rtol=1e-14)
    a, b = v.pair(u).data
    np.testing.assert_array_equal(a, x)
    np.testing.assert_array_equal(b, y)
    np.testing.assert_array_equal(v.pure(2.5).to_array(), np.full(6, 2.5))
    np.testing.assert_allclose(v.counit(), x.sum(), rtol=1e-14)
    np.testing.assert_allclose(lift_a2(lambda p, q: p * q + 1, v, u).to_array(), x * y + 1, rtol=1e-14)


def test_nested_structures_map_and_sum_rowwise() -> None:
    m = rng.normal(size=(4, 3))
    w = matrix(m, Seq, Model)
    np.testing.assert_allclose(w.fmap(lambda row: row.fmap(jnp.exp)).to_array(), np.exp(m), rtol=1e-14)
    np.testing.assert_allclose(w.fmap(lambda row: row.counit()).to_array(), m.sum(axis=1), rtol=1e-14)
    np.testing.assert_allclose(w.counit().to_array(), m.sum(axis=0), rtol=1e-14)
    np.testing.assert_allclose(counit(Compose(w)), m.sum(), rtol=1e-14)


def test_pure_of_a_structure_broadcasts_it() -> None:
    row = vector(rng.normal(size=3), Model)
    grid = vector(np.zeros(4), Seq).pure(row)
    np.testing.assert_array_equal(grid.to_array(), np.tile(row.to_array(), (4, 1)))
    assert grid[1].tag is Model


def test_ap_applies_pytree_functions() -> None:
    scales = rng.normal(size=4)
    x = rng.normal(size=4)
    fs = vector(scales, Seq).fmap(lambda s: Partial(jnp.multiply, s))
    np.testing.assert_allclose(ap(fs, vector(x, Seq)).to_array(), scales * x, rtol=1e-14)


def test_stack_takes_any_pytree_of_equal_leading_axes() -> None:
    v = Vec.stack((jnp.ones((3, 2)), jnp.zeros(3)), Seq)
    assert v.size == 3
    with pytest.raises(ValueError, match=r"Vec.stack\[Seq\].*leading axis"):
        Vec.stack((jnp.ones((3, 2)), jnp.zeros(4)), Seq)


def test_mismatched_sizes_and_tags_name_both() -> None:
    with pytest.raises(ValueError, match=r"Vec\[Seq\] of size 3 vs Vec\[Seq\] of size 4"):
        vector(np.ones(3), Seq).pair(vector(np.ones(4), Seq))
    with pytest.raises(ValueError, match=r"Vec\[Seq\] of size 3 vs Vec\[Model\] of size 3"):
        vector(np.ones(3), Seq).pair(vector(np.ones(3), Model))  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="Vec\\[Seq\\] paired with Compose"):
        vector(np.ones(3), Seq).pair(Compose(matrix(np.ones((3, 3)), Seq, Model)))  # type: ignore[arg-type]


def test_bad_construction_is_rejected_clearly() -> None:
    with pytest.raises(ValueError, match=r"vector\(Seq\) needs a 1-D array, got shape \(2, 2\)"):
        vector(np.ones((2, 2)), Seq)
    with pytest.raises(ValueError, match=r"matrix\(Seq, Model\) needs a 2-D array, got shape \(3,\)"):
        matrix(np.ones(3), Seq, Model)
    with pytest.raises(TypeError, match="dimension tag must be a subclass of Dim"):
        vector(np.ones(3), int)  # type: ignore[type-var]
    with pytest.raises(ValueError, match=r"to_array: Vec\[Seq\] holds 2 arrays"):
        vector(np.ones(3), Seq).pair(vector(np.ones(3), Seq)).to_array()


def test_a_structure_without_counit_is_named() -> None:
    with pytest.raises(TypeError, match="str has no Counit instance"):
        counit("abc")  # type: ignore[arg-type]


def test_vec_is_a_pytree_through_jit_and_grad() -> None:
    x = rng.normal(size=5)

    @jax.jit
    def energy(v: Vec[Seq, jax.Array]) -> jax.Array:
        return v.fmap(lambda a: a**2).counit()

    np.testing.assert_allclose(energy(vector(x, Seq)), np.sum(x**2), rtol=1e-14)
    grad = jax.grad(energy)(vector(x, Seq))
    assert isinstance(grad, Vec)
    assert grad.tag is Seq
    np.testing.assert_allclose(grad.to_array(), 2 * x, rtol=1e-14)


def test_vmap_over_a_batch_of_vectors() -> None:
    batch = rng.normal(size=(7, 5))
    sums = jax.vmap(lambda row: vector(row, Seq).fmap(jnp.abs).counit())(batch)
    np.testing.assert_allclose(sums, np.abs(batch).sum(axis=1), rtol=1e-14)


def test_float32_is_kept() -> None:
    v = vector(np.ones(3, np.float32), Hidden)
    assert v.fmap(lambda a: 2 * a).counit().dtype == jnp.float32
