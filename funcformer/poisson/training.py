"""Training a Funcformer on the Poisson task: optax Adam on a warm-up + cosine schedule, ``jit``, minibatches.

A run lives in a directory: ``config.json`` (the ``Run``), ``checkpoint.npz``
(parameters, optimiser state, step, loss history; written atomically every
``checkpoint_every`` steps and at the end) and ``metrics.json`` (the test
metric, written by ``evaluate``). The minibatches of step s depend only on
(seed, s), so a run resumed from its last checkpoint continues exactly as an
uninterrupted one would. A non-finite loss stops the run; the last good
checkpoint stays.

The loss is the mean relative L2 error, in the exact L2 norm of the Chebyshev
series (Gram matrices), of the model's n x n prediction against the
truncated solution.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax
from tqdm.auto import tqdm

from applicative.instances.chebyshev import gram
from funcformer.model import Config, Funcformer, init
from funcformer.poisson._files import atomic_file
from funcformer.poisson.task import TRAIN_SEED, Task, check_train_seed, load_dataset

__all__ = [
    "CHECKPOINT",
    "CONFIG",
    "METRICS",
    "Run",
    "State",
    "TrainingDiverged",
    "batch_indices",
    "default_cache",
    "l2_norm",
    "load",
    "make_step",
    "optimiser",
    "output_scale",
    "predict",
    "read_run",
    "save",
    "series_relative_l2",
    "train",
    "write_atomically",
]

CONFIG = "config.json"
CHECKPOINT = "checkpoint.npz"
METRICS = "metrics.json"


def default_cache() -> Path:
    """Where datasets are cached: $FUNCFORMER_CACHE, else ~/.cache/funcformer."""
    return Path(os.environ.get("FUNCFORMER_CACHE", Path.home() / ".cache" / "funcformer"))


@dataclass(frozen=True)
class Run:
    """Everything that defines a training run (saved as config.json)."""

    model: Config = field(default_factory=Config)
    task: Task = field(default_factory=Task)
    steps: int = 1500
    batch: int = 16
    learning_rate: float = 3e-3
    warmup: int = 100
    clip: float = 1.0
    train_size: int = 8192
    seed: int = TRAIN_SEED
    """Seeds the training set, the initialisation and the minibatch order."""
    checkpoint_every: int = 200

    def __post_init__(self) -> None:
        for name in ("steps", "batch", "train_size", "checkpoint_every"):
            if getattr(self, name) < 1:
                raise ValueError(f"Run.{name} must be positive, got {getattr(self, name)}")
        for name in ("learning_rate", "clip"):
            if not getattr(self, name) > 0:
                raise ValueError(f"Run.{name} must be positive, got {getattr(self, name)}")
        for name in ("warmup", "seed"):
            if getattr(self, name) < 0:
                raise ValueError(f"Run.{name} must be >= 0, got {getattr(self, name)}")
        if self.batch > self.train_size:
            raise ValueError(f"Run.batch = {self.batch} exceeds Run.train_size = {self.train_size}")
        if self.model.n != self.task.n:
            raise ValueError(f"the model's n = {self.model.n} differs from the task's n = {self.task.n}")
        check_train_seed(self.seed)

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), indent=2, sort_keys=True)

    @staticmethod
    def from_json(text: str, source: str = "config") -> Run:
        try:
            raw = json.loads(text)
            return Run(**{**raw, "model": Config(**raw["model"]), "task": Task(**raw["task"])})
        except (ValueError, TypeError, KeyError) as error:
            raise ValueError(f"{source}: not a valid run configuration ({error})") from error


def output_scale(task: Task) -> float:
    """The typical ||u|| / ||f|| (mean over 1024 sources of a seed no split uses): the model
    predicts u in this unit, so its outputs start at the right size."""
    data = load_dataset(default_cache(), task, seed=12345, count=1024, fine=False)
    ratio = np.asarray(l2_norm(jnp.asarray(data.u)) / l2_norm(jnp.asarray(data.f)))
    return float(np.mean(ratio))


def l2_norm(c: jax.Array) -> jax.Array:
    """Per-sample L2 norm on [-1, 1]^2 of (B, n, n) coefficient arrays (exact, through the Gram matrix)."""
    g = jnp.asarray(gram(c.shape[-1]), c.dtype)
    return jnp.sqrt(jnp.einsum("bij,ik,jl,bkl->b", c, g, g, c))


def series_relative_l2(predicted: jax.Array, target: jax.Array) -> jax.Array:
    """Per-sample ||p - u|| / ||u|| in the exact L2 norm on [-1, 1]^2 of the series (the training loss;
    ``task.relative_l2``, the metric, takes it on the uniform grid against the fine solution)."""
    return l2_norm(predicted - target) / l2_norm(target)


def predict(model: Funcformer, f: jax.Array, scale: float) -> jax.Array:
    """Potentials (B, n, n) for sources (B, n, n). The solution operator is linear, so the model
    sees each source scaled to unit norm and its output is scaled back: a layer norm cannot lose
    the source's size."""
    norm = jnp.maximum(l2_norm(f), float(np.finfo(f.dtype).tiny))[:, None, None]
    return jax.vmap(model)(f / norm) * (norm * scale)


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
    seconds: float = 0.0
    """Training time so far (all sessions of a resumed run)."""


class TrainingDiverged(RuntimeError):
    """The loss became NaN or infinite."""


def _fresh(run: Run, opt: optax.GradientTransformation) -> State:
    model = init(run.seed, run.model)
    return State(model, opt.init(model), 0, [])


