"""Every law of every abstraction, for every instance (applicative.laws)."""

import dataclasses
from collections.abc import Callable
from typing import Any, cast

import hypothesis.extra.numpy as hnp
import hypothesis.strategies as st
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from applicative import (
    ARITHMETIC,
    Applicative,
    Axis,
    Cheb,
    Compose,
    Dense,
    DenseTree,
    Leaf,
    Node,
    Pointwise,
    Vec,
    VecOf,
    as_vec,
    fast_paths,
    laws,
    linalg,
    record,
    strategies,
)
from applicative.instances import chebyshev
from applicative.protocols.algebra import Arithmetic, Module, Real
from applicative.strategies import Law
from tests.applicative.dims import Seq

EXAMPLES = {"default": (5, 3, 2), "slow": (20, 8, 5)}
"""Examples drawn per law, for most instances and for those with a Chebyshev axis (their fmaps run DCTs op
by op), and for the Dense hook (each example runs eleven operations both ways, the generic one eagerly):
in the default run, and in CI's slow run (-m slow). Each draw of new sizes compiles every operation
anew: the default run's were 10, 6 and 5, the hook's checks two thirds of this file's time (issue 65);
the curated mutants tools/mutants.py runs on this parametrisation are killed with these."""


@pytest.mark.parametrize("instance", list(strategies.INSTANCES))
@pytest.mark.parametrize("run", ["default", pytest.param("slow", marks=pytest.mark.slow)])
def test_structure_laws(instance: str, run: str) -> None:
    """check_laws checks every law the instance claims: all of them, but for Quantum's counit (a
    measurement, not linear: tests/applicative/test_distribution.py shows a counterexample to each law it drops)."""
    strategy, maps = strategies.INSTANCES[instance]
    most, chebyshev, dense_examples = EXAMPLES[run]
    examples = chebyshev if "Cheb" in instance else most
    checked = laws.check_laws(strategy(), maps=maps, max_examples=examples, dense_examples=dense_examples)
    not_claimed = ("counit additivity", "counit respects pairing") if instance == "Quantum" else ()
    # The Dense hook is checked where the structure is one of scalars (not a matrix: Vec of Vec).
    dense = laws.DENSE_LAWS if instance in ("Vec", "Compose Vec Vec", "Cheb", "Compose Vec Cheb",
                                            "Compose Cheb Vec", "DenseTree", "Graph") else ()  # fmt: skip
    assert checked == tuple(law for law in laws.LAWS if law not in not_claimed) + dense


def test_quantum_passes_its_laws_with_64_bit_types_off() -> None:
    """JAX's default: outcomes float32, amplitudes complex64 (the suite runs under x64). Distribution
    shares the construction and merging checked here."""
    strategy, maps = strategies.INSTANCES["Quantum"]
    with jax.enable_x64(False):
        example = laws.drawn(strategy())
        dtypes = {leaf.dtype for leaf in jax.tree_util.tree_leaves(example)}
        assert dtypes == {np.dtype(np.float32), np.dtype(np.complex64)}
        checked = laws.check_laws(strategy(), maps=maps, max_examples=8)
    assert checked == tuple(law for law in laws.LAWS if law not in ("counit additivity", "counit respects pairing"))


@pytest.mark.parametrize("elements", ["Vec", "Cheb"])
@pytest.mark.slow
def test_the_laws_take_structures_of_any_element_the_strategy_draws(elements: str) -> None:
    """The default maps act leaf by leaf: a Vec of Vecs, a Cheb of Vecs (not a Compose: the structure
    of structures itself) pass with them; their Dense hook is the elements' business (not checked)."""

    def outer(t: laws.Triple) -> laws.Triple:
        x, y, z = (cast(Compose[Any, Any, Any], c) for c in t)
        return x.outer, y.outer, z.outer

    if elements == "Vec":
        triples, maps = strategies.matrix_triples(), laws.Maps()
    else:
        triples, maps = strategies.cheb_vec_triples().map(outer), strategies.AFFINE
    x = laws.drawn(triples)[0]
    assert isinstance(cast(Dense[Any, Any], x).elements(), Vec)
    assert laws.check_laws(triples, maps=maps, max_examples=5) == laws.LAWS


