"""Files that appear only once fully written, so a crash or a kill never leaves half of one; a run
directory's files and the lock that gives it to one process at a time.

A run directory holds ``config.json`` (the run's description: its settings, a JSON object),
``checkpoint.npz`` (``checkpoints``) and, where a task evaluates its runs, ``metrics.json``."""

from __future__ import annotations

import contextlib
import glob
import os
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO, Any

from filelock import FileLock, Timeout

LOCK = ".lock"
CONFIG = "config.json"
CHECKPOINT = "checkpoint.npz"
BEST = "best.npz"
"""The checkpoint of the lowest held-out error so far (``fit(keep_best=True)``), beside the last."""
HISTORY = "history.csv"
"""The run's curve, an epoch a row (``checkpoints.write_history``), written with each checkpoint."""
METRICS = "metrics.json"


class RunInUse(RuntimeError):
    """Another process holds the run directory."""


@contextlib.contextmanager
def holding(directory: Path, files: Iterable[str]) -> Iterator[None]:
    """Hold ``directory`` for this process: another process that tries fails at
    once with ``RunInUse``. The lock is the OS's (``filelock``), so a killed process never leaves it
    held; the same process may take it again (``train`` then ``evaluate``). On entry, the temporaries of
    ``files`` that a killed ``atomic_file`` left behind are removed: no one else writes them meanwhile."""
    if not directory.is_dir():
        raise FileNotFoundError(f"no trained run at {directory}: no such directory")
    lock = FileLock((directory / LOCK).resolve(), timeout=0, is_singleton=True)  # one per path: reentrant
    try:
        lock.acquire()
    except Timeout:
        raise RunInUse(
            f"{directory} is in use by another process (training, evaluating or plotting it): "
            "wait for it to finish, or use another directory"
        ) from None
    try:
        for name in files:
            for stale in directory.glob(f"{glob.escape(name)}*.tmp"):
                stale.unlink(missing_ok=True)
        yield
    finally:
        lock.release()


def holding_run(directory: Path) -> contextlib.AbstractContextManager[None]:
    """Hold a run directory for this process (``holding``): training, evaluating and plotting take it,
    so two processes never mix their files in one run."""
    return holding(directory, (CONFIG, CHECKPOINT, BEST, HISTORY, METRICS))


@contextlib.contextmanager
def atomic_file(path: Path, mode: str = "wb") -> Iterator[IO[Any]]:
    """Write through a temporary file in ``path``'s directory, moved onto ``path`` (``os.replace``) on success."""
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
    try:
        with os.fdopen(handle, mode) as file:
            yield file
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def read_config(directory: Path) -> str:
    """The text of the run's config.json in ``directory``; FileNotFoundError, "no trained run at DIR: config.json
    is missing", where there is none."""
    if not (directory / CONFIG).exists():
        raise FileNotFoundError(f"no trained run at {directory}: {CONFIG} is missing")
    return (directory / CONFIG).read_text(encoding="utf-8")


def write_atomically(path: Path, text: str) -> None:
    """A text file, written atomically (``atomic_file``)."""
    with atomic_file(path, "w") as file:
        file.write(text)
