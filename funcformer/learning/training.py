"""Training a Funcformer on an operator-learning task (a ``Problem``): optax Adam on a warm-up + cosine
schedule, ``jit``, minibatches.

A run lives in a directory: ``config.json`` (the ``Run``), ``checkpoint.npz``
(parameters, optimiser state, step, loss history and the output scale; written
atomically every ``checkpoint_every`` steps and at the end) and ``metrics.json``
(the test metric, written by ``evaluate``). The config names the task (its
``Problem``), so ``read_run`` finds it. The output scale (``output_scale``)
is computed once, when the run starts, and read back from the checkpoint by a
resumed run and by ``load_solver``, which therefore generate no data. The
minibatches of step s depend only on (seed, s), so a run resumed from its last
checkpoint continues exactly as an uninterrupted one would. A non-finite loss
stops the run; the last good checkpoint stays. A run stopped before its first
checkpoint after step 0 leaves nothing behind. One process at a time holds a
run directory (``holding_run``): training, evaluating and plotting take it.

Data parallel: each minibatch is split over ``jax.devices()`` (a 1-D mesh,
``data_parallel``; in one process these are its local devices), the model and
the optimiser state are replicated, so the same code runs on one CPU, several
GPUs or a TPU slice. On one device this is the same computation as an
unsharded step (bitwise equal losses and weights, checked on the CPU).

The loss is the mean relative L2 error, in the exact L2 norm of the Chebyshev
series (Gram matrices), of the model's n x n prediction against the
truncated solution. The model sees the problem's normalised inputs x' and is
trained on the targets u / (c * scale) (``Problem.normalise``): the relative
error of c * scale * model(x') against u, computed once on the host in float64.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import json
import time
import warnings
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax.sharding import Mesh, NamedSharding, PartitionSpec
from tqdm.auto import tqdm

from applicative.instances.chebyshev import gram
from funcformer._fields import check_fields
from funcformer.learning._files import atomic_file, default_cache, holding
from funcformer.learning.metric import series_norm
from funcformer.learning.problem import Problem, problem_named
from funcformer.model import Config, Funcformer, init

__all__ = [
    "CHECKPOINT",
    "CONFIG",
    "METRICS",
    "NoStoredScale",
    "Run",
    "State",
    "TrainingDiverged",
    "batch_indices",
    "data_parallel",
    "holding_run",
    "l2_norm",
    "load",
    "make_step",
    "optimiser",
    "output_scale",
    "read_run",
    "save",
    "series_relative_l2",
    "train",
    "training_arrays",
    "write_atomically",
]

MAX_SEED = 2**63 - 1
CONFIG = "config.json"
CHECKPOINT = "checkpoint.npz"
METRICS = "metrics.json"


@dataclass(frozen=True)
class Run:
    """Everything that defines a training run (saved as config.json). ``Run.of(problem, ...)`` fills in
    the problem's default model, task and settings."""

    problem: Problem[Any]
    model: Config
    task: Any
    """The problem's task parameters (its ``Task``)."""
    steps: int = 3000
    batch: int = 32
    learning_rate: float = 1e-2
    warmup: int = 100
    clip: float = 1.0
    train_size: int = 8192
    seed: int = 0
    """Seeds the training set, the initialisation and the minibatch order."""
    checkpoint_every: int = 200

    def __post_init__(self) -> None:
        check_fields(self)  # ints are ints, learning_rate and clip finite numbers
        for name in ("steps", "batch", "train_size", "checkpoint_every"):
            if getattr(self, name) < 1:
                raise ValueError(f"Run.{name} must be positive, got {getattr(self, name)}")
        for name in ("learning_rate", "clip"):
            if not getattr(self, name) > 0:
                raise ValueError(f"Run.{name} must be positive, got {getattr(self, name)}")
        for name in ("warmup", "seed"):
            if getattr(self, name) < 0:
                raise ValueError(f"Run.{name} must be >= 0, got {getattr(self, name)}")
        if self.seed > MAX_SEED:
            raise ValueError(f"Run.seed must be at most 2**63 - 1 (a 64-bit seed), got {self.seed}")
        if self.batch > self.train_size:
            raise ValueError(f"Run.batch = {self.batch} exceeds Run.train_size = {self.train_size}")
        if self.model.n != self.task.n:
            raise ValueError(f"the model's n = {self.model.n} differs from the task's n = {self.task.n}")
        self.problem.check_train_seed(self.seed)

    @staticmethod
    def of(problem: Problem[Any], **changes: Any) -> Run:
        """The problem's default run (its model, task and ``Problem.defaults``), with ``changes``."""
        return Run(
            **{"problem": problem, "model": problem.model, "task": problem.task(), **problem.defaults, **changes}
        )

    def fields(self) -> dict[str, Any]:
        """The settings as plain data: the problem by name, the model and task as dicts."""
        shallow = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        model, task = dataclasses.asdict(self.model), dataclasses.asdict(self.task)
        return {**shallow, "problem": self.problem.name, "model": model, "task": task}

    def to_json(self) -> str:
        return json.dumps(self.fields(), indent=2, sort_keys=True)

    @staticmethod
    def from_json(text: str, source: str = "config") -> Run:
        """The run of a config.json (one written before runs named their task is a Poisson run)."""
        try:
            raw = json.loads(text)
            problem = problem_named(raw.pop("problem", "poisson"))
            return Run(
                **{**raw, "problem": problem, "model": Config(**raw["model"]), "task": problem.task(**raw["task"])}
            )
        except (ValueError, TypeError, KeyError, AttributeError) as error:
            raise ValueError(f"{source}: not a valid run configuration ({error})") from error


