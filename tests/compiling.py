"""How the suite compiles: XLA:CPU's code generation at its least optimisation, for every program the tests
compile and every process they start (tests/conftest.py puts ``FAST_COMPILE`` in ``XLA_FLAGS`` before
JAX's backend starts; the processes inherit it, and a test that sets flags of its own adds them to it,
but for the two that compare float32 training on one device and on two, whose tolerances are rounding
measured under XLA's defaults).

The tests check what the library computes, not how fast XLA makes it run. XLA's HLO passes (fusion, the
algebraic simplifier, layouts) run as they do for a user's program, so the program run is the same
computation; only the making of its machine code is cheaper: LLVM's optimisation skipped and, before
jaxlib 0.11.1, XLA's older fusion emitters (docs/install.md: the time it saves). A test of XLA's own
code generation, a regression of a miscompile users met, compiles as users' programs do:
``jax.jit(f, compiler_options=USERS_COMPILE)``.
"""

from __future__ import annotations

import os
from importlib.metadata import version

from packaging.version import Version

# jaxlib 0.11.1 dropped --xla_cpu_use_fusion_emitters (its emitters are the only ones), and XLA aborts on a
# flag it does not know.
_EMITTERS = Version(version("jaxlib")) < Version("0.11.1")

FAST_COMPILE = " ".join(
    [
        "--xla_backend_optimization_level=0",
        "--xla_llvm_disable_expensive_passes=true",
        *(["--xla_cpu_use_fusion_emitters=false"] if _EMITTERS else []),
        "--xla_cpu_parallel_codegen_split_count=1",
    ]
)
"""XLA flags: LLVM's optimisation level 0 for the generated code, its expensive passes off; before jaxlib
0.11.1, a fusion's code emitted element by element (the older emitters), not through MLIR; the code made
in one piece, not split for threads to compile."""

USERS_COMPILE: dict[str, str | bool | int | float] = {
    "xla_backend_optimization_level": 3,
    "xla_llvm_disable_expensive_passes": False,
    **({"xla_cpu_use_fusion_emitters": True} if _EMITTERS else {}),
}
"""``jax.jit``'s ``compiler_options`` that restore XLA's defaults (a user's program, whatever ``XLA_FLAGS``
the suite set)."""


def xla_flags(*more: str) -> str:
    """``XLA_FLAGS`` for a process a test starts: the suite's (``FAST_COMPILE``, and whatever the run was
    given), then ``more``."""
    return " ".join([os.environ.get("XLA_FLAGS", ""), *more]).strip()


def compile_fast() -> None:
    """Add ``FAST_COMPILE`` to this process's ``XLA_FLAGS`` (read when JAX's backend starts), unless the run
    sets an optimisation level of its own."""
    if "xla_backend_optimization_level" not in os.environ.get("XLA_FLAGS", ""):
        os.environ["XLA_FLAGS"] = xla_flags(FAST_COMPILE)
