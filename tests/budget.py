"""What the default run holds, and its time budget (the hooks are loaded by tests/conftest.py).

A test marked ``end_to_end`` is slow too: a whole program or run as its user starts it (a bench script at
its smoke size, a guide's program, a notebook, a command line, a process of its own, a training killed and
resumed) that takes more than about 5 s of a worker's time is left out of the README's run, which checks
the library piece by piece, and CI runs it in both environments (pyproject.toml's markers, .ci/run); a
longer one, only slow, runs in the newest only. The shorter ones stay as the README's run's own checks of
whole runs (the digits example's command line and its run killed and resumed, the learning layer's resumes).
docs/install.md has what the mark took out of the README's run, and its time before and after.

A test of the README's run (not marked slow) whose setup, call or teardown takes longer than ``BUDGET``
seconds fails, naming itself, its phase and its time.

The bound: the slowest phase of the default run takes about 30 s on the 2-core machine the README's times
are measured on, with the tests on both cores; CI's machines are up to 2.5 times slower. 90 s keeps every
test of today on every machine CI uses, and stops one test from growing into minutes unnoticed: one past it
belongs in the slow run (``-m slow``), or is to be made smaller. ``$APPLICATIVE_TEST_BUDGET`` sets another
bound (seconds)."""

from __future__ import annotations

import os
from collections.abc import Generator

import pytest

BUDGET = float(os.environ.get("APPLICATIVE_TEST_BUDGET", "90"))
"""Seconds one phase of a default-run test may take."""


def pytest_itemcollected(item: pytest.Item) -> None:
    if item.get_closest_marker("end_to_end") is not None:  # (before -m selects: it reads the marks after)
        item.add_marker(pytest.mark.slow)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    if report.passed and call.duration > BUDGET and item.get_closest_marker("slow") is None:
        report.outcome = "failed"
        report.longrepr = (
            f"{item.nodeid}: its {call.when} took {call.duration:.1f} s, past the default run's budget of "
            f"{BUDGET:g} s a test (tests/budget.py): mark it slow, or make it smaller"
        )
    return report
