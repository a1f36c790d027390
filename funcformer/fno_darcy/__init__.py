"""Darcy flow as in the Fourier Neural Operator paper (docs/fno_darcy.md): its data, regenerated from the
authors' recipe (``funcformer.fno_darcy.data``), written once to a directory and loaded at the paper's
resolutions.

    generate    the training set (seed ``TRAIN_SEED``) and the test set (``TEST_SEED``) at s = 421, written
                to a directory in shards of ``SHARD_SIZE`` samples, in parallel over processes
                (``python -m funcformer.fno_darcy generate --out DIR``)
    load        a split's (a, u), subsampled to s = 85, 141, 211 or 421 (``data.subsample``)
    export      the whole dataset at one grid in one file, float32 (1,200 samples at s = 85: 32 MB, not
                1.5 GB): for a machine that trains there alone; ``load`` reads it as it reads the directory

and the models trained on them (bench/fno_darcy.py prints the table):

    model       ``ImageToFunction``: the coefficient as an image, the solution as a Chebyshev series, the
                library's encoder and cross attention between them
    vit         ``ViTToFunction``: a vision transformer, a token a cell of the image (with its neighbours), the
                answer per cell projected onto a Chebyshev series; self-attention and learned kernel integrals
    recipes     ``Recipe`` (by default the best learned model: the ViT with the square's symmetries; ``IMAGE``
                the attending model's), ``train_image``, ``solve_image``, ``solver_part``, ``predict_image``: its
                training and its answers at any of the benchmark's grids, alone or correcting the recipe's solver
                run on the model's input (``data.coarse_solution``, the baseline a numerical analyst tries first)
    fno         the FNO paper's model and training protocol, ported to JAX: the sanity check on the data
both trained by ``applicative.training.fit`` (the loop, the checkpoints and the run directories of every
model; ``python -m funcformer.fno_darcy train [--model vit|image|fno]``), measured by
``funcformer.learning.metric.values_relative_l2`` (the benchmark's metric).

The directory holds ``dataset.json`` (what was asked for) and the shards ``train-00000.npz``, ...,
``test-00000.npz``, ...: shard k of a split holds its samples k * shard_size, ... (fewer in the last), the
coefficients ``a`` and the solutions ``u`` (``data.solution``), both on the cell-centred grid, (count, s, s)
float64, with the shard's description and a SHA-256 of it and of the arrays, checked whenever the shard is read
(``applicative.training.store``, the one format of every dataset on disk). A shard appears only once fully
written, so a killed generator resumes where it stopped: ``generate`` again makes only the missing shards; a
shard that fails its check is refused by name, never overwritten. One generator at a time writes a directory
(an OS file lock).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeAlias

import numpy as np

from applicative.training import store
from funcformer.fno_darcy.data import (
    ALPHA,
    HIGH,
    LOW,
    NODES,
    TAU,
    coarse_solution,
    coefficients,
    solution,
    solve,
    subsample,
)
from funcformer.fno_darcy.model import ImageConfig, ImageToFunction
from funcformer.fno_darcy.recipes import IMAGE, Recipe, predict_image, solve_image, solver_part, train_image

__all__ = [
    "IMAGE",
    "SHARD_SIZE",
    "SPLITS",
    "TEST_SEED",
    "TRAIN_SEED",
    "ImageConfig",
    "ImageToFunction",
    "Recipe",
    "coarse_solution",
    "coefficients",
    "export",
    "generate",
    "load",
    "predict_image",
    "solution",
    "solve",
    "solve_image",
    "solver_part",
    "subsample",
    "train_image",
]

TRAIN_SEED = 0
"""The training set's seed."""
TEST_SEED = 1
"""The test set's seed."""
SPLITS = {"train": TRAIN_SEED, "test": TEST_SEED}
"""Each split's seed."""
SHARD_SIZE = 10
"""Samples per shard: 10 at s = 421 are 28 MB of arrays (about 13 MB compressed), 10 solves."""
RECIPE = 1
"""The recipe's version, recorded in every shard: raised when the numbers a seed gives change."""
Shape: TypeAlias = tuple[int, ...]


def _shard_path(directory: Path, split: str, index: int) -> Path:
    return directory / f"{split}-{index:05d}.npz"


def _shards(settings: dict[str, Any], split: str) -> list[dict[str, Any]]:
    """The descriptions of a split's shards: what each holds and how it is drawn."""
    count, size = settings["splits"][split], settings["shard_size"]
    common = {key: settings[key] for key in ("recipe", "s", "low", "high", "alpha", "tau")}
    return [
        {**common, "split": split, "seed": SPLITS[split], "index": k, "start": start, "count": min(size, count - start)}
        for k, start in enumerate(range(0, count, size))
    ]


def _listing(directory: Path) -> Callable[[dict[str, Any]], list[tuple[Path, dict[str, Any], dict[str, Shape]]]]:
    """The dataset's shards as ``store.make`` lists them: path, description, the arrays' shapes."""

    def listed(settings: dict[str, Any]) -> list[tuple[Path, dict[str, Any], dict[str, Shape]]]:
        return [
            (_shard_path(directory, split, shard["index"]), shard, dict.fromkeys("au", _shape(shard)))
            for split in SPLITS
            for shard in _shards(settings, split)
        ]

    return listed


def _shape(shard: dict[str, Any]) -> Shape:
    return (shard["count"], shard["s"], shard["s"])


def _draw(shard: dict[str, Any]) -> dict[str, np.ndarray]:
    """A shard's samples, drawn and solved: ``coefficients`` and their ``solution``."""
    a = coefficients(shard["seed"], shard["count"], shard["s"], shard["low"], shard["high"], start=shard["start"])
    return {"a": a, "u": np.stack([solution(sample) for sample in a])}


