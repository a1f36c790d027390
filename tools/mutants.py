"""Mutation testing: apply realistic mutants to applicative/ and funcformer/, run the tests that cover each,
and print the kill rate (docs/mutants.md has the last measurement and the survivors).

A mutant is data (``MUTANTS``): a file, an exact snippet of it (which must occur once there: a snippet
found nowhere is reported as stale, one found twice as ambiguous, and neither is counted), its
replacement, a one-line description and the 1-3 test files (or test ids) that exercise the mutated
code. They are the mistakes a tired engineer makes: an off-by-one, a dropped scaling or normalisation,
a wrong axis, swapped operands, a sign, a changed constant, a transposed matrix, ``<`` for ``<=``, a
removed validation, a seed reused every epoch, an inverted mask. A mutant that cannot change behaviour
is marked with the reason (``equivalent=``); it still runs, and if its tests fail the marking is wrong,
which the report says.

Why a curated list and not a tool: mutmut and cosmic-ray (both install from PyPI here) mutate every
operator of every line, thousands of mutants, most of them noise (a message's text, a ``repr``), each
a pytest run that pays JAX's start-up and compilations (seconds to a minute here): days of CPU on 2
cores. A list with per-mutant covering tests runs in about half an hour and says what each mutant means.

The repository's files (tracked and untracked, not ignored: the working tree as it is) are copied once
into a temporary directory per job; each mutant is written there, its tests run with
``python -m pytest -x -q -p no:cacheprovider <tests>`` (``PYTHONPATH`` the copy, no bytecode written, a
fresh dataset cache), and the original file is restored. Nothing in the repository is ever changed.
First a baseline run checks that the unmutated copy passes every selected mutant's tests (else the
kill rate would mean nothing, and the script stops).

    python tools/mutants.py                     # every mutant (about 35 minutes on 2 CPU cores)
    python tools/mutants.py --only ID [ID ...]  # some mutants
    python tools/mutants.py --list              # the mutants, their tests, and whether each applies
    python tools/mutants.py --jobs 2 --timeout 300

It prints a Markdown table (id, file, description, result, seconds), the reasons of the equivalent
mutants, and last ``killed K of M non-equivalent mutants (E equivalent, S survived: ids)``. Results:
killed (a test failed), error (the tests could not be collected: an import or syntax error), timeout
(past ``--timeout``; killed too), survived, equivalent (a marked mutant that survived), MISMARKED
(a marked mutant that was killed: counted as killed), no tests (the tests named select none: counted as
survived), stale, ambiguous.
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import queue
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from mutant_records import Mutant
from mutants_examples import MUTANTS as EXAMPLES
from mutants_funcformer import MUTANTS as FUNCFORMER
from mutants_graphs import MUTANTS as GRAPHS
from mutants_library import MUTANTS as LIBRARY
from mutants_trees import MUTANTS as TREES
from mutants_users import MUTANTS as USERS

ROOT = Path(__file__).resolve().parent.parent
MUTANTS = [*LIBRARY, *FUNCFORMER, *TREES, *USERS, *EXAMPLES, *GRAPHS]
"""Every mutant, in the order of the report (the records: mutants_library.py, mutants_funcformer.py,
mutants_trees.py, mutants_users.py, mutants_examples.py, mutants_graphs.py)."""



# Running


@dataclass(frozen=True)
class Outcome:
    result: str
    seconds: float
    detail: str = ""


KILLED = ("killed", "error", "timeout", "MISMARKED")


def tracked_files() -> list[str]:
    """The working tree's files: tracked and untracked, not ignored (read-only git)."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT, check=True, capture_output=True, text=True,
    ).stdout  # fmt: skip
    return [name for name in listed.split("\0") if name and (ROOT / name).is_file()]


def make_copy(files: Iterable[str], into: Path) -> Path:
    for name in files:
        (into / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, into / name)
    return into


def pytest(copy: Path, tests: Iterable[str], timeout: float) -> tuple[int | None, str]:
    """(exit status or None on timeout, the output's last lines) of the tests run in ``copy``, files in the
    suite's order (by path): some tests read JAX's process-wide compilation caches, and pass in that order."""
    tests = sorted(tests, key=lambda test: test.split("::")[0])
    with tempfile.TemporaryDirectory(prefix="mutant-run-") as scratch:
        env = {
            **os.environ,
            "PYTHONPATH": str(copy),  # the copy's packages, not the editable install's
            "PYTHONDONTWRITEBYTECODE": "1",  # a mutant of the original's size and mtime must not hit a stale .pyc
            "FUNCFORMER_CACHE": str(Path(scratch) / "cache"),  # a mutated generator never feeds another run
        }
        # (-m: the tests named run whether or not they are marked slow, which the default run leaves out)
        command = [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", "-m", "slow or not slow",
                   f"--basetemp={scratch}/pytest", *tests]  # fmt: skip
        process = subprocess.Popen(
            command, cwd=copy, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
            start_new_session=True,
        )  # fmt: skip
        try:
            output, _ = process.communicate(timeout=timeout)
            status: int | None = process.returncode
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)  # the process group this call started
            output, _ = process.communicate()
            status = None
    lines = [line for line in output.splitlines() if line.strip()]
    return status, "\n".join(lines[-15:])


def summary_line(output: str) -> str:
    return output.splitlines()[-1].strip("= ") if output else ""


