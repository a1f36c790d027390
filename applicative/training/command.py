"""The flags and exit statuses every training command line shares (the examples' and the tasks').

    add_flags(parser)        --out DIR, --resume, --seconds S, --quiet on a ``train`` sub-command's parser
    run(prog, name, action)  runs ``action()`` and returns the exit status: 0, or the one ``action`` returns
                             (``UNFINISHED``, 75: a --seconds budget stopped the run); 75 after SIGTERM, at any moment
                             (``stopping.Stopped``, ``Preempted``: "PROG NAME: stopped by SIGTERM ..." and what
                             is saved, which ``--resume`` continues or starts again); 130 after Ctrl-C (the
                             same words); 1 with "PROG NAME: error: ..." on stderr for bad input, a diverged
                             run or a run directory in use. On several processes, one that stops or fails on
                             its own tells the others, which end too, saying so (``lifeline.stop``)
    plot(directory, per_epoch)   the run's loss per step and its held-out curve, DIR/loss.png
    end_process(status)      a command line's ``__main__``: ends the process without Python's last sweep of it

A run directory is every model's (``loop.fit``): ``config.json`` and ``checkpoint.npz``. ``history`` reads a
run's losses and held-out errors back without its model (``checkpoints.history``).
"""

from __future__ import annotations

import argparse
import gc
import sys
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import NoReturn

from applicative.training import lifeline
from applicative.training.checkpoints import history
from applicative.training.files import RunInUse, holding_run
from applicative.training.loop import Preempted, TrainingDiverged
from applicative.training.rendezvous import StartupError
from applicative.training.stopping import Stopped, saved, stopping

__all__ = ["INTERRUPTED", "UNFINISHED", "add_flags", "end_process", "plot", "run"]

INTERRUPTED = 130
"""The exit status after Ctrl-C (SIGINT), as a shell reports a command it interrupted (128 + 2)."""
UNFINISHED = Stopped.exit_status
"""The exit status of a ``train`` that its ``--seconds`` budget stopped, checkpointed: 75, as after SIGTERM, for
the same reason (the run is not finished: ``--resume`` continues it), where 0 says it is."""

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


def run(prog: str, name: str, action: Callable[[], int | None]) -> int:
    """``action()``'s exit status: 0 when it returns None, what it returns otherwise (``UNFINISHED``);
    ``Stopped.exit_status`` (75) after SIGTERM at any moment of it (``stopping.stopping``; in the loop,
    ``Preempted``), its message on stderr; ``INTERRUPTED`` (130)
    after Ctrl-C, "PROG NAME: stopped by SIGINT (Ctrl-C): " and what is saved; 1 after bad input
    (ValueError, TypeError), a missing or occupied run (FileNotFoundError, FileExistsError, ``RunInUse``), a
    diverged one or processes that could not meet (``StartupError``), with "PROG NAME: error: MESSAGE" on
    stderr; any other exception raised on.

    On several processes, a stop at a checkpoint (SIGTERM in the loop, which every process meets at one step)
    ends each in order. Any other ending (Ctrl-C, SIGTERM outside the loop, an error, whether every process
    meets it or one alone) ends this process at once and tells the others (``lifeline.stop``), each of which
    ends within seconds unless it ends by itself first, saying which process stopped, why and what to do (75
    after a stop, 1 after an error); an error that only says another process died or stopped (a collective
    that broke) gives way to the lifeline's line naming it."""
    lifeline.speaking_as(f"{prog} {name}")
    try:
        with stopping():
            status = action()
    except (Stopped, Preempted) as stopped:
        print(f"{prog} {name}: {stopped}", file=sys.stderr)
        if isinstance(stopped, Stopped) and stopped.here:
            lifeline.stop("was stopped by SIGTERM", saved(), Stopped.exit_status)
        return Stopped.exit_status
    except KeyboardInterrupt:
        print(f"{prog} {name}: stopped by SIGINT (Ctrl-C): {saved()}", file=sys.stderr)
        lifeline.stop("was stopped by SIGINT (Ctrl-C)", saved(), INTERRUPTED)
        return INTERRUPTED
    except Exception as error:
        if lifeline.holding() and _broken(error) and lifeline.explains(2.0):
            return 1  # (the lifeline ended this process, naming the process that stopped or died)
        if isinstance(error, _REFUSED):
            print(f"{prog} {name}: error: {error}", file=sys.stderr)
            lifeline.stop(f"ended with an error: {error}"[:300], saved(), 1)
            return 1
        if not lifeline.holding():
            raise
        traceback.print_exc()
        lifeline.stop(f"failed: {type(error).__name__}: {error}"[:300], saved(), 1)
        return 1
    return 0 if status is None else status


def end_process(status: int) -> NoReturn:
    """End the process with ``status`` (``sys.exit``), its objects left to the operating system: frozen first
    (``gc.freeze``), so that Python's collector, which sweeps every object it tracks again and again as the
    interpreter shuts down, skips them. A parser's run holds millions (the standard library's trees): its
    process took 10 s to end after its last line. Streams are flushed and ``atexit`` handlers run as ever; what
    is left undone is what the sweep alone would do, finalizing objects caught in reference cycles (a command's
    files are written and closed by then). For a command line's ``__main__`` only: a process that goes on
    would never free such cycles."""
    gc.freeze()
    sys.exit(status)


_BROKEN = ("Gloo", "Connection closed by peer", "Connection reset by peer")
"""What an error says where it only means that a collective with another process broke (that process stopped or
died): JAX's words, whatever the exception's type (a ValueError, a ``JaxRuntimeError``)."""


def _broken(error: Exception) -> bool:
    return any(words in str(error) for words in _BROKEN)


def plot(directory: Path, per_epoch: int) -> Path:
    """DIR/loss.png: the run's loss per step and its held-out errors (at the last step of each epoch of
    ``per_epoch`` steps) from its checkpoint; the path written. FileNotFoundError if there is no run there."""
    from applicative.training.plots import plot_loss  # matplotlib, imported by the one command that draws

    with holding_run(directory):
        losses, held_out = history(directory)
        steps = [(epoch * per_epoch - 1, error) for epoch, error in held_out]
        return plot_loss(losses, directory / "loss.png", held_out=steps)