def _settings(directory: Path) -> dict[str, Any]:
    """The directory's ``dataset.json``, checked to describe this dataset's shards."""
    settings = store.settings(directory, "python -m funcformer.fno_darcy generate --out DIR")
    try:
        for split in SPLITS:
            _shards(settings, split)
    except (KeyError, TypeError) as error:
        raise ValueError(
            f"{directory / store.DATASET} is not a dataset description ({type(error).__name__}: {error})"
        ) from None
    return settings


def generate(
    out: Path | str,
    train: int = 1000,
    test: int = 200,
    s: int = NODES,
    *,
    low: float = LOW,
    workers: int | None = None,
    shard_size: int = SHARD_SIZE,
    progress: bool = True,
) -> int:
    """Make the ``train`` training and ``test`` test samples at s points per axis in ``out`` (created if need
    be), or finish making them: only the shards not yet in ``out`` are made, each checked one is kept. Sample i
    of a split is ``coefficients(seed, 1, s, low, HIGH, start=i)`` and ``solution(a)`` (solved at s nodes and
    interpolated back to the cell centres, as in solve_gwf.m). ``workers`` processes (default: every core; 1:
    this process) make the shards, a ``tqdm`` bar counting samples. Returns the number of samples made now.

    ValueError: a count or s out of range, ``out`` holding a dataset of other settings, or a shard that fails
    its check (named); ``RunInUse`` (``applicative.training.files``) if another generator holds ``out``."""
    for name, value, least in (("train", train, 1), ("test", test, 1), ("s", s, 4), ("shard_size", shard_size, 1)):
        if not isinstance(value, int) or value < least:
            raise ValueError(f"generate: {name} must be an integer >= {least}, got {value!r}")
    workers = (os.cpu_count() or 1) if workers is None else workers
    if not isinstance(workers, int) or workers < 1:
        raise ValueError(f"generate: workers must be an integer >= 1, got {workers!r}")
    if not (np.isfinite(low) and low > 0):
        raise ValueError(f"generate: low = {low} must be positive and finite (a > 0: the PDE is elliptic)")
    settings: dict[str, Any] = {"recipe": RECIPE, "s": s, "low": float(low), "high": HIGH, "alpha": ALPHA, "tau": TAU}
    settings.update(shard_size=shard_size, splits={"train": train, "test": test})
    directory = Path(out)
    return store.make(directory, settings, _listing(directory), _draw, workers=workers, progress=progress,
                      what="fno_darcy")  # fmt: skip


def load(directory: Path | str, split: str, s: int = 85) -> tuple[np.ndarray, np.ndarray]:
    """(a, u) of a split ("train" or "test") in ``directory``, each (count, s, s) float64: the stored coefficients
    and solutions subsampled to s (``subsample``; s = 85, 141, 211, 421 from the 421 grid), every shard checked;
    or, ``directory`` an ``export``'s file, its arrays at its one grid, checked.

    FileNotFoundError: no dataset, or a missing shard (the generator has not finished). ValueError: another
    split, an s the stored grid (or the export) has not, or a shard or an export that fails its check (named)."""
    directory = Path(directory)
    if split not in SPLITS:
        raise ValueError(f"load: split must be one of {', '.join(SPLITS)}, got {split!r}")
    if directory.is_file():
        return _read_export(directory, split, s)
    settings = _settings(directory)
    subsample(np.zeros((settings["s"], settings["s"])), s)  # refuses an s the stored grid has not
    a, u = [], []
    for shard in _shards(settings, split):
        path = _shard_path(directory, split, shard["index"])
        if not path.exists():
            raise FileNotFoundError(f"{path} is missing: the generator has not finished; run generate again to resume")
        _, arrays = store.read(path, json.dumps(shard, sort_keys=True), dict.fromkeys("au", _shape(shard)))
        shard_a, shard_u = arrays["a"], arrays["u"]
        a.append(np.ascontiguousarray(subsample(shard_a, s)))
        u.append(np.ascontiguousarray(subsample(shard_u, s)))
    return np.concatenate(a), np.concatenate(u)


def export(directory: Path | str, path: Path | str, s: int = 85) -> Path:
    """Write the dataset in ``directory`` at the s x s grid (``load``) to the one file ``path`` (.npz, a
    ``store.write``): both splits' a and u as float32 (what the models train on), with the dataset's settings
    and s as its description, checked by ``load``. Returns the path. Errors as ``load``'s."""
    settings = _settings(Path(directory))
    arrays = {f"{x}_{split}": y for split in SPLITS for x, y in zip("au", load(directory, split, s), strict=True)}
    store.write(Path(path), json.dumps({**settings, "exported_s": s}, sort_keys=True), arrays, np.float32)
    return Path(path)


def _read_export(path: Path, split: str, s: int) -> tuple[np.ndarray, np.ndarray]:
    """(a, u) of a split of ``export``'s file at ``path``, float64, checked. ValueError naming the file."""
    advice = "export it again from the dataset's directory"
    names = [f"{x}_{name}" for name in SPLITS for x in "au"]
    text, arrays = store.read(path, None, dict.fromkeys(names), advice)
    exported = json.loads(text)["exported_s"]
    if s != exported:
        raise ValueError(f"load: {path} holds the dataset at s = {exported} alone, not s = {s}: {advice} at s = {s}")
    return arrays[f"a_{split}"].astype(np.float64), arrays[f"u_{split}"].astype(np.float64)
