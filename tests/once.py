"""What the suite makes once a run and its xdist workers share (a mypy run over users' scripts, the
documentation site): the first worker to ask makes it, under a file lock in the run's shared temporary
directory; the others wait for it and read it. A run that will ask begins it at its start (``begin``, from
tests/conftest.py), in a thread beside the tests: made while they run, not while a worker waits for it."""

from __future__ import annotations

import contextlib
import os
import shutil
import threading
from collections.abc import Callable
from pathlib import Path

import pytest
from filelock import FileLock


def shared(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The run's temporary directory, common to its xdist workers (each worker's own lies inside it)."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


def directory(tmp_path_factory: pytest.TempPathFactory, name: str, make: Callable[[Path], None]) -> Path:
    """The directory ``name`` of ``shared``, filled by ``make(it)`` once a run: by the first worker that asks,
    or again by the next if ``make`` raised."""
    root = shared(tmp_path_factory)
    made, done = root / name, root / f"{name}.done"
    with FileLock(root / f"{name}.lock"):
        if not done.exists():
            shutil.rmtree(made, ignore_errors=True)
            made.mkdir()
            make(made)
            done.touch()
    return made


def begin(tmp_path_factory: pytest.TempPathFactory, name: str, make: Callable[[Path], None]) -> threading.Thread:
    """``directory(tmp_path_factory, name, make)`` in a thread of its own, started: a worker whose tests will
    ask for ``name`` begins it before they run (the worker that takes the lock first makes it; the other's
    thread waits for it). A failure is left to the test that asks, which makes it again and reports it."""

    shared(tmp_path_factory)  # here, not in the thread: pytest makes the directory on the first ask, unlocked,
    # and a test's fixture asking beside the thread's first ask failed with FileExistsError

    def made() -> None:
        with contextlib.suppress(Exception):
            directory(tmp_path_factory, name, make)

    thread = threading.Thread(target=made, name=f"once: {name}", daemon=True)
    thread.start()
    return thread
