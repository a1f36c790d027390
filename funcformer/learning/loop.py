"""``train(run, directory)``: the training loop, thin around the jitted step (``steps.make_step``).

A run lives in a directory (``_files``): ``config.json`` (the ``RunConfig``) and ``checkpoint.npz``
(``checkpoints``: written atomically every ``checkpoint_every`` steps and at the end). The output
scale (``data.output_scale``) is computed once, when the run starts, and read back from the
checkpoint by a resumed run and by ``solver.load_solver``, which therefore generate no data.

The loop stays on the device: the training set is placed there once, the step draws its own
minibatch, and the host only sends each epoch's order and reads the losses back, for the progress
bar (at most every half second, one step behind, so that the device never waits) and at each
checkpoint. The minibatches of step s depend only on (seed, s), so a run resumed from its last
checkpoint continues exactly as an uninterrupted one would. A non-finite loss stops the run at the
next read; the last good checkpoint stays, as no checkpoint is written past a non-finite loss. A
run stopped before its first checkpoint after step 0 leaves nothing behind. One process at a time
holds a run directory (``holding_run``); in a run on several processes, process 0 alone holds, reads
and writes it (``processes``).
"""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path

import jax
import numpy as np
from jax.sharding import NamedSharding
from tqdm.auto import tqdm

from funcformer.learning._files import CHECKPOINT, CONFIG, write_atomically
from funcformer.learning.checkpoints import State, from_bytes, save
from funcformer.learning.data import output_scale, training_arrays
from funcformer.learning.processes import agree, from_owner, is_owner, owning
from funcformer.learning.settings import RunConfig, read_run
from funcformer.learning.steps import data_parallel, epoch_order, make_step, optimiser, place
from funcformer.model import init

__all__ = ["TrainingDiverged", "train"]

_SHOW_EVERY = 0.5
"""Seconds between the progress bar's reads of the losses."""


class TrainingDiverged(RuntimeError):
    """The loss became NaN or infinite."""


def train(
    run: RunConfig,
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
    ``interrupt_after`` (for tests) stops abruptly after that
    many steps of this call, writing nothing more, as a kill would.

    After ``jax.distributed.initialize`` (``processes.initialize``), every process calls ``train`` with
    the same arguments: process 0 alone holds, reads and writes ``directory`` (the others need not see
    it), and a process whose training data, run or initial state differs from process 0's is refused
    before the first step, on every process (``processes``).
    """
    out = Path(directory)
    _, replicated = data_parallel(run.batch)  # refuses a batch the devices cannot split, before any write
    with owning(out, create=not resume):
        stored = from_owner(lambda: _opened(run, out, resume))
        if resume:
            state = from_bytes(stored, run, out)
        else:
            model = init(run.seed, run.model)
            state = State(model, optimiser(run).init(model), 0, [], output_scale(run.problem, run.data_config))
        x, t = training_arrays(run, state.scale)
        _agree(run, state, x, t)
        if not resume and is_owner():
            write_atomically(out / CONFIG, run.to_json())
            save(out, run, state)  # a run killed before its first interval resumes from here
        try:
            return _steps(run, out, state, x, t, replicated, progress, interrupt_after)
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
    if not resume:
        if (out / CHECKPOINT).exists():
            raise FileExistsError(f"{out} already holds a run: pass --resume, or another --out")
        return b""
    if read_run(out, run.problem) != run:
        raise ValueError(f"--resume: {out / CONFIG} holds a different run; resume it with its own settings")
    if not (out / CHECKPOINT).exists():
        raise FileNotFoundError(f"no checkpoint at {out / CHECKPOINT}")
    return (out / CHECKPOINT).read_bytes()


def _agree(run: RunConfig, state: State, x: np.ndarray, t: np.ndarray) -> None:
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
    run: RunConfig,
    out: Path,
    state: State,
    x: np.ndarray,
    t: np.ndarray,
    replicated: NamedSharding,
    progress: bool,
    interrupt_after: int | None,
) -> State:
    """The training loop, from ``state`` to ``run.steps``, checkpointing into ``out``."""
    step_fn = make_step(run)
    per_epoch = run.train_size // run.batch
    # placed leaf by leaf from the host: device_put would compare every array across the processes
    model, opt_state = jax.tree_util.tree_map(
        lambda a: place(np.asarray(a), replicated), (state.model, state.opt_state)
    )
    inputs, targets = place(x, replicated), place(t, replicated)
    start, first = time.perf_counter() - state.seconds, state.step
    losses, pending = list(state.losses), list[jax.Array]()  # read, and not yet read back from the device
    saved_step, shown = first, time.perf_counter()

    def read(count: int) -> None:
        """Move the first ``count`` pending losses to ``losses``; stop at a non-finite one."""
        values = [float(v) for v in jax.device_get(pending[:count])]
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

    # tqdm.auto: a text bar in a terminal, a widget in a notebook; the owner's alone. On several processes
    # the losses are read at the checkpoints only, where every process reads them: a non-finite one
    # stops all of them at the same step, and none is left waiting in a collective.
    shown_here = progress and is_owner()
    bar = tqdm(total=run.steps, initial=first, desc="train", unit="step", disable=not shown_here, mininterval=0.5)
    read_between = progress and jax.process_count() == 1
    with bar:
        for step in range(first, run.steps):
            if interrupt_after is not None and step - first == interrupt_after:
                read(len(pending))
                return State(model, opt_state, step, losses, state.scale, time.perf_counter() - start)
            epoch, i = divmod(step, per_epoch)
            if i == 0 or step == first:
                order = place(epoch_order(run, epoch).astype(np.int32), replicated)
            model, opt_state, loss = step_fn(model, opt_state, inputs, targets, order, np.int32(step))
            pending.append(loss)
            if (step + 1) % run.checkpoint_every == 0 or step + 1 == run.steps:
                read(len(pending))
                state = State(model, opt_state, step + 1, losses, state.scale, time.perf_counter() - start)
                if is_owner():
                    save(out, run, state)
                saved_step = state.step
            elif read_between and time.perf_counter() - shown > _SHOW_EVERY:
                read(len(pending) - 1)  # the newest step still runs meanwhile
                shown = time.perf_counter()
            if losses:
                bar.set_postfix(loss=f"{losses[-1]:.3e}", refresh=False)
            bar.update()
    return dataclasses.replace(state, losses=losses)
