"""``tolerance.float32``, the tolerance of float32 results against float64 references: the CPU's own where
float32 products are float32 (the suite's checks there are as tight as they were written), at least TF32's
where a GPU's default takes them in TF32, and the CPU's again where the precision is set to "highest"; and
``emulate_tf32``, a GPU's products on the CPU, against numpy's products of operands rounded to TF32."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import jax
import numpy as np
import pytest

from applicative import laws
from applicative.laws import _compare
from tests.applicative.tolerance import TF32, float32


def test_the_cpu_keeps_the_tolerance_it_is_given(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(jax, "default_backend", lambda: "cpu")  # the suite's on any machine
    monkeypatch.setattr(_compare, "_CPU_ROUNDS", False)  # products not rounded to TF32
    for precision in (None, "default", "tensorfloat32"):  # the CPU takes float32 products in float32 always
        with jax.default_matmul_precision(precision):
            assert laws.default_tolerance(np.float32) == pytest.approx(1000 * np.finfo(np.float32).eps)
            assert float32(1e-5) == {"rtol": 1e-5, "atol": 1e-5}
            assert float32(1e-4, atol=1e-7) == {"rtol": 1e-4, "atol": 1e-7}
            assert float32(1e-2) == {"rtol": 1e-2, "atol": 1e-2}


@pytest.mark.parametrize("backend", ["gpu", "cuda", "rocm", "tpu"])
def test_a_backend_of_fewer_mantissa_bits_takes_at_least_tf32(monkeypatch: pytest.MonkeyPatch, backend: str) -> None:
    assert TF32 == 5e-3
    monkeypatch.setattr(jax, "default_backend", lambda: backend)
    for default in (None, "default"):  # unset, or set to the backend's default
        with jax.default_matmul_precision(default):
            assert laws.default_tolerance(np.float32) == laws.default_tolerance(np.complex64) == TF32
            assert laws.default_tolerance(np.float64) == 1e-10
            assert float32(1e-5) == {"rtol": TF32, "atol": TF32}
            assert float32(1e-4, atol=1e-7) == {"rtol": TF32, "atol": TF32}
            assert float32(1e-2, atol=2e-2) == {"rtol": 1e-2, "atol": 2e-2}  # looser than TF32: as given
    for precision in ("highest", "float32"):
        with jax.default_matmul_precision(precision):
            assert laws.default_tolerance(np.float32) == pytest.approx(1000 * np.finfo(np.float32).eps)
            assert float32(1e-4, atol=1e-7) == {"rtol": 1e-4, "atol": 1e-7}
    with jax.default_matmul_precision("tensorfloat32"):
        assert float32(1e-5) == {"rtol": TF32, "atol": TF32}


EMULATED_PRODUCTS = """
import json, sys
import jax, jax.numpy as jnp, numpy as np
from jax import lax
from tests.applicative.tolerance import EMULATED, emulate_tf32
jax.config.update("jax_enable_x64", True)
rng = np.random.default_rng(0)
a, b = rng.standard_normal((32, 48)).astype(np.float32), rng.standard_normal((48, 16)).astype(np.float32)
x, k = rng.standard_normal((1, 1, 64)).astype(np.float32), rng.standard_normal((1, 1, 5)).astype(np.float32)
emulate_tf32()
with jax.default_matmul_precision("highest"):
    highest = np.asarray(jax.jit(jnp.matmul)(a, b))
out = {
    "emulated": EMULATED,
    "jitted": np.asarray(jax.jit(jnp.matmul)(a, b)).tolist(),
    "eager": np.asarray(jnp.matmul(a, b)).tolist(),
    "gradient": np.asarray(jax.grad(lambda a: jnp.sum(a @ b))(a)).tolist(),
    "highest argument": np.asarray(jnp.matmul(a, b, precision="highest")).tolist(),
    "highest default": highest.tolist(),
    "float64": np.asarray(jnp.matmul(a.astype(np.float64), b.astype(np.float64))).tolist(),
    "convolution": np.asarray(lax.conv_general_dilated(x, k, (1,), "VALID")).tolist(),
}
json.dump(out, sys.stdout)
"""


def tf32_numpy(x: np.ndarray) -> np.ndarray:
    """x rounded to 11 significant bits (TF32's 10 stored and the implicit one), in float64."""
    mantissa, exponent = np.frexp(x.astype(np.float64))
    return np.ldexp(np.round(mantissa * 2.0**11) / 2.0**11, exponent)


@pytest.mark.end_to_end
def test_emulated_tf32_rounds_the_operands_of_default_precision_products_only() -> None:
    # In a process of its own: the emulation replaces the CPU's lowering for the rest of the process; on the
    # CPU, whatever device the suite has (an H200 computed this convolution in float32, not TF32).
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run(
        [sys.executable, "-c", EMULATED_PRODUCTS], cwd=root, capture_output=True, text=True, check=True,
        env={**os.environ, "PYTHONPATH": str(root), "JAX_PLATFORMS": "cpu"},
    )  # fmt: skip
    out = {name: np.asarray(value) for name, value in json.loads(done.stdout).items() if name != "emulated"}
    assert json.loads(done.stdout)["emulated"] == ["dot_general", "conv_general_dilated"]
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((32, 48)).astype(np.float32), rng.standard_normal((48, 16)).astype(np.float32)
    x, k = rng.standard_normal((1, 1, 64)).astype(np.float32), rng.standard_normal((1, 1, 5)).astype(np.float32)
    exact, rounded = a.astype(np.float64) @ b, tf32_numpy(a) @ tf32_numpy(b)
    for name in ("jitted", "eager"):  # the rounded operands' product, summed in float32
        np.testing.assert_allclose(out[name], rounded, rtol=0, atol=2e-5)
        assert np.abs(out[name] - exact).max() > 1e-3  # far from float32's own product
    np.testing.assert_allclose(out["gradient"], np.broadcast_to(tf32_numpy(b).sum(axis=1), a.shape), atol=2e-5)
    for name in ("highest argument", "highest default", "float64"):  # not rounded
        np.testing.assert_allclose(out[name], exact, rtol=0, atol=2e-5)
    windows = np.lib.stride_tricks.sliding_window_view(tf32_numpy(x[0, 0]), 5)
    np.testing.assert_allclose(out["convolution"][0, 0], windows @ tf32_numpy(k[0, 0]), rtol=0, atol=2e-5)
