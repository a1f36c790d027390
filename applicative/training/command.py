"""The flags and exit statuses every training command line shares (the examples' and the tasks').

    add_flags(parser)        --out DIR, --resume, --seconds S, --quiet on a ``train`` sub-command's parser
    run(prog, name, action)  runs ``action()`` and returns the exit status: 0; 75 after SIGTERM, at any moment
                             (``stopping.Stopped``, ``Preempted``: "PROG NAME: stopped by SIGTERM ..." and what
                             is saved, which ``--resume`` continues or starts again); 1 with "PROG NAME: error:
                             ..." on stderr for bad input, a diverged run or a run directory in use
    plot(directory, per_epoch)   the run's loss per step and its held-out curve, DIR/loss.png

A run directory is every model's (``loop.fit``): ``config.json`` and ``checkpoint.npz``. ``history`` reads a
run's losses and held-out errors back without its model (``checkpoints.history``).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

from applicative.training.checkpoints import history
from applicative.training.files import RunInUse, holding_run
from applicative.training.loop import Preempted, TrainingDiverged
from applicative.training.rendezvous import StartupError
from applicative.training.stopping import Stopped, stopping

__all__ = ["add_flags", "plot", "run"]

_REFUSED = (ValueError, TypeError, FileNotFoundError, FileExistsError, TrainingDiverged, RunInUse, StartupError)
"""What a command line reports as an error, exit status 1."""


def _positive(text: str) -> float:
    value = float(text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be positive, got {text}")
    return value


def add_flags(parser: argparse.ArgumentParser) -> None:
    """The flags of a ``train`` sub-command: ``--out`` (the run directory, required), ``--resume``, ``--seconds``
    (a budget: the run stops, checkpointed, at the first epoch's end past it) and ``--quiet`` (no progress bar)."""
    parser.add_argument("--out", type=Path, required=True, help="the run directory (config.json, checkpoint.npz)")
    parser.add_argument("--resume", action="store_true", help="continue the run in --out from its checkpoint")
    parser.add_argument("--seconds", type=_positive, default=None,
                        help="a time budget: stop, checkpointed, at the first epoch's end past it")  # fmt: skip
    parser.add_argument("--quiet", action="store_true", help="no progress bar")


def run(prog: str, name: str, action: Callable[[], None]) -> int:
    """``action()``'s exit status: 0 when it returns; ``Stopped.exit_status`` (75) after SIGTERM at any moment
    of it (``stopping.stopping``; in the loop, ``Preempted``), its message on stderr; 1 after bad input
    (ValueError, TypeError), a missing or occupied run (FileNotFoundError, FileExistsError, ``RunInUse``), a
    diverged one or processes that could not meet (``StartupError``), with "PROG NAME: error: MESSAGE" on
    stderr."""
    try:
        with stopping():
            action()
    except (Stopped, Preempted) as stopped:
        print(f"{prog} {name}: {stopped}", file=sys.stderr)
        return Stopped.exit_status
    except _REFUSED as error:
        print(f"{prog} {name}: error: {error}", file=sys.stderr)
        return 1
    return 0


def plot(directory: Path, per_epoch: int) -> Path:
    """DIR/loss.png: the run's loss per step and its held-out errors (at the last step of each epoch of
    ``per_epoch`` steps) from its checkpoint; the path written. FileNotFoundError if there is no run there."""
    from applicative.training.plots import plot_loss  # matplotlib, imported by the one command that draws

    with holding_run(directory):
        losses, held_out = history(directory)
        steps = [(epoch * per_epoch - 1, error) for epoch, error in held_out]
        return plot_loss(losses, directory / "loss.png", held_out=steps)
