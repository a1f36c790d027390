"""The training loop every model shares, thin around the jitted step (``steps.make_block``: a step, or a
block of steps in one call).

    fit(learner, optimiser, inputs, targets, DIR, description=..., steps=..., batch=...)   any ``Learner``
    train(run, DIR)                                                     a task's Funcformer run (``RunConfig``)

A run lives in a directory (``_files``): ``config.json`` (the run's description: a ``RunConfig``, or any
JSON object a task writes) and ``checkpoint.npz`` (``checkpoints``: written atomically every
``checkpoint_every`` steps and at the end). A task's output scale (``data.output_scale``) is computed
once, when the run starts, and read back from the checkpoint by a resumed run and by
``solver.load_solver``, which therefore generate no data.

The loop stays on the device: the training set is placed there once, the step draws its own
minibatch, and the host only sends each epoch's order and reads the losses back, for the progress
bar (at most every half second, one call behind, so that the device never waits), at each
checkpoint and, with ``log``, at the end of each epoch (a line: the epoch's mean loss, its seconds,
and every ``validate_every`` epochs the error on held-out samples). The minibatches of step s depend
only on (seed, s), so a run resumed from its last checkpoint continues exactly as an uninterrupted one
would. A non-finite loss stops the run at the next read; the last good checkpoint stays, as no
checkpoint is written past a non-finite loss. SIGTERM (a cluster's preemption) stops the run at the end
of the block in progress, on every process after the same step, checkpointed there, raising
``Preempted``. A run stopped before its first checkpoint after step 0 leaves nothing behind. One process
at a time holds a run directory (``holding_run``); in a run on several processes, process 0 alone holds,
reads and writes it (``processes``).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Generic, TypeVar

import jax
import numpy as np
import optax
from jax.sharding import NamedSharding
from tqdm.auto import tqdm

from funcformer.learning._files import CHECKPOINT, CONFIG, write_atomically
from funcformer.learning.checkpoints import State, from_bytes, read, save, stored, template
from funcformer.learning.data import output_scale, training_arrays
from funcformer.learning.learner import Learner
from funcformer.learning.processes import agree, from_owner, is_owner, owning, preemption
from funcformer.learning.settings import RunConfig, read_run
from funcformer.learning.steps import data_parallel, epoch_order, funcformer_learner, make_block, optimiser, place
from funcformer.model import Funcformer

__all__ = ["Preempted", "TrainingDiverged", "fit", "train"]

P = TypeVar("P")

_SHOW_EVERY = 0.5
"""Seconds between the progress bar's reads of the losses."""


class TrainingDiverged(RuntimeError):
    """The loss became NaN or infinite."""


class Preempted(RuntimeError):
    """SIGTERM reached a process of the run (``processes.preemption``): every process stopped after the same
    step, ``step``, checkpointed there; ``--resume`` (``resume=True``) continues as if it had not stopped."""

    exit_status = 75
    """The status a command line exits with after it (sysexits' EX_TEMPFAIL: stopped, to be run again)."""

    def __init__(self, step: int, directory: Path | None) -> None:
        where = f"in {directory}" if directory is not None else "by process 0"
        super().__init__(
            f"stopped by SIGTERM after step {step}, checkpointed there {where}: continue the run with --resume"
        )
        self.step = step


@dataclass(frozen=True)
class _Plan(Generic[P]):
    """What the loop runs: the step, its schedule and where it writes."""

    learner: Learner[P]
    opt: optax.GradientTransformation
    description: str
    """config.json's text, stored in every checkpoint."""
    steps: int
    batch: int
    count: int
    """Training samples; an epoch is ``count // batch`` steps (the last partial batch is dropped)."""
    seed: int
    checkpoint_every: int
    log: bool = False
    validate: Callable[[P], float] | None = None
    validate_every: int = 1
    seconds: float | None = None
    """A budget: this session stops at the first epoch's end past it (checkpointed; ``resume`` goes on)."""
    block: int = 1
    """Steps a jitted call takes at most (``steps.make_block``); a block never crosses an epoch's end, a
    checkpoint or the interrupt point."""

    @property
    def per_epoch(self) -> int:
        return self.count // self.batch