def first_failure(output: str) -> str:
    """The first failing test pytest names (its short summary), else the summary line."""
    failed = [line for line in output.splitlines() if line.startswith(("FAILED ", "ERROR "))]
    return failed[0][:200] if failed else summary_line(output)


def run_mutant(m: Mutant, copy: Path, timeout: float) -> Outcome:
    path = copy / m.file
    original = path.read_text(encoding="utf-8")
    count = original.count(m.old)
    if count != 1:
        return Outcome("stale" if count == 0 else "ambiguous", 0.0, f"snippet found {count} times")
    start = time.perf_counter()
    path.write_text(original.replace(m.old, m.new), encoding="utf-8")
    try:
        status, output = pytest(copy, m.tests, timeout)
    finally:
        path.write_text(original, encoding="utf-8")
    seconds = time.perf_counter() - start
    if status is None:
        result = "timeout"
    elif status == 0:
        result = "equivalent" if m.equivalent else "survived"
    elif m.equivalent:
        result = "MISMARKED"
    elif status == 1:
        result = "killed"
    elif status == 5:
        result = "no tests"
    else:
        result = "error"
    return Outcome(result, seconds, first_failure(output))


def baseline_tests(mutants: list[Mutant]) -> list[str]:
    """The union of the mutants' tests, a test id left out where its whole file is in."""
    union = list(dict.fromkeys(test for m in mutants for test in m.tests))
    files = {test for test in union if "::" not in test}
    return [test for test in union if "::" not in test or test.split("::")[0] not in files]


def list_mutants(mutants: list[Mutant]) -> None:
    print("| id | file | applies | tests | equivalent |\n| --- | --- | --- | --- | --- |")
    for m in mutants:
        count = (ROOT / m.file).read_text(encoding="utf-8").count(m.old)
        applies = "yes" if count == 1 else "stale" if count == 0 else f"ambiguous ({count})"
        print(f"| {m.id} | {m.file} | {applies} | {', '.join(m.tests)} | {m.equivalent or ''} |")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", nargs="+", metavar="ID", help="run these mutants only")
    parser.add_argument("--list", action="store_true", help="list the mutants and whether each applies")
    parser.add_argument("--jobs", type=int, default=1, help="mutants run at once, each in its own copy (default 1)")
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds a mutant's tests may take")
    args = parser.parse_args()
    assert len({m.id for m in MUTANTS}) == len(MUTANTS), "mutant ids must be unique"
    mutants = MUTANTS
    if args.only:
        unknown = sorted(set(args.only) - {m.id for m in MUTANTS})
        if unknown:
            parser.error(f"unknown mutants: {', '.join(unknown)}")
        mutants = [m for m in MUTANTS if m.id in args.only]
    if args.list:
        list_mutants(mutants)
        return 0

    started = time.perf_counter()
    print(f"$ python {shlex.join(['tools/mutants.py', *sys.argv[1:]])}")
    print(
        f"{datetime.date.today().isoformat()}; {platform.machine()} {platform.system()}, {os.cpu_count()} CPU "
        f"cores, load average {', '.join(f'{x:.2f}' for x in os.getloadavg())}; Python {platform.python_version()}"
    )
    files = tracked_files()
    with tempfile.TemporaryDirectory(prefix="mutants-") as top:
        copies: queue.Queue[Path] = queue.Queue()
        for j in range(max(1, args.jobs)):
            copies.put(make_copy(files, Path(top) / f"copy{j}"))
        tests = baseline_tests(mutants)
        first = copies.get()
        status, output = pytest(first, tests, 10 * args.timeout)
        copies.put(first)
        if status != 0:
            print(f"The unmutated copy fails the mutants' tests (status {status}); no kill rate:\n{output}")
            return 1
        print(f"Baseline: the unmutated copy passes the {len(tests)} covering test files and ids "
              f"({summary_line(output)}, {time.perf_counter() - started:.0f} s).\n")  # fmt: skip

        def one(m: Mutant) -> Outcome:
            copy = copies.get()
            try:
                outcome = run_mutant(m, copy, args.timeout)
            finally:
                copies.put(copy)
            print(f"{m.id}: {outcome.result} ({outcome.seconds:.0f} s) {outcome.detail}", file=sys.stderr, flush=True)
            return outcome

        with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
            outcomes = list(pool.map(one, mutants))

    print("| id | file | description | result | seconds |\n| --- | --- | --- | --- | --- |")
    for m, o in zip(mutants, outcomes, strict=True):
        print(f"| {m.id} | {m.file} | {m.description} | {o.result} | {o.seconds:.0f} |")
    counted = [(m, o) for m, o in zip(mutants, outcomes, strict=True) if o.result not in ("stale", "ambiguous")]
    equivalent = [m for m, o in counted if o.result == "equivalent"]
    live = [(m, o) for m, o in counted if o.result != "equivalent"]
    killed = [m for m, o in live if o.result in KILLED]
    survived = [m.id for m, o in live if o.result not in KILLED]
    print()
    for m in equivalent:
        print(f"- equivalent, {m.id}: {m.equivalent}")
    for m, o in zip(mutants, outcomes, strict=True):
        if o.result in ("stale", "ambiguous", "MISMARKED"):
            print(f"- {o.result}, {m.id}: " + (o.detail if o.result != "MISMARKED" else "marked equivalent, killed"))
    print(f"total {time.perf_counter() - started:.0f} s")
    print(
        f"killed {len(killed)} of {len(live)} non-equivalent mutants "
        f"({len(equivalent)} equivalent, {len(survived)} survived: {', '.join(survived) or 'none'})"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
