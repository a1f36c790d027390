"""``tolerance.float32``, the tolerance of float32 results against float64 references: the CPU's own where
float32 products are float32 (the suite's checks there are as tight as they were written), at least TF32's
where a GPU's default takes them in TF32, and the CPU's again where the precision is set to "highest"."""

from __future__ import annotations

import jax
import pytest

from tests.applicative.tolerance import TF32, float32


def test_the_cpu_keeps_the_tolerance_it_is_given(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(jax, "default_backend", lambda: "cpu")  # the suite's on any machine
    for precision in (None, "default", "tensorfloat32"):  # the CPU takes float32 products in float32 always
        with jax.default_matmul_precision(precision):
            assert float32(1e-5) == {"rtol": 1e-5, "atol": 1e-5}
            assert float32(1e-4, atol=1e-7) == {"rtol": 1e-4, "atol": 1e-7}
            assert float32(1e-2) == {"rtol": 1e-2, "atol": 1e-2}


@pytest.mark.parametrize("backend", ["gpu", "cuda", "rocm", "tpu"])
def test_a_backend_of_fewer_mantissa_bits_takes_at_least_tf32(monkeypatch: pytest.MonkeyPatch, backend: str) -> None:
    assert TF32 == 5e-3
    monkeypatch.setattr(jax, "default_backend", lambda: backend)
    for default in (None, "default"):  # unset, or set to the backend's default
        with jax.default_matmul_precision(default):
            assert float32(1e-5) == {"rtol": TF32, "atol": TF32}
            assert float32(1e-4, atol=1e-7) == {"rtol": TF32, "atol": TF32}
            assert float32(1e-2, atol=2e-2) == {"rtol": 1e-2, "atol": 2e-2}  # looser than TF32: as given
    for precision in ("highest", "float32"):
        with jax.default_matmul_precision(precision):
            assert float32(1e-4, atol=1e-7) == {"rtol": 1e-4, "atol": 1e-7}
    with jax.default_matmul_precision("tensorfloat32"):
        assert float32(1e-5) == {"rtol": TF32, "atol": TF32}
