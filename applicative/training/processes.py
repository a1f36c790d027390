"""Training on several processes: JAX's own runtime (``jax.distributed``) joins them, one owns the run.

A run on several processes (hosts, or several processes of one host) is the one-process run with
its minibatches split over every process's devices (``steps.data_parallel``): each process builds
the same training data, model and optimiser state, and the jitted step's collectives keep them in
step. Process 0, the *owner*, alone touches the run directory: it holds it (``_files.holding_run``),
reads a resumed run's config and checkpoint and hands them to the others (``from_owner``), and writes
the config, the checkpoints, the metrics and the plots. The other processes never write, so the run
directory need only exist on the owner's host, a shared file system works as well, and a crash of
any process leaves the owner's last checkpoint, which ``--resume`` continues on any number of
processes. Before the first step every process's data, configuration and initial state are
compared by a SHA-256 (``agree``): processes that differ are refused by number.

``initialize`` first has the processes meet (``rendezvous.meet``): a start that cannot complete (a port
in use, an id given twice, a missing process, processes asked for different starts) ends on every
process within a bounded time, in an error that names the processes; every process proves it belongs
to the run with the run's secret (``$APPLICATIVE_RUN_SECRET``; a run without one is refused unless its port
is open to this host alone), and nothing else that connects changes anything. The meeting's connections then
stay open (``lifeline.hold``): when a process dies, stops on its own or goes silent, the others end within
seconds, naming it. ``preemption`` turns SIGTERM into a stop of every process after one step,
which the loop checkpoints (``loop.Preempted``).

With one process (``jax.process_count() == 1``) every function here is the identity or a no-op.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import ipaddress
import math
import os
import signal
import socket
import sys
import threading
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import TypeVar

import jax
import numpy as np
from jax._src import config, distributed, xla_bridge
from jax.experimental import multihost_utils
from jaxlib import _jax

from applicative.training.files import RunInUse, holding_run
from applicative.training.hosting import split
from applicative.training.lifeline import BEAT_EVERY, SILENT, hold
from applicative.training.rendezvous import SECRET, meet
from applicative.training.stopping import interrupt_swallowed, raise_early
from applicative.training.stopping import received as stopped_before

_T = TypeVar("_T")

__all__ = ["agree", "from_owner", "initialize", "is_owner", "owning", "preemption"]

ENVIRONMENT = {
    "coordinator": "JAX_COORDINATOR_ADDRESS",
    "processes": "JAX_NUM_PROCESSES",
    "process_id": "JAX_PROCESS_ID",
    "bind": "JAX_COORDINATOR_BIND_ADDRESS",
    "secret": SECRET,
    "silent": "APPLICATIVE_SILENT",
}
"""The environment variables ``initialize`` reads where an argument is None (the first is JAX's own)."""

STARTUP_TIMEOUT = 60.0
"""Seconds ``initialize`` waits for every process of the run to come, by default."""


def initialize(
    coordinator: str | None = None,
    processes: int | None = None,
    process_id: int | None = None,
    *,
    cluster: bool = False,
    timeout: float = STARTUP_TIMEOUT,
    bind: str | None = None,
    start: str = "",
    secret: str | None = None,
    silent: float | None = None,
) -> bool:
    """Join this process to a run on several (``jax.distributed.initialize``), before JAX uses a device.

    ``coordinator`` is process 0's ``host:port``, reachable from every process; ``processes`` how many
    take part; ``process_id`` this one's number, 0 to ``processes - 1``. An argument that is None is
    read from its environment variable (``ENVIRONMENT``). With none of the three given anywhere and
    ``cluster`` False, nothing happens (a one-process run) and False is returned; with ``cluster``,
    JAX fills in what is missing from the cluster it detects (Slurm, Open MPI, a Cloud TPU, a
    Kubernetes job with ``jax[k8s]``). True once joined.

    The processes first meet (``rendezvous.meet``, when the three are known): within ``timeout`` seconds
    every process has come, once, proving it holds the run's ``secret`` (default ``$APPLICATIVE_RUN_SECRET``,
    else empty: the same on every process, given at launch; docs/processes.md) and saying the same ``start``
    (what it was asked to do: a new run, a resumed one), or every process that came stops with a
    ``rendezvous.StartupError`` naming what is wrong (a port in use, an id given twice, a count or a start
    that differs) and which processes never came. Process 0's coordinator listens on ``bind`` (``host:port``;
    default ``$JAX_COORDINATOR_BIND_ADDRESS``, else the coordinator's own address, so that only the interface
    the others use is open; ``[::]:port`` for every interface). The meeting's connections then watch the
    processes (``lifeline.hold``): when one dies, every other ends within seconds, naming it, and one that sends
    nothing for ``silent`` seconds (default ``$APPLICATIVE_SILENT``, else ``lifeline.SILENT``; more than
    ``lifeline.BEAT_EVERY``) is taken as stopped or hung, named, and the others end. ValueError for
    a count below 1 or an id out of range, and for a run without a secret whose port is open beyond this host
    (process 0's ``bind``, the others' ``coordinator``, not a loopback address): closed by default, where a
    run on this host alone is only warned.
    """
    coordinator = coordinator or os.environ.get(ENVIRONMENT["coordinator"])
    if processes is None:
        processes = _from_environment(ENVIRONMENT["processes"], int, "an integer")
    if process_id is None:
        process_id = _from_environment(ENVIRONMENT["process_id"], int, "an integer")
    if (coordinator, processes, process_id) == (None, None, None) and not cluster:
        return False
    if processes is not None and processes < 1:
        raise ValueError(f"the number of processes must be positive, got {processes}")
    if process_id is not None and processes is not None and not 0 <= process_id < processes:
        raise ValueError(f"the process id must be in 0..{processes - 1} for {processes} processes, got {process_id}")
    if not timeout > 0:
        raise ValueError(f"the startup timeout must be positive, got {timeout} s")
    if silent is None:
        silent = _from_environment(ENVIRONMENT["silent"], float, "a number of seconds")
    silent = SILENT if silent is None else silent
    if not silent > BEAT_EVERY:
        raise ValueError(
            f"a process's silence must be longer than its beats' interval, {BEAT_EVERY:g} s, got {silent:g} s"
        )
    connections: dict[int, socket.socket] = {}
    if coordinator is not None and processes is not None and process_id is not None:
        bind = bind or os.environ.get(ENVIRONMENT["bind"]) or coordinator
        key = (secret if secret is not None else os.environ.get(SECRET, "")).encode()
        if not key:
            _without_secret(bind if process_id == 0 else coordinator)
        connections = meet(coordinator, processes, process_id, start=start, timeout=timeout, bind=bind, secret=key)
        hold(connections, process_id, silent=silent)
    raise_early()  # (where no meeting raised it: JAX meets a cluster's processes)
    jax.distributed.initialize(
        coordinator, processes, process_id, initialization_timeout=math.ceil(timeout), coordinator_bind_address=bind
    )
    if connections:  # they met here (processes of a cluster JAX detects meet its own way)
        _collectives_at(_own_address(next(iter(connections.values()))))
    return True


def _own_address(connection: socket.socket) -> str:
    """This host's address on ``connection``: the one the other end reached it at, or left it from."""
    return str(connection.getsockname()[0]).removeprefix("::ffff:")


def _collectives_at(address: str) -> None:
    """JAX's collectives on the CPU (gloo) listen at ``address``, this process's end of its connection to the run.

    Left to itself gloo listens at the address the host's name resolves to, which many hosts map to a loopback
    address (Debian's /etc/hosts: ``127.0.1.1 NAME``; a container's: ``127.0.0.1 NAME``): each other host then
    connects to itself and the run ends at its first collective ("timed out connecting ... remote=[127.0.0.1]").
    The address the processes met at reaches this one from the others. (JAX names no setting for it: this
    registers its own CPU client with gloo told the address, as ``jax._src.xla_bridge`` registers its own.)
    """
    if config.cpu_collectives_implementation.value != "gloo":
        return
    gloo = _jax.make_gloo_tcp_collectives(distributed.global_state.client, hostname=address)
    xla_bridge.register_backend_factory(
        "cpu", functools.partial(xla_bridge.make_cpu_client, collectives=gloo), priority=0, fail_quietly=False
    )


def _without_secret(address: str) -> None:
    """A run without a secret, whose process 0 listens (or is reached) at ``address``: refused, a ValueError
    saying how to give one, unless that address is this host's loopback, which no other host reaches; then a
    warning on stderr."""
    host, _ = split(address)
    if host == "localhost" or _is_loopback(host):
        print(f"warning: no ${SECRET}: any program of this host may join the run at {address}, or end it; give "
              "every process the same random secret to close it (docs/processes.md)", file=sys.stderr)  # fmt: skip
        return
    raise ValueError(
        f"a run of several processes at {address} needs a secret, else any program that reaches the port may join "
        f"it or end it: give every process the same random ${SECRET} (export {SECRET}=$(openssl rand -hex 16) "
        "before srun on Slurm; on Kubernetes, a Secret read into the variable; docs/processes.md, \"Who may join\")"
    )


def _is_loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:  # a name
        return False


def _from_environment(name: str, parse: Callable[[str], _T], what: str) -> _T | None:
    """The environment variable ``name`` read by ``parse``; None where it is not set; ValueError naming it and
    ``what`` it must be where ``parse`` refuses it."""
    text = os.environ.get(name)
    if text is None:
        return None
    try:
        return parse(text)
    except ValueError:
        raise ValueError(f"${name} must be {what}, got {text!r}") from None


def is_owner() -> bool:
    """Whether this process owns the run directory: process 0 (the only one, in a one-process run)."""
    return jax.process_index() == 0


# The errors ``from_owner`` raises again on the other processes by kind; any other as a RuntimeError.
_KINDS: dict[str, type[Exception]] = {
    kind.__name__: kind for kind in (ValueError, TypeError, FileNotFoundError, FileExistsError, RunInUse)
}


def from_owner(make: Callable[[], bytes]) -> bytes:
    """``make()`` run on the owner, its bytes on every process.

    An exception of ``make`` is raised on the owner as it is and, on every other process, as an
    exception of the same kind (``ValueError``, ``FileNotFoundError``, ``FileExistsError``,
    ``RunInUse``, ``TypeError``; else ``RuntimeError``) whose message starts with "process 0: ", so
    that no process waits for a collective the owner never joins.
    """
    if jax.process_count() == 1:
        return make()
    error, message = None, b""
    if is_owner():
        try:
            message = b"\0" + make()
        except Exception as caught:
            error, message = caught, b"\1" + f"{type(caught).__name__}\n{caught}".encode()
    received = _broadcast(message)
    if error is not None:
        raise error
    if received[:1] == b"\1":
        kind, _, text = received[1:].decode().partition("\n")
        raise _KINDS.get(kind, RuntimeError)(f"process 0: {text}")
    return received[1:]


def _broadcast(data: bytes) -> bytes:
    """The owner's ``data`` on every process (the others pass anything): its length, then its bytes."""
    size = int(multihost_utils.broadcast_one_to_all(np.array([len(data)], np.int32))[0])
    buffer = np.frombuffer(data, np.uint8) if is_owner() else np.zeros(size, np.uint8)
    return bytes(multihost_utils.broadcast_one_to_all(buffer))


@contextlib.contextmanager
def owning(directory: Path, *, resume: bool) -> Iterator[None]:
    """On the owner, hold the run ``directory`` for this block (``holding_run``; a new run, not ``resume``,
    makes it first); every process learns whether it could (``from_owner``: a run in use is refused on
    all). First of all, the processes agree on the start: all resume the run, or none does (``agree``)."""
    agree("starts of the run", "resume" if resume else "new", advice="give every process the same command: all "
          "with --resume, or none")  # fmt: skip
    with contextlib.ExitStack() as stack:

        def hold() -> bytes:
            if not resume:
                directory.mkdir(parents=True, exist_ok=True)
            stack.enter_context(holding_run(directory))
            return b""

        from_owner(hold)
        yield


@contextlib.contextmanager
def preemption() -> Iterator[Callable[[int], bool]]:
    """For this block, ``preempted(step)``: True, at one step on every process, once SIGTERM (a cluster's
    preemption or cancel: Slurm, Kubernetes) reached any process of the run.

    On several processes it is JAX's preemption sync point (``jax.distributed`` catches SIGTERM, and the
    processes agree on the first step every one of them checks after it; every process must check every
    step it passes, in the same order). In one process, a handler of this block records SIGTERM (in the
    main thread; the handler before it is restored at the block's end), and one that reached the command line
    before it (``stopping.received``) stops the run at its first check. A Ctrl-C whose ``KeyboardInterrupt`` was
    swallowed on its way is raised again at the next check (``stopping.interrupt_swallowed``)."""

    def checking(preempted: Callable[[int], bool]) -> Callable[[int], bool]:
        def check(step: int) -> bool:
            interrupt_swallowed()
            return preempted(step)

        return check

    if jax.process_count() > 1:
        yield checking(multihost_utils.reached_preemption_sync_point)
        return
    if threading.current_thread() is not threading.main_thread():  # signals reach the main thread alone
        yield lambda step: False
        return
    received = threading.Event()
    if stopped_before():
        received.set()
    previous = signal.signal(signal.SIGTERM, lambda number, frame: received.set())
    try:
        yield checking(lambda step: received.is_set())
    finally:
        signal.signal(signal.SIGTERM, previous)


def agree(what: str, *parts: str | np.ndarray | Iterable[np.ndarray], advice: str) -> None:
    """Refuse, on every process, when the processes' ``parts`` (texts and arrays) differ: a ValueError
    that names ``what`` and the processes that differ from process 0, and ends with ``advice``. They
    are compared by a SHA-256 of each array's dtype, shape and bytes, computed only on several processes."""
    if jax.process_count() == 1:
        return
    digest = hashlib.sha256()
    for part in parts:
        for item in [part] if isinstance(part, str | np.ndarray) else part:
            array = np.ascontiguousarray(np.frombuffer(item.encode(), np.uint8) if isinstance(item, str) else item)
            digest.update(f"{array.dtype.str}{array.shape}".encode())
            digest.update(array.tobytes())
    digests = np.asarray(multihost_utils.process_allgather(np.frombuffer(digest.digest(), np.uint8)))
    differ = [i for i in range(len(digests)) if not np.array_equal(digests[i], digests[0])]
    if differ:
        several = len(differ) > 1
        raise ValueError(
            f"the {len(digests)} processes hold different {what}: process{'es' if several else ''} "
            f"{', '.join(map(str, differ))} differ{'' if several else 's'} from process 0; {advice}"
        )
