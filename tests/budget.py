"""The default run's time budget: a test of the README's run (not marked slow) whose setup, call or teardown
takes longer than ``BUDGET`` seconds fails, naming itself, its phase and its time (the hook is loaded by
tests/conftest.py).

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