def output_scale(problem: Problem[Any], task: Any) -> float:
    """The typical ||u|| / c, c the normalisation's factor (Poisson: ||u|| / ||f||), as a mean over 1024
    inputs of a seed no split uses: the model predicts u in this unit, so its outputs start at the right
    size. ``train`` computes it once, when a run starts, and stores it in the checkpoint (``State.scale``)."""
    data = problem.dataset(default_cache(), task, 12345, 1024, False)
    _, log2_factors = problem.normalise(data.inputs)
    return float(np.mean(series_norm(data.u) / np.exp2(log2_factors)))


def training_arrays(run: Run, scale: float) -> tuple[np.ndarray, np.ndarray]:
    """The training set as float32 (model inputs x', targets u / (c * scale)): see the module."""
    data = run.problem.dataset(default_cache(), run.task, run.seed, run.train_size, False)
    inputs, log2_factors = run.problem.normalise(data.inputs)
    factors = np.exp2(log2_factors)
    if not np.all(np.isfinite(factors) & (factors > 0)):
        raise ValueError(
            f"{run.problem.title} training set: an input's normalisation factor is not positive and finite"
        )
    targets = data.u / (factors * scale)[:, None, None]
    return inputs.astype(np.float32), targets.astype(np.float32)


def l2_norm(c: jax.Array) -> jax.Array:
    """Per-sample L2 norm on [-1, 1]^2 of (B, n, n) coefficient arrays (exact, through the Gram matrix)."""
    g = jnp.asarray(gram(c.shape[-1]), c.dtype)
    return jnp.sqrt(jnp.einsum("bij,ik,jl,bkl->b", c, g, g, c))


def series_relative_l2(predicted: jax.Array, target: jax.Array) -> jax.Array:
    """Per-sample ||p - u|| / ||u|| in the exact L2 norm on [-1, 1]^2 of the series (the training loss;
    ``task.relative_l2``, the metric, takes it on the uniform grid against the fine solution)."""
    return l2_norm(predicted - target) / l2_norm(target)


