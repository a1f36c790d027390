"""The law suite: every law of every abstraction, checked with hypothesis.

A law is an equation; each abstraction's module states its laws as functions
returning both sides (``functor.identity_law`` ...). Here they are gathered
in ``LAWS`` and checked on random structures:

    check_laws(vec_triples())          # every law Vec claims, or
    check_law("pair associativity", vec_triples())

(strategies for the library's own instances are in ``applicative.strategies``).
An instance claims every law of the abstractions it implements (Functor,
Applicative, Counit) unless its class says otherwise in ``laws_claimed``
(``Quantum``'s counit is a measurement, not linear); ``check_laws`` checks
exactly the claimed ones and, for a ``Dense`` structure of scalars, its hook
(``check_dense``: the fast paths against the generic definitions), and returns
their names. A failure names the law, states it as an equation and shows the
drawn inputs and both sides. ``drawn(strategy)`` is one example, drawn as ``check_laws`` draws its
first (not shrunk, as ``hypothesis.find`` would: seconds for a structure).

A strategy yields triples ``(x, y, z)`` of structures that can be paired (same
brand, same size for a Vec) holding elements of any type the maps accept (the
default maps act leaf by leaf: scalars, Vecs, functions). Equality is structural
(same pytree, same tags and sizes) with leaves close to ``rtol``/``atol``.

Tolerances follow the dtype unless given: ``default_tolerance`` is 1e-10 for
float64 and 1000 ulps for narrower floats (1.2e-4 for float32, JAX's default
dtype, where a correct instance's sums differ from the exact ones by a few
ulps; 1e-2 at most); at least 5e-3 for float32 where the backend's matrix products round
their operands (``rounded_products``: a GPU's TF32, a TPU's bfloat16 passes, at JAX's default
precision). Integers compare to 1e-10, i.e. exactly.
An instance whose ``fmap`` is exact only for some maps (Chebyshev functions
applying a nonlinearity on a grid) passes its own ``maps`` and tolerances.

The package's modules are private, one job each, and everything is documented here as the package
exports it: ``_structure`` (the structure laws, ``check_law``), ``_dense`` (the ``Dense`` hook,
``check_dense``), ``_suite`` (``check_laws``: the claimed laws, then the hook), ``_algebra`` (the
Module and Ring laws) and ``_compare`` (``assert_close``, the tolerances and the failure reports).
"""

from applicative.laws._algebra import MODULE_LAWS as MODULE_LAWS
from applicative.laws._algebra import RING_LAWS as RING_LAWS
from applicative.laws._algebra import check_algebra_laws as check_algebra_laws
from applicative.laws._compare import ROUNDED_PRODUCTS as ROUNDED_PRODUCTS
from applicative.laws._compare import assert_close as assert_close
from applicative.laws._compare import default_tolerance as default_tolerance
from applicative.laws._compare import rounded_products as rounded_products
from applicative.laws._dense import DENSE_LAWS as DENSE_LAWS
from applicative.laws._dense import check_dense as check_dense
from applicative.laws._structure import LAWS as LAWS
from applicative.laws._structure import Maps as Maps
from applicative.laws._structure import Triple as Triple
from applicative.laws._structure import check_law as check_law
from applicative.laws._structure import claimed_laws as claimed_laws
from applicative.laws._structure import drawn as drawn
from applicative.laws._structure import leafwise as leafwise
from applicative.laws._suite import check_laws as check_laws

__all__ = [
    "DENSE_LAWS",
    "LAWS",
    "MODULE_LAWS",
    "RING_LAWS",
    "ROUNDED_PRODUCTS",
    "Maps",
    "Triple",
    "assert_close",
    "check_algebra_laws",
    "check_dense",
    "check_law",
    "check_laws",
    "claimed_laws",
    "default_tolerance",
    "drawn",
    "leafwise",
    "rounded_products",
]
