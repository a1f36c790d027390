"""Checks of a GPU machine, in at most 9 minutes on one GPU: the whole default test suite, the attention,
mixed precision, graph, trees and encoder benchmarks, and a short training run of each task, each check a
row of one table, in this order.

- the device JAX sees, and JAX's release;
- the default test suite (``pytest -n WORKERS -v``: as the README runs it, several workers sharing the GPU,
  none preallocating its memory): passed and failed counts, and the failed tests' names (by then, if it
  runs out of time). A test file that
  needs a development tool the machine lacks (mypy, mkdocs, tensorboardX: ``TOOLS``) is left out, and the
  row names it;
- ``bench/attention.py`` at 1,024 and 16,384 positions, in bfloat16 (where cuDNN's fused kernel applies):
  each path's time and memory over the fused attention's (``jax.nn.dot_product_attention``);
- ``bench/precision.py``: the digit reverser's seconds a step and test accuracy in float32 and computing in
  bfloat16 (``applicative.training.bfloat16``), and their ratio;
- ``bench/graphs.py`` at 1,024 and 16,384 nodes: attention over a graph's edges against the same edges as a
  dense mask, forward and backward, the time and memory of each;
- ``bench/trees.py`` at 1,024 leaves (timed) and at 16,384 (compiled only), the attention materialised
  and in chunks: a size that does not fit in the GPU's memory is a row that says so;
- ``bench/transformer.py`` at its default size: the generic encoder's time over the hand-written one's,
  calls alone and in flight, and its extra host time; with ``--hlo``, the kernels each compiles to;
- ``python -m funcformer.poisson train`` and ``python -m funcformer.darcy train``, 500 steps of the
  default model on 1,024 training samples: the seconds and the test error the run reports.

Each check is a subprocess with a timeout, within a budget for the whole (``--budget``, 540 s): a check
that fails, times out or finds no time left is a row that says so, and the next one runs. Each row is
printed (and written to ``--out``) as it finishes, so that a run killed from outside still leaves the
rows before.

    python bench/gpu.py --out gpu.md     # on the GPU machine, from the repository root
    python bench/gpu.py --tiny           # every check at a tiny size (about a minute on 2 CPU cores)

``--log FILE`` keeps each check's command and whole output.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import importlib.util
import json
import os
import re
import shlex
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BUDGET = 540.0
"""Seconds for every check together (9 minutes); each check's timeout is cut to what is left of it."""
LEAST = 5.0
"""Seconds under which a check is not started."""
SUITE_SECONDS = 300.0
"""The default suite's timeout. On one H200 with 16 cores, where compiling for the GPU is the suite's work, 8
workers had not finished in 270 s and 15 had run 88% of it in 165 s (2026-11-30)."""
TINY_SUITE = (
    "tests/applicative/test_dyadic.py::test_weights_are_exact_powers_of_two_at_every_depth",
    "tests/test_dependencies.py::test_lowest_pins_exactly_each_runtime_dependency",
)
"""``--tiny``'s tests: two cheap tests of two files."""
TRAINING = ("--steps", "500", "--train-size", "1024", "--test-size", "256", "--checkpoint-every", "500")
"""A short run of a task's default model. With an empty dataset cache the run first solves its 1,024
training samples, the output scale's 1,024 and its 256 test samples (on the CPU): Darcy's solves are then
a good part of its seconds."""
TINY_TRAINING = (
    *("--steps", "2", "--batch", "2", "--train-size", "4", "--warmup", "0", "--learning-rate", "1e-2"),
    *("--channels", "2", "--heads", "1", "--head-channels", "1", "--hidden-channels", "2", "--layers", "1"),
    *("--test-size", "8"),
)
"""``--tiny``'s run: the smoke runs' settings of ``bench/_report.py`` (``SMOKE_RUN``, ``SMOKE_MODEL``,
``SMOKE_TEST_SIZE``), whose compilations JAX's persistent cache may then hold."""
DEVICE = (
    "import json, platform, jax, jaxlib; d = jax.devices(); "
    "print(json.dumps({'platform': d[0].platform, 'kind': d[0].device_kind, 'count': len(d), "
    "'jax': jax.__version__, 'jaxlib': jaxlib.__version__, 'python': platform.python_version()}))"
)