def optimiser(run: Run) -> optax.GradientTransformation:
    """Adam on a linear warm-up and a cosine decay to 1% of the peak, after clipping the global norm."""
    schedule = optax.warmup_cosine_decay_schedule(
        0.0, run.learning_rate, min(run.warmup, run.steps // 10), run.steps, run.learning_rate / 100
    )
    return optax.chain(optax.clip_by_global_norm(run.clip), optax.adam(schedule))


def batch_indices(run: Run, step: int) -> np.ndarray:
    """The training samples of ``step``: each epoch is a permutation drawn from (seed, epoch)."""
    per_epoch = run.train_size // run.batch
    epoch, i = divmod(step, per_epoch)
    order = np.random.default_rng([run.seed, epoch]).permutation(run.train_size)
    return order[i * run.batch : (i + 1) * run.batch]


@dataclass
class State:
    """What a checkpoint holds."""

    model: Funcformer
    opt_state: Any
    step: int
    losses: list[float]
    scale: float
    """The run's ``output_scale``, computed when it started."""
    seconds: float = 0.0
    """Training time so far (all sessions of a resumed run)."""


class TrainingDiverged(RuntimeError):
    """The loss became NaN or infinite."""


class NoStoredScale(ValueError):
    """A checkpoint written before runs stored their output scale; ``train --resume`` adds it."""


def _fresh(run: Run, opt: optax.GradientTransformation, scale: float) -> State:
    model = init(run.seed, run.model)
    return State(model, opt.init(model), 0, [], scale)


_CHECKPOINT_FIELDS = {"run", "step", "seconds", "losses", "output_scale"}


def save(directory: Path, run: Run, state: State) -> None:
    """Write the checkpoint atomically: a temporary file in ``directory``, then ``os.replace``."""
    leaves = jax.tree_util.tree_leaves((state.model, state.opt_state))
    arrays = {f"leaf_{i}": np.asarray(leaf) for i, leaf in enumerate(leaves)}
    arrays.update(run=np.asarray(run.to_json()), step=np.asarray(state.step), seconds=np.asarray(state.seconds))
    arrays.update(losses=np.asarray(state.losses), output_scale=np.asarray(state.scale, np.float64))
    with atomic_file(directory / CHECKPOINT) as file:
        np.savez(file, allow_pickle=False, **arrays)


def load(directory: Path, run: Run, opt: optax.GradientTransformation, *, scale: float | None = None) -> State:
    """The checkpoint in ``directory``, checked against ``run`` and the shapes it implies.

    A checkpoint written before runs stored their output scale raises ``NoStoredScale``, unless
    ``scale`` gives one (``train --resume`` passes ``output_scale``'s, as that run's training
    computed it); a stored scale is always the one used. An unreadable file (truncated, not a zip,
    a missing or damaged array) raises a ValueError naming it.
    """
    path = directory / CHECKPOINT
    if not path.exists():
        raise FileNotFoundError(f"no checkpoint at {path}")
    template = _fresh(run, opt, 1.0)
    leaves, treedef = jax.tree_util.tree_flatten((template.model, template.opt_state))
    try:
        stored = np.load(path, allow_pickle=False)
        if not isinstance(stored, np.lib.npyio.NpzFile):
            raise ValueError("an .npy array, not an .npz archive")
        with stored:
            saved_run = Run.from_json(str(stored["run"]), str(path))
            step, losses = int(stored["step"]), [float(x) for x in stored["losses"]]
            seconds = float(stored["seconds"])
            stored_scale = float(stored["output_scale"]) if "output_scale" in stored.files else None
            arrays = [stored[f"leaf_{i}"] for i in range(len(leaves))]
            extra = sorted(set(stored.files) - {f"leaf_{i}" for i in range(len(leaves))} - _CHECKPOINT_FIELDS)
    except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile) as error:
        raise ValueError(f"{path} is corrupt or not a checkpoint ({type(error).__name__}: {error})") from error
    if stored_scale is None:
        if scale is None:
            raise NoStoredScale(
                f"{path} was written before runs stored their output scale; run "
                f"`python -m funcformer.{run.problem.name} train --out {directory} --resume` once: it "
                "computes the scale as the run's training did and stores it (loading a run generates no data)"
            )
        stored_scale = scale
    if not (np.isfinite(stored_scale) and stored_scale > 0):
        raise ValueError(f"{path}: the stored output scale is {stored_scale}, not a positive finite number")
    if saved_run != run:
        changed = sorted(k for k, v in run.fields().items() if saved_run.fields()[k] != v)
        raise ValueError(f"{path} was written by a different run configuration (fields differ: {', '.join(changed)})")
    if extra:
        raise ValueError(f"{path} holds arrays the configuration has no place for: {', '.join(extra)}")
    for i, (leaf, array) in enumerate(zip(leaves, arrays, strict=True)):
        if np.shape(leaf) != array.shape:
            raise ValueError(f"{path}: array {i} has shape {array.shape}, the configuration needs {np.shape(leaf)}")
        if array.dtype.kind != np.dtype(jnp.result_type(leaf)).kind:
            raise ValueError(f"{path}: array {i} is {array.dtype}, the configuration needs {jnp.result_type(leaf)}")
        if array.dtype.kind == "f" and not np.all(np.isfinite(array)):
            raise ValueError(f"{path}: array {i} holds NaN or infinite values; a checkpoint's weights are finite")
    restored = [jnp.asarray(a, jnp.result_type(leaf)) for a, leaf in zip(arrays, leaves, strict=True)]
    model, opt_state = jax.tree_util.tree_unflatten(treedef, restored)
    return State(model, opt_state, step, losses, stored_scale, seconds)


