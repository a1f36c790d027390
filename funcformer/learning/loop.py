"""A task's Funcformer run trained by the loop every model shares (``applicative.training.loop``).

train(run, DIR)   the run ``run`` (``RunConfig``) into DIR: its config.json is the run, its checkpoint the
                  one format of every model; a task's output scale (``data.output_scale``) is computed
                  once, when the run starts, and read back from the checkpoint by a resumed run and by
                  ``solver.load_solver``, which therefore generate no data
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from applicative.training.checkpoints import State
from applicative.training.data import Arrays
from applicative.training.files import CONFIG
from applicative.training.loop import Plan, opening, run_from
from applicative.training.processes import agree
from applicative.training.steps import data_parallel
from funcformer.learning.checkpoints import from_bytes
from funcformer.learning.data import held_out_arrays, output_scale, training_arrays
from funcformer.learning.settings import RunConfig, read_run
from funcformer.learning.steps import funcformer_learner, loss, optimiser
from funcformer.model import Funcformer

__all__ = ["train"]


def train(
    run: RunConfig,
    directory: str | Path,
    *,
    resume: bool = False,
    progress: bool = True,
    log: bool = False,
    seconds: float | None = None,
) -> State[Funcformer]:
    """Train the Funcformer run ``run`` into ``directory``; with ``resume``, continue from its checkpoint.
    With ``log``, a line an epoch (``train_size // batch`` steps): its mean loss, its seconds and the loss on
    the held-out samples (``data.held_out_arrays``), kept as the run's learning curve (``State.held_out``);
    ``seconds``, a budget: the call stops, checkpointed, at the first epoch's end past it (``fit``'s).

    The directory is held for the whole call (another process's ``train`` or ``evaluate`` of it fails
    at once). A new run writes its config.json first (``loop.opening``): a run stopped by SIGTERM before
    its first checkpoint keeps it, and ``resume`` starts it again; one stopped by an error before its first
    checkpoint after step 0 (a diverging first step, data that cannot be made) removes its files, so a
    rerun is not refused.

    After ``jax.distributed.initialize`` (``processes.initialize``), every process calls ``train`` with
    the same arguments: process 0 alone holds, reads and writes ``directory`` (the others need not see
    it), and a process whose training data, run or initial state differs from process 0's is refused
    before the first step, on every process (``processes``).
    """
    out = Path(directory)
    data_parallel(run.batch)  # refuses a batch the devices cannot split, before any write
    learner = funcformer_learner(run.model)
    with opening(out, run.to_json(), resume=resume, check=lambda: _check_run(run, out, resume)) as stored:
        if stored:
            state = from_bytes(stored, run, out)
        else:
            model = learner.init(run.seed)
            state = State(model, optimiser(run).init(model), 0, [], output_scale(run.problem, run.data_config))
        x, t = training_arrays(run, state.scale)
        _agree(run, state, x, t)
        validate = _held_out_loss(run, state.scale) if log else None
        plan = Plan(learner, optimiser(run), Arrays(x, t, run.batch), run.to_json(), run.steps, run.seed,
                    run.checkpoint_every, log, validate, seconds=seconds)  # fmt: skip
        return run_from(plan, out, state, resume=bool(stored), progress=progress)


def _held_out_loss(run: RunConfig, scale: float) -> Callable[[Funcformer], float]:
    """The training loss on the held-out samples, a function of the model (jitted once)."""
    x, t = (jnp.asarray(a) for a in held_out_arrays(run, scale))
    measured = jax.jit(loss)
    return lambda model: float(measured(model, x, t))


def _check_run(run: RunConfig, out: Path, resume: bool) -> None:
    """On the owner: a run to resume must be ``run`` (its config.json read as a task's run)."""
    if resume and read_run(out, run.problem) != run:
        raise ValueError(f"--resume: {out / CONFIG} holds a different run; resume it with its own settings")


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