@dataclasses.dataclass(frozen=True)
class Check:
    """One row: ``python ARGUMENTS`` from the repository root, for at most ``timeout`` seconds; ``result``
    reads the finished process into the row's last cell."""

    name: str
    arguments: tuple[str, ...]
    timeout: float
    result: Callable[[subprocess.CompletedProcess[str]], str]
    environment: tuple[tuple[str, str], ...] = ()
    partial: Callable[[str], str] = lambda stdout: last_line(stdout)
    """What a check stopped at its timeout had found, from its output so far."""


@dataclasses.dataclass(frozen=True)
class Row:
    check: str
    status: str
    seconds: float
    result: str

    def line(self) -> str:
        cells = [self.check, self.status, f"{self.seconds:.0f}", self.result]
        return "| " + " | ".join(" ".join(cell.replace("|", "/").split()) for cell in cells) + " |"


HEADER = "| check | status | seconds | result |\n|---|---|---|---|"


# What each check's output says


def device(done: subprocess.CompletedProcess[str]) -> str:
    facts = json.loads(done.stdout.strip().splitlines()[-1])
    return (
        f"{facts['kind']} ({facts['platform']}, {facts['count']} device{'s' * (facts['count'] > 1)}); "
        f"JAX {facts['jax']}, jaxlib {facts['jaxlib']}, Python {facts['python']}"
    )


def pytest_counts(done: subprocess.CompletedProcess[str]) -> str:
    """pytest's summary line: ``10 failed, 106 passed`` (its counts, without the seconds), and the names of
    the tests that failed (``failed_tests``)."""
    lines = done.stdout.strip().splitlines()
    for line in reversed(lines):
        counts = re.findall(r"(\d+) (passed|failed|errors?|skipped|xfailed|xpassed|deselected)", line)
        if counts and re.search(r" in [\d.]+s", line):
            failed = failed_tests(done.stdout)
            summary = ", ".join(f"{number} {what}" for number, what in counts)
            return summary + (": " + "; ".join(failed) if failed else "")
    raise ValueError("no pytest summary line")


def failed_tests(output: str) -> list[str]:
    """The tests that failed or errored, once each, without their files' directories: from the summary's
    ``FAILED tests/a/test_x.py::t[p] - message`` lines and, as they happen, from ``-v``'s
    ``[gw3] [ 48%] FAILED tests/a/test_x.py::t[p]`` (so that a run stopped at its timeout names them too)."""
    found = re.findall(r"^(?:\[gw\d+\] \[ *\d+%\] )?(?:FAILED|ERROR) (\S.*?)\s*(?: - .*)?$", output, re.M)
    return list(dict.fromkeys(name.split("::", 1)[0].rsplit("/", 1)[-1] + "::" + name.split("::", 1)[1]
                              if "::" in name else name for name in found))  # fmt: skip


def failed_so_far(output: str) -> str:
    """What a run of ``pytest -v`` stopped at its timeout had found: the tests passed and failed by then."""
    failed = failed_tests(output)
    passed = len(re.findall(r" PASSED ", output))
    return f"by then {passed} passed, {len(failed)} failed" + (": " + "; ".join(failed) if failed else "")


def transformer_ratios(done: subprocess.CompletedProcess[str]) -> str:
    ratios = {f"{what}{flight}": value for what, flight, value in re.findall(
        r"^ratio (forward|forward\+backward)((?:, \d+ in flight)?): (\S+)$", done.stdout, re.M)}  # fmt: skip
    host = re.search(r"host time per call over the hand-written one's: (.*)$", done.stdout, re.M)
    return (
        f"generic / hand-written: forward {ratios['forward']}, forward+backward {ratios['forward+backward']}"
        + "".join(f"; {name} {value}" for name, value in ratios.items() if "flight" in name)
        + (f"; generic's extra host time {host.group(1)}" if host else "")
    )


