"""SIGTERM while a training command line imports its modules: exit status 75 and a line, not 143 and silence.

``python -m funcformer.poisson train ...`` (any ``python -m applicative...`` or ``python -m funcformer...``
command whose first argument is ``train``) spends its first seconds importing JAX and the library, before
``command.run`` can catch SIGTERM (``training.stopping``); Python's default would end it there with status 143
and no word. ``applicative/__init__`` imports this module before anything else, and for those command lines
only (``sys.argv[0]`` is ``"-m"`` while ``python -m``'s packages are imported), while SIGTERM still has its
default action, it sets a handler that writes "PROG train: stopped by SIGTERM while starting: nothing saved
yet: run the same command again" to stderr and ends the process with 75 at once: nothing is written yet, and
nothing needs closing. ``command.run`` replaces it; a library imported any other way sets no handler.

A command line of a run of several processes (``--processes N`` or ``$JAX_NUM_PROCESSES``, N > 1) is not
ended there: the others would wait for it until their start-up timeout. The signal is recorded (``carried``)
and raised where the processes meet (``stopping.raise_early``), which tells the others it was stopped, seconds
later, once the imports are done; a second SIGTERM ends it at once.
"""

import os
import signal
import sys
import threading
from types import FrameType

__all__: list[str] = []


def _module() -> str | None:
    """The module ``python -m MODULE train ...`` runs, while its packages are imported; None otherwise."""
    argv = list(getattr(sys, "orig_argv", []))
    if sys.argv[:2] != ["-m", "train"] or "-m" not in argv[1:]:
        return None
    module = argv[argv.index("-m", 1) + 1] if argv.index("-m", 1) + 1 < len(argv) else ""
    return module if module.partition(".")[0] in ("applicative", "funcformer") else None


def _several() -> bool:
    """Whether the command line names a run of several processes: its ``--processes`` (the last), else
    ``$JAX_NUM_PROCESSES``, above 1."""
    argv, count = list(getattr(sys, "orig_argv", [])), os.environ.get("JAX_NUM_PROCESSES")
    for flag, value in zip(argv, [*argv[1:], ""], strict=True):
        if flag == "--processes":
            count = value
        elif flag.startswith("--processes="):
            count = flag.partition("=")[2]
    try:
        return int(count or "") > 1
    except ValueError:
        return False


def carried() -> bool:
    """Whether a SIGTERM came while the command line imported its modules and awaits the meeting; taken once."""
    global _carried
    came, _carried = _carried, False
    return came


def _stop(number: int, frame: FrameType | None) -> None:
    global _carried
    if not _carried and _several():
        _carried = True
        return
    os.write(2, f"python -m {_MODULE} train: stopped by SIGTERM while starting: {_NOTHING_SAVED}\n".encode())
    os._exit(75)


_MODULE = _module()
_carried = False
_NOTHING_SAVED = "nothing saved yet: run the same command again"  # training.stopping's, not imported: it is heavy
_MAIN = threading.current_thread() is threading.main_thread()
if _MODULE and _MAIN and signal.getsignal(signal.SIGTERM) == signal.SIG_DFL:
    signal.signal(signal.SIGTERM, _stop)
