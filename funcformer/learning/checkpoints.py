"""Checkpoints: a run's state in its directory's checkpoint.npz, written atomically, read back checked.

The file holds the model's and the optimiser state's arrays (``leaf_0``, ``leaf_1``, ... in pytree
order), the run's config, the step, the loss history, the training time so far and the run's output
scale. ``load`` reads them against a template of the run's shapes from ``jax.eval_shape`` (no
weight is drawn, nothing is compiled): every array's shape, kind and finiteness is checked, and the
file's config must be the run's.
"""

from __future__ import annotations

import io
import zipfile
from dataclasses import dataclass
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import optax

from funcformer.learning._files import CHECKPOINT, atomic_file
from funcformer.learning.settings import RunConfig
from funcformer.learning.steps import optimiser
from funcformer.model import Funcformer, init

__all__ = ["State", "from_bytes", "load", "save", "template"]


@dataclass
class State:
    """What a checkpoint holds."""

    model: Funcformer
    opt_state: optax.OptState
    step: int
    losses: list[float]
    scale: float
    """The run's ``data.output_scale``, computed when it started."""
    seconds: float = 0.0
    """Training time so far (all sessions of a resumed run)."""


def template(run: RunConfig) -> tuple[Funcformer, optax.OptState]:
    """The run's (model, optimiser state) as ``jax.ShapeDtypeStruct`` leaves: their pytree structure,
    shapes and dtypes, from ``jax.eval_shape`` (nothing is drawn or allocated)."""

    def fresh() -> tuple[Funcformer, optax.OptState]:
        model = init(run.seed, run.model)
        return model, optimiser(run).init(model)

    shapes: tuple[Funcformer, optax.OptState] = jax.eval_shape(fresh)
    return shapes


_FIELDS = {"run", "step", "seconds", "losses", "output_scale"}


def save(directory: Path, run: RunConfig, state: State) -> None:
    """Write the checkpoint atomically: a temporary file in ``directory``, then ``os.replace``."""
    leaves = jax.tree_util.tree_leaves((state.model, state.opt_state))
    arrays = {f"leaf_{i}": np.asarray(leaf) for i, leaf in enumerate(leaves)}
    arrays.update(run=np.asarray(run.to_json()), step=np.asarray(state.step), seconds=np.asarray(state.seconds))
    arrays.update(losses=np.asarray(state.losses), output_scale=np.asarray(state.scale, np.float64))
    with atomic_file(directory / CHECKPOINT) as file:
        np.savez(file, allow_pickle=False, **arrays)


def load(directory: Path, run: RunConfig) -> State:
    """The checkpoint in ``directory``, checked against ``run`` and the shapes it implies (``template``).

    An unreadable file (truncated, not a zip, a missing or damaged array) raises a ValueError naming
    it, and so does a checkpoint of an older format (one without its output scale), saying to train
    the run again.
    """
    path = directory / CHECKPOINT
    if not path.exists():
        raise FileNotFoundError(f"no checkpoint at {path}")
    return from_bytes(path.read_bytes(), run, directory)


def from_bytes(data: bytes, run: RunConfig, directory: Path) -> State:
    """``load`` of the checkpoint ``data`` read from ``directory`` (named in its errors): what the owner of
    a run on several processes reads and hands to the others (``processes.from_owner``)."""
    path = directory / CHECKPOINT
    leaves, treedef = jax.tree_util.tree_flatten(template(run))
    try:
        stored = np.load(io.BytesIO(data), allow_pickle=False)
        if not isinstance(stored, np.lib.npyio.NpzFile):
            raise ValueError("an .npy array, not an .npz archive")
        with stored:
            saved_run = RunConfig.from_json(str(stored["run"]), run.problem, str(path))
            step, losses = int(stored["step"]), [float(x) for x in stored["losses"]]
            seconds = float(stored["seconds"])
            stored_scale = float(stored["output_scale"]) if "output_scale" in stored.files else None
            arrays = [stored[f"leaf_{i}"] for i in range(len(leaves))]
            extra = sorted(set(stored.files) - {f"leaf_{i}" for i in range(len(leaves))} - _FIELDS)
    except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile) as error:
        raise ValueError(f"{path} is corrupt or not a checkpoint ({type(error).__name__}: {error})") from error
    if stored_scale is None:
        again = run.problem.invocation("train --out DIR", "funcformer.learning.train(run, DIR)")
        raise ValueError(
            f"{path} is a checkpoint of an older format (saved before runs stored their output scale), which this "
            f"version does not read: train the run again ({again}, with the settings in its config.json)"
        )
    if not (np.isfinite(stored_scale) and stored_scale > 0):
        raise ValueError(f"{path}: the stored output scale is {stored_scale}, not a positive finite number")
    if saved_run != run:
        changed = sorted(k for k, v in run.fields().items() if saved_run.fields()[k] != v)
        raise ValueError(f"{path} was written by a different run configuration (fields differ: {', '.join(changed)})")
    if extra:
        raise ValueError(f"{path} holds arrays the configuration has no place for: {', '.join(extra)}")
    for i, (leaf, array) in enumerate(zip(leaves, arrays, strict=True)):
        if leaf.shape != array.shape:
            raise ValueError(f"{path}: array {i} has shape {array.shape}, the configuration needs {leaf.shape}")
        if array.dtype.kind != leaf.dtype.kind:
            raise ValueError(f"{path}: array {i} is {array.dtype}, the configuration needs {leaf.dtype}")
        if array.dtype.kind == "f" and not np.all(np.isfinite(array)):
            raise ValueError(f"{path}: array {i} holds NaN or infinite values; a checkpoint's weights are finite")
    restored = [jnp.asarray(a, leaf.dtype) for a, leaf in zip(arrays, leaves, strict=True)]
    model, opt_state = jax.tree_util.tree_unflatten(treedef, restored)
    return State(model, opt_state, step, losses, stored_scale, seconds)