def read_run(directory: Path, problem: Problem[Any] | None = None) -> Run:
    """The ``Run`` saved in ``directory``; with ``problem``, a run of another task is refused by name."""
    path = directory / CONFIG
    if not path.exists():
        raise FileNotFoundError(f"no trained run at {directory}: {CONFIG} is missing")
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as error:
        raise ValueError(f"{path} is not a run configuration: not UTF-8 text ({error})") from None
    run = Run.from_json(text, str(path))
    if problem is not None and run.problem is not problem:
        name = run.problem.name
        raise ValueError(
            f"{directory} holds a {run.problem.title} run, not a {problem.title} one: "
            f"use python -m funcformer.{name} or funcformer.{name}.load_solver"
        )
    return run


def data_parallel(batch: int) -> tuple[NamedSharding, NamedSharding]:
    """(split, replicated): shardings on a 1-D mesh of ``jax.devices()`` that split a minibatch's
    axis 0 into equal parts, one a device, and that replicate (the model, the optimiser state). In one
    process the devices are its local ones; after ``jax.distributed.initialize()``, every process's.
    A ``batch`` that the device count does not divide is refused."""
    devices = jax.devices()
    if batch % len(devices):
        raise ValueError(
            f"Run.batch = {batch} does not split over the {len(devices)} {devices[0].platform} devices: "
            f"use a multiple of {len(devices)}, or fewer devices (e.g. CUDA_VISIBLE_DEVICES)"
        )
    mesh = Mesh(np.asarray(devices), ("batch",))
    split, replicated = PartitionSpec("batch"), PartitionSpec()  # type: ignore[no-untyped-call]
    return NamedSharding(mesh, split), NamedSharding(mesh, replicated)


@functools.lru_cache(maxsize=4)
def make_step(run: Run) -> Callable[..., Any]:
    """The jitted update of ``run``: (model, opt_state, x, t) -> (model, opt_state, loss), the model's
    inputs x and targets t (``training_arrays``) split over the devices (``data_parallel``), the rest
    replicated; one compilation per run configuration and process (a resumed run reuses it)."""
    opt = optimiser(run)
    split, replicated = data_parallel(run.batch)

    def loss_fn(model: Funcformer, x: jax.Array, t: jax.Array) -> jax.Array:
        return jnp.mean(series_relative_l2(jax.vmap(model)(x), t))

    def step(model: Funcformer, opt_state: Any, x: jax.Array, t: jax.Array) -> Any:
        loss, grads = jax.value_and_grad(loss_fn)(model, x, t)
        updates, opt_state = opt.update(grads, opt_state, model)
        return optax.apply_updates(model, updates), opt_state, loss

    return jax.jit(step, in_shardings=(replicated, replicated, split, split), out_shardings=replicated)


def _minibatch(x: np.ndarray, split: NamedSharding) -> jax.Array:
    """``x``, a whole minibatch (the same in every process), as an array split by ``split``: each
    process copies only the rows of its own devices."""
    return jax.make_array_from_callback(x.shape, split, lambda index: x[index])