def kernel_counts(done: subprocess.CompletedProcess[str]) -> str:
    """The kernels each encoder compiles to, in all (``bench/transformer.py --hlo``'s last column)."""
    counts = re.findall(r"^(generic|hand) (fwd\+bwd|fwd) .*?(\d+)$", done.stdout, re.M)
    if len(counts) != 4:
        raise ValueError("no kernel table")
    return "kernels: " + ", ".join(f"{who} {what} {n}" for who, what, n in counts)


def table_rows(output: str, columns: int) -> list[list[str]]:
    """The cells of each row of a bench's Markdown table in ``output``: a line of ``columns`` cells whose
    first is a number (a size); a ValueError if there is none."""
    rows = [[cell.strip() for cell in line.strip().strip("|").split("|")] for line in output.splitlines()]
    found = [cells for cells in rows if len(cells) == columns and cells[0].isdigit()]
    if not found:
        raise ValueError("no rows")
    return found


def attention_rows(done: subprocess.CompletedProcess[str]) -> str:
    """Each path's time and memory over the fused attention's, at each size the bench ran."""
    parts = []
    for positions, path, _, _, time_ratio, memory, memory_ratio in table_rows(done.stdout, 7):
        if path != "fused":
            timed = f"{time_ratio} time" if time_ratio else memory or "not timed"
            parts.append(f"{positions} {path}: {timed}" + (f", {memory_ratio} memory" if memory_ratio else ""))
    return "; ".join(parts)


def trees_rows(done: subprocess.CompletedProcess[str]) -> str:
    """Each row of the table: its attention, and the steps' times and ratio, or why they are not timed."""
    parts = []
    for _, attention, compile_time, tree, vec, ratio, memory in table_rows(done.stdout, 7):
        if ratio:
            parts.append(f"{attention}: tree {tree}, Vec {vec}, {ratio}x (compile {compile_time})")
        else:
            parts.append(f"{attention}: {tree}" + (f" ({memory})" if memory else ""))
    return "; ".join(parts)


def precision_rows(done: subprocess.CompletedProcess[str]) -> str:
    """Each compute's seconds a step and test accuracy, and the ratio of the two times."""
    rows = re.findall(r"^\| (float32|bfloat16[^|]*) \| (\S+) \| (\S+) \|$", done.stdout, re.M)
    ratio = re.search(r"^ratio bfloat16/float32 seconds a step: (\S+)$", done.stdout, re.M)
    if len(rows) != 2 or ratio is None:
        raise ValueError("no table")
    parts = [f"{name.split(',')[0]}: {seconds} s a step, accuracy {correct}" for name, seconds, correct in rows]
    return "; ".join(parts) + f"; bfloat16/float32 time {ratio.group(1)}"


def graphs_rows(done: subprocess.CompletedProcess[str]) -> str:
    """At each size: both paths' milliseconds and temporary megabytes (or why not), and the sparse path's
    over the dense one's."""
    parts = []
    for nodes, edges, path, ms, time_ratio, memory, memory_ratio in table_rows(done.stdout, 7):
        timed = f"{ms} ms" if ms else "not timed"
        ratios = f" (sparse / dense: time {time_ratio or '-'}, memory {memory_ratio or '-'})"
        ratios = ratios if path == "sparse" else ""
        parts.append(f"{nodes} nodes, {edges} edges, {path}: {timed}, {memory} MB{ratios}")
    return "; ".join(parts)


