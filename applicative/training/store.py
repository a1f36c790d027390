"""Datasets on disk, for every task: one file format, checked whenever read, and two ways to fill it.

    write(path, text, arrays)          one checked file: named float64 arrays, a description (``text``) and a
                                       SHA-256 of both, written atomically (``_files.atomic_file``)
    read(path, text, shapes)           its arrays, refused by name if it is another file, altered or truncated
    make(directory, settings, shards)  a dataset in shards (each a ``write``), made in parallel by a task's
                                       function of a shard's description; resumable (only missing shards
                                       are made, each kept one checked), one writer at a time
    cached_arrays(path, ...)           a task's dataset as one cached file, remade when it does not match

A sharded dataset's directory holds ``dataset.json`` (its settings) and its shards; ``settings(directory)``
reads the first. ``funcformer.fno_darcy`` keeps its benchmark this way (1,200 samples at 421 x 421 in 120
shards, and its export at one grid as one file); the Poisson and Darcy tasks cache theirs with
``cached_arrays``.
"""

from __future__ import annotations

import concurrent.futures
import hashlib
import json
import multiprocessing
import zipfile
import zlib
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from tqdm.auto import tqdm

from applicative.training.files import RunInUse, atomic_file, holding, write_atomically

__all__ = ["DATASET", "cached_arrays", "digest", "make", "read", "settings", "write"]

DATASET = "dataset.json"
"""A sharded dataset's settings, in its directory."""
_ADVICE = "delete it and run generate again to make it anew"


def digest(text: str, *arrays: np.ndarray) -> str:
    """The SHA-256 (hex) of a description and its arrays' float64 bytes, in order."""
    hashed = hashlib.sha256(text.encode())
    for array in arrays:
        hashed.update(np.ascontiguousarray(array, np.float64).tobytes())
    return hashed.hexdigest()


def write(path: Path, text: str, arrays: Mapping[str, np.ndarray], dtype: type[np.floating[Any]] = np.float64) -> None:
    """``arrays`` (as ``dtype``), the description ``text`` and their ``digest`` at ``path``, compressed, written
    atomically: the file appears only whole."""
    stored = {name: np.asarray(array, dtype) for name, array in arrays.items()}
    savez: Callable[..., None] = np.savez_compressed  # numpy's stubs would let a dict fill allow_pickle
    with atomic_file(path) as file:
        savez(file, shard=np.asarray(text), sha256=np.asarray(digest(text, *stored.values())), **stored)


def read(
    path: Path, text: str | None, shapes: Mapping[str, tuple[int, ...] | None], advice: str = _ADVICE
) -> tuple[str, dict[str, np.ndarray]]:
    """(description, arrays) of the file at ``path`` (``write``), checked: its description must be ``text``
    (unless None), each array of ``shapes`` must have its shape (unless None) and the checksum must match.
    ValueError naming the file, and ``advice``, otherwise."""
    try:
        with np.load(path, allow_pickle=False) as stored:
            found, checksum = str(stored["shard"]), str(stored["sha256"])
            arrays = {name: stored[name] for name in shapes}
    except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile, zlib.error) as error:
        raise ValueError(f"{path} is corrupt or truncated ({type(error).__name__}: {error}): {advice}") from None
    if text is not None and found != text:
        raise ValueError(f"{path} holds another shard ({found}) than this dataset's ({text}): {advice}")
    for name, shape in shapes.items():
        if (shape is not None and arrays[name].shape != shape) or arrays[name].dtype.kind != "f":
            raise ValueError(
                f"{path} holds {name} {arrays[name].shape} {arrays[name].dtype}, not {shape} floats: {advice}"
            )
    if digest(found, *arrays.values()) != checksum:
        raise ValueError(f"{path} is corrupt: its arrays do not match its SHA-256 checksum: {advice}")
    return found, arrays


def settings(directory: Path, make: str) -> dict[str, Any]:
    """The directory's ``dataset.json``; FileNotFoundError (naming the command ``make`` that makes one) if there
    is none, ValueError if it is unreadable."""
    path = directory / DATASET
    if not path.is_file():
        raise FileNotFoundError(f"no dataset at {directory} (no {DATASET}): make it with {make}")
    try:
        stored: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    except ValueError as error:
        raise ValueError(f"{path} is not a dataset description ({type(error).__name__}: {error})") from None
    return stored


