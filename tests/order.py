"""The order the tests are handed out in: ``tests/test_bench.py``'s first (the hook is loaded by tests/conftest.py).

pytest-xdist hands the tests to its workers in the order they are collected (``--dist load``), and a worker
that has run its last test waits for the others. The bench scripts' tests are the longest of CI's slow run
(``bench/gpu.py --tiny`` about 45 s on this 2-core machine, ``bench/fno_darcy.py`` 20 s, each a process of
its own), and they were collected last (``tests/test_*.py`` after ``tests/applicative/`` and
``tests/funcformer/``): in the newest environment's slow run one worker ran the last three alone, 37 s after
the other had ended. Handed out first, they are spread over the workers and the short tests fill in behind
them. The rest keep their order (a module's tests together, as its fixtures want)."""

from __future__ import annotations

import pytest

FIRST = "test_bench.py"
"""The file whose tests are handed out first."""


def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    items.sort(key=lambda item: item.path.name != FIRST)  # (a stable sort: False, the bench's, first)