def test_a_claim_names_known_laws() -> None:
    @record
    class Overclaiming(Vec[Seq, jax.Array]):
        laws_claimed = frozenset({"functor identity", "counit linearity"})

    with pytest.raises(ValueError, match=r"Overclaiming.laws_claimed names unknown laws \['counit linearity'\]"):
        laws.claimed_laws(Overclaiming)


@record
class ReversingVec(Vec[Seq, jax.Array]):
    """Not a functor: its fmap also reverses the elements."""

    def fmap(self, f: Callable[[jax.Array], Any]) -> Vec[Seq, Any]:
        out = super().fmap(f)
        return ReversingVec(jax.tree_util.tree_map(lambda leaf: leaf[::-1], out.data), out.tag, out.size)


def _reversing(x: Applicative[Any, Any]) -> ReversingVec:
    v = as_vec(x)
    return ReversingVec(v.data, v.tag, v.size)


def test_the_suite_catches_a_broken_instance() -> None:
    structures = strategies.vec_triples().map(lambda t: (_reversing(t[0]), _reversing(t[1]), _reversing(t[2])))
    # The failure states the law as an equation, the drawn inputs and both sides (each repr may wrap
    # over lines, as numpy prints arrays of mixed exponents: hence (?s)).
    shown = r"(?s)law 'functor identity' fails: fmap\(id, x\) = x\n  x = ReversingVec\(.*?\n  y = .*?\n  z = .*?\n"
    shown += r"  left = .*?\n  right = "
    with pytest.raises(AssertionError, match=shown):
        laws.check_law("functor identity", structures)


def _cheb_hook(monkeypatch: pytest.MonkeyPatch, gram: Callable[[int], Any], exact: Callable[[int], Any]) -> None:
    """Cheb's Dense hook replaced by one with another Gram matrix or another claim of exactness."""

    def axes(self: Cheb[Any, Any]) -> tuple[Axis]:
        return (Axis("Cheb", self.tag, self.size, gram(self.size), exact=exact(self.size)),)

    monkeypatch.setattr(Cheb, "axes", axes)


def _chebs(n: int) -> st.SearchStrategy[laws.Triple]:
    """Triples of Cheb[Law] of n coefficients, each between 1 and 2 (products of full degree)."""
    cheb = hnp.arrays(np.float64, n, elements=st.floats(1, 2)).map(lambda a: Cheb.from_array(a, Law))
    return st.tuples(cheb, cheb, cheb)


