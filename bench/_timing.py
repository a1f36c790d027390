"""What the benchmarks share: side-by-side timing of jitted cases."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Any

import jax


def timed(fn: Callable[[], Any]) -> float:
    """Seconds for one call, waiting for its result."""
    start = time.perf_counter()
    jax.block_until_ready(fn())
    return time.perf_counter() - start


def race(cases: dict[str, Callable[[], Any]], warmup: int, repeats: int) -> dict[str, float]:
    """Median seconds per case; each repeat runs every case once, in a rotating order."""
    for _ in range(warmup):
        for fn in cases.values():
            jax.block_until_ready(fn())
    names = list(cases)
    samples: dict[str, list[float]] = {name: [] for name in names}
    for r in range(repeats):
        order = names[r % len(names) :] + names[: r % len(names)]
        if r % 2:
            order.reverse()
        for name in order:
            samples[name].append(timed(cases[name]))
    return {name: statistics.median(s) for name, s in samples.items()}


def paired(a: Callable[[], Any], b: Callable[[], Any], warmup: int, repeats: int) -> tuple[float, float, float]:
    """Median seconds of ``a`` and of ``b``, and the median of a / b over runs taken side by side (in
    alternating order): a slow spell of a shared machine slows both halves of one ratio."""
    for _ in range(warmup):
        jax.block_until_ready(a())
        jax.block_until_ready(b())
    pairs = []
    for r in range(repeats):
        if r % 2:
            tb, ta = timed(b), timed(a)
        else:
            ta, tb = timed(a), timed(b)
        pairs.append((ta, tb))
    return (
        statistics.median(ta for ta, _ in pairs),
        statistics.median(tb for _, tb in pairs),
        statistics.median(ta / tb for ta, tb in pairs),
    )
