"""The training loop every model shares, thin around the jitted step (``steps``).

    fit(learner, optimiser, data, DIR, description=..., steps=...)   any ``Learner``, any ``data.Source``

A run lives in a directory (``files``): ``config.json`` (the run's description: any JSON object of its
settings) and ``checkpoint.npz`` (``checkpoints``: written atomically every ``checkpoint_every`` steps and at
the end).

The loop stays on the device: a training set held whole (``data.Arrays``) is placed there once, the step
draws its own minibatch, and the host only sends each epoch's order; a drawn minibatch (``data.Drawn``) is
placed as it is made, the device meanwhile running the step before. The host reads the losses back for the
progress bar (at most every half second, one call behind, so that the device never waits), at each
checkpoint and, with ``log``, at the end of each epoch (a line: the epoch's mean loss, its seconds, and every
``validate_every`` epochs the error on held-out samples). The minibatches of step s depend only on (seed, s),
so a run resumed from its last checkpoint continues exactly as an uninterrupted one would. A non-finite loss
stops the run at the next read; the last good checkpoint stays, as no checkpoint is written past a
non-finite loss. SIGTERM (a cluster's preemption) stops the run at the end of the block in progress, on every
process after the same step, checkpointed there, raising ``Preempted``; before the loop (``opening``: the data,
the step-0 checkpoint), it stops a command line at once (``stopping``), leaving the run's config.json, which
``--resume`` starts again. A run stopped by an error before its first checkpoint after step 0 leaves nothing
behind. One process at a time holds a run directory (``files.holding_run``); in a run on several processes,
process 0 alone holds, reads and writes it (``processes``).
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, TypeVar

import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax.sharding import NamedSharding
from tqdm.auto import tqdm

from applicative.training.checkpoints import (
    State,
    difference,
    fitted,
    read,
    same_run,
    save,
    stored,
    template,
    write_history,
)
from applicative.training.data import Arrays, Drawn, Source, count
from applicative.training.files import BEST, CHECKPOINT, CONFIG, HISTORY, write_atomically
from applicative.training.learner import Learner
from applicative.training.processes import from_owner, is_owner, owning, preemption
from applicative.training.steps import data_parallel, epoch_order, make_block, make_update, place, shardings
from applicative.training.stopping import NOTHING_SAVED, Stopped, deferred, note
from applicative.training.validation import improved, record, stalled, stopped_early

__all__ = ["Plan", "Preempted", "TrainingDiverged", "fit", "opened", "opening", "run_from"]

P = TypeVar("P")

_SHOW_EVERY = 0.5
"""Seconds between the progress bar's reads of the losses."""

_KILLED_AFTER: contextvars.ContextVar[int | None] = contextvars.ContextVar("killed_after", default=None)


@contextlib.contextmanager
def _killed_after(steps: int) -> Iterator[None]:
    """For the tests: in this block, a call of the loop stops abruptly after ``steps`` steps of its own, writing
    nothing more and returning the state it reached, as a kill would leave its directory."""
    token = _KILLED_AFTER.set(steps)
    try:
        yield
    finally:
        _KILLED_AFTER.reset(token)


class TrainingDiverged(RuntimeError):
    """The loss became NaN or infinite."""


class Preempted(RuntimeError):
    """SIGTERM reached a process of the run (``processes.preemption``): every process stopped after the same
    step, ``step``, checkpointed there; ``--resume`` (``resume=True``) continues as if it had not stopped."""

    exit_status = Stopped.exit_status
    """The status a command line exits with after it, 75 (sysexits' EX_TEMPFAIL: stopped, to be run again)."""

    def __init__(self, step: int, directory: Path | None) -> None:
        where = f"in {directory}" if directory is not None else "by process 0"
        super().__init__(
            f"stopped by SIGTERM after step {step}, checkpointed there {where}: continue the run with --resume"
        )
        self.step = step