def test_the_dense_check_catches_a_wrong_gram_matrix(monkeypatch: pytest.MonkeyPatch) -> None:
    """The identity for the Gram matrix (the mistake a user made): every law holds, the hook does not. On one
    fixed triple: a drawn one whose constant and T_2 terms are both about 0 (hypothesis draws 1e-309) has
    counit 0 either way, and the mistake is caught by a later check (mul_mv), not by this one."""
    _cheb_hook(monkeypatch, gram=lambda n: None, exact=lambda n: (n + 1) // 2)
    number = r"-?\d[\d.e+-]*"
    message = (rf"the Dense hook fails 'dense counit': dot\(x, fmap \(const 1\) x\) through the Gram matrices is "
               rf"{number}, counit\(x\) is {number}\n  x = Cheb")  # fmt: skip
    with pytest.raises(AssertionError, match=message):
        laws.check_laws(_one_triple(_cheb), maps=strategies.AFFINE, max_examples=1)


def test_the_dense_check_catches_an_asymmetric_gram_matrix(monkeypatch: pytest.MonkeyPatch) -> None:
    _cheb_hook(monkeypatch, gram=lambda n: chebyshev.gram(n) + np.triu(np.ones((n, n)), 1) * 1e-3,
               exact=lambda n: (n + 1) // 2)  # fmt: skip
    with pytest.raises(AssertionError, match=r"dense Gram matrices: Cheb\[Law\] of size \d+: .* not symmetric"):
        laws.check_dense(_chebs(4), max_examples=3)


def test_the_dense_check_catches_a_false_claim_of_exactness(monkeypatch: pytest.MonkeyPatch) -> None:
    """Cheb's fmap truncates products to N coefficients: claiming every coordinate exact is false."""
    _cheb_hook(monkeypatch, gram=chebyshev.gram, exact=lambda n: None)
    with pytest.raises(AssertionError, match=r"the Dense hook fails 'dense dot': dot by the dense formula is"):
        laws.check_dense(_chebs(4), max_examples=3)


def test_the_dense_check_catches_a_hook_that_never_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    """Axes that never meet (a new shape identity each call) make every operation generic: the check says so."""
    monkeypatch.setattr(Cheb, "axes", lambda self: (Axis("Cheb", self.tag, self.size, chebyshev.gram(self.size),
                                                         shape=object()),))  # fmt: skip
    with pytest.raises(AssertionError, match=r"dense dot: the dense formula did not run"):
        laws.check_dense(strategies.cheb_triples(), max_examples=2)


def test_the_dense_check_needs_a_structure_of_scalars() -> None:
    strategy, _ = strategies.INSTANCES["Vec of Vec"]
    with pytest.raises(TypeError, match=r"check_dense: a Vec\[Law\] of size \d+ x Vec\[LawInner\] of size \d+ "
                                        r"is not a Dense structure of scalars"):  # fmt: skip
        laws.check_dense(strategy(), max_examples=1)
    with pytest.raises(TypeError, match=r"check_dense: a (Leaf|Node) \(not Dense, or with no axes\)"):
        laws.check_dense(strategies.tree_triples(), max_examples=1)


class Unhalved(Arithmetic[Any]):
    """Arithmetic whose scale ignores the factor: a tree's counit through it is the plain sum of the
    leaves, which depends on refinement (docs/design.md, correction 5)."""

    def scale(self, r: Real, a: Any) -> Any:
        return a


def test_the_suite_catches_a_counit_that_depends_on_refinement() -> None:
    """counit(fmap(fst, pair(Leaf 1, Node(Leaf 1, Leaf 1)))) is 2 under the plain sum, counit(Leaf 1) is 1."""
    one, split = Leaf(jnp.float64(1.0)), Node(Leaf(jnp.float64(1.0)), Leaf(jnp.float64(1.0)))
    laws.check_law("counit respects pairing", st.just((one, split, one)), max_examples=1)
    with pytest.raises(AssertionError, match="counit respects pairing"):
        laws.check_law("counit respects pairing", st.just((one, split, one)), maps=laws.Maps(module=Unhalved()))


scalars_f64 = st.floats(-1e3, 1e3, allow_nan=False)
complexes = st.complex_numbers(max_magnitude=1e3, allow_nan=False, allow_infinity=False)


@pytest.mark.parametrize(
    ("name", "values", "rtol"),
    [
        ("python floats", scalars_f64, 1e-9),
        ("complex numbers", complexes, 1e-9),
        ("float64 arrays", hnp.arrays(np.float64, 3, elements=scalars_f64).map(jnp.asarray), 1e-9),
        ("float32 arrays", hnp.arrays(np.float32, 3, elements=st.floats(-10, 10, width=32)).map(jnp.asarray), 1e-4),
    ],
)
def test_arithmetic_ring_laws(name: str, values: st.SearchStrategy[object], rtol: float) -> None:
    laws.check_algebra_laws(ARITHMETIC, values, rtol=rtol, atol=rtol * 1e3)


def test_pointwise_module_laws_on_vectors() -> None:
    vecs = hnp.arrays(np.float64, 4, elements=scalars_f64).map(lambda a: Vec.from_array(a, Seq))
    pointwise: Pointwise[VecOf[Seq], object] = Pointwise(ARITHMETIC)
    laws.check_algebra_laws(pointwise, vecs, rtol=1e-9, atol=1e-6)


def test_default_tolerances_follow_the_dtype() -> None:
    """1e-10 at float64; 1000 ulps at float32, where a correct instance's sums are a few ulps off (where the
    backend rounds its products, at least 5e-3: tests/applicative/test_tolerance.py)."""
    with jax.default_matmul_precision("highest"):  # float32 products float32's on every backend
        assert laws.default_tolerance(np.float64) == 1e-10
        assert laws.default_tolerance(np.float32) == pytest.approx(1000 * np.finfo(np.float32).eps)
        assert laws.default_tolerance(np.float16) == 1e-2
        assert laws.default_tolerance(np.int32) == 1e-10
        exact = np.linspace(1.0, 2.0, 5)
        off = exact * (1 + 3.8e-6)  # the float32 counit-additivity discrepancy a user reported
        laws.assert_close(exact.astype(np.float32), off.astype(np.float32))
        with pytest.raises(AssertionError):
            laws.assert_close(exact, off)  # the same gap at float64 is a real error
        with pytest.raises(AssertionError):
            laws.assert_close(exact.astype(np.float32), (exact * 1.01).astype(np.float32))
        laws.assert_close(exact, off, rtol=1e-5)  # a tolerance given is the one used


@pytest.mark.slow
def test_float32_structures_pass_the_laws_with_the_default_tolerances() -> None:
    float32 = strategies.vec_triples().map(lambda t: jax.tree_util.tree_map(lambda a: a.astype(np.float32), t))
    example = laws.drawn(float32)
    assert {leaf.dtype for leaf in jax.tree_util.tree_leaves(example)} == {np.dtype(np.float32)}
    assert "counit additivity" in laws.check_laws(float32, max_examples=4)


def test_the_dense_check_refuses_an_exactness_that_leaves_nothing_to_compare(monkeypatch: pytest.MonkeyPatch) -> None:
    """Axis.exact = 0 would set every coordinate to zero and compare zeros: an error, never a pass."""
    _cheb_hook(monkeypatch, gram=chebyshev.gram, exact=lambda n: 0)
    with pytest.raises(AssertionError, match=r"dense exactness: Cheb\[Law\] of size \d+ declares Axis.exact = 0"):
        laws.check_dense(_chebs(4), max_examples=1)


def _formula(monkeypatch: pytest.MonkeyPatch, op: str, change: Callable[[Any], Any]) -> None:
    """The linear algebra's dense formula for ``op`` replaced by ``change`` of its result (coordinates, shells)."""
    original = fast_paths.dense_formula

    def patched(name: str, spec: str, ring: Any, *operands: object, **options: Any) -> Any:
        out = original(name, spec, ring, *operands, **options)
        return change(out) if out is not None and name == op else out

    monkeypatch.setattr(linalg, "dense_formula", patched)


@pytest.mark.parametrize("triples", [strategies.vec_triples, strategies.cheb_triples])
def test_the_dense_check_catches_a_formula_that_transposes_its_result(
    monkeypatch: pytest.MonkeyPatch, triples: Callable[[], st.SearchStrategy[laws.Triple]]
) -> None:
    """mul_mmt(a, b) = b a^T: a formula giving a b^T passes on a = b, so the check needs two matrices (and
    sizes of 2 or more: a 1 x 1 product is its own transpose), and more than a few draws: hypothesis may
    draw zeros or equal operands first, on which a transposed product is right."""
    _formula(monkeypatch, "mul_mmt", lambda out: (out[0].T, out[1]))
    sized = triples().filter(lambda t: jax.tree_util.tree_leaves(t[0])[0].shape[0] >= 2)
    with pytest.raises(AssertionError, match=r"the Dense hook fails 'dense mul_mmt'"):
        laws.check_dense(sized, max_examples=25)  # enough draws that some pair is not symmetric


def test_the_dense_check_catches_a_hook_that_declines_one_operation(monkeypatch: pytest.MonkeyPatch) -> None:
    original = fast_paths.dense_formula
    monkeypatch.setattr(linalg, "dense_formula", lambda op, *rest: None if op == "mul_vm" else original(op, *rest))
    with pytest.raises(AssertionError, match=r"dense mul_vm: the dense formula did not run"):
        laws.check_dense(strategies.vec_triples(), max_examples=1)


@record
class SquaringVec(Vec[Seq, jax.Array]):
    """A counit that sums squares (not linear); its Dense hook, a Vec's, is right."""

    def fmap(self, f: Callable[[jax.Array], Any]) -> Vec[Seq, Any]:
        out = super().fmap(f)
        return SquaringVec(out.data, out.tag, out.size)

    def pair(self, other: Applicative[VecOf[Seq], Any]) -> Vec[Seq, Any]:
        out = super().pair(other)
        return SquaringVec(cast(jax.Array, out.data), out.tag, out.size)

    def counit(self, module: Module[jax.Array] | None = None) -> jax.Array:
        return jnp.sum(self.data**2)


def _squaring(x: Applicative[Any, Any]) -> SquaringVec:
    v = as_vec(x)
    return SquaringVec(v.data, v.tag, v.size)


def test_the_dense_check_blames_a_wrong_counit_not_the_hook() -> None:
    """On one fixed triple of random coordinates: drawn ones may be zeros, on which a sum of squares is linear."""
    structures = _one_triple(lambda a: _squaring(_vec(a)))
    blamed = r"the counit fails 'counit (additivity|homogeneity)', so the Dense hook cannot be"  # whichever first
    with pytest.raises(AssertionError, match=blamed):
        laws.check_dense(structures, max_examples=1)


def test_the_dense_check_judges_a_sum_that_cancels_at_its_terms_scale(monkeypatch: pytest.MonkeyPatch) -> None:
    """A Cheb of Vecs whose sum_mul_mmt cancels: y is an odd function, and sums reaching 5e7 (each_mul_mmt's)
    come to 6e-8, where the two right formulas, summing in other orders, are 2e-7 apart: rounding at the
    size of the terms (CI drew such a triple, at a third of these coordinates, and the check judged it at
    the result's size). The right hook passes, judged at 30^6 (sum_mul_mmt's degree, 6, in coordinates up to
    30); a sum_mul_mmt off by a millionth still fails on coordinates of unit size."""

    def cheb_of_vecs(a: list[list[float]]) -> Compose[Any, Any, jax.Array]:
        return Compose(Cheb.stack(Vec.from_array(3.0 * np.array(a), Law, strategies.LawInner).data, Law))

    x = cheb_of_vecs([[-10, 0], [0, 0.99999], [6.1e-5, -0.6917771], [1.5, 0]])
    y = cheb_of_vecs([[0, 0], [-9, 0], [0, 0], [0, 0]])
    z = cheb_of_vecs([[-1.9, -10], [-10, -10], [0, -0.5], [0, 0]])
    laws.check_dense(st.just((x, y, z)), max_examples=1)
    _formula(monkeypatch, "sum_mul_mmt", lambda out: (out[0] * (1 + 1e-6), out[1]))
    with pytest.raises(AssertionError, match=r"the Dense hook fails 'dense sum_mul_mmt'"):
        laws.check_dense(_one_triple(_vec), max_examples=1)


# Boundaries of check_dense that its mutants found untested (docs/mutants.md, issue 32 part 6). One fixed
# triple of random coordinates, no two alike: every matrix built of them is asymmetric.


def _one_triple(make: Callable[[np.ndarray], Any]) -> st.SearchStrategy[laws.Triple]:
    x, y, z = (make(np.random.default_rng(seed).normal(size=4)) for seed in range(3))
    return st.just((x, y, z))


def _vec(a: np.ndarray) -> Vec[Law, jax.Array]:
    return Vec.from_array(a, Law)


def _cheb(a: np.ndarray) -> Cheb[Law, jax.Array]:
    return Cheb.from_array(a, Law)


def test_the_dense_check_refuses_a_gram_matrix_of_zeros(monkeypatch: pytest.MonkeyPatch) -> None:
    """Definite: every eigenvalue above the floor, eps * size * the largest |eigenvalue|. A zero matrix's
    floor is 0, and its smallest eigenvalue, 0, is not above it."""
    _cheb_hook(monkeypatch, gram=lambda n: np.zeros(n), exact=lambda n: (n + 1) // 2)
    message = r"dense Gram matrices: Cheb\[Law\] of size 4: the Gram matrix is not positive definite \(smallest eig"
    with pytest.raises(AssertionError, match=message):
        laws.check_dense(_one_triple(_cheb), max_examples=1)


def test_the_dense_check_refuses_a_negative_weight_of_a_measure_that_is_data(monkeypatch: pytest.MonkeyPatch) -> None:
    """A measure that is data (a tree's) may weigh 0, on padding: semidefinite. Never less than 0."""
    original = DenseTree.axes

    def negated(self: DenseTree[Any]) -> tuple[Axis]:
        axes = original(self)
        assert axes is not None
        return (dataclasses.replace(axes[0], gram=-jnp.asarray(axes[0].gram)),)

    monkeypatch.setattr(DenseTree, "axes", negated)
    trees = _one_triple(lambda a: DenseTree.stack(((None, None), (None, None)), a, 6))
    with pytest.raises(AssertionError, match=r"DenseTree of size \d+: the Gram matrix is not positive semidefinite"):
        laws.check_dense(trees, max_examples=1)


def test_the_dense_check_compares_a_chebyshev_function_on_its_exact_coordinates_only() -> None:
    """A Cheb's products are exact where each factor holds (size + 1) // 2 coefficients (its Axis.exact): the
    hook and the generic definitions agree there, where one coefficient more truncates the product (a dot
    product 0.037 against 0.051 on this triple). The drawn examples of test_structure_laws meet this only
    by chance (their first is all zeros)."""
    laws.check_dense(_one_triple(_cheb), max_examples=1)


def test_the_dense_check_refuses_an_exactness_beyond_the_axis(monkeypatch: pytest.MonkeyPatch) -> None:
    _cheb_hook(monkeypatch, gram=chebyshev.gram, exact=lambda n: n + 1)
    with pytest.raises(AssertionError, match=r"dense exactness: Cheb\[Law\] of size 4 declares Axis.exact = 5"):
        laws.check_dense(_one_triple(_cheb), max_examples=1)


def test_the_dense_check_catches_coefficients_that_claim_to_be_nodal(monkeypatch: pytest.MonkeyPatch) -> None:
    """A Cheb's fmap samples the function: its coefficients are not values at positions, so a claim
    that they are is refused, by its full Gram matrix first and, given a diagonal, by its fmap."""

    def nodal(gram: Callable[[int], Any]) -> None:
        monkeypatch.setattr(Cheb, "axes", lambda self: (Axis("Cheb", self.tag, self.size, gram(self.size),
                                                             exact=(self.size + 1) // 2, nodal=True),))  # fmt: skip

    nodal(chebyshev.gram)
    with pytest.raises(AssertionError, match=r"dense nodal: Cheb\[Law\] of size 4 is nodal but its Gram matrix is not"):
        laws.check_dense(_one_triple(_cheb), max_examples=1)
    nodal(lambda n: np.diag(chebyshev.gram(n)))  # a diagonal (wrong, but the counit check comes after)
    with pytest.raises(AssertionError, match=r"the Dense hook fails 'dense nodal': the coordinates of fmap sin"):
        laws.check_dense(_one_triple(_cheb), max_examples=1)


@pytest.mark.parametrize(
    ("op", "spec"), [("mul_mv", "gf,g->f"), ("mul_vm", "f,gf->g"), ("mul_mm", "gf,gh->fh"), ("mul_mm", "fg,hg->fh")]
)
def test_the_dense_check_catches_a_formula_that_reads_a_matrix_transposed(
    monkeypatch: pytest.MonkeyPatch, op: str, spec: str
) -> None:
    """a = outer(x, y) + outer(z, x) and b = outer(y, z) + outer(x, x) are not symmetric: a formula that
    reads a (mul_mv, mul_vm, mul_mm's first operand) or b (mul_mm's second) transposed is caught."""
    original = fast_paths.dense_formula

    def transposed(name: str, given: str, ring: Any, *operands: object) -> Any:
        return original(name, spec if name == op else given, ring, *operands)

    monkeypatch.setattr(linalg, "dense_formula", transposed)
    with pytest.raises(AssertionError, match=rf"the Dense hook fails 'dense {op}'"):
        laws.check_dense(_one_triple(_vec), max_examples=1)


def test_the_dense_check_catches_an_outer_product_transposed(monkeypatch: pytest.MonkeyPatch) -> None:
    _formula(monkeypatch, "outer", lambda out: (out[0].T, out[1]))
    with pytest.raises(AssertionError, match=r"the Dense hook fails 'dense outer'"):
        laws.check_dense(_one_triple(_vec), max_examples=1)


def test_the_dense_check_catches_a_hook_that_declines_a_product_of_matrices(monkeypatch: pytest.MonkeyPatch) -> None:
    """mul_mm's generic definition runs mul_vm on each row, by mul_vm's dense formula: not mul_mm's."""
    original = fast_paths.dense_formula
    monkeypatch.setattr(linalg, "dense_formula", lambda op, *rest: None if op == "mul_mm" else original(op, *rest))
    with pytest.raises(AssertionError, match=r"dense mul_mm: the dense formula did not run .*taken: \['mul_vm'"):
        laws.check_dense(_one_triple(_vec), max_examples=1)


def test_the_dense_check_catches_a_scale_that_ignores_its_factor(monkeypatch: pytest.MonkeyPatch) -> None:
    """scale is checked with the factor -1.5: a formula that drops its factor (or its sign) is caught."""
    original = fast_paths.on_coordinates

    def unscaled(op: str, module: Any, f: Callable[..., Any], *xs: object) -> Any:
        return original(op, module, (lambda leaf: leaf) if op == "scale" else f, *xs)

    monkeypatch.setattr(linalg, "on_coordinates", unscaled)
    with pytest.raises(AssertionError, match=r"the Dense hook fails 'dense scale'"):
        laws.check_dense(_one_triple(_vec), max_examples=1)


def _decades(seed: int) -> Cheb[Law, jax.Array]:
    """A Cheb of 6 coefficients whose first 3 (its Axis.exact) span ten decades, 1e-5 to 1e5, signs random."""
    r = np.random.default_rng(seed)
    return _cheb(np.concatenate([r.normal(size=3) * 10.0 ** r.uniform(-5, 5, size=3), np.zeros(3)]))


def test_the_dense_check_judges_each_result_at_its_own_scale(monkeypatch: pytest.MonkeyPatch) -> None:
    """Coordinates spanning ten decades: a product's entries span twenty, and its smallest are rounded at the
    scale of its largest (entry by entry, a right hook once failed: 3.2e-10 apart on entries near 1e-9 of a
    mul_mm reaching 2.9e5). The right hook passes; a Gram matrix off by a millionth in one pair of entries
    fails, naming the first check it breaks."""
    triple = st.just((_decades(0), _decades(1), _decades(2)))
    laws.check_dense(triple, max_examples=1)

    def off(n: int) -> np.ndarray:
        gram = np.array(chebyshev.gram(n))
        gram[0, 2] = gram[2, 0] = gram[0, 2] * (1 + 1e-6)
        return gram

    _cheb_hook(monkeypatch, gram=off, exact=lambda n: (n + 1) // 2)
    with pytest.raises(AssertionError, match=r"(?s)the Dense hook fails 'dense counit'.*above atol \+ rtol \* \(the "):
        laws.check_dense(triple, max_examples=1)
