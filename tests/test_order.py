"""How the tests are handed out to xdist's workers (tests/order.py): how many ``-n auto`` starts."""

from __future__ import annotations

import pytest
from xdist.plugin import pytest_xdist_auto_num_workers as xdist_count  # the cores, as xdist counts them


def test_auto_starts_one_worker_more_than_xdist_unless_a_number_is_asked_for(
    pytestconfig: pytest.Config, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The hook xdist asks for ``-n auto``'s number (this run's, with tests/conftest.py's hooks): one more
    than xdist's own count, and the number ``PYTEST_XDIST_AUTO_NUM_WORKERS`` asks for where it is set."""
    monkeypatch.delenv("PYTEST_XDIST_AUTO_NUM_WORKERS", raising=False)
    assert pytestconfig.hook.pytest_xdist_auto_num_workers(config=pytestconfig) == xdist_count(pytestconfig) + 1
    monkeypatch.setenv("PYTEST_XDIST_AUTO_NUM_WORKERS", "2")
    assert pytestconfig.hook.pytest_xdist_auto_num_workers(config=pytestconfig) == 2