def make(
    directory: Path,
    wanted: dict[str, Any],
    shards: Callable[[dict[str, Any]], Sequence[tuple[Path, dict[str, Any], Mapping[str, tuple[int, ...]]]]],
    make_shard: Callable[[dict[str, Any]], dict[str, np.ndarray]],
    *,
    workers: int,
    progress: bool,
    what: str,
) -> int:
    """Make, or finish making, the dataset of settings ``wanted`` in ``directory`` (created if need be):
    ``shards(settings)`` lists its shards (path, description, the arrays' shapes); each shard not yet
    there is ``make_shard(description)``, written by ``write`` (the description's JSON its text), by
    ``workers`` processes (spawned, never forked: JAX's threads) or this one (1), a ``tqdm`` bar counting
    samples (a description's "count"). Each shard already there is checked (``read``) and kept. Returns
    the number of samples made now. ValueError: ``directory`` holding a dataset of other settings, or a
    shard that fails its check (named); ``RunInUse`` if another writer holds it."""
    directory.mkdir(parents=True, exist_ok=True)
    listing = shards(wanted)
    try:
        with holding(directory, (DATASET, *(path.name for path, _, _ in listing))):
            if (directory / DATASET).exists():
                stored = settings(directory, "")
                if stored != wanted:
                    differ = sorted(key for key in wanted if stored.get(key) != wanted[key])
                    raise ValueError(
                        f"{directory} holds a dataset of other settings (differing: {', '.join(differ)}; stored "
                        f"{json.dumps(stored)}): use another directory, or the stored settings to finish it"
                    )
            else:
                write_atomically(directory / DATASET, json.dumps(wanted, indent=2, sort_keys=True) + "\n")
            todo, done, total = [], 0, 0
            for path, shard, shapes in listing:
                total += shard["count"]
                if path.exists():
                    read(path, json.dumps(shard, sort_keys=True), shapes)
                    done += shard["count"]
                else:
                    todo.append((path, shard))
            with tqdm(total=total, initial=done, desc=what, unit="sample", disable=not progress) as bar:
                if workers == 1 or len(todo) <= 1:
                    for path, shard in todo:
                        bar.update(_made(path, shard, make_shard))
                else:
                    context = multiprocessing.get_context("spawn")
                    with concurrent.futures.ProcessPoolExecutor(min(workers, len(todo)), mp_context=context) as pool:
                        futures = [pool.submit(_made, path, shard, make_shard) for path, shard in todo]
                        try:
                            for future in concurrent.futures.as_completed(futures):
                                bar.update(future.result())
                        except BaseException:
                            pool.shutdown(cancel_futures=True)
                            raise
            return total - done
    except RunInUse:
        message = f"{directory} is being written by another generator: wait for it to finish, or use another directory"
        raise RunInUse(message) from None


def _made(path: Path, shard: dict[str, Any], make_shard: Callable[[dict[str, Any]], dict[str, np.ndarray]]) -> int:
    """Make one shard and write it; its number of samples."""
    write(path, json.dumps(shard, sort_keys=True), make_shard(shard))
    return int(shard["count"])


def cached_arrays(
    path: Path,
    parameters: np.ndarray,
    count: int,
    shapes: Mapping[str, tuple[int, ...]],
    make: Callable[[], dict[str, np.ndarray]],
) -> dict[str, np.ndarray]:
    """The first ``count`` rows of the float64 arrays stored at ``path``, if it is readable, was written
    for exactly these ``parameters`` and holds at least ``count`` rows of these row ``shapes``; else
    ``make()``'s ``count`` rows, stored there atomically in place of the smaller file. So one file serves
    every count of a dataset whose first rows do not depend on the count (each is a prefix of the next):
    the cache holds one file per dataset, as large as the largest count asked for. A mismatch or an
    unreadable, corrupt file means regenerate: never a silent wrong dataset."""
    try:
        with np.load(path, allow_pickle=False) as stored:
            if np.array_equal(stored["parameters"], parameters):
                arrays = {name: stored[name] for name in shapes}
                if all(
                    a.shape[1:] == shapes[n] and len(a) >= count and a.dtype == np.float64 for n, a in arrays.items()
                ):
                    return {name: a[:count] for name, a in arrays.items()}
    except Exception:
        pass
    arrays = make()
    path.parent.mkdir(parents=True, exist_ok=True)
    savez: Callable[..., None] = np.savez
    with atomic_file(path) as file:
        savez(file, parameters=parameters, **arrays)
    return arrays
