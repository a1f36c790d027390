"""The type of the tolerance dicts the tests splat into ``assert_allclose`` and ``assert_close``, and the
tolerance of float32 results, which follows the backend's float32 matrix precision."""

from typing import TypedDict

import jax


class Tolerance(TypedDict):
    """``**TOL`` for ``np.testing.assert_allclose`` and ``applicative.laws.assert_close``: a plain
    ``dict[str, float]`` would also match their ``bool`` and ``str`` parameters, which mypy rejects."""

    rtol: float
    atol: float


TF32 = 5e-3
"""Float32 matrix products in TF32 (NVIDIA GPUs' default since Ampere) or bfloat16 passes (TPUs): 10 mantissa
bits, so errors about 1e-3 against float64 where the CPU's are about 1e-7."""


def float32(cpu: float, atol: float | None = None) -> Tolerance:
    """The tolerance of a float32 result against a float64 numpy reference: ``cpu`` (and ``atol``, where
    the absolute tolerance differs from the relative one) where float32 matrix products are float32 (the CPU,
    or a default precision fixed at "highest" or "float32"), each at least ``TF32`` where the backend's
    default takes them with fewer mantissa bits (a GPU, a TPU)."""
    precision = str(getattr(jax.config, "jax_default_matmul_precision", None)).lower()
    exact = jax.default_backend() == "cpu" or precision in ("highest", "float32")
    rtol, atol = cpu, cpu if atol is None else atol
    return {"rtol": rtol, "atol": atol} if exact else {"rtol": max(rtol, TF32), "atol": max(atol, TF32)}
