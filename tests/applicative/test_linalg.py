"""The derived linear algebra: fast paths == generic definitions == numpy float64,
jitted == eager, gradients == finite differences, clear dimension errors."""

import contextlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.test_util import check_grads

from applicative import (
    Applicative,
    Arithmetic,
    Compose,
    Dim,
    Leaf,
    Ring,
    Tree,
    Vec,
    VecOf,
    add,
    as_vec,
    counit,
    dot,
    each_mul_mmt,
    generic_only,
    linear,
    mul_mm,
    mul_mmt,
    mul_mv,
    mul_vm,
    outer,
    scale,
    sum_mul_mmt,
    to_array,
)
from tests.applicative.dims import Hidden, Model, Out, Seq
from tests.applicative.tolerance import Tolerance, float32
from tests.compiling import USERS_COMPILE

rng = np.random.default_rng(1)
S, D, H = 5, 4, 3  # sizes of Seq, Model, Hidden


# Each case: the operation on arrays through Vec, and its numpy float64 reference.
Case = tuple[Callable[..., jax.Array], Callable[..., np.ndarray], tuple[tuple[int, ...], ...]]
CASES: dict[str, Case] = {
    "dot": (lambda a, b: dot(Vec.from_array(a, Model), Vec.from_array(b, Model)), np.dot, ((D,), (D,))),
    "outer": (lambda a, b: to_array(outer(Vec.from_array(a, Seq), Vec.from_array(b, Model))), np.outer, ((S,), (D,))),
    "mul_mv": (
        lambda m, v: to_array(mul_mv(Vec.from_array(m, Seq, Model), Vec.from_array(v, Model))),
        np.matmul,
        ((S, D), (D,)),
    ),
    "mul_vm": (
        lambda v, m: to_array(mul_vm(Vec.from_array(v, Seq), Vec.from_array(m, Seq, Model))),
        np.matmul,
        ((S,), (S, D)),
    ),
    "mul_mm": (
        lambda a, b: to_array(mul_mm(Vec.from_array(a, Seq, Model), Vec.from_array(b, Model, Hidden))),
        np.matmul,
        ((S, D), (D, H)),
    ),
    "mul_mmt": (
        lambda a, b: to_array(mul_mmt(Vec.from_array(a, Seq, Model), Vec.from_array(b, Hidden, Model))),
        lambda a, b: b @ a.T,
        ((S, D), (H, D)),
    ),
    "each_mul_mmt": (
        lambda a, b: to_array(each_mul_mmt(Vec.from_array(a, Out, Seq, Model), Vec.from_array(b, Hidden, Model))),
        lambda a, b: np.einsum("fgh,kh->fkg", a, b),
        ((2, S, D), (H, D)),
    ),
    "sum_mul_mmt": (
        lambda a, b: to_array(sum_mul_mmt(Vec.from_array(a, Out, Seq, Model), Vec.from_array(b, Out, Hidden, Model))),
        lambda a, b: np.einsum("fgh,fkh->kg", a, b),
        ((2, S, D), (2, H, D)),
    ),
    "linear": (
        lambda w, c, x: to_array(
            linear(Vec.from_array(w, Hidden, Model), Vec.from_array(c, Hidden), Vec.from_array(x, Model))
        ),
        lambda w, c, x: w @ x + c,
        ((H, D), (H,), (D,)),
    ),
}


def _args(shapes: tuple[tuple[int, ...], ...], dtype: type = np.float64) -> list[np.ndarray]:
    return [rng.normal(size=s).astype(dtype) for s in shapes]


