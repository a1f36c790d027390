"""Checkpoints: a run's state in its directory's checkpoint.npz, written atomically, read back checked.

One format for every model (``learner.Learner``): the parameters' and the optimiser state's arrays
(``leaf_0``, ``leaf_1``, ... in pytree order), the run's description (its config.json text), the step,
the loss history, the held-out errors so far, the training time and the run's output scale. ``read``
takes them against a template of the run's shapes from ``jax.eval_shape`` (no weight is drawn, nothing is
compiled): every array's shape, kind and finiteness is checked, and the file's description must be the
run's (a different one is refused naming the settings that differ).

Beside it, ``fit`` may keep best.npz (the same format: the state of the lowest held-out error so far;
``restore(..., best=True)``) and writes history.csv with every checkpoint (``write_history``: an epoch a row,
its last step, its mean loss and its held-out error, for a spreadsheet or ``pandas.read_csv``; the same curve
as TensorBoard events where ``tensorboardX`` is installed: ``tensorboard``).

``save_pytree`` and ``load_pytree`` keep any pytree in the same format, checked the same way: a batch of
trees, a structure holding trees, a dataset to cache or hand to another process. A leaf that is a typed
key array (a tree's layout, a PRNG key: JAX's extended dtypes, which numpy cannot hold) is stored as its
key data and rebuilt with the template's implementation, so a tree comes back of its shape.
"""

from __future__ import annotations

import csv
import io
import json
import zipfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, TypeVar

import jax
import jax.numpy as jnp
import numpy as np
import optax

from applicative import stacked
from applicative.training.data import Arrays, Source
from applicative.training.files import BEST, CHECKPOINT, CONFIG, HISTORY, atomic_file, write_atomically
from applicative.training.learner import Learner
from applicative.training.store import digest
from applicative.training.tensorboard import write_events

__all__ = [
    "State",
    "difference",
    "history",
    "load_pytree",
    "read",
    "restore",
    "same_run",
    "save",
    "save_pytree",
    "stored",
    "template",
    "write_history",
]

P = TypeVar("P")
T = TypeVar("T")


@dataclass
class State(Generic[P]):
    """What a checkpoint holds."""

    model: P
    opt_state: optax.OptState
    step: int
    losses: list[float]
    scale: float
    """The run's output scale (a task's ``data.output_scale``; 1.0 for a model that keeps its own),
    computed when it started."""
    seconds: float = 0.0
    """Training time so far (all sessions of a resumed run)."""
    held_out: list[tuple[int, float]] = field(default_factory=list)
    """(epoch, error on the held-out samples) every ``validate_every`` epochs (``loop.fit``): the first of the
    named metrics where ``validate`` gives several."""
    metrics: dict[str, list[tuple[int, float]]] = field(default_factory=dict)
    """Each named held-out metric's (epoch, value) pairs, where ``validate`` gives a mapping of them (empty where
    it gives one error)."""


def template(
    learner: Learner[P, Any, Any, Any], seed: int, opt: optax.GradientTransformation
) -> tuple[P, optax.OptState]:
    """The run's (parameters, optimiser state) as ``jax.ShapeDtypeStruct`` leaves: their pytree structure,
    shapes and dtypes, from ``jax.eval_shape`` (nothing is drawn or allocated)."""

    def fresh() -> tuple[P, optax.OptState]:
        model = learner.init(seed)
        return model, opt.init(model)

    shapes: tuple[P, optax.OptState] = jax.eval_shape(fresh)
    return shapes


_FIELDS = {"run", "fit", "step", "seconds", "losses", "output_scale", "held_out", "metrics", "metric_names"}


def save(directory: Path, description: str, state: State[P], name: str = CHECKPOINT, fitted: str = "") -> None:
    """Write the checkpoint of the run ``description`` (its config.json text) atomically: a temporary file
    in ``directory``, then ``os.replace``, to ``name`` (checkpoint.npz; ``files.BEST`` for the best). ``fitted``:
    the settings ``fit`` was given beside it (``loop.fitted``), stored where not empty."""
    arrays = _arrays((state.model, state.opt_state))
    arrays.update(run=np.asarray(description), step=np.asarray(state.step), seconds=np.asarray(state.seconds))
    if fitted:
        arrays.update(fit=np.asarray(fitted))
    arrays.update(losses=np.asarray(state.losses), output_scale=np.asarray(state.scale, np.float64))
    arrays.update(held_out=np.asarray(state.held_out, np.float64).reshape(-1, 2))
    if state.metrics:  # (validations, metrics), in the names' order
        values = [[v for _, v in curve] for curve in state.metrics.values()]
        arrays.update(metric_names=np.asarray(list(state.metrics)), metrics=np.asarray(values, np.float64).T)
    with atomic_file(directory / name) as file:
        np.savez(file, allow_pickle=False, **arrays)