def train(
    run: RunConfig,
    directory: str | Path,
    *,
    resume: bool = False,
    progress: bool = True,
    interrupt_after: int | None = None,
) -> State[Funcformer]:
    """Train the Funcformer run ``run`` into ``directory``; with ``resume``, continue from its checkpoint.

    The directory is held for the whole call (another process's ``train`` or ``evaluate`` of it fails
    at once). Files are written once the data is ready; a run stopped before its first checkpoint
    after step 0 (a diverging first step, an interrupt) removes them, so a rerun is not refused.
    ``interrupt_after`` (for tests) stops abruptly after that
    many steps of this call, writing nothing more, as a kill would.

    After ``jax.distributed.initialize`` (``processes.initialize``), every process calls ``train`` with
    the same arguments: process 0 alone holds, reads and writes ``directory`` (the others need not see
    it), and a process whose training data, run or initial state differs from process 0's is refused
    before the first step, on every process (``processes``).
    """
    out = Path(directory)
    _, replicated = data_parallel(run.batch)  # refuses a batch the devices cannot split, before any write
    learner = funcformer_learner(run.model)
    plan = _Plan(learner, optimiser(run), run.to_json(), run.steps, run.batch, run.train_size, run.seed,
                 run.checkpoint_every)  # fmt: skip
    with owning(out, resume=resume):
        stored = from_owner(lambda: _opened(run, out, resume))
        if resume:
            state = from_bytes(stored, run, out)
        else:
            model = learner.init(run.seed)
            state = State(model, plan.opt.init(model), 0, [], output_scale(run.problem, run.data_config))
        x, t = training_arrays(run, state.scale)
        _agree(run, state, x, t)
        return _run(plan, out, state, x, t, resume, replicated, progress, interrupt_after)


def fit(
    learner: Learner[P],
    opt: optax.GradientTransformation,
    inputs: np.ndarray,
    targets: np.ndarray,
    directory: str | Path,
    *,
    description: str,
    steps: int,
    batch: int,
    seed: int = 0,
    checkpoint_every: int | None = None,
    scale: float = 1.0,
    resume: bool = False,
    progress: bool = True,
    log: bool = True,
    validate: Callable[[P], float] | None = None,
    validate_every: int = 1,
    seconds: float | None = None,
    block: int = 1,
    interrupt_after: int | None = None,
) -> State[P]:
    """Train ``learner`` with ``opt`` on (inputs, targets), (count, ...) arrays placed on the devices once,
    into ``directory``: ``steps`` updates of ``batch`` samples, epoch e visiting the samples in the order
    ``epoch_order(seed, e, count)``, a checkpoint every ``checkpoint_every`` steps (default: every epoch)
    and at the end; with ``resume``, continue from the directory's checkpoint. ``description`` (a JSON
    object: the run's settings) is written as config.json and stored in every checkpoint; a checkpoint of
    another description is refused, naming the settings that differ. ``scale`` is stored with the run
    (``State.scale``). With ``log``, a line an epoch: its mean loss, its seconds, and every
    ``validate_every`` epochs (and at the last) ``validate(parameters)``, the error on held-out samples,
    also kept in the checkpoint (``State.held_out``). With ``seconds``, a budget: the call stops at the end of
    the first epoch past it, with a checkpoint (the schedule stays that of ``steps``; ``resume`` goes on).
    ``block``: steps in one jitted call at most (``steps.make_block``: the host dispatches one call, not
    ``block``; the same updates, to rounding: XLA may order a sum otherwise inside its loop), a block
    ending at every epoch's end and checkpoint (``block`` = the steps of an epoch: an epoch a call). The
    blocks follow from the step, so a resumed run with the same ``block`` repeats an uninterrupted one.
    ``interrupt_after`` as ``train``'s.

    ValueError: inputs and targets of different counts, a batch larger than the training set, a step count,
    an interval or a block below 1."""
    out = Path(directory)
    count = len(inputs)
    if len(targets) != count:
        raise ValueError(f"fit: {count} inputs but {len(targets)} targets")
    if not 1 <= batch <= count:
        raise ValueError(f"fit: batch = {batch} must be between 1 and the {count} training samples")
    per_epoch = count // batch
    every = per_epoch if checkpoint_every is None else checkpoint_every
    if steps < 1 or every < 1 or validate_every < 1 or block < 1:
        raise ValueError(
            f"fit: steps = {steps}, checkpoint_every = {every}, validate_every = {validate_every} and block = {block} "
            "must be positive"
        )
    _, replicated = data_parallel(batch)
    plan = _Plan(learner, opt, description, steps, batch, count, seed, every, log, validate, validate_every, seconds,
                 block)  # fmt: skip
    with owning(out, resume=resume):
        stored = from_owner(lambda: _opened_by_description(description, out, resume))
        if resume:
            state = read(stored, description, template(learner, seed, opt), out)
        else:
            model = learner.init(seed)
            state = State(model, opt.init(model), 0, [], scale)
        return _run(plan, out, state, np.asarray(inputs), np.asarray(targets), resume, replicated, progress,
                    interrupt_after)  # fmt: skip


