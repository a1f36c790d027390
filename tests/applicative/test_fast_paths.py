"""The linear algebra's dense formulas: they run, they are right, and they relate to the generic definitions
as each instance states (applicative/protocols/dense.py).

For every operation and every kind of structure level (a ``Vec``, a ``Cheb``, and the composites
``Compose`` of the two), the operation must take its dense formula (``record_fast_paths``) and
equal an independent float64 numpy formula: each level flattened to one axis, contracted through
the Kronecker product of its axes' Gram matrices (the identity for a Vec, the integrals of T_i T_j
by ``numpy.polynomial.chebyshev`` for a Cheb). Then the relation to the generic definition
(``generic_only``): equal for Vec levels; for Cheb levels, equal when the products' degrees stay
below N, and otherwise the generic definition integrates the product truncated to N coefficients,
a different number, while the dense formula is the exact integral.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import numpy.polynomial.chebyshev as C
import pytest

from applicative import (
    Cheb,
    Compose,
    Dim,
    Leaf,
    Ring,
    Vec,
    add,
    dot,
    each_mul_mmt,
    generic_only,
    mul_mm,
    mul_mmt,
    mul_mv,
    mul_vm,
    nn,
    outer,
    record_fast_paths,
    scale,
    sum_mul_mmt,
    to_array,
)
from tests.applicative.tolerance import Tolerance

rng = np.random.default_rng(11)
TOL: Tolerance = {"rtol": 1e-12, "atol": 1e-12}


class A(Dim): ...


class B(Dim): ...


class D(Dim): ...


class E(Dim): ...


Axis = tuple[str, type[Dim], int]
"""("vec" or "cheb", tag, size)"""
Level = tuple[Axis, ...]
"""One structure level: one axis, or two for a Compose."""

# The kinds of level every operation is checked on, each over its own tag.
KINDS: dict[str, Callable[[type[Dim]], Level]] = {
    "Vec": lambda t: (("vec", t, 3),),
    "Cheb": lambda t: (("cheb", t, 6),),
    "Cheb∘Vec": lambda t: (("cheb", t, 5), ("vec", E, 2)),
    "Vec∘Cheb": lambda t: (("vec", t, 2), ("cheb", E, 4)),
}


def build(array: np.ndarray, levels: list[Level]) -> Any:
    """The nested structure of these levels holding the array (one axis per level axis, in order)."""
    out: Any = jnp.asarray(array)
    for level in reversed(levels):
        for kind, tag, size in reversed(level):
            out = Vec(out, tag, size) if kind == "vec" else Cheb(out, tag, size, 2 * size)
        if len(level) > 1:
            out = Compose(out)
    return out


def integral(c: np.ndarray) -> float:
    antiderivative = C.chebint(c)
    return float(C.chebval(1.0, antiderivative) - C.chebval(-1.0, antiderivative))


def gram_numpy(level: Level) -> np.ndarray:
    """The Gram matrix of a level's product basis: Kronecker product of its axes' (numpy's integrals)."""
    g = np.ones((1, 1))
    for kind, _, n in level:
        axis = (
            np.eye(n)
            if kind == "vec"
            else np.array([[integral(C.chebmul(np.eye(n)[i], np.eye(n)[j])) for j in range(n)] for i in range(n)])
        )
        g = np.kron(g, axis)
    return g


def size(level: Level) -> int:
    return int(np.prod([n for _, _, n in level]))


def shape(*levels: Level) -> tuple[int, ...]:
    return tuple(n for level in levels for _, _, n in level)


# Each operation: its level letters (the spec of applicative.linalg) and the numpy formula on the
# levels flattened to matrices, with G the Gram matrix of the contracted level.
Op = tuple[Callable[..., Any], str, Callable[..., np.ndarray]]
OPS: dict[str, Op] = {
    "dot": (dot, "f,f->", lambda g, a, b: a @ g["f"] @ b),
    "outer": (outer, "f,g->fg", lambda g, a, b: np.outer(a, b)),
    "mul_mv": (mul_mv, "fg,g->f", lambda g, m, v: m @ g["g"] @ v),
    "mul_vm": (mul_vm, "f,fg->g", lambda g, v, m: v @ g["f"] @ m),
    "mul_mm": (mul_mm, "fg,gh->fh", lambda g, a, b: a @ g["g"] @ b),
    "mul_mmt": (mul_mmt, "fg,hg->hf", lambda g, a, b: b @ g["g"] @ a.T),
    "each_mul_mmt": (each_mul_mmt, "ifg,hg->ihf", lambda g, a, b: np.einsum("hp,pq,ifq->ihf", b, g["g"], a)),
    "sum_mul_mmt": (
        sum_mul_mmt,
        "fgh,fih->ig",
        lambda g, a, b: np.einsum("pq,qih,hk,pgk->ig", g["f"], b, g["h"], a),
    ),
}
TAGS = {"f": A, "g": B, "h": D, "i": E}


def operands(spec: str, kind: str, truncate: bool = False) -> tuple[list[Any], list[np.ndarray], dict[str, Level]]:
    """Random operands for ``spec`` with every level of ``kind`` (the 'i' level of sum_mul_mmt and of
    each_mul_mmt a Vec):
    the structures, their arrays with each level flattened, and the levels. ``truncate``: Chebyshev
    coefficients of degree below half the resolution only."""
    letters = sorted(set(spec.replace(",", "").split("->")[0]))
    levels = {c: KINDS["Vec" if c == "i" else kind](TAGS[c]) for c in letters}
    structures, flat = [], []
    for names in spec.split("->")[0].split(","):
        ls = [levels[c] for c in names]
        array = rng.normal(size=shape(*ls))
        if truncate:
            for position, (k, _, n) in enumerate(ax for level in ls for ax in level):
                if k == "cheb":
                    index = [slice(None)] * array.ndim
                    index[position] = slice(n // 2, None)
                    array[tuple(index)] = 0.0
        structures.append(build(array, ls))
        flat.append(array.reshape([size(level) for level in ls]))
    return structures, flat, levels


def expected(name: str, flat: list[np.ndarray], levels: dict[str, Level]) -> np.ndarray:
    _, spec, formula = OPS[name]
    out = formula({c: gram_numpy(level) for c, level in levels.items()}, *flat)
    return np.asarray(out).reshape(shape(*(levels[c] for c in spec.split("->")[1])))


CASES = [(name, kind) for name in OPS for kind in KINDS]


@pytest.mark.parametrize(("name", "kind"), CASES, ids=[f"{n}-{k}" for n, k in CASES])
def test_the_dense_formula_runs_and_is_the_exact_contraction(name: str, kind: str) -> None:
    op, spec, _ = OPS[name]
    structures, flat, levels = operands(spec, kind)
    with record_fast_paths() as taken:
        result = op(*structures)
    assert taken == [name]
    out = np.asarray(result) if spec.endswith("->") else np.asarray(to_array(result))
    np.testing.assert_allclose(out, expected(name, flat, levels), **TOL)
    if not spec.endswith("->"):  # the result has the shape of the levels it keeps
        # jaxlib 0.9.0 ships no type stub for PyTreeDef: mypy cannot type its ==.
        assert jax.tree_util.tree_structure(result) == jax.tree_util.tree_structure(  # type: ignore[operator]
            build(out, [levels[c] for c in spec.split("->")[1]])
        )


@pytest.mark.parametrize(("name", "kind"), CASES, ids=[f"{n}-{k}" for n, k in CASES])
def test_the_generic_definition_agrees_where_products_are_exact(name: str, kind: str) -> None:
    # Vec levels: always. Cheb levels: fmap truncates a product to N coefficients, which is exact
    # when both factors have degree below N / 2.
    op, spec, _ = OPS[name]
    structures, flat, levels = operands(spec, kind, truncate=True)
    with generic_only(), record_fast_paths() as taken:
        result = op(*structures)
    assert taken == []
    out = np.asarray(result) if spec.endswith("->") else np.asarray(to_array(result))
    np.testing.assert_allclose(out, expected(name, flat, levels), **TOL)


def test_on_cheb_the_dense_formula_is_the_exact_integral_and_the_generic_one_truncates() -> None:
    # Full-degree factors: the product has degree 2N - 2. The dense formula integrates it exactly;
    # the generic definition (counit . fmap mul . pair) integrates its first N coefficients.
    n = 8
    # Its own seeded draw (not the module's shared rng, whose draws depend on which tests ran first):
    # factors whose product's degrees >= n carry a seventh of the integral.
    a, b = np.random.default_rng(0).normal(size=(2, n))
    f, g = Cheb.from_array(a, A), Cheb.from_array(b, A)
    product = C.chebmul(a, b)
    with generic_only():
        generic = float(dot(f, g))
    fast = float(dot(f, g))
    np.testing.assert_allclose(fast, integral(product), **TOL)
    np.testing.assert_allclose(generic, integral(product[:n]), **TOL)
    assert abs(fast - generic) > 1e-2 * abs(fast)  # two different operators, as documented
    np.testing.assert_allclose(fast - generic, integral(product) - integral(product[:n]), **TOL)


def test_sums_and_scalings_act_on_coordinates() -> None:
    for kind in KINDS:
        (x, y), _, _ = operands("f,f->", kind)
        with record_fast_paths() as taken:
            total, scaled = add(x, y), scale(-1.5, x)
        assert taken == ["add", "scale"]
        np.testing.assert_allclose(to_array(total), to_array(x) + to_array(y), **TOL)
        np.testing.assert_allclose(to_array(scaled), -1.5 * to_array(x), **TOL)
        with generic_only():  # fmap of a linear map: exact up to rounding, on a Cheb too
            np.testing.assert_allclose(to_array(add(x, y)), to_array(total), **TOL)
            np.testing.assert_allclose(to_array(scale(-1.5, x)), to_array(scaled), **TOL)


def test_the_dense_formula_declines_where_it_does_not_apply() -> None:
    class MaxPlus(Ring[jax.Array]):
        def zero(self, like: jax.Array) -> jax.Array:
            return jnp.full_like(like, -jnp.inf)

        def add(self, a: jax.Array, b: jax.Array) -> jax.Array:
            return jnp.maximum(a, b)

        def scale(self, r: float | jax.Array, a: jax.Array) -> jax.Array:
            return a + jnp.log(r)

        def mul(self, a: jax.Array, b: jax.Array) -> jax.Array:
            return a + b

    v = Vec.from_array(rng.normal(size=3), A)
    with record_fast_paths() as taken:
        tropical = dot(v, v, MaxPlus())  # another ring: its own arithmetic
        tree_level = dot(Compose(Leaf(v)), Compose(Leaf(v)))  # a Tree level has no array axes
        with generic_only():
            dot(v, v)
    assert taken == []
    np.testing.assert_allclose(tropical, 2 * np.max(to_array(v)), **TOL)
    np.testing.assert_allclose(tree_level, np.sum(to_array(v) ** 2), **TOL)


def test_jit_does_not_change_the_dense_formulas() -> None:
    for name in OPS:
        op, spec, _ = OPS[name]
        structures, flat, levels = operands(spec, "Cheb∘Vec")
        out = jax.jit(op)(*structures)
        got = np.asarray(out) if spec.endswith("->") else np.asarray(to_array(out))
        np.testing.assert_allclose(got, expected(name, flat, levels), **TOL)


def test_mismatched_levels_are_named() -> None:
    (x,), _, _ = operands("f->f", "Cheb∘Vec")
    y = build(rng.normal(size=(5, 3)), [(("cheb", A, 5), ("vec", E, 3))])
    with pytest.raises(
        ValueError,
        match=r"dot: dimension mismatch: Cheb\[A\] of size 5 x Vec\[E\] of size 2 vs Cheb\[A\] of size 5 x Vec\[E\] ",
    ):
        dot(x, y)


def test_a_linear_map_of_a_cheb_sequence_is_one_contraction_without_dcts() -> None:
    # Linear.each: the Gram matrix folded into W, then one contraction of coefficients. The map
    # through fmap would sample the sequence and transform back: the same numbers, two DCTs more.
    xs = build(rng.normal(size=(6, 5)), [KINDS["Cheb"](A), (("cheb", B, 5),)])
    lin = nn.Linear.init(jax.random.key(0), Cheb.from_array(np.zeros(5), B), Cheb.from_array(np.zeros(4), D))

    def matmuls(f: Callable[[Any], Any]) -> int:
        return str(jax.make_jaxpr(f)(xs)).count("dot_general")

    assert matmuls(lin.each) == 2
    assert matmuls(lambda x: x.fmap(lin)) == 4
    np.testing.assert_allclose(to_array(lin.each(xs)), to_array(xs.fmap(lin)), **TOL)