def fitted(data: Source, seed: int, block: int) -> str:
    """What decides a run of ``fit`` beside its description, as JSON: its seed and block, and its data (a training
    set held whole: its batch and the SHA-256 of its arrays; drawn minibatches: their epoch). Stored in each
    checkpoint (``save``); a resume given others is refused, naming each (``read``). (Not its steps: where it
    stops; a resume may go further, on the schedule its optimiser was made with.)"""
    if isinstance(data, Arrays):
        typed = jax.dtypes.prng_key  # a typed key's leaf hashed by its words
        leaves = [jax.random.key_data(x) if jnp.issubdtype(jnp.result_type(x), typed) else x
                  for x in jax.tree_util.tree_leaves((data.inputs, data.targets))]  # fmt: skip
        made: dict[str, object] = {"batch": data.batch, "training set": digest("", *map(np.asarray, leaves))}
    else:
        made = {"per_epoch": data.per_epoch}
    return json.dumps({"seed": seed, "block": block, **made}, sort_keys=True)


def write_history(directory: Path, state: State[Any], per_epoch: int) -> None:
    """history.csv, atomically: a row an epoch begun (the last may be partial): ``epoch`` (from 1), ``step`` (the
    steps done at its end), ``loss`` (the mean of its steps' losses), ``held_out`` (its held-out error) and a
    column a named metric (``State.metrics``), each empty where none was computed; the same curve as
    TensorBoard events where ``tensorboardX`` is installed (``tensorboard.write_events``)."""
    curves = [dict(state.held_out), *(dict(curve) for curve in state.metrics.values())]
    header = ["epoch", "step", "loss", "held_out", *state.metrics]
    rows = []
    for epoch in range(1, -(-len(state.losses) // per_epoch) + 1):
        step = min(epoch * per_epoch, len(state.losses))
        mean = float(np.mean(state.losses[(epoch - 1) * per_epoch : step]))
        rows.append([str(epoch), str(step), repr(mean), *("" if epoch not in c else repr(c[epoch]) for c in curves)])
    text = io.StringIO()
    csv.writer(text, lineterminator="\n").writerows([header, *rows])
    write_atomically(directory / HISTORY, text.getvalue())
    write_events(directory, header, rows)


def stored(directory: Path, name: str = CHECKPOINT) -> bytes:
    """The bytes of ``directory``'s checkpoint (``name``); FileNotFoundError naming it if there is none."""
    path = directory / name
    if not path.exists():
        raise FileNotFoundError(f"no checkpoint at {path}")
    return path.read_bytes()


def read(
    data: bytes,
    description: str,
    shapes: tuple[P, optax.OptState],
    directory: Path,
    *,
    again: str = "",
    check: Callable[[str], object] | None = None,
    name: str = CHECKPOINT,
    fitted: str = "",
) -> State[P]:
    """The checkpoint ``data`` (read from ``directory`` / ``name``, named in the errors) of the run
    ``description``, its arrays checked against ``shapes`` (``template``). ``check``, a function of the stored
    description, may refuse it first (a task's own messages); ``again`` says how to train the run again.
    ``fitted``: the settings ``fit`` is given now, which must be those it stored (a checkpoint that stored
    none, written by a task's own loop or an older version, is not asked)."""
    path = directory / name
    leaves, treedef = jax.tree_util.tree_flatten(shapes)
    try:
        stored = np.load(io.BytesIO(data), allow_pickle=False)
        if not isinstance(stored, np.lib.npyio.NpzFile):
            raise ValueError("an .npy array, not an .npz archive")
        with stored:
            saved = str(stored["run"])
            fit = str(stored["fit"]) if "fit" in stored.files else ""
            step, losses = int(stored["step"]), [float(x) for x in stored["losses"]]
            seconds = float(stored["seconds"])
            stored_scale = float(stored["output_scale"]) if "output_scale" in stored.files else None
            held = stored["held_out"] if "held_out" in stored.files else np.zeros((0, 2))
            held_out = [(int(e), float(v)) for e, v in np.asarray(held, np.float64).reshape(-1, 2)]
            metrics = _metrics(stored, held_out)
            arrays = [stored[f"leaf_{i}"] for i in range(len(leaves))]
            extra = sorted(set(stored.files) - {f"leaf_{i}" for i in range(len(leaves))} - _FIELDS)
    except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile) as error:
        raise ValueError(f"{path} is corrupt or not a checkpoint ({type(error).__name__}: {error})") from error
    if check is not None:
        check(saved)
    if stored_scale is None:
        how = f" ({again}, with the settings in its config.json)" if again else ""
        raise ValueError(
            f"{path} is a checkpoint of an older format (saved before runs stored their output scale), which this "
            f"version does not read: train the run again{how}"
        )
    if not (np.isfinite(stored_scale) and stored_scale > 0):
        raise ValueError(f"{path}: the stored output scale is {stored_scale}, not a positive finite number")
    if not same_run(saved, description):
        raise ValueError(f"{path} was written by a different run configuration ({difference(saved, description)})")
    if fit and fitted and not same_run(fit, fitted):
        raise ValueError(f"{path} was trained with other settings of fit ({difference(fit, fitted)}): resume it "
                         "with its own")  # fmt: skip
    if extra:
        raise ValueError(f"{path} holds arrays the configuration has no place for: {', '.join(extra)}")
    model, opt_state = jax.tree_util.tree_unflatten(treedef, _leaves(arrays, leaves, path, "the configuration"))
    return State(model, opt_state, step, losses, stored_scale, seconds, held_out, metrics)


def _metrics(stored: Any, held_out: list[tuple[int, float]]) -> dict[str, list[tuple[int, float]]]:
    """The named metrics' curves of a checkpoint (its ``metrics`` rows: the held-out curve's epochs)."""
    if "metric_names" not in stored.files:
        return {}
    values = np.asarray(stored["metrics"], np.float64).reshape(len(held_out), -1)
    return {str(name): [(e, float(v)) for (e, _), v in zip(held_out, values[:, k], strict=True)]
            for k, name in enumerate(stored["metric_names"])}  # fmt: skip


def save_pytree(path: str | Path, x: object, description: str = "") -> None:
    """``x``, any pytree of arrays (structures holding trees included), in one file of the checkpoint format
    at ``path`` (an .npz): its leaves in pytree order and ``description``, written atomically."""
    arrays = _arrays(x)
    arrays.update(run=np.asarray(description))
    with atomic_file(Path(path)) as file:
        np.savez(file, allow_pickle=False, **arrays)


def load_pytree(path: str | Path, like: T, description: str = "") -> T:
    """The pytree ``save_pytree`` wrote at ``path``, rebuilt on ``like`` (a value of its structure, or
    ``jax.eval_shape`` of one: its pytree structure, shapes and dtypes). A ValueError names the file and what
    differs: another description, another number of arrays, an array's shape or kind, a file that is not
    one of these; FileNotFoundError if there is none."""
    path = Path(path)
    leaves, treedef = jax.tree_util.tree_flatten(like)
    try:
        with np.load(path, allow_pickle=False) as stored:
            saved = str(stored["run"])
            count = sum(name.startswith("leaf_") for name in stored.files)
            arrays = [stored[f"leaf_{i}"] for i in range(count)]
    except (ValueError, KeyError, EOFError, zipfile.BadZipFile, AttributeError) as error:
        raise ValueError(f"{path} is corrupt or not a saved pytree ({type(error).__name__}: {error})") from error
    if saved != description:
        raise ValueError(f"{path} holds {saved!r}, not {description!r}")
    if count != len(leaves):
        raise ValueError(f"{path} holds {count} arrays, the structure it is read into has {len(leaves)}")
    restored: T = jax.tree_util.tree_unflatten(treedef, _leaves(arrays, leaves, path, "the structure"))
    return restored


def _arrays(x: object) -> dict[str, np.ndarray]:
    """The leaves of ``x`` as host arrays named ``leaf_0``, ``leaf_1``, ... in pytree order; a typed key array
    (a tree's layout, a PRNG key) as its key data."""
    return {f"leaf_{i}": stacked.to_host(leaf) for i, leaf in enumerate(jax.tree_util.tree_leaves(x))}


def _leaves(arrays: list[np.ndarray], template: list[Any], path: Path, needs: str) -> list[jax.Array]:
    """The stored ``arrays`` as the leaves of ``template`` (arrays or ``jax.ShapeDtypeStruct``s), checked:
    each array's shape and kind, finite floats; a typed key array rebuilt from its key data."""
    restored = []
    for i, (leaf, array) in enumerate(zip(template, arrays, strict=True)):
        keys = jnp.issubdtype(leaf.dtype, jax.dtypes.extended)
        shape = jax.eval_shape(jax.random.key_data, leaf).shape if keys else leaf.shape
        if shape != array.shape:
            raise ValueError(f"{path}: array {i} has shape {array.shape}, {needs} needs {shape}")
        if array.dtype.kind != ("u" if keys else np.dtype(leaf.dtype).kind):
            raise ValueError(f"{path}: array {i} is {array.dtype}, {needs} needs {leaf.dtype}")
        if array.dtype.kind == "f" and not np.all(np.isfinite(array)):
            raise ValueError(f"{path}: array {i} holds NaN or infinite values; stored weights are finite")
        if keys:
            restored.append(jax.random.wrap_key_data(jnp.asarray(array), impl=_key_impl(leaf)))
        else:
            restored.append(jnp.asarray(array, leaf.dtype))
    return restored


def _key_impl(leaf: Any) -> Any:
    """The implementation of a typed key array or of its ``jax.ShapeDtypeStruct`` (JAX reads it off arrays
    only: here off a placeholder of that type, traced by ``jax.eval_shape``)."""
    found: list[Any] = []

    def probe(key: jax.Array) -> int:
        found.append(jax.random.key_impl(key))
        return 0

    jax.eval_shape(probe, leaf)
    return found[0]


def same_run(saved: str, description: str) -> bool:
    """Whether two run descriptions hold the same settings: equal as JSON (whatever their spacing or the order
    of their keys), or, where either is not JSON, equal as text."""
    try:
        return bool(json.loads(saved) == json.loads(description))
    except ValueError:
        return saved == description


def difference(saved: str, description: str) -> str:
    """The settings in which two run descriptions (JSON objects) differ, each with its value in the run
    (``saved``) and the value given (a nested setting named by its path, ``config.batch``), or why they cannot
    be compared."""
    try:
        old, new = _flat(json.loads(saved)), _flat(json.loads(description))
    except (ValueError, TypeError):
        return "its description is not the run's"
    missing = object()
    changed = sorted(k for k in old.keys() | new.keys() if old.get(k, missing) != new.get(k, missing))

    def said(settings: dict[str, object], key: str) -> str:
        return json.dumps(settings[key]) if key in settings else "none"

    parts = [f"{key}: {said(old, key)} in the run, {said(new, key)} given" for key in changed]
    return f"settings differ: {'; '.join(parts)}"


def _flat(settings: object, prefix: str = "") -> dict[str, object]:
    """A JSON object's settings by path (``config.batch``); TypeError for what is not a JSON object."""
    if not isinstance(settings, dict):
        raise TypeError("not a JSON object")
    flat: dict[str, object] = {}
    for key, value in settings.items():
        if isinstance(value, dict):
            flat |= _flat(value, f"{prefix}{key}.")
        else:
            flat[f"{prefix}{key}"] = value
    return flat


def restore(
    directory: str | Path,
    learner: Learner[P, Any, Any, Any],
    opt: optax.GradientTransformation,
    seed: int = 0,
    *,
    best: bool = False,
) -> State[P]:
    """The checkpoint of a finished (or stopped) run of ``fit`` in ``directory``: its parameters, optimiser state,
    losses and held-out curve, checked against ``learner``'s and ``opt``'s shapes (``template`` of ``seed``) and
    against the run's own config.json (the description it was trained with); with ``best``, the state of its
    lowest held-out error (best.npz, ``fit(keep_best=True)``), its step and curve those of that moment.
    FileNotFoundError naming the file when there is no run there (or no best.npz); ValueError naming what is
    wrong when the checkpoint is not this run's."""
    out = Path(directory)
    if not (out / CONFIG).exists():
        raise FileNotFoundError(f"no trained run at {out}: {CONFIG} is missing")
    description = (out / CONFIG).read_text(encoding="utf-8", errors="replace")
    name = BEST if best else CHECKPOINT
    return read(stored(out, name), description, template(learner, seed, opt), out, name=name)


def history(directory: str | Path) -> tuple[list[float], list[tuple[int, float]]]:
    """A run's (losses, held-out errors) from its checkpoint, without its model: what a plot reads.
    FileNotFoundError naming the file if there is none; ValueError if it is not a checkpoint."""
    path, data = Path(directory) / CHECKPOINT, stored(Path(directory))
    try:
        saved = np.load(io.BytesIO(data), allow_pickle=False)
        if not isinstance(saved, np.lib.npyio.NpzFile):
            raise ValueError("an .npy array, not an .npz archive")
        with saved:
            losses = [float(x) for x in saved["losses"]]
            held = saved["held_out"] if "held_out" in saved.files else np.zeros((0, 2))
    except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile) as error:
        raise ValueError(f"{path} is corrupt or not a checkpoint ({type(error).__name__}: {error})") from error
    return losses, [(int(e), float(v)) for e, v in np.asarray(held, np.float64).reshape(-1, 2)]