def _run(
    plan: _Plan[P],
    out: Path,
    state: State[P],
    x: np.ndarray,
    t: np.ndarray,
    resume: bool,
    replicated: NamedSharding,
    progress: bool,
    interrupt_after: int | None,
) -> State[P]:
    """The steps of ``plan`` from ``state``, in the held directory ``out``: a new run writes its config and a
    step-0 checkpoint first, and removes both if it stops before its next checkpoint."""
    if not resume and is_owner():
        write_atomically(out / CONFIG, plan.description)
        save(out, plan.description, state)  # a run killed before its first interval resumes from here
    try:
        return _steps(plan, out, state, x, t, replicated, progress, interrupt_after)
    except BaseException:
        if not resume and is_owner() and _checkpoint_step(out) == 0:
            # Stopped before its first checkpoint (a diverging first step, an interrupt): nothing
            # of it is worth resuming, and nothing of it may block a rerun.
            (out / CHECKPOINT).unlink(missing_ok=True)
            (out / CONFIG).unlink(missing_ok=True)
        raise


def _opened(run: RunConfig, out: Path, resume: bool) -> bytes:
    """On the owner: the checkpoint of the run to resume (its config checked), or nothing for a new run
    in a directory that holds none."""
    if resume and read_run(out, run.problem) != run:
        raise ValueError(f"--resume: {out / CONFIG} holds a different run; resume it with its own settings")
    return _opened_by_description(run.to_json(), out, resume)


def _opened_by_description(description: str, out: Path, resume: bool) -> bytes:
    """``_opened`` of any run: its config.json must hold ``description``."""
    if not resume:
        if (out / CHECKPOINT).exists():
            raise FileExistsError(f"{out} already holds a run: pass --resume, or another --out")
        return b""
    if not (out / CONFIG).exists():
        raise FileNotFoundError(f"no trained run at {out}: {CONFIG} is missing")
    if (out / CONFIG).read_text(encoding="utf-8", errors="replace") != description:
        raise ValueError(f"--resume: {out / CONFIG} holds a different run; resume it with its own settings")
    return stored(out)


def _agree(run: RunConfig, state: State[Funcformer], x: np.ndarray, t: np.ndarray) -> None:
    """Every process holds process 0's run, training data and initial state (``processes.agree``)."""
    cache = run.problem.invocation("cache --clear", "funcformer.learning.default_cache()")
    agree("run configurations", run.to_json(), advice="give every process the same settings")
    agree(
        "training data",
        x,
        t,
        advice="every process must generate the same data: the same code and library versions on every host, "
        f"and no stale dataset cache (clear it with {cache})",
    )
    leaves = jax.tree_util.tree_leaves((state.model, state.opt_state))
    agree("initial states", map(np.asarray, leaves), advice="run the same code and library versions on every host")


def _checkpoint_step(directory: Path) -> int | None:
    try:
        with np.load(directory / CHECKPOINT, allow_pickle=False) as stored:
            return int(stored["step"])
    except Exception:  # missing or unreadable: not a step-0 checkpoint of ours
        return None


