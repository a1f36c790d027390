"""A short tour: ``python -m applicative``.

Builds a small attention-shaped computation with the generic linear algebra
on ``Vec``, checks it against numpy, and times the generic definitions against
the instance fast paths under ``jit``.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np

from applicative import Applicative, Dim, Vec, VecOf, counit, generic_only, mul_mm, mul_mmt, to_array

__all__ = ["attention", "main"]


class Seq(Dim):
    """Sequence positions."""


class Model(Dim):
    """Model features."""


def attention(q: jax.Array, k: jax.Array, v: jax.Array) -> jax.Array:
    """softmax(q k^T / sqrt(d)) v, written once against the protocols."""
    scores = mul_mmt(Vec.from_array(k, Seq, Model), Vec.from_array(q, Seq, Model))  # one row per query

    def softmax(row: Applicative[VecOf[Seq], jax.Array]) -> Applicative[VecOf[Seq], jax.Array]:
        e = row.fmap(lambda s: jnp.exp(s / np.sqrt(q.shape[1])))
        total = counit(e)
        return e.fmap(lambda a: a / total)

    return to_array(mul_mm(scores.fmap(softmax), Vec.from_array(v, Seq, Model)))


def _seconds(f: Callable[[], jax.Array], repeats: int = 20) -> float:
    f().block_until_ready()
    start = time.perf_counter()
    for _ in range(repeats):
        f().block_until_ready()
    return (time.perf_counter() - start) / repeats


def main() -> None:
    rng = np.random.default_rng(0)
    q, k, v = (jnp.asarray(rng.normal(size=(128, 64)), jnp.float32) for _ in range(3))
    s = np.asarray(q, np.float64) @ np.asarray(k, np.float64).T / 8.0
    p = np.exp(s - s.max(axis=1, keepdims=True))
    reference = (p / p.sum(axis=1, keepdims=True)) @ np.asarray(v, np.float64)

    # Two functions: JAX caches a trace per function, so one jitted function cannot hold both paths.
    fast = jax.jit(lambda *qkv: attention(*qkv))
    with generic_only():
        generic = jax.jit(lambda *qkv: attention(*qkv))
        generic(q, k, v).block_until_ready()  # trace with fast paths off
    print(f"attention 128x64, float32: max |fast - numpy|    = {np.abs(fast(q, k, v) - reference).max():.2e}")
    print(f"                           max |generic - numpy| = {np.abs(generic(q, k, v) - reference).max():.2e}")
    t_fast, t_generic = _seconds(lambda: fast(q, k, v)), _seconds(lambda: generic(q, k, v))
    print(f"jit time: fast paths {t_fast * 1e3:.3f} ms, generic definitions {t_generic * 1e3:.3f} ms")
    print(f"ratio generic/fast: {t_generic / t_fast:.2f}")


if __name__ == "__main__":
    main()