@dataclass(frozen=True)
class Plan(Generic[P]):
    """What the loop runs: the model, its optimiser, its data, its schedule and what it writes."""

    learner: Learner[P, Any, Any, Any]
    opt: optax.GradientTransformation
    data: Source
    description: str
    """config.json's text, stored in every checkpoint."""
    steps: int
    seed: int
    checkpoint_every: int
    log: bool = False
    validate: Callable[[P], float | Mapping[str, float]] | None = None
    validate_every: int = 1
    seconds: float | None = None
    """A budget: this session stops at the first epoch's end past it (checkpointed; ``resume`` goes on)."""
    block: int = 1
    """Steps a jitted call takes at most (``steps.make_block``; ``data.Arrays`` only); a block never crosses an
    epoch's end, a checkpoint or the interrupt point."""
    patience: int | None = None
    """Early stopping: the run ends, checkpointed, once ``patience`` held-out errors in a row have not fallen
    below the best before them by more than ``min_delta`` (``validation.stalled``)."""
    min_delta: float = 0.0
    keep_best: bool = False
    """Whether best.npz keeps the state of the lowest held-out error so far (``checkpoints.restore(best=True)``)."""
    fitted: str = ""
    """What ``fit`` was given that decides the run beside its description (``fitted``), stored in its checkpoints."""

    @property
    def per_epoch(self) -> int:
        return self.data.per_epoch


def fit(
    learner: Learner[P, Any, Any, Any],
    opt: optax.GradientTransformation,
    data: Source,
    directory: str | Path,
    *,
    description: str,
    steps: int,
    seed: int = 0,
    checkpoint_every: int | None = None,
    scale: float = 1.0,
    resume: bool = False,
    progress: bool = True,
    log: bool = True,
    validate: Callable[[P], float | Mapping[str, float]] | None = None,
    validate_every: int = 1,
    seconds: float | None = None,
    block: int = 1,
    patience: int | None = None,
    min_delta: float = 0.0,
    keep_best: bool = False,
) -> State[P]:
    """Train ``learner`` with ``opt`` on ``data`` (``data.Arrays``: a training set placed on the devices once,
    epoch e visiting it in the order ``epoch_order(seed, e, count)``; ``data.Drawn``: minibatches made on the
    host from (seed, step)) into ``directory``: ``steps`` updates, a checkpoint every ``checkpoint_every`` steps
    (default: every epoch) and at the end; with ``resume``, continue from the directory's checkpoint.
    ``description`` (a JSON object: the run's settings) is written as config.json and stored in every
    checkpoint; a checkpoint of another description is refused, naming the settings that differ. ``scale`` is
    stored with the run (``State.scale``). Every ``validate_every`` epochs (and at the last),
    ``validate(parameters)``, the error on held-out samples, kept in the checkpoint (``State.held_out``), or a
    mapping of named metrics (the same names each time), each kept (``State.metrics``), the first the error. With
    ``log``, a line an epoch: its mean loss, its seconds and that error when there is one. With ``seconds``, a
    budget: the call stops at the end of the first epoch past it, with a checkpoint (the schedule stays that of
    ``steps``; ``resume`` goes on).
    ``block``: steps in one jitted call at most (``steps.make_block``, ``data.Arrays`` only: the host dispatches
    one call, not ``block``; the same updates, to rounding: XLA may order a sum otherwise inside its loop), a
    block ending at every epoch's end and checkpoint. The blocks follow from the step, so a resumed run with the
    same ``block`` repeats an uninterrupted one.
    ``patience``: early stopping, as Keras's ``EarlyStopping``: the run ends, with a checkpoint, at the first
    held-out error that makes ``patience`` in a row with no improvement (an error below the best before it by
    more than ``min_delta``), a line saying so with ``log``; resumed, it stays ended. ``keep_best``: best.npz,
    beside the checkpoint, holds the state of each new lowest held-out error (``restore(..., best=True)``).
    Every checkpoint writes history.csv beside it (``checkpoints.write_history``). A run stopped early or by its
    budget returns a state whose ``step`` is below ``steps``.

    ValueError: a step count, an interval, a block or a patience below 1, a negative ``min_delta``, a block above 1
    for drawn minibatches, ``patience`` or ``keep_best`` without ``validate`` (and ``data``'s own: inputs and
    targets of different counts, a batch larger than the training set)."""
    out = Path(directory)
    every = data.per_epoch if checkpoint_every is None else checkpoint_every
    if steps < 1 or every < 1 or validate_every < 1 or block < 1:
        raise ValueError(
            f"fit: steps = {steps}, checkpoint_every = {every}, validate_every = {validate_every} and block = {block} "
            "must be positive"
        )
    if block > 1 and isinstance(data, Drawn):
        raise ValueError(f"fit: block = {block} needs a training set held whole (Arrays); drawn minibatches take 1")
    if (patience is not None and patience < 1) or not min_delta >= 0:
        raise ValueError(f"fit: patience = {patience} must be positive and min_delta = {min_delta} at least 0")
    if (patience is not None or keep_best) and validate is None:
        raise ValueError("fit: patience and keep_best watch the held-out error: pass validate, a function of the model")
    if isinstance(data, Arrays):
        data_parallel(data.batch)  # refuses a batch the devices cannot split, before any write
    settings = fitted(data, seed, block)
    plan = Plan(learner, opt, data, description, steps, seed, every, log, validate, validate_every, seconds, block,
                patience, min_delta, keep_best, settings)  # fmt: skip
    with opening(out, description, resume=resume) as saved:
        if saved:
            state = read(saved, description, template(learner, seed, opt), out, fitted=settings)
        else:
            model = learner.init(seed)
            state = State(model, opt.init(model), 0, [], scale)
        return run_from(plan, out, state, resume=bool(saved), progress=progress)


