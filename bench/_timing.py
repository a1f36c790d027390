"""What the benchmarks share: side-by-side timing of jitted cases, and a row for a case that does not fit in
memory."""

from __future__ import annotations

import dataclasses
import gc
import os
import re
import statistics
import time
from collections.abc import Callable
from typing import Any, TypeVar

import jax

T = TypeVar("T")


def device_memory() -> float:
    """GB of the default device: a GPU's own (its allocator's limit), else this machine's."""
    stats = jax.devices()[0].memory_stats()  # None on the CPU
    if stats and "bytes_limit" in stats:
        return float(stats["bytes_limit"]) / 1e9
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 1e9


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


@dataclasses.dataclass(frozen=True)
class DoesNotFit:
    """A measurement whose memory could not be allocated: ``asked``, the bytes that the failed allocation
    asked for where its message says, else None. Its text is a table's cell, ``does not fit`` or
    ``does not fit (asked for 137.4 GB)``."""

    asked: float | None = None

    def __str__(self) -> str:
        return "does not fit" if self.asked is None else f"does not fit (asked for {self.asked / 1e9:.1f} GB)"


OUT_OF_MEMORY = re.compile(r"RESOURCE_EXHAUSTED|out of memory", re.IGNORECASE)
"""What XLA says of a failed allocation, compiling (its autotuner's scratch buffers) or running."""
ASKED = re.compile(r"allocate\s+(?:request\s+for\s+)?(\d+(?:\.\d+)?)\s*(bytes|B|[KMGT]i?B)\b", re.IGNORECASE)
"""The size in ``trying to allocate 137438953472 bytes``, ``Failed to allocate request for 128.00GiB``."""


def does_not_fit(error: BaseException) -> DoesNotFit | None:
    """``error`` as a ``DoesNotFit`` if it is a failed allocation: the host's ``MemoryError``, or JAX's runtime
    error (``jax.errors.JaxRuntimeError``, which jaxlib's ``XlaRuntimeError`` is) saying RESOURCE_EXHAUSTED or
    out of memory; None for any other error."""
    if isinstance(error, MemoryError):
        return DoesNotFit()
    if not isinstance(error, jax.errors.JaxRuntimeError) or not OUT_OF_MEMORY.search(str(error)):
        return None
    match = ASKED.search(str(error))
    if match is None:
        return DoesNotFit()
    number, unit = float(match[1]), match[2].upper()
    if unit in ("B", "BYTES"):
        return DoesNotFit(number)
    base = 1024 if unit[1] == "I" else 1000  # GiB, GB
    return DoesNotFit(number * base ** ("KMGT".index(unit[0]) + 1))


def or_does_not_fit(measure: Callable[[], T]) -> T | DoesNotFit:
    """``measure()``, or the ``DoesNotFit`` of its failed allocation (``does_not_fit``), so that a table prints
    the row and goes on to the next; any other error propagates."""
    try:
        return measure()
    except (MemoryError, jax.errors.JaxRuntimeError) as error:
        failure = does_not_fit(error)
        if failure is None:
            raise
    gc.collect()  # the failed attempt's buffers, which its traceback held, before the next row allocates
    return failure
