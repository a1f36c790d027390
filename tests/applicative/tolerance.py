"""The type of the tolerance dicts the tests splat into ``assert_allclose`` and ``assert_close``, the
tolerance of float32 results, which follows the backend's float32 matrix precision, and a GPU's float32
products emulated on the CPU.

A GPU takes float32 matrix products and convolutions in TF32 by default: each operand rounded to 10
mantissa bits, the sum kept in float32. ``APPLICATIVE_EMULATE_TF32=1 pytest`` runs the suite on the CPU
with its products so rounded (``emulate_tf32``), so that a check too tight for a GPU fails here too."""

from collections.abc import Sequence
from typing import Any, TypedDict

import jax
import jax.numpy as jnp
from jax import lax

from applicative import laws
from applicative.laws import _compare

EMULATE_TF32 = "APPLICATIVE_EMULATE_TF32"
"""The environment variable that, set to 1, makes the suite's CPU products TF32's (tests/conftest.py)."""


class Tolerance(TypedDict):
    """``**TOL`` for ``np.testing.assert_allclose`` and ``applicative.laws.assert_close``: a plain
    ``dict[str, float]`` would also match their ``bool`` and ``str`` parameters, which mypy rejects."""

    rtol: float
    atol: float


TF32 = laws.ROUNDED_PRODUCTS
"""Float32 matrix products in TF32 (NVIDIA GPUs' default since Ampere) or bfloat16 passes (TPUs): 10 mantissa
bits, so errors about 1e-3 against float64 where the CPU's are about 1e-7."""


def float32(cpu: float, atol: float | None = None) -> Tolerance:
    """The tolerance of a float32 result against a float64 numpy reference: ``cpu`` (and ``atol``, where
    the absolute tolerance differs from the relative one) where float32 matrix products are float32 (the CPU,
    or a default precision fixed at "highest" or "float32"), each at least ``TF32`` where the backend's
    default takes them with fewer mantissa bits (a GPU, a TPU, the CPU under ``emulate_tf32``: the
    library's own ``laws.rounded_products``)."""
    rtol, atol = cpu, cpu if atol is None else atol
    if laws.rounded_products():
        return {"rtol": max(rtol, TF32), "atol": max(atol, TF32)}
    return {"rtol": rtol, "atol": atol}


EMULATED: list[str] = []
"""The primitives whose CPU lowering ``emulate_tf32`` has replaced (empty: products are float32's)."""


def tf32(x: jax.Array) -> jax.Array:
    """float32 ``x`` rounded to TF32's 10 mantissa bits (to nearest, ties away from zero), as a float32."""
    bits = lax.bitcast_convert_type(x, jnp.uint32)
    return lax.bitcast_convert_type((bits + jnp.uint32(0x1000)) & jnp.uint32(0xFFFFE000), jnp.float32)


def emulate_tf32() -> None:
    """From now on, the CPU's float32 matrix products and convolutions round their operands to TF32 first,
    as a GPU's do, where their precision is the default (not "highest" or "float32", by argument or by
    ``jax.default_matmul_precision``). It replaces the CPU lowering of ``dot_general`` and
    ``conv_general_dilated`` (JAX's internal lowering table: a test harness's tool, not the library's), so
    it acts on what is compiled after, jitted or eager, differentiated or not."""
    from jax._src.interpreters import mlir  # here: the suite does not depend on JAX's internals unless emulating

    rounded = mlir.lower_fun(tf32, multiple_results=False)
    for primitive in (lax.dot_general_p, lax.conv_general_dilated_p):
        entry = mlir._platform_specific_lowerings["cpu"].get(primitive) or mlir._lowerings[primitive]
        rule = getattr(entry, "rule", entry)  # newer JAX keeps (rule, inline) entries

        def lowering(ctx: Any, *operands: Any, _rule: Any = rule, **params: Any) -> Sequence[Any]:
            if _exact(params.get("precision")):
                return _rule(ctx, *operands, **params)  # type: ignore[no-any-return]
            operands = tuple(
                _value(rounded(ctx.replace(primitive=None, avals_in=[aval], avals_out=[aval]), operand))
                if aval.dtype == jnp.float32
                else operand
                for operand, aval in zip(operands, ctx.avals_in, strict=True)
            )
            return _rule(ctx, *operands, **params)  # type: ignore[no-any-return]

        mlir.register_lowering(primitive, lowering, platform="cpu")
        EMULATED.append(primitive.name)
    _compare._CPU_ROUNDS = True  # the library's float32 tolerances (laws.default_tolerance), as on a GPU


def _exact(precision: object) -> bool:
    """Whether a product of this ``precision`` parameter (None, a ``Precision`` or a pair, or an algorithm)
    is float32's on a GPU: asked for by argument, or by the default precision in force."""
    names = [str(p).lower() for p in (precision if isinstance(precision, tuple) else (precision,)) if p is not None]
    if not names or all(name in ("default", "precision.default", "0") for name in names):
        names = [str(getattr(jax.config, "jax_default_matmul_precision", None)).lower()]
    return any(name.removeprefix("precision.") in ("highest", "float32") or "f32_f32_f32" in name for name in names)


def _value(result: Any) -> Any:
    """The one value of a lowered function's result (nested in lists by JAX's lowering)."""
    while isinstance(result, (list, tuple)):
        (result,) = result
    return result
