"""SIGTERM (a cluster's preemption or cancel) outside the training loop: a command stops at once, with ``Stopped``,
saying what it leaves behind.

Inside the loop, SIGTERM is recorded and the run stops after the step in progress, checkpointed there
(``processes.preemption``, ``loop.Preempted``). Before it (reading arguments, meeting the other processes,
making the data, the step-0 checkpoint) and after it (evaluating), a command line runs in ``stopping()``: SIGTERM
raises ``Stopped`` in the main thread at once (at the end of the C call in progress, if one is), which the
command line turns into exit status 75 and its message (``command.run``): "stopped by SIGTERM: " and what is
saved, as the code last said it (``note``: "nothing saved yet" until a run directory holds its config). A block
that must not be cut in two (a run directory and its config.json, made together; a checkpoint and its note)
runs in ``deferred()``, where a SIGTERM or a Ctrl-C waits for the block's end. Ctrl-C (SIGINT, under Python's
own handling of it) raises ``KeyboardInterrupt`` as Python would, and is recorded too: one that code on its way
swallowed (a weakref callback or a destructor, where Python prints "Exception ignored" and goes on) is raised again
at the loop's next step (``interrupt_swallowed``) or the block's end. Before a command line's first
module is imported, ``applicative._sigterm`` stands in; for a run of several processes it carries the signal to
the meeting (``raise_early``), which tells the other processes.

With several processes, once ``jax.distributed`` has joined them, JAX's runtime takes SIGTERM over and the
loop stops every process after one step (``processes.preemption``): ``stopping`` then has nothing to catch.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from types import FrameType

from applicative import _sigterm

__all__ = [
    "NOTHING_SAVED",
    "Stopped",
    "deferred",
    "interrupt_swallowed",
    "note",
    "raise_early",
    "received",
    "saved",
    "stopping",
]

NOTHING_SAVED = "nothing saved yet: run the same command again"


class Stopped(BaseException):
    """SIGTERM stopped the command; the message says what is saved (``exit_status``: 75). A ``BaseException``,
    as ``KeyboardInterrupt`` is: it may be raised in the middle of any code, whose ``except Exception`` must not
    take it for that code's own failure (a dataset cache that reads as corrupt, and is made again)."""

    exit_status = 75
    """The status a command line exits with after it (sysexits' EX_TEMPFAIL: stopped, to be run again)."""

    here = False
    """Whether this process's own SIGTERM raised it (``stopping``), not another process's word."""


class _State(threading.local):
    saved = NOTHING_SAVED
    deferring = 0
    pending = False
    interrupted = False  # a Ctrl-C held by ``deferred``, raised at its end
    received = False
    sigint = False  # a Ctrl-C reached this ``stopping`` block (``_interrupt``)
    early = False  # a SIGTERM came while the command imported its modules (``_sigterm.carried``)


_state = _State()  # per thread, though only the main thread sees signals


def note(saved: str) -> None:
    """What a SIGTERM from now on leaves behind, for its message: "DIR holds ...: --resume ..."."""
    _state.saved = saved


def saved() -> str:
    """What a stop now leaves behind, as the code last said it (``note``): for a stop's message of any cause."""
    return _state.saved


def _stop(how: str = "") -> Stopped:
    stopped = Stopped(f"stopped by SIGTERM{how}: {_state.saved}")
    stopped.here = True
    return stopped


def raise_early() -> None:
    """Raise the ``Stopped`` of a SIGTERM that came while the command line imported its modules, which
    ``applicative._sigterm`` carried to this point (the meeting of several processes, which tells the others)."""
    if _state.early:
        _state.early = False
        raise _stop()


def received() -> bool:
    """Whether SIGTERM reached this ``stopping`` block: the loop stops at its first step if a ``Stopped`` was
    swallowed on its way (a library's ``except BaseException``, a destructor's)."""
    return _state.received


def _handle(number: int, frame: FrameType | None) -> None:
    _state.received = True
    if _state.deferring:
        _state.pending = True
        return
    raise _stop()


def _interrupt(number: int, frame: FrameType | None) -> None:
    _state.sigint = True
    if _state.deferring:
        _state.interrupted = True
        return
    raise KeyboardInterrupt


def interrupt_swallowed() -> None:
    """Raise ``KeyboardInterrupt`` again where a Ctrl-C reached this ``stopping`` block and its own was swallowed
    on its way (the run goes on past it): the loop asks at every step (``processes.preemption``)."""
    if _state.sigint:
        raise KeyboardInterrupt


@contextlib.contextmanager
def stopping() -> Iterator[None]:
    """For this block, SIGTERM raises ``Stopped`` (in the main thread; elsewhere the block runs as it is), nothing
    being saved yet (``note``); an error that ends the block after SIGTERM came is that ``Stopped`` too (code on
    its way made it another error: CPython's imports can), its message naming the error, unless it is a stop
    itself (an ``exit_status`` of 75: the loop's ``Preempted``). Under Python's own handling of SIGINT, the block
    records a Ctrl-C as it raises its ``KeyboardInterrupt``; an error or the block's end that follows a swallowed
    one is that ``KeyboardInterrupt``. The handlers before it are restored at the block's end."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    note(NOTHING_SAVED)
    _state.received = _state.sigint = False
    previous = signal.signal(signal.SIGTERM, _handle)
    python_sigint = signal.getsignal(signal.SIGINT) is signal.default_int_handler
    previous_sigint = signal.signal(signal.SIGINT, _interrupt) if python_sigint else None
    _state.early = _sigterm.carried()
    try:
        yield
        interrupt_swallowed()
    except Exception as error:
        if _state.sigint:
            raise KeyboardInterrupt from error
        if not _state.received or getattr(error, "exit_status", None) == Stopped.exit_status:
            raise  # no SIGTERM came, or the error is a stop itself (the loop's ``Preempted``)
        # the Stopped SIGTERM raised, which code on its way turned into an error of its own (CPython's import
        # machinery raises TypeError "expected a message argument" where it could not make an ImportError's)
        raise _stop(f" (on its way: {type(error).__name__}: {error})") from error
    finally:
        signal.signal(signal.SIGTERM, previous)
        if previous_sigint is not None:
            signal.signal(signal.SIGINT, previous_sigint)
        _state.received = _state.early = _state.sigint = False


@contextlib.contextmanager
def deferred() -> Iterator[None]:
    """A block that SIGTERM and Ctrl-C do not cut: the ``Stopped`` SIGTERM would raise, or the
    ``KeyboardInterrupt`` of a SIGINT under Python's own handling of it, is raised at the block's end instead
    (a checkpoint written and the note saying so, ``note``, go together: the message never names an older one)."""
    hold = (
        not _state.deferring
        and threading.current_thread() is threading.main_thread()
        and signal.getsignal(signal.SIGINT) is signal.default_int_handler
    )
    previous = signal.signal(signal.SIGINT, _hold_interrupt) if hold else None
    _state.deferring += 1
    try:
        yield
    finally:
        _state.deferring -= 1
        if previous is not None:
            signal.signal(signal.SIGINT, previous)
        if not _state.deferring and _state.interrupted:
            _state.interrupted = False
            raise KeyboardInterrupt
        if not _state.deferring and _state.pending:
            _state.pending = False
            if signal.getsignal(signal.SIGTERM) is _handle:
                raise _stop()


def _hold_interrupt(number: int, frame: FrameType | None) -> None:
    _state.interrupted = True
