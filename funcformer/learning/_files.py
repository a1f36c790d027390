"""Files that appear only once fully written, so a crash or a kill never leaves half of one, and the
dataset cache built on them (shared by the Poisson and Darcy tasks)."""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import IO, Any

import numpy as np


def default_cache() -> Path:
    """Where datasets are cached: $FUNCFORMER_CACHE, else ~/.cache/funcformer."""
    return Path(os.environ.get("FUNCFORMER_CACHE", Path.home() / ".cache" / "funcformer"))


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


def cached_arrays(
    path: Path,
    parameters: np.ndarray,
    shapes: Mapping[str, tuple[int, ...]],
    make: Callable[[], dict[str, np.ndarray]],
) -> dict[str, np.ndarray]:
    """The float64 arrays stored at ``path`` if it is readable and was written for exactly these
    ``parameters`` with these ``shapes``; else ``make()``'s, stored there atomically. A mismatch or an
    unreadable, corrupt file means regenerate: never a silent wrong dataset."""
    try:
        with np.load(path, allow_pickle=False) as stored:
            if np.array_equal(stored["parameters"], parameters):
                arrays = {name: stored[name] for name in shapes}
                if all(a.shape == shapes[n] and a.dtype == np.float64 for n, a in arrays.items()):
                    return arrays
    except Exception:
        pass
    arrays = make()
    path.parent.mkdir(parents=True, exist_ok=True)
    # numpy's stubs type savez's **arrays so that a dict could fill allow_pickle; these are arrays
    savez: Callable[..., None] = np.savez
    with atomic_file(path) as file:
        savez(file, parameters=parameters, **arrays)
    return arrays