def save(directory: Path, run: Run, state: State) -> None:
    """Write the checkpoint atomically: a temporary file in ``directory``, then ``os.replace``."""
    leaves = jax.tree_util.tree_leaves((state.model, state.opt_state))
    arrays = {f"leaf_{i}": np.asarray(leaf) for i, leaf in enumerate(leaves)}
    arrays.update(run=np.asarray(run.to_json()), step=np.asarray(state.step), seconds=np.asarray(state.seconds))
    arrays.update(losses=np.asarray(state.losses))
    with atomic_file(directory / CHECKPOINT) as file:
        np.savez(file, allow_pickle=False, **arrays)


def load(directory: Path, run: Run, opt: optax.GradientTransformation) -> State:
    """The checkpoint in ``directory``, checked against ``run`` and the shapes it implies."""
    path = directory / CHECKPOINT
    if not path.exists():
        raise FileNotFoundError(f"no checkpoint at {path}")
    template = _fresh(run, opt)
    leaves, treedef = jax.tree_util.tree_flatten((template.model, template.opt_state))
    try:
        with np.load(path, allow_pickle=False) as stored:
            saved_run = Run.from_json(str(stored["run"]), str(path))
            step, losses = int(stored["step"]), [float(x) for x in stored["losses"]]
            seconds = float(stored["seconds"])
            arrays = [stored[f"leaf_{i}"] for i in range(len(leaves))]
    except (OSError, ValueError, KeyError, EOFError) as error:
        raise ValueError(f"{path} is corrupt or not a checkpoint ({error})") from error
    if saved_run != run:
        changed = sorted(k for k, v in dataclasses.asdict(run).items() if dataclasses.asdict(saved_run)[k] != v)
        raise ValueError(f"{path} was written by a different run configuration (fields differ: {', '.join(changed)})")
    for i, (leaf, array) in enumerate(zip(leaves, arrays, strict=True)):
        if np.shape(leaf) != array.shape:
            raise ValueError(f"{path}: array {i} has shape {array.shape}, the configuration needs {np.shape(leaf)}")
    restored = [jnp.asarray(a, jnp.result_type(leaf)) for a, leaf in zip(arrays, leaves, strict=True)]
    model, opt_state = jax.tree_util.tree_unflatten(treedef, restored)
    return State(model, opt_state, step, losses, seconds)


def read_run(directory: Path) -> Run:
    """The ``Run`` saved in ``directory``."""
    path = directory / CONFIG
    if not path.exists():
        raise FileNotFoundError(f"no trained run at {directory}: {CONFIG} is missing")
    return Run.from_json(path.read_text(), str(path))


@functools.lru_cache(maxsize=4)
def make_step(run: Run) -> Callable[..., Any]:
    """The jitted update of ``run``: (model, opt_state, f, u) -> (model, opt_state, loss); one
    compilation per run configuration and process (a resumed run reuses it)."""
    opt = optimiser(run)
    scale = output_scale(run.task)

    def loss_fn(model: Funcformer, f: jax.Array, u: jax.Array) -> jax.Array:
        return jnp.mean(series_relative_l2(predict(model, f, scale), u))

    @jax.jit
    def step(model: Funcformer, opt_state: Any, f: jax.Array, u: jax.Array) -> Any:
        loss, grads = jax.value_and_grad(loss_fn)(model, f, u)
        updates, opt_state = opt.update(grads, opt_state, model)
        return optax.apply_updates(model, updates), opt_state, loss

    return step


def train(
    run: Run,
    directory: str | Path,
    *,
    resume: bool = False,
    progress: bool = True,
    interrupt_after: int | None = None,
) -> State:
    """Train ``run`` into ``directory``; with ``resume``, continue from its checkpoint.

    ``interrupt_after`` (for tests) stops abruptly after that many steps of this call, writing
    nothing more, as a kill would.
    """
    out = Path(directory)
    opt = optimiser(run)
    if resume:
        saved = read_run(out)
        if saved != run:
            raise ValueError(f"--resume: {out / CONFIG} holds a different run; resume it with its own settings")
        state = load(out, run, opt)
    else:
        out.mkdir(parents=True, exist_ok=True)
        if (out / CHECKPOINT).exists():
            raise FileExistsError(f"{out} already holds a run: pass --resume, or another --out")
        write_atomically(out / CONFIG, run.to_json())
        state = _fresh(run, opt)
        save(out, run, state)  # a run killed before its first interval resumes from here

    data = load_dataset(default_cache(), run.task, run.seed, run.train_size, fine=False)
    f = jnp.asarray(data.f, jnp.float32)
    u = jnp.asarray(data.u, jnp.float32)
    step_fn = make_step(run)
    start, first = time.perf_counter() - state.seconds, state.step
    saved_step = first  # the step of the checkpoint on disk
    # tqdm.auto: a text bar in a terminal, a widget in a notebook.
    bar = tqdm(total=run.steps, initial=first, desc="train", unit="step", disable=not progress, mininterval=0.5)
    with bar:
        for step in range(first, run.steps):
            if interrupt_after is not None and step - first == interrupt_after:
                return state
            idx = jnp.asarray(batch_indices(run, step))
            model, opt_state, loss_value = step_fn(state.model, state.opt_state, f[idx], u[idx])
            loss = float(loss_value)
            if not np.isfinite(loss):
                raise TrainingDiverged(
                    f"loss is {loss} at step {step}; stopped. The last good checkpoint "
                    f"(step {saved_step}) is kept in {out}: lower --learning-rate or --clip and retrain"
                )
            state.losses.append(loss)
            state = State(model, opt_state, step + 1, state.losses, time.perf_counter() - start)
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
