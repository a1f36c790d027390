"""What the suite makes once a run (tests/once.py): made once whoever asks, begun early or not, and a failure
left to the test that asks."""

import threading
import uuid
from pathlib import Path
from typing import cast

import pytest

from tests import once


def _name() -> str:
    """A name no other test of the run (on any worker) uses."""
    return f"test-once-{uuid.uuid4().hex}"


def test_what_is_begun_is_made_once_and_read_by_whoever_asks(tmp_path_factory: pytest.TempPathFactory) -> None:
    calls: list[Path] = []
    started, release = threading.Event(), threading.Event()

    def make(out: Path) -> None:
        calls.append(out)
        started.set()
        release.wait(10)  # held while a second beginner and an asker come
        (out / "made").write_text("once")

    name = _name()
    first = once.begin(tmp_path_factory, name, make)
    assert started.wait(10)
    second = once.begin(tmp_path_factory, name, make)  # another worker's thread: waits for the first
    release.set()
    made = once.directory(tmp_path_factory, name, make)
    first.join(10)
    second.join(10)
    assert not first.is_alive()
    assert not second.is_alive()
    assert calls == [made]
    assert (made / "made").read_text() == "once"


def test_a_failure_of_what_was_begun_is_made_again_and_raised_by_the_test_that_asks(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    calls: list[Path] = []

    def make(out: Path) -> None:
        calls.append(out)
        (out / "partial").write_text("left by a failed make")
        raise AssertionError(f"make failed ({len(calls)})")

    name = _name()
    once.begin(tmp_path_factory, name, make).join(10)
    assert len(calls) == 1
    with pytest.raises(AssertionError, match=r"make failed \(2\)"):
        once.directory(tmp_path_factory, name, make)
    assert len(calls) == 2
    assert not (once.shared(tmp_path_factory) / f"{name}.done").exists()


def test_begin_asks_for_the_runs_directory_before_its_thread_starts(tmp_path: Path) -> None:
    """pytest makes a worker's temporary directory on the first ``getbasetemp`` (remove, then make, unlocked):
    a test's fixture asking beside the begun thread's first ask failed with FileExistsError (CI, 2026-12-02).
    The caller asks first, so the thread and every later test read the directory made."""
    askers: list[threading.Thread] = []

    class Factory:  # pytest's TempPathFactory as far as tests/once.py uses it
        def getbasetemp(self) -> Path:
            askers.append(threading.current_thread())
            (tmp_path / "base").mkdir(exist_ok=True)
            return tmp_path / "base"

    made = threading.Event()
    thread = once.begin(cast(pytest.TempPathFactory, Factory()), _name(), lambda out: made.set())
    thread.join(10)
    assert made.is_set()
    assert askers[0] is threading.current_thread()
