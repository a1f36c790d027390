"""How the tests are handed out to pytest-xdist's workers (the hooks are loaded by tests/conftest.py).

A run ends when its last worker does, so each worker should run out of tests at about the same time:

- **Work stealing.** xdist's default (``--dist load``) sends each worker chunks of tests ahead, and a
  worker that has run its chunks waits while another runs the chunk it was sent last: in the README's run,
  17 s of one worker's time at the end (the site's and the guides' tests, queued on the other).
  ``--dist worksteal`` splits the tests between the workers and lets one that has run out take tests
  still queued on another: both ended within 0.1 s of each other, and the run took 344 s where it had
  taken 354 s (one after the other, from clean caches). ``-n`` asks for it; another ``--dist`` given on
  the command line is kept.
- **The bench scripts' tests first.** A test already running cannot be taken over: the longest of CI's slow
  run are the bench scripts' (``bench/gpu.py --tiny`` about 45 s on this 2-core machine,
  ``bench/fno_darcy.py`` 20 s, each a process of its own), and collected last (``tests/test_*.py`` after
  ``tests/applicative/`` and ``tests/funcformer/``) they ran alone on one worker for the last 37 s of the
  newest environment's slow run. Started first, the other workers have every other test to run beside them.
  The rest keep their order (a module's tests together, as its fixtures want).
- **One worker more than the cores.** Part of the run is waiting, not computing: sockets and timers (the
  rendezvous and lifeline tests), processes a test starts and waits for (command lines, bench scripts,
  guides). A worker that waits leaves its core idle, so ``-n auto`` (the README's) starts one worker for
  every core as xdist counts them (``-n logical``: every logical core), and one more. On this 2-core
  machine, the README's run from clean caches, one run after the other: 2 workers 353 s and 333 s,
  3 workers 287 s and 300 s, 4 workers 295 s. ``PYTEST_XDIST_AUTO_NUM_WORKERS`` (xdist's) still sets
  the number, and ``-n N`` asks for N."""

from __future__ import annotations

import os

import pytest

FIRST = "test_bench.py"
"""The file whose tests are handed out first."""


def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    items.sort(key=lambda item: item.path.name != FIRST)  # (a stable sort: False, the bench's, first)


@pytest.hookimpl(optionalhook=True)  # (a hook of xdist's, which a run without it does not know)
def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object | None:
    if config.getoption("dist") != "load":  # another mode asked for: xdist makes its own
        return None
    from xdist.scheduler import WorkStealingScheduling

    scheduler: object = WorkStealingScheduling(config, log)  # (xdist ships no types)
    return scheduler


@pytest.hookimpl(tryfirst=True, optionalhook=True)  # (before xdist's own, which answers too)
def pytest_xdist_auto_num_workers(config: pytest.Config) -> int | None:
    if os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS"):  # a number asked for: xdist's own hook reads it
        return None
    from xdist.plugin import pytest_xdist_auto_num_workers as xdist_count  # the cores, as xdist counts them

    workers: int = xdist_count(config) + 1
    return workers