@contextlib.contextmanager
def opening(out: Path, description: str, *, resume: bool, check: Callable[[], None] | None = None) -> Iterator[bytes]:
    """For this block, the run directory ``out`` held (``processes.owning``) and its run opened: on every process,
    the checkpoint to resume (``opened``, after ``check()`` on the owner), or b"" for a run that starts at step 0.
    A new run's directory is made with its config.json (``description``) in one go, which SIGTERM does not cut
    (``stopping.deferred``), so that ``--resume`` starts it again (``opened``) however soon it is stopped.

    The block ended by SIGTERM (``stopping.Stopped``), what is in the directory stays (the message says what, as
    ``stopping.note`` was told); by any other error, a new run with no checkpoint past step 0 (a diverging first
    step, data that cannot be made, processes that disagree) is removed, config.json and checkpoint.npz: nothing
    of it is worth resuming, and nothing of it may block a rerun."""
    with contextlib.ExitStack() as held:
        with deferred():
            held.enter_context(owning(out, resume=resume))

            def open_run() -> bytes:
                (check or (lambda: None))()
                saved = opened(description, out, resume)
                if not resume:
                    write_atomically(out / CONFIG, description)
                note(f"{out} holds the run's last checkpoint: --resume continues it" if saved else
                     f"{out} holds the run's {CONFIG} and no checkpoint yet: --resume starts the same run")  # fmt: skip
                return saved

            saved = from_owner(open_run)
            if not is_owner():  # what a stop leaves, in this process's words (``stopping.note``)
                none = f"process 0 holds the run's {CONFIG} and no checkpoint yet: --resume starts the same run"
                note("process 0 holds the run's last checkpoint: --resume continues it" if saved else none)
        try:
            yield saved
        except (Stopped, Preempted):
            raise
        except BaseException:
            if not resume and is_owner() and _checkpoint_step(out) in (0, None):
                for name in (CHECKPOINT, BEST, HISTORY, CONFIG):
                    (out / name).unlink(missing_ok=True)
                note(NOTHING_SAVED)
            raise


def run_from(plan: Plan[P], out: Path, state: State[P], *, resume: bool, progress: bool) -> State[P]:
    """The steps of ``plan`` from ``state``, in the run directory ``out`` already opened (``opening``): ``fit``'s,
    and a task's with its own run format (``funcformer.learning.train``) after it checked its own. A run that
    starts at step 0 (not ``resume``) writes a step-0 checkpoint first."""
    if not resume:
        with deferred():  # the checkpoint and the note saying so, together: a stop between names no older state
            if is_owner():
                save(out, plan.description, state, fitted=plan.fitted)  # a run killed before its first interval resumes
                write_history(out, state, plan.per_epoch)
            holder = out if is_owner() else "process 0"
            note(f"{holder} holds the run's {CONFIG} and its step-0 checkpoint: --resume continues it")
    return _steps(plan, out, state, progress)


def opened(description: str, out: Path, resume: bool) -> bytes:
    """On the owner: the checkpoint of the run to resume (its config.json must hold ``description``), or
    nothing for a new run in a directory that holds none, and for a run to resume that holds its config.json
    and no checkpoint yet (stopped by SIGTERM before it: ``--resume`` starts it again). ValueError naming the
    checkpoint when it is an empty file (a damaged one, not a missing one)."""
    if not resume:
        if (out / CHECKPOINT).exists():
            raise FileExistsError(
                f"{out} already holds a run: resume it (--resume; fit's resume=True), or train into another directory"
            )
        return b""
    if not (out / CONFIG).exists():
        raise FileNotFoundError(f"no trained run at {out}: {CONFIG} is missing")
    if not same_run(written := (out / CONFIG).read_text(encoding="utf-8", errors="replace"), description):
        raise ValueError(
            f"resume: {out / CONFIG} holds a different run ({difference(written, description)}); resume it with its "
            "own settings"
        )
    if not (out / CHECKPOINT).exists():
        return b""
    if not (saved := stored(out)):  # b"" means no checkpoint to the callers: an empty file is a damaged one
        raise ValueError(f"{out / CHECKPOINT} is corrupt or not a checkpoint (an empty file)")
    return saved


