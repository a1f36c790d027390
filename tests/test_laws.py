"""Every law of every abstraction, for every instance (applicative.laws)."""

import hypothesis.extra.numpy as hnp
import hypothesis.strategies as st
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from applicative import ARITHMETIC, Pointwise, Vec, laws, record, strategies
from tests.dims import Seq


@pytest.mark.parametrize("law", laws.LAWS)
@pytest.mark.parametrize("instance", list(strategies.INSTANCES))
def test_structure_law(instance: str, law: str) -> None:
    strategy, maps = strategies.INSTANCES[instance]
    # Chebyshev fmaps run DCTs op by op: fewer examples keep the suite quick.
    laws.check_law(law, strategy(), maps=maps, max_examples=8 if "Cheb" in instance else 20)


@record
class ReversingVec(Vec[Seq, jax.Array]):
    """Not a functor: its fmap also reverses the elements."""

    def fmap(self, f):  # type: ignore[no-untyped-def]
        out = super().fmap(f)
        return ReversingVec(jax.tree_util.tree_map(lambda leaf: leaf[::-1], out.data), out.tag, out.size)


def test_the_suite_catches_a_broken_instance() -> None:
    structures = strategies.vec_triples().map(lambda t: tuple(ReversingVec(x.data, x.tag, x.size) for x in t))
    with pytest.raises(AssertionError, match="functor identity"):
        laws.check_law("functor identity", structures)


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
    laws.check_algebra_laws(Pointwise(ARITHMETIC), vecs, rtol=1e-9, atol=1e-6)