@pytest.mark.parametrize("name", list(CASES))
def test_fast_generic_and_numpy_agree(name: str) -> None:
    op, reference, shapes = CASES[name]
    args = _args(shapes)
    expected = reference(*args)
    np.testing.assert_allclose(op(*args), expected, rtol=1e-12, atol=1e-12)
    with generic_only():
        np.testing.assert_allclose(op(*args), expected, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("name", list(CASES))
def test_jit_equals_eager(name: str) -> None:
    op, reference, shapes = CASES[name]
    args = _args(shapes)
    for context in (contextlib.nullcontext, generic_only):
        with context():
            eager, jitted = op(*args), jax.jit(lambda *xs: op(*xs))(*args)  # traced afresh in this context
        np.testing.assert_allclose(jitted, eager, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(jitted, reference(*args), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("name", list(CASES))
def test_gradients_match_finite_differences(name: str) -> None:
    op, _, shapes = CASES[name]
    args = _args(shapes)
    check_grads(op, args, order=1, modes=("rev", "fwd"))
    with generic_only():
        check_grads(op, args, order=1, modes=("rev",))


@pytest.mark.parametrize("name", list(CASES))
def test_float32_stays_float32(name: str) -> None:
    op, reference, shapes = CASES[name]
    args = _args(shapes, np.float32)
    out = op(*args)
    assert out.dtype == jnp.float32
    np.testing.assert_allclose(out, reference(*[a.astype(np.float64) for a in args]), **float32(1e-5))


def test_complex_matrices() -> None:
    a = rng.normal(size=(S, D)) + 1j * rng.normal(size=(S, D))
    b = rng.normal(size=(D, H)) + 1j * rng.normal(size=(D, H))
    for context in (contextlib.nullcontext, generic_only):
        with context():
            out = to_array(mul_mm(Vec.from_array(a, Seq, Model), Vec.from_array(b, Model, Hidden)))
        np.testing.assert_allclose(out, a @ b, rtol=1e-12)


@dataclass(frozen=True)
class MaxPlus(Ring[jax.Array]):
    """The tropical semiring: add = max, mul = +; generic code must honour it."""

    def zero(self, like: jax.Array) -> jax.Array:
        return jnp.full_like(like, -jnp.inf)

    def add(self, a: jax.Array, b: jax.Array) -> jax.Array:
        larger: jax.Array = jax.tree_util.tree_map(jnp.maximum, a, b)
        return larger

    def scale(self, r: float | jax.Array, a: jax.Array) -> jax.Array:
        shifted: jax.Array = jax.tree_util.tree_map(lambda leaf: leaf + jnp.log(r), a)
        return shifted

    def mul(self, a: jax.Array, b: jax.Array) -> jax.Array:
        return a + b


def test_a_non_arithmetic_ring_runs_the_generic_definition() -> None:
    a, b = rng.normal(size=(S, D)), rng.normal(size=(D, H))
    out = to_array(mul_mm(Vec.from_array(a, Seq, Model), Vec.from_array(b, Model, Hidden), MaxPlus()))
    np.testing.assert_allclose(out, np.max(a[:, :, None] + b[None, :, :], axis=1), rtol=1e-14)
    np.testing.assert_allclose(dot(Vec.from_array(a[0], Model), Vec.from_array(b[:, 0], Model), MaxPlus()), out[0, 0])


def test_generic_definitions_cover_other_structures() -> None:
    # The Frobenius inner product of two grids, as the dot product of Compose structures.
    x, y = rng.normal(size=(S, D)), rng.normal(size=(S, D))
    gx, gy = Compose(Vec.from_array(x, Seq, Model)), Compose(Vec.from_array(y, Seq, Model))
    np.testing.assert_allclose(dot(gx, gy), np.sum(x * y), rtol=1e-12)
    # A Vec of pairs is not dense: the fast path declines and the generic one runs.
    pairs = Vec.from_array(x[:, 0], Seq).pair(Vec.from_array(x[:, 1], Seq))
    np.testing.assert_allclose(
        dot(pairs.fmap(lambda p: p[0] * p[1]), Vec.from_array(np.ones(S), Seq)), np.dot(x[:, 0], x[:, 1]), rtol=1e-12
    )


def _attention(q: np.ndarray, k: np.ndarray, v: np.ndarray) -> jax.Array:
    """Generic scores, a row softmax through counit, and the weighted values."""
    scores = mul_mmt(Vec.from_array(k, Seq, Model), Vec.from_array(q, Out, Model))  # one row per query

    def softmax(row: Applicative[VecOf[Seq], jax.Array]) -> Applicative[VecOf[Seq], jax.Array]:
        e = row.fmap(jnp.exp)
        total = counit(e)
        return e.fmap(lambda a: a / total)

    return to_array(mul_mm(scores.fmap(softmax), Vec.from_array(v, Seq, Hidden)))


def _attention_numpy(q: np.ndarray, k: np.ndarray, v: np.ndarray) -> np.ndarray:
    s = q @ k.T
    p = np.exp(s - s.max(axis=1, keepdims=True))
    attended: np.ndarray = (p / p.sum(axis=1, keepdims=True)) @ v
    return attended


class Batch(Dim):
    """Many rows."""


class Three(Dim):
    """A small feature axis: the size at which XLA:CPU's fusion went wrong."""


# jax-ml/jax#39103: XLA:CPU miscompiles a vmapped small matvec followed by a reduction under jit,
# with O(1) errors in the rows past the first 32,768 (float32) or 16,384 (float64), up to about
# 43,000 rows: jaxlib 0.9.1, 0.9.2, 0.10.0 and 0.10.1 in float32, 0.10.2 in float32 and float64.
# 0.9.0, 0.9.0.1 and 0.11.0 on compute it correctly; pyproject.toml excludes the releases that
# don't, and docs/install.md lists them. It is the plain jax.numpy form `m @ r` (m the matrix, r
# the batched vector) that goes wrong: the library's own mul_mv compiles to a layout XLA gets right.
MISCOMPILED_ROWS = (20_000, 36_000, 43_000)
USERS_MATVEC_THEN_REDUCTION: dict[str, Callable[[jax.Array, jax.Array], jax.Array]] = {
    # what a user writes in jax.numpy
    "vmap": lambda m, x: jax.vmap(lambda r: jnp.sum(m @ r))(x),
    # the same in a user's fmap over a structure, summed by counit
    "fmap then counit": lambda m, x: to_array(
        Vec.from_array(x, Batch, Three).fmap(lambda r: counit(Vec.from_array(m @ to_array(r), Three)))
    ),
}


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("form", list(USERS_MATVEC_THEN_REDUCTION))
def test_jit_regression_users_matvec_then_reduction(form: str, dtype: type[np.floating[Any]]) -> None:
    # Fails on every excluded release (float32: 36,000 and 43,000 rows; on 0.10.2 float64 too).
    f = USERS_MATVEC_THEN_REDUCTION[form]
    m = rng.normal(size=(3, 3))
    for rows in MISCOMPILED_ROWS:
        x = rng.normal(size=(rows, 3))
        expected = (x @ m.T).sum(axis=1)
        args = jnp.asarray(m, dtype), jnp.asarray(x, dtype)
        eager, jitted = f(*args), jax.jit(f, compiler_options=USERS_COMPILE)(*args)  # XLA's code as users get it
        tol = float32(1e-4) if dtype == np.float32 else Tolerance(rtol=1e-4, atol=1e-4)  # TF32 on a GPU
        tolerance = {"rtol": tol["rtol"], "atol": tol["atol"] * np.abs(expected).max()}
        np.testing.assert_allclose(eager, expected, **tolerance)
        np.testing.assert_allclose(
            jitted, expected, **tolerance, err_msg=f"jit miscompiled {rows} rows: see docs/install.md"
        )


@pytest.mark.parametrize(("dtype", "rows"), [(np.float32, 36000), (np.float64, 20000)])
def test_jit_regression_vmapped_matvec_then_reduction(dtype: type[np.floating[Any]], rows: int) -> None:
    # The library's own form of the case above (mul_mv inside fmap, then counit): its einsum
    # compiles to a layout XLA:CPU gets right, so this passes on the excluded releases too; it
    # guards the library's path, and the test above guards users' code.
    m = rng.normal(size=(3, 3)).astype(dtype)
    x = rng.normal(size=(rows, 3)).astype(dtype)
    expected = (x.astype(np.float64) @ m.T.astype(np.float64)).sum(axis=1)

    def row_sums(m: np.ndarray, x: np.ndarray) -> jax.Array:
        w = Vec.from_array(m, Three, Three)
        return to_array(Vec.from_array(x, Batch, Three).fmap(lambda r: counit(mul_mv(w, r))))

    for context in (contextlib.nullcontext, generic_only):
        with context():
            jitted = jax.jit(lambda *a: row_sums(*a), compiler_options=USERS_COMPILE)(m, x)  # traced afresh here
        tol = float32(1e-4)
        np.testing.assert_allclose(jitted, expected, rtol=tol["rtol"], atol=tol["atol"] * np.abs(expected).max())


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize(("queries", "keys", "model"), [(4, 3, 2), (8, 5, 4), (16, 16, 8), (64, 32, 16)])
def test_jit_regression_nested_vmap_dot_then_row_softmax(
    dtype: type[np.floating[Any]], queries: int, keys: int, model: int
) -> None:
    # The pattern docs/design.md reports jaxlib 0.10.2 getting wrong on CPU: jitted
    # generic attention with a row softmax, wrong by O(1) while eager was right.
    q, k = rng.normal(size=(queries, model)).astype(dtype), rng.normal(size=(keys, model)).astype(dtype)
    v = rng.normal(size=(keys, 3)).astype(dtype)
    expected = _attention_numpy(*(a.astype(np.float64) for a in (q, k, v)))
    tol: Tolerance = {"rtol": 1e-12, "atol": 1e-12} if dtype == np.float64 else float32(2e-5)
    for context in (generic_only, contextlib.nullcontext):
        with context():
            eager = _attention(q, k, v)
            jitted = jax.jit(lambda *a: _attention(*a), compiler_options=USERS_COMPILE)(q, k, v)
        np.testing.assert_allclose(eager, expected, **tol)
        np.testing.assert_allclose(jitted, expected, **tol)


V = Vec.from_array
MISMATCHES: dict[str, Callable[[], object]] = {
    "dot": lambda: dot(V(np.ones(3), Model), V(np.ones(4), Model)),
    "mul_mv": lambda: mul_mv(V(np.ones((2, 3)), Seq, Model), V(np.ones(3), Hidden)),  # type: ignore[misc]
    "mul_vm": lambda: mul_vm(V(np.ones(3), Seq), V(np.ones((4, 2)), Seq, Model)),
    "mul_mm": lambda: mul_mm(V(np.ones((2, 3)), Seq, Model), V(np.ones((3, 2)), Hidden, Model)),  # type: ignore[misc]
    "mul_mmt": lambda: mul_mmt(V(np.ones((2, 3)), Seq, Model), V(np.ones((3, 2)), Hidden, Model)),
    "each_mul_mmt": lambda: each_mul_mmt(V(np.ones((2, 3, 4)), Out, Seq, Model), V(np.ones((3, 5)), Hidden, Model)),
    "sum_mul_mmt": lambda: sum_mul_mmt(
        V(np.ones((2, 3, 4)), Out, Seq, Model), V(np.ones((2, 3, 5)), Out, Hidden, Model)
    ),
}
MISMATCH = r"dimension mismatch: Vec\[\w+\] of size \d vs Vec\[\w+\] of size \d"


@pytest.mark.parametrize("name", list(MISMATCHES))
def test_dimension_mismatches_name_both_sides(name: str) -> None:
    for context in (contextlib.nullcontext, generic_only):
        with context(), pytest.raises(ValueError, match=MISMATCH):
            MISMATCHES[name]()


def test_default_ring_is_ordinary_arithmetic() -> None:
    a, b = rng.normal(size=D), rng.normal(size=D)
    assert dot(Vec.from_array(a, Model), Vec.from_array(b, Model), Arithmetic()) == dot(
        Vec.from_array(a, Model), Vec.from_array(b, Model)
    )


# Misnested operands: a TypeError naming the operation and the argument, at trace time, on both paths.

v3, m33 = V(np.ones(3), Seq), V(np.ones((3, 3)), Seq, Seq)
VECTOR_FOR_MATRIX: dict[str, tuple[Callable[[], object], str]] = {
    "mul_mv": (lambda: mul_mv(v3, v3), "m"),  # type: ignore[arg-type]
    "mul_vm": (lambda: mul_vm(v3, v3), "m"),  # type: ignore[arg-type]
    "mul_mm": (lambda: mul_mm(v3, m33), "a"),  # type: ignore[arg-type]
    "mul_mmt": (lambda: mul_mmt(m33, v3), "b"),  # type: ignore[arg-type]
    "linear": (lambda: linear(v3, v3, v3), "w"),  # type: ignore[arg-type]
}


@pytest.mark.parametrize("name", list(VECTOR_FOR_MATRIX))
def test_a_vector_where_a_matrix_belongs_is_named(name: str) -> None:
    call, argument = VECTOR_FOR_MATRIX[name]
    expected = (
        rf"{name}: argument {argument} is a Vec\[Seq\] of size 3 holding scalars; expected a structure of structures"
    )
    for context in (contextlib.nullcontext, generic_only):
        with context(), pytest.raises(TypeError, match=expected):
            call()


def test_a_matrix_where_a_vector_belongs_is_named() -> None:
    # Under ordinary arithmetic, elements are multiplied: they cannot be structures.
    matrix = r"is a Vec\[Seq\] of size 3 of Vec\[Seq\] of size 3 holding scalars; expected a structure \(a vector\)"
    with pytest.raises(TypeError, match=r"dot: argument a " + matrix):
        dot(m33, v3)
    with pytest.raises(TypeError, match=r"outer: argument b " + matrix):
        outer(v3, m33)
    with pytest.raises(TypeError, match=r"sum_mul_mmt: argument a is a Vec\[Seq\] of size 3 of Vec\[Seq\] of size 3"):
        sum_mul_mmt(m33, m33)  # type: ignore[arg-type]
    with pytest.raises(
        TypeError, match=r"add: the arguments hold different elements, a Vec and an array of shape \(\)"
    ):
        add(m33, v3)


def test_an_array_where_a_structure_belongs_is_named() -> None:
    with pytest.raises(TypeError, match=r"dot: argument a is a ndarray; expected a structure \(a vector\)"):
        dot(np.ones(3), v3)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"scale: argument a is a ndarray"):
        scale(2.0, np.ones(3))  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"scale: r must be a scalar \(a number or a 0-d array\), got an array"):
        scale(jnp.ones(3), v3)  # broadcasting would give a Hadamard product


def test_the_generic_definitions_name_what_they_meet() -> None:
    # A tree shows no elements up front: the nested operations of a generic definition check theirs.
    t = Tree.from_nested((1.0, 2.0))
    with pytest.raises(TypeError, match=r"dot: argument a is a (float|ArrayImpl|\w*Tracer); expected a structure"):
        mul_mv(t, t)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"dot: an element is a Leaf, a structure, not a scalar; .* Compose\(x\)"):
        dot(Leaf(Leaf(1.0)), Leaf(Leaf(1.0)))
    with pytest.raises(TypeError, match=r"add: the arguments hold different elements, a Leaf and a float"):
        add(Leaf(Leaf(1.0)), Leaf(1.0))
    # Well-nested trees still run (the dyadic integral of the pointwise product).
    assert float(dot(t, t)) == 0.5 * 1.0 + 0.5 * 4.0


def test_operand_checks_add_nothing_to_compiled_code() -> None:
    # The checks are Python on shapes: a jitted matrix-vector product traces to the same program.
    m, x = V(rng.normal(size=(S, D)), Seq, Model), V(rng.normal(size=D), Model)
    jaxpr = jax.make_jaxpr(lambda m, x: to_array(mul_mv(m, x)))(m, x)
    assert [eqn.primitive.name for eqn in jaxpr.eqns] == ["dot_general"]


def test_add_of_arrays_and_scalars_adds_per_element() -> None:
    # A Vec of 4 arrays plus a Vec of 4 scalars adds b_i to element i. Leafwise, the coordinates
    # (4, 4) + (4,) would broadcast b along the wrong axis: the fast path declines unequal leaf shapes.
    rows, b = rng.normal(size=(4, 4)), rng.normal(size=4)
    total = add(Vec.stack(rows, Seq), V(b, Seq))
    np.testing.assert_allclose(np.asarray(as_vec(total).data), rows + b[:, None], rtol=1e-14)