def _steps(
    plan: _Plan[P],
    out: Path,
    state: State[P],
    x: np.ndarray,
    t: np.ndarray,
    replicated: NamedSharding,
    progress: bool,
    interrupt_after: int | None,
) -> State[P]:
    """The training loop, from ``state`` to ``plan.steps``, checkpointing into ``out``."""
    per_epoch = plan.per_epoch
    # placed leaf by leaf from the host: device_put would compare every array across the processes
    model, opt_state = jax.tree_util.tree_map(
        lambda a: place(np.asarray(a), replicated), (state.model, state.opt_state)
    )
    inputs, targets = place(x, replicated), place(t, replicated)
    start, first = time.perf_counter() - state.seconds, state.step
    losses, pending = list(state.losses), list[jax.Array]()  # read, and not yet read back from the device
    held_out, epoch_start = list(state.held_out), time.perf_counter()
    saved_step, shown, session = first, time.perf_counter(), time.perf_counter()

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
        """After the last step of an epoch: its line, and its held-out error when one is due."""
        nonlocal epoch_start, start
        epoch, last = step // per_epoch, (plan.steps - 1) // per_epoch
        read(len(pending))
        line = (
            f"epoch {epoch + 1}/{last + 1}: loss {np.mean(losses[-per_epoch:]):.4e}, "
            f"{time.perf_counter() - epoch_start:.1f} s"
        )
        if plan.validate is not None and ((epoch + 1) % plan.validate_every == 0 or epoch == last):
            validating = time.perf_counter()
            held_out.append((epoch + 1, plan.validate(model)))
            start += time.perf_counter() - validating  # the training time leaves the held-out error out
            line += f", held-out error {held_out[-1][1]:.4e}"
        bar.write(line)
        epoch_start = time.perf_counter()

    # tqdm.auto: a text bar in a terminal, a widget in a notebook; the owner's alone. On several processes
    # the losses are read at the checkpoints only, where every process reads them: a non-finite one
    # stops all of them at the same step, and none is left waiting in a collective.
    shown_here = progress and is_owner()
    bar = tqdm(total=plan.steps, initial=first, desc="train", unit="step", disable=not shown_here, mininterval=0.5)
    read_between = progress and jax.process_count() == 1
    with bar, preemption() as preempted:
        step = first
        while step < plan.steps:
            if interrupt_after is not None and step - first == interrupt_after:
                read(len(pending))
                return State(model, opt_state, step, losses, state.scale, time.perf_counter() - start, held_out)
            epoch, i = divmod(step, per_epoch)
            if i == 0 or step == first:
                order = place(epoch_order(plan.seed, epoch, plan.count).astype(np.int32), replicated)
            every = plan.checkpoint_every
            ends = [step + plan.block, (epoch + 1) * per_epoch, (step // every + 1) * every]
            if interrupt_after is not None:
                ends.append(first + interrupt_after)
            end = min(plan.steps, *ends)
            block = make_block(plan.learner, plan.opt, plan.batch, per_epoch, plan.seed, end - step)
            model, opt_state, block_losses = block(model, opt_state, inputs, targets, order, np.int32(step))
            pending.append(block_losses)
            step, last = end, end - 1
            epoch_done = end % per_epoch == 0
            if plan.log and (epoch_done or end == plan.steps):
                log_epoch(last)
            spent = epoch_done and plan.seconds is not None and time.perf_counter() - session > plan.seconds
            stopped = preempted(end)  # every process asks at every block's end
            if end % every == 0 or end == plan.steps or spent or stopped:
                read(len(pending))
                seconds = time.perf_counter() - start
                state = State(model, opt_state, end, losses, state.scale, seconds, held_out)
                if is_owner():
                    save(out, plan.description, state)
                saved_step = state.step
                if stopped:
                    raise Preempted(end, out if is_owner() else None)
                if spent:
                    return dataclasses.replace(state, losses=losses, held_out=held_out)
            elif read_between and time.perf_counter() - shown > _SHOW_EVERY:
                read(len(pending) - 1)  # the newest block still runs meanwhile
                shown = time.perf_counter()
            if losses:
                bar.set_postfix(loss=f"{losses[-1]:.3e}", refresh=False)
            bar.update(len(block_losses))
    return dataclasses.replace(state, losses=losses, held_out=held_out)