def train(
    run: Run,
    directory: str | Path,
    *,
    resume: bool = False,
    progress: bool = True,
    interrupt_after: int | None = None,
) -> State:
    """Train ``run`` into ``directory``; with ``resume``, continue from its checkpoint.

    The directory is held for the whole call (another process's ``train`` or ``evaluate`` of it fails
    at once). Files are written once the data is ready; a run stopped before its first checkpoint
    after step 0 (a diverging first step, an interrupt) removes them, so a rerun is not refused.
    Resuming a run saved before runs stored their output scale computes it (as its training did),
    stores it in the checkpoint and warns. ``interrupt_after`` (for tests) stops abruptly after that
    many steps of this call, writing nothing more, as a kill would.
    """
    out = Path(directory)
    opt = optimiser(run)
    split, replicated = data_parallel(run.batch)  # refuses a batch the devices cannot split, before any write
    if not resume:
        out.mkdir(parents=True, exist_ok=True)
    with holding_run(out):
        if resume:
            state = _resumed(run, out, opt)
        else:
            if (out / CHECKPOINT).exists():
                raise FileExistsError(f"{out} already holds a run: pass --resume, or another --out")
            state = _fresh(run, opt, output_scale(run.problem, run.task))  # the scale: once per run
        x, t = training_arrays(run, state.scale)
        if not resume:
            write_atomically(out / CONFIG, run.to_json())
            save(out, run, state)  # a run killed before its first interval resumes from here
        try:
            return _steps(run, out, state, x, t, split, replicated, progress, interrupt_after)
        except BaseException:
            if not resume and _checkpoint_step(out) == 0:
                # Stopped before its first checkpoint (a diverging first step, an interrupt): nothing
                # of it is worth resuming, and nothing of it may block a rerun.
                (out / CHECKPOINT).unlink(missing_ok=True)
                (out / CONFIG).unlink(missing_ok=True)
            raise


def holding_run(directory: Path) -> contextlib.AbstractContextManager[None]:
    """Hold a run directory for this process (``_files.holding``): ``train``, ``evaluate`` and the
    plots take it, so two processes never mix their files in one run."""
    return holding(directory, (CONFIG, CHECKPOINT, METRICS))


def _checkpoint_step(directory: Path) -> int | None:
    try:
        with np.load(directory / CHECKPOINT, allow_pickle=False) as stored:
            return int(stored["step"])
    except Exception:  # missing or unreadable: not a step-0 checkpoint of ours
        return None


def _resumed(run: Run, out: Path, opt: optax.GradientTransformation) -> State:
    saved = read_run(out)
    if saved != run:
        raise ValueError(f"--resume: {out / CONFIG} holds a different run; resume it with its own settings")
    try:
        return load(out, run, opt)
    except NoStoredScale:
        state = load(out, run, opt, scale=output_scale(run.problem, run.task))
        save(out, run, state)
        warnings.warn(
            f"{out / CHECKPOINT} held no output scale (a run saved before scales were stored): "
            f"computed it as the run's training did ({state.scale!r}) and stored it",
            stacklevel=3,
        )
        return state


def _steps(
    run: Run,
    out: Path,
    state: State,
    x: np.ndarray,
    t: np.ndarray,
    split: NamedSharding,
    replicated: NamedSharding,
    progress: bool,
    interrupt_after: int | None,
) -> State:
    """The training loop, from ``state`` to ``run.steps``, checkpointing into ``out``."""
    step_fn = make_step(run)
    model, opt_state = jax.device_put((state.model, state.opt_state), replicated)
    state = dataclasses.replace(state, model=model, opt_state=opt_state)
    start, first = time.perf_counter() - state.seconds, state.step
    saved_step = first  # the step of the checkpoint on disk
    # tqdm.auto: a text bar in a terminal, a widget in a notebook.
    bar = tqdm(total=run.steps, initial=first, desc="train", unit="step", disable=not progress, mininterval=0.5)
    with bar:
        for step in range(first, run.steps):
            if interrupt_after is not None and step - first == interrupt_after:
                return state
            idx = batch_indices(run, step)
            model, opt_state, loss_value = step_fn(
                state.model, state.opt_state, _minibatch(x[idx], split), _minibatch(t[idx], split)
            )
            loss = float(loss_value)
            if not np.isfinite(loss):
                raise TrainingDiverged(
                    f"loss is {loss} at step {step}; stopped. The last good checkpoint "
                    f"(step {saved_step}) is kept in {out}: lower --learning-rate or --clip and retrain"
                    if saved_step
                    else f"loss is {loss} at the first step; stopped, nothing kept: lower --learning-rate or --clip"
                )
            state.losses.append(loss)
            state = State(model, opt_state, step + 1, state.losses, state.scale, time.perf_counter() - start)
            if state.step % run.checkpoint_every == 0 or state.step == run.steps:
                save(out, run, state)
                saved_step = state.step
            bar.set_postfix(loss=f"{loss:.3e}", refresh=False)
            bar.update()
    return state


def write_atomically(path: Path, text: str) -> None:
    """A text file, written atomically."""
    with atomic_file(path, "w") as file:
        file.write(text)
