"""SIGTERM while a training command line imports its modules: exit status 75 and a line, not 143 and silence.

``python -m funcformer.poisson train ...`` (any ``python -m applicative...`` or ``python -m funcformer...``
command whose first argument is ``train``) spends its first seconds importing JAX and the library, before
``command.run`` can catch SIGTERM (``training.stopping``); Python's default would end it there with status 143
and no word. ``applicative/__init__`` imports this module before anything else, and for those command lines
only (``sys.argv[0]`` is ``"-m"`` while ``python -m``'s packages are imported), while SIGTERM still has its
default action, it sets a handler that writes "PROG train: stopped by SIGTERM while starting: nothing saved
yet: run the same command again" to stderr and ends the process with 75 at once: nothing is written yet, and
nothing needs closing. ``command.run`` replaces it; a library imported any other way sets no handler.
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


def _stop(number: int, frame: FrameType | None) -> None:
    os.write(2, f"python -m {_MODULE} train: stopped by SIGTERM while starting: {_NOTHING_SAVED}\n".encode())
    os._exit(75)


_MODULE = _module()
_NOTHING_SAVED = "nothing saved yet: run the same command again"  # training.stopping's, not imported: it is heavy
_MAIN = threading.current_thread() is threading.main_thread()
if _MODULE and _MAIN and signal.getsignal(signal.SIGTERM) == signal.SIG_DFL:
    signal.signal(signal.SIGTERM, _stop)