def _checkpoint_step(directory: Path) -> int | None:
    try:
        with np.load(directory / CHECKPOINT, allow_pickle=False) as saved:
            return int(saved["step"])
    except Exception:  # missing or unreadable: not a step-0 checkpoint of ours
        return None


def _host(leaf: Any) -> Any:
    """A leaf as the host holds it before placing: a numpy array, or a JAX array of an extended dtype (a
    ``DenseTree``'s layout: no numpy array holds it)."""
    if isinstance(leaf, jax.Array) and jnp.issubdtype(leaf.dtype, jax.dtypes.extended):
        return leaf
    return np.asarray(leaf)


class _Feed(Generic[P]):
    """The steps' minibatches: ``advance(model, opt_state, step, end)`` runs steps [step, end) and returns the
    new (model, opt_state) and their losses."""

    def __init__(self, plan: Plan[P], replicated: NamedSharding) -> None:
        self.plan = plan
        self.data = plan.data
        self.replicated = replicated
        if isinstance(self.data, Arrays):
            # placed leaf by leaf from the host: device_put would compare every array across the processes
            self.inputs = place(jax.tree_util.tree_map(_host, self.data.inputs), replicated)
            self.targets = place(jax.tree_util.tree_map(_host, self.data.targets), replicated)
        self.order = jnp.zeros(0, jnp.int32)
        self.epoch = -1  # the epoch of ``order``

    def advance(self, model: P, opt_state: optax.OptState, step: int, end: int) -> tuple[P, optax.OptState, jax.Array]:
        plan, data = self.plan, self.data
        if isinstance(data, Drawn):
            inputs, targets = data.draw(plan.seed, step)
            split, _ = data_parallel(count(inputs, "the drawn inputs"))
            inputs, targets = (place(jax.tree_util.tree_map(_host, tree), split) for tree in (inputs, targets))
            update = make_update(plan.learner, plan.opt, plan.seed)
            model, opt_state, value = update(model, opt_state, inputs, targets, np.int32(step))
            return model, opt_state, value[None]
        epoch = step // data.per_epoch
        if epoch != self.epoch:
            self.order = place(epoch_order(plan.seed, epoch, data.count).astype(np.int32), self.replicated)
            self.epoch = epoch
        block = make_block(plan.learner, plan.opt, data.batch, data.per_epoch, plan.seed, end - step)
        return block(model, opt_state, self.inputs, self.targets, self.order, np.int32(step))