def training(directory: Path) -> Callable[[subprocess.CompletedProcess[str]], str]:
    """The test error and training time that the run in ``directory`` records (its metrics.json)."""

    def result(_: subprocess.CompletedProcess[str]) -> str:
        metrics = json.loads((directory / "metrics.json").read_text())
        test = metrics["test"]
        return (
            f"test error mean {test['mean']:.2e}, median {test['median']:.2e} ({metrics['test_size']} samples); "
            f"{metrics['steps']} steps in {metrics['train_seconds']:.1f} s"
        )

    return result


# The checks

TOOLS = {
    "mypy": ("tests/test_typing.py", "tests/test_readme.py", "tests/test_guide.py"),
    "mkdocs": ("tests/test_site.py",),
    "tensorboardX": ("tests/applicative/test_training_fit.py",),
}
"""The development tools (``pyproject.toml``'s ``dev`` extra) that a GPU machine's image may lack, and the
test files that need each: run by mypy or mkdocs, or importing it."""


def missing_tools() -> dict[str, tuple[str, ...]]:
    """The tools of ``TOOLS`` this Python cannot import, with their test files."""
    return {tool: files for tool, files in TOOLS.items() if importlib.util.find_spec(tool) is None}


def suite_result(left_out: dict[str, tuple[str, ...]]) -> Callable[[subprocess.CompletedProcess[str]], str]:
    """``pytest_counts``, and the test files left out for want of a tool, by name."""

    def result(done: subprocess.CompletedProcess[str]) -> str:
        gone = "; ".join(f"{', '.join(Path(f).name for f in files)} left out ({tool} not installed)"
                         for tool, files in left_out.items())  # fmt: skip
        return pytest_counts(done) + (f" [{gone}]" if gone else "")

    return result


def checks(tiny: bool, runs: Path, workers: int) -> list[Check]:
    """The checks, in the order they run."""
    no_preallocation = (("XLA_PYTHON_CLIENT_PREALLOCATE", "false"),)  # several workers share one GPU
    left_out = missing_tools()
    tests = TINY_SUITE if tiny else tuple(f"--ignore={f}" for files in left_out.values() for f in files)
    small, large, chunk = (8, 16, 3) if tiny else (1024, 16384, 128)
    positions = ("16", "64") if tiny else ("1024", "16384")
    nodes = ("64", "128") if tiny else ("1024", "16384")
    every = [
        Check("device", ("-c", DEVICE), 120, device),
        Check(f"pytest -n {workers}", ("-m", "pytest", "-n", str(workers), "-v", "-p", "no:cacheprovider", *tests),
              SUITE_SECONDS, suite_result(left_out), no_preallocation, failed_so_far),
        Check(f"bench/attention.py at {' and '.join(positions)} positions",
              ("bench/attention.py", "--positions", *positions, *(["--smoke"] if tiny else ["--dtype", "bfloat16"])),
              150, attention_rows),
        Check("bench/precision.py", ("bench/precision.py", *(["--smoke"] if tiny else [])), 150, precision_rows),
        Check(f"bench/graphs.py at {' and '.join(nodes)} nodes",
              ("bench/graphs.py", "--nodes", *nodes, *(["--smoke"] if tiny else ["--repeats", "3"])), 150, graphs_rows),
        Check(f"bench/trees.py at {small} leaves", ("bench/trees.py", "--sizes", str(small), "--chunk", str(chunk),
              "--time-up-to", str(small)), 150, trees_rows),
        Check(f"bench/trees.py at {large} leaves", ("bench/trees.py", "--sizes", str(large), "--chunk", str(chunk),
              "--time-up-to", str(small)), 120, trees_rows),
        Check("bench/transformer.py", ("bench/transformer.py", *(["--smoke"] if tiny else [])), 150,
              transformer_ratios),
        Check("kernels: bench/transformer.py --hlo",
              ("bench/transformer.py", "--hlo", *(["--smoke"] if tiny else [])), 120, kernel_counts),
    ]  # fmt: skip
    for task in ("poisson", "darcy"):
        flags = TINY_TRAINING if tiny else TRAINING
        out = runs / task
        command = ("-m", f"funcformer.{task}", "train", "--out", str(out), *flags, "--quiet")
        every.append(Check(f"{task} train {' '.join(flags[:2])}", command, 150, training(out)))
    return every


