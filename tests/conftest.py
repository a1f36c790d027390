"""Tests run in float64 so that numpy references can be matched to 1e-12; with APPLICATIVE_EMULATE_TF32=1,
the CPU's float32 products are a GPU's (tests/applicative/tolerance.py).

The tests compile through JAX's persistent compilation cache (``.cache/jax`` at the repository's root, or
``$JAX_COMPILATION_CACHE_DIR``), so that the pytest-xdist workers and the next run of the suite compile each
program once: about half of the suite's time is XLA compiling the same small programs again. A program is
looked up by its XLA module, so a cached one is the very program that would be compiled: results do not
depend on the cache (a mutated copy of the code, or TF32's emulated products, are other modules). The
processes the tests start (command lines, several-process runs) share it through the environment from
jaxlib 0.12 on; before, they compile as a user's do: jaxlib 0.9 logs a false "Target machine feature
+prefer-no-scatter is not supported" error for each program it loads from the cache (XLA counts two tuning
flags among the CPU's features), which would flood what they print.

They compile at XLA's least optimisation of the generated code, and so do the processes they start
(tests/compiling.py says what that changes: the program's speed, not its computation)."""

import os
import signal
from collections.abc import Iterator
from importlib.metadata import version
from pathlib import Path

import jax
import pytest
from packaging.version import Version

from tests.applicative.tolerance import EMULATE_TF32, emulate_tf32
from tests.budget import (  # noqa: F401  (hooks: what the default run holds, and its time budget)
    pytest_itemcollected,
    pytest_runtest_makereport,
)
from tests.compiling import compile_fast
from tests.order import (  # noqa: F401  (hooks: tests/order.py)
    pytest_collection_modifyitems,
    pytest_xdist_auto_num_workers,
    pytest_xdist_make_scheduler,
)

compile_fast()  # (before anything starts JAX's backend, which reads XLA_FLAGS once)
jax.config.update("jax_enable_x64", True)
CACHE = os.environ.get("JAX_COMPILATION_CACHE_DIR") or str(Path(__file__).resolve().parent.parent / ".cache" / "jax")
jax.config.update("jax_compilation_cache_dir", CACHE)
jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)  # JAX's default keeps only compiles over 1 s
if Version(version("jaxlib")) >= Version("0.12"):  # (the processes the tests start: see above)
    os.environ.update(JAX_COMPILATION_CACHE_DIR=CACHE, JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS="0")
if os.environ.get(EMULATE_TF32) == "1":
    emulate_tf32()


@pytest.fixture(scope="session", autouse=True)
def made_early(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """What the run makes once (``tests/once.py``) and its tests will ask for, begun in threads as the run
    starts: the site (test_site.py's ``site``) and mypy over users' scripts (``mypy_errors``). Made when first asked,
    at the run's end where those tests are collected, they held one xdist worker waiting for the other
    (docs/install.md)."""
    needed = {name for item in request.session.items for name in getattr(item, "fixturenames", ())}
    begun = []
    if "site" in needed:
        from tests import test_site

        begun.append(test_site.begin(tmp_path_factory))
    if "mypy_errors" in needed:
        from tests import users_mypy

        begun.append(users_mypy.begin(tmp_path_factory))
    yield
    for thread in begun:
        thread.join()


@pytest.fixture(scope="session")
def mypy_errors(tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, int], str]:
    """mypy --strict's messages over every user's script the typing, README and guide tests check, by (file
    name, line): one run for the whole test run (tests/users_mypy.py)."""
    from tests import users_mypy  # here: it imports those test modules

    return users_mypy.errors(tmp_path_factory)


@pytest.fixture
def python_sigint() -> Iterator[None]:
    """Python's own handling of SIGINT (``KeyboardInterrupt``) for the test, whatever the runner's: a runner
    started in the background ignores SIGINT, and passes that on to the processes it starts."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)