def _steps(plan: Plan[P], out: Path, state: State[P], progress: bool) -> State[P]:
    """The training loop, from ``state`` to ``plan.steps``, checkpointing into ``out``."""
    if plan.patience is not None and stalled(state.held_out, plan.patience, plan.min_delta):
        return state  # stopped early: resumed, it stays ended
    per_epoch = plan.per_epoch
    _, replicated = data_parallel(plan.data.batch) if isinstance(plan.data, Arrays) else shardings()
    model, opt_state = jax.tree_util.tree_map(
        lambda a: place(np.asarray(a), replicated), (state.model, state.opt_state)
    )
    feed = _Feed(plan, replicated)
    start, first = time.perf_counter() - state.seconds, state.step
    losses, pending = list(state.losses), list[jax.Array]()  # read, and not yet read back from the device
    held_out, epoch_start = list(state.held_out), time.perf_counter()
    metrics = {name: list(curve) for name, curve in state.metrics.items()}
    saved_step, shown, session = first, time.perf_counter(), time.perf_counter()
    killed_after = _KILLED_AFTER.get()

    def read(count: int) -> None:
        """Move the first ``count`` pending blocks' losses to ``losses``; stop at a non-finite one."""
        values = [float(v) for block in jax.device_get(pending[:count]) for v in np.ravel(block)]
        del pending[:count]
        for value in values:
            if not np.isfinite(value):
                raise TrainingDiverged(
                    f"loss is {value} at step {len(losses)}; stopped. The last good checkpoint "
                    f"(step {saved_step}) is kept in {out}: lower --learning-rate or --clip and retrain"
                    if saved_step
                    else f"loss is {value} at the first step; stopped, nothing kept: lower --learning-rate or --clip"
                )
            losses.append(value)

    def log_epoch(step: int) -> None:
        """After the last step of an epoch: its held-out error when one is due, and its line (with ``log``)."""
        nonlocal epoch_start, start
        epoch, last = step // per_epoch, (plan.steps - 1) // per_epoch
        read(len(pending))
        line = (
            f"epoch {epoch + 1}/{last + 1}: loss {np.mean(losses[-per_epoch:]):.4e}, "
            f"{time.perf_counter() - epoch_start:.1f} s"
        )
        if plan.validate is not None and ((epoch + 1) % plan.validate_every == 0 or epoch == last):
            validating = time.perf_counter()
            value = plan.validate(model)
            start += time.perf_counter() - validating  # the training time leaves the held-out error out
            held_out.append((epoch + 1, record(value, epoch + 1, metrics)))
            named = metrics.items() if metrics else [("error", held_out)]
            line += ", held-out " + ", ".join(f"{name} {curve[-1][1]:.4e}" for name, curve in named)
            if plan.keep_best and improved(held_out) and is_owner():
                seconds = time.perf_counter() - start
                best = State(model, opt_state, step + 1, losses, state.scale, seconds, held_out, metrics)
                with deferred():
                    save(out, plan.description, best, BEST, plan.fitted)
        if plan.log:
            bar.write(line)
        epoch_start = time.perf_counter()

    # tqdm.auto: a text bar in a terminal, a widget in a notebook; the owner's alone. On several processes
    # the losses are read at the checkpoints only, where every process reads them: a non-finite one
    # stops all of them at the same step, and none is left waiting in a collective.
    shown_here = progress and is_owner()
    with deferred():  # a SIGTERM inside tqdm's constructor would leave a bar whose destructor fails at exit
        bar = tqdm(total=plan.steps, initial=first, desc="train", unit="step", disable=not shown_here, mininterval=0.5)
    read_between = progress and jax.process_count() == 1
    with bar, preemption() as preempted:
        step = first
        while step < plan.steps:
            if killed_after is not None and step - first == killed_after:
                read(len(pending))
                seconds = time.perf_counter() - start
                return State(model, opt_state, step, losses, state.scale, seconds, held_out, metrics)
            epoch = step // per_epoch
            every = plan.checkpoint_every
            ends = [step + plan.block, (epoch + 1) * per_epoch, (step // every + 1) * every]
            if killed_after is not None:
                ends.append(first + killed_after)
            end = min(plan.steps, *ends)
            model, opt_state, block_losses = feed.advance(model, opt_state, step, end)
            pending.append(block_losses)
            step, last = end, end - 1
            epoch_done = end % per_epoch == 0
            if (plan.log or plan.validate is not None) and (epoch_done or end == plan.steps):
                log_epoch(last)
            spent = epoch_done and plan.seconds is not None and time.perf_counter() - session > plan.seconds
            early = epoch_done and plan.patience is not None and stalled(held_out, plan.patience, plan.min_delta)
            stopped = preempted(end)  # every process asks at every block's end
            if end % every == 0 or end == plan.steps or spent or stopped or early:
                read(len(pending))
                seconds = time.perf_counter() - start
                state = State(model, opt_state, end, losses, state.scale, seconds, held_out, metrics)
                if is_owner():
                    with deferred():  # a Ctrl-C between the two would leave a message naming the older checkpoint
                        save(out, plan.description, state, fitted=plan.fitted)
                        write_history(out, state, per_epoch)
                        going = end < plan.steps and not early
                        note(f"{out} holds the run's checkpoint at step {end} of {plan.steps}: --resume continues it"
                             if going else f"{out} holds the trained run, {end} steps")  # fmt: skip
                else:  # (process 0's checkpoint may be one past the last this process saw it write)
                    note("process 0 holds the run's last checkpoint: --resume continues it")
                saved_step = state.step
                if stopped:
                    raise Preempted(end, out if is_owner() else None)
                if early and plan.log:
                    bar.write(stopped_early(held_out, plan.patience, plan.min_delta, end // per_epoch))
                if spent or early:
                    return dataclasses.replace(state, losses=losses, held_out=held_out, metrics=metrics)
            elif read_between and time.perf_counter() - shown > _SHOW_EVERY:
                read(len(pending) - 1)  # the newest block still runs meanwhile
                shown = time.perf_counter()
            if losses:
                bar.set_postfix(loss=f"{losses[-1]:.3e}", refresh=False)
            bar.update(len(block_losses))
    return dataclasses.replace(state, losses=losses, held_out=held_out, metrics=metrics)