RUNNING: set[int] = set()
"""The process groups of the checks under way (each check's process leads a session of its own)."""
STOPPED = threading.Event()
"""Set when this script is told to stop: no check starts after."""


def end_running(signum: int, _: object) -> None:
    """Ends the checks under way, then this script: a check left running would hold the GPU."""
    STOPPED.set()
    for group in list(RUNNING):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(group, signal.SIGKILL)
    raise SystemExit(128 + signum)


def run(check: Check, deadline: float, log: list[str]) -> Row:
    """``check`` as a row: run, failed, timed out or not started for want of time before ``deadline``."""
    left = deadline - time.monotonic()
    if left < LEAST or STOPPED.is_set():
        return Row(check.name, "not run: " + ("stopped" if STOPPED.is_set() else "out of time"), 0.0, "")
    timeout = min(check.timeout, left)
    command = [sys.executable, *check.arguments]
    environment = {**os.environ, "PYTHONUNBUFFERED": "1", **dict(check.environment)}
    start = time.monotonic()
    # A session of its own: a timeout ends the check's process group, its own subprocesses too.
    process = subprocess.Popen(command, cwd=ROOT, env=environment, text=True, start_new_session=True,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # fmt: skip
    RUNNING.add(process.pid)
    try:
        stdout, stderr = process.communicate(timeout=timeout)
        timed_out = False
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        stdout, stderr = process.communicate()
        timed_out = True
    finally:
        RUNNING.discard(process.pid)
    seconds = time.monotonic() - start
    log.append(f"$ {shlex.join(command)}\n{stdout}{stderr}\n")
    done = subprocess.CompletedProcess(command, process.returncode, stdout, stderr)
    if timed_out:
        return Row(check.name, f"timed out after {timeout:.0f} s", seconds, check.partial(stdout))
    try:
        result = check.result(done)
    except Exception as error:  # a failed check's output: its last words instead
        result = last_line(stderr or stdout) if done.returncode else f"output not understood: {error!r}"
        return Row(check.name, f"failed (exit {done.returncode})" if done.returncode else "failed", seconds, result)
    return Row(check.name, "ok" if done.returncode == 0 else f"failed (exit {done.returncode})", seconds, result)


def last_line(text: str) -> str:
    lines = [line for line in text.splitlines() if line.strip()]
    return lines[-1].strip()[:200] if lines else ""


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, help="also write the table to this file")
    parser.add_argument("--log", type=Path, help="write each check's command and output to this file")
    parser.add_argument("--tiny", action="store_true", help="every check at a tiny size (the suite's smoke run)")
    parser.add_argument("--budget", type=float, default=BUDGET, help="seconds for all checks (default %(default)s)")
    parser.add_argument(
        "--workers", type=int, default=None, help="the suite's pytest workers (default: CPU cores - 1, 2 to 16)"
    )
    args = parser.parse_args(argv)
    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, end_running)
    deadline = time.monotonic() + args.budget
    lines = [f"$ python {shlex.join(['bench/gpu.py', *(argv if argv is not None else sys.argv[1:])])}", "", HEADER]
    log: list[str] = []

    def emit(row: Row) -> None:
        lines.append(row.line())
        print(row.line(), flush=True)
        if args.out:
            args.out.write_text("\n".join(lines) + "\n")
        if args.log:
            args.log.write_text("\n".join(log))

    print("\n".join(lines), flush=True)
    workers = args.workers or (2 if args.tiny else min(16, max(2, (os.cpu_count() or 1) - 1)))
    with tempfile.TemporaryDirectory(prefix="gpu-check-") as runs:
        for check in checks(args.tiny, Path(runs), workers):
            emit(run(check, deadline, log))


if __name__ == "__main__":
    main()
