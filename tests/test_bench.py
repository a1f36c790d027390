"""Every script of bench/ runs at a tiny size and prints its figures: a refactor that breaks a benchmark
fails here, not when someone next runs the command behind a figure of the documentation (issue 32).

Each script runs as its users run it, ``python bench/SCRIPT.py`` from the repository root, in a process
of its own, at the tiny size it offers (``--smoke``, or its own size flags), and what it prints is read:
its ratios are finite positive numbers, its tables have their rows. So do the two tools of
tools/, in their cheap modes: ``mutants.py --list`` (the mutants and whether each still applies) and
``site.py --help`` (the rest needs Chromium and selenium, which the project does not install).
What a GPU alone can show is simulated: an allocation that fails (``_timing.or_does_not_fit``: a row
that does not fit, and the table goes on), and ``gpu.py``'s rows for a check that fails or times out.

The processes share, for this session only, a dataset cache (``FUNCFORMER_CACHE``) and JAX's
persistent compilation cache, and compile as the suite does (the ``XLA_FLAGS`` they inherit,
tests/compiling.py): the smoke runs' timings mean nothing, only that the scripts complete and that the
generic and hand-written models still agree.
"""

from __future__ import annotations

import importlib
import importlib.util
import math
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from types import ModuleType
from typing import Any

import jax
import pytest
from filelock import FileLock

from tests import once

ROOT = Path(__file__).resolve().parent.parent
NUMBER = r"[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?"


@pytest.fixture(scope="session")
def shared(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory for this session's caches, shared by the xdist workers (``tests/once.py``)."""
    directory = once.shared(tmp_path_factory) / "bench-smoke"
    directory.mkdir(exist_ok=True)
    return directory


@pytest.fixture(scope="session")
def scales(shared: Path) -> Path:
    """``shared``, its dataset cache holding the 1024 samples that every training run of a task starts
    with (``output_scale``; Darcy's take seconds to solve): made once, here, rather than by two scripts
    at the same time."""
    from funcformer.darcy import PROBLEM as DARCY  # here: a worker that runs no training imports none of it
    from funcformer.learning.data import output_scale
    from funcformer.poisson import PROBLEM as POISSON

    with FileLock(shared / "scales.lock"), pytest.MonkeyPatch.context() as patch:
        patch.setenv("FUNCFORMER_CACHE", str(shared / "datasets"))
        for problem in (POISSON, DARCY):
            output_scale(problem, problem.data_config())
    return shared


def bench(shared: Path, script: str, *arguments: str) -> str:
    """``python bench/<script> <arguments>`` from the repository root: its standard output, once it has
    exited 0."""
    return run(shared, f"bench/{script}", *arguments)


def run(shared: Path, path: str, *arguments: str) -> str:
    """``python <path> <arguments>`` from the repository root: its standard output, once it has exited 0."""
    env = {
        **os.environ,
        "FUNCFORMER_CACHE": str(shared / "datasets"),
        "JAX_COMPILATION_CACHE_DIR": str(shared / "jax"),
        "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS": "0",
        "JAX_COMPILATION_CACHE_MAX_SIZE": str(2**30),  # a size makes JAX lock the cache's files: processes share it
        "JAX_PLATFORMS": "cpu",
    }
    command = [sys.executable, path, *arguments]
    result = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, check=False, timeout=300)
    assert result.returncode == 0, f"{' '.join(command)} exited {result.returncode}:\n{result.stderr[-4000:]}"
    return result.stdout


def positive(text: str) -> float:
    """A printed number that must be finite and positive."""
    value = float(text)
    assert math.isfinite(value), text
    assert value > 0, text
    return value


def last_line(out: str, label: str) -> float:
    """The number of the output's last line, ``<label>: X.XX``."""
    last = out.strip().splitlines()[-1]
    match = re.fullmatch(rf"{re.escape(label)}: ({NUMBER})", last)
    assert match, f"last line {last!r}, expected {label}: X.XX"
    return positive(match[1])


def rows(out: str, header: str) -> list[list[str]]:
    """The cells of the rows of the Markdown table whose header row starts with ``header``."""
    lines = out.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith(header)), None)
    assert start is not None, f"no table headed {header!r} in:\n{out}"
    assert re.fullmatch(r"\|(\s*-+\s*\|)+", lines[start + 1]), lines[start + 1]
    table = []
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        table.append([cell.strip() for cell in line.strip().strip("|").split("|")])
    assert table, f"the table headed {header!r} has no rows"
    return table


def row(table: list[list[str]], first: str) -> list[str]:
    """The cells of the row whose first cell starts with ``first``."""
    found = [cells for cells in table if cells[0].startswith(first)]
    assert len(found) == 1, f"{len(found)} rows start with {first!r}: {table}"
    return found[0]


def duration(cell: str) -> float:
    """Seconds of a printed duration: ``1.2 s``, ``3.40 ms``, ``5.60 us`` (``0 ms`` where a step took
    less than half a millisecond, printed to the millisecond)."""
    match = re.fullmatch(rf"({NUMBER}) (s|ms|us)", cell)
    assert match, cell
    seconds = float(match[1]) * {"s": 1.0, "ms": 1e-3, "us": 1e-6}[match[2]]
    assert math.isfinite(seconds), cell
    assert seconds >= 0, cell
    return seconds


def script(monkeypatch: pytest.MonkeyPatch, name: str) -> ModuleType:
    """``bench/<name>.py`` imported as the module ``bench_<name>``, bench/ on ``sys.path`` (as the scripts
    put it, for ``_timing`` and ``_report``) until the test ends."""
    monkeypatch.syspath_prepend(str(ROOT / "bench"))
    spec = importlib.util.spec_from_file_location(f"bench_{name}", ROOT / "bench" / f"{name}.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, module)  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


# The generic code against hand-written jax.numpy


@pytest.mark.end_to_end
def test_funcformer_checks_the_generic_against_the_hand_written_funcformer_and_prints_the_ratio(
    shared: Path,
) -> None:
    out = bench(shared, "funcformer.py", "--smoke")
    agreement = re.search(rf"relative difference ({NUMBER})\); gradients differ by ({NUMBER}) of the largest", out)
    assert agreement, out
    assert float(agreement[1]) < 1e-4
    assert float(agreement[2]) < 1e-3
    generic, hand, ratio = re.findall(rf"^  2 channels +({NUMBER}) +({NUMBER}) +({NUMBER})$", out, re.M)[0]
    # the times are printed to 0.01 ms, the ratio of the unrounded ones to 0.01
    assert positive(ratio) == pytest.approx(positive(generic) / positive(hand), rel=0.1, abs=0.01)
    assert last_line(out, "ratio generic/hand-written train step") == float(ratio)  # the largest of one


@pytest.mark.end_to_end
def test_transformer_checks_the_generic_against_the_hand_written_encoder_and_prints_the_ratios(shared: Path) -> None:
    out = bench(shared, "transformer.py", "--smoke")
    difference = re.search(rf"max gradient difference / max \|gradient\| = ({NUMBER})", out)
    assert difference, out
    assert float(difference[1]) < 1e-3
    for label in ("forward", "forward+backward", "forward, 8 in flight", "forward+backward, 8 in flight"):
        ratio = re.search(rf"^ratio {re.escape(label)}: ({NUMBER})$", out, re.M)
        assert ratio, (label, out)
        positive(ratio[1])
    host = rf"({NUMBER}) us forward, ({NUMBER}) us with the gradient"
    assert re.search(rf"^the generic model's host time per call over the hand-written one's: {host}$", out, re.M)


@pytest.mark.end_to_end
def test_attention_times_every_path_beside_the_fused_kernel(shared: Path) -> None:
    out = bench(shared, "attention.py", "--smoke", "--positions", "16", "64", "--function-up-to", "16")
    table = rows(out, "| positions | path |")
    paths = ["fused", "Vec", "Vec, materialised", "tree", "function"]
    assert [cells[:3] for cells in table] == [[n, p, "float32"] for n in ("16", "64") for p in paths]
    for positions, path, _, ms, time_ratio, memory, memory_ratio in table:
        if (positions, path) == ("64", "function"):
            assert (ms, memory) == ("", "not run (above --function-up-to)")
            continue
        positive(ms)
        assert positive(time_ratio) == 1.0 or path != "fused"
        assert float(memory) >= 0
        if memory_ratio:
            positive(memory_ratio)


@pytest.mark.end_to_end
def test_graphs_times_attention_over_the_edges_beside_the_dense_mask(shared: Path) -> None:
    out = bench(shared, "graphs.py", "--nodes", "16", "48", "--edges-per-node", "2", "--smoke")
    table = rows(out, "| nodes | edges |")
    sizes = (("16", "32"), ("48", "96"))
    assert [cells[:3] for cells in table] == [[n, e, p] for n, e in sizes for p in ("sparse", "dense")]
    for _, _, path, ms, time_ratio, memory, memory_ratio in table:
        positive(ms)
        assert float(memory) >= 0
        if path == "sparse":
            positive(time_ratio)
            positive(memory_ratio)


def logged(log: str, command: str) -> str:
    """What the one check of ``bench/gpu.py``'s log whose command ends with ``command`` printed."""
    found = [
        part.partition("\n")[2]
        for part in re.split(r"^\$ ", log, flags=re.M)
        if part.partition("\n")[0].endswith(command)
    ]
    assert len(found) == 1, f"{len(found)} commands of the log end with {command!r}"
    return found[0]


def check_trees_table(out: str, leaves: str, timed: bool) -> None:
    """``bench/trees.py``'s table at ``leaves`` leaves in chunks of 3: a row materialised and one in chunks,
    each with its compile time and the two steps' memory, and, where ``timed``, the steps' times and ratio."""
    table = rows(out, "| leaves |")
    assert [cells[:2] for cells in table] == [[leaves, "materialised"], [leaves, "chunks of 3"]]
    for _, _, compile_time, tree_step, vec_step, ratio, memory in table:
        duration(compile_time)
        assert re.fullmatch(rf"{NUMBER} / {NUMBER} GB", memory), memory
        if not timed:
            assert (tree_step, vec_step, ratio) == ("not timed", "", "")
            continue
        duration(tree_step)
        duration(vec_step)
        positive(ratio)


OUT_OF_MEMORY = [
    # XLA's words on a GPU, compiling (the autotuner's scratch) and running; 128 GiB = 137,438,953,472 bytes
    ("RESOURCE_EXHAUSTED: Out of memory while trying to allocate 137438953472 bytes.", "137.4 GB"),
    ("RESOURCE_EXHAUSTED: Failed to allocate request for 128.00GiB (137438953472B) on device ordinal 0", "137.4 GB"),
    ("INTERNAL: Autotuning failed: out of memory trying to allocate 2.5GB", "2.5 GB"),
    ("RESOURCE_EXHAUSTED: XLA:TPU compile permanent error. Ran out of memory in memory space vmem.", None),
]


@pytest.mark.parametrize(("message", "asked"), OUT_OF_MEMORY)
def test_a_failed_allocation_is_a_row_that_does_not_fit(
    monkeypatch: pytest.MonkeyPatch, message: str, asked: str | None
) -> None:
    timing = script(monkeypatch, "_timing")

    def measure() -> dict[str, float]:
        raise jax.errors.JaxRuntimeError(message)  # jaxlib's XlaRuntimeError, on every JAX the project admits

    failure = timing.or_does_not_fit(measure)
    assert isinstance(failure, timing.DoesNotFit)
    assert str(failure) == ("does not fit" if asked is None else f"does not fit (asked for {asked})")


def test_only_a_failed_allocation_does_not_fit(monkeypatch: pytest.MonkeyPatch) -> None:
    timing = script(monkeypatch, "_timing")
    assert timing.or_does_not_fit(lambda: {"ratio": 1.5}) == {"ratio": 1.5}

    def host() -> None:
        raise MemoryError

    assert str(timing.or_does_not_fit(host)) == "does not fit"
    errors = [
        jax.errors.JaxRuntimeError("INVALID_ARGUMENT: Executable expected parameter 0 of size 8 but got 16"),
        ValueError("out of memory, but not a runtime error of JAX's"),
        RuntimeError("RESOURCE_EXHAUSTED, but not from JAX"),
    ]
    for error in errors:

        def fails(error: Exception = error) -> None:
            raise error

        with pytest.raises(type(error)) as raised:
            timing.or_does_not_fit(fails)
        assert raised.value is error


def test_trees_prints_a_size_that_does_not_fit_and_goes_on_to_the_chunked_row(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    trees = script(monkeypatch, "trees")

    def dense_row(n: int, chunk: int | None, timed: bool) -> dict[str, Any]:
        if chunk is None:  # as XLA's autotuner on an H100, compiling 16,384 leaves materialised
            raise jax.errors.JaxRuntimeError(
                "RESOURCE_EXHAUSTED: Out of memory while trying to allocate 137438953472 bytes."
            )
        return {"n": n, "chunk": chunk, "tree_compile": 2.0, "tree_memory": 1.25, "vec_memory": 0.5}

    monkeypatch.setattr(trees, "dense_row", dense_row)
    trees.main(["--sizes", "16384", "--time-up-to", "4096"])
    table = rows(capsys.readouterr().out, "| leaves |")
    assert table == [
        ["16384", "materialised", "", "does not fit (asked for 137.4 GB)", "", "", ""],
        ["16384", "chunks of 128", "2.0 s", "not timed", "", "", "1.25 / 0.50 GB"],
    ]

    def broken(n: int, chunk: int | None, timed: bool) -> dict[str, Any]:
        raise jax.errors.JaxRuntimeError("INTERNAL: ptxas exited with non-zero error code")

    monkeypatch.setattr(trees, "dense_row", broken)
    with pytest.raises(jax.errors.JaxRuntimeError, match="ptxas"):
        trees.main(["--sizes", "16384"])


# The GPU machine's checks


def test_attention_measures_the_memory_of_a_path_too_large_to_time(monkeypatch: pytest.MonkeyPatch) -> None:
    attention = script(monkeypatch, "attention")
    monkeypatch.setattr(attention, "device_memory", lambda: 0.0)  # nothing fits: every path compiled, none timed
    table = [line.strip("|").split("|") for line in attention.rows(8, jax.numpy.dtype("float32"), 1, 8, 1, 4)]
    cells = [[cell.strip() for cell in row] for row in table]
    torch = importlib.util.find_spec("torch") is not None  # PyTorch's row, where it is installed, is timed
    assert [row[1] for row in cells] == ["fused", "Vec", "Vec, materialised", "tree", "function"] + ["torch"] * torch
    for _, path, _, ms, time_ratio, memory, _ in cells[:4]:
        assert (ms, time_ratio) == ("", ""), path
        assert re.fullmatch(rf"{NUMBER} \(not timed: above 60% of the device's memory\)", memory), memory
    assert cells[4][3:6] == ["", "", "not run (above --function-up-to)"]


def test_gpu_checks_make_a_row_of_a_failure_a_timeout_and_a_check_without_time(monkeypatch: pytest.MonkeyPatch) -> None:
    gpu = script(monkeypatch, "gpu")
    log: list[str] = []
    later = time.monotonic() + 60

    def check(name: str, code: str, timeout: float = 30) -> Any:
        return gpu.Check(name, ("-c", code), timeout, gpu.pytest_counts)

    failed = gpu.run(check("fails", "import sys; print('1 passed'); sys.exit('boom')"), later, log)
    assert (failed.status, failed.result) == ("failed (exit 1)", "boom")
    pytest_like = gpu.run(
        check("tests", "import sys; print('F.\\n1 failed, 1 passed in 0.01s'); sys.exit(1)"), later, log
    )
    assert (pytest_like.status, pytest_like.result) == ("failed (exit 1)", "1 failed, 1 passed")
    failing = "print('FAILED tests/a/test_x.py::t[f32] - E\\n1 failed, 1 passed in 1.0s')"
    named = gpu.run(check("tests", failing), later, log)
    assert named.result == "1 failed, 1 passed: test_x.py::t[f32]"  # the failed tests by name
    passed = gpu.run(check("tests", "print('2 passed, 1 deselected in 3.20s (0:00:03)')"), later, log)
    assert (passed.status, passed.result) == ("ok", "2 passed, 1 deselected")
    assert passed.line() == f"| tests | ok | {passed.seconds:.0f} | 2 passed, 1 deselected |"
    not_understood = gpu.run(check("tests", "print('no summary')"), later, log)
    assert not_understood.status == "failed"
    assert not_understood.result.startswith("output not understood")
    start = time.monotonic()
    slow = gpu.run(check("sleeps", "import time; print('a row', flush=True); time.sleep(60)", timeout=1), later, log)
    assert time.monotonic() - start < 30
    assert (slow.status, slow.result) == ("timed out after 1 s", "a row")
    verbose = "[gw0] [ 50%] PASSED tests/a/test_y.py::v\\n[gw1] [ 99%] FAILED tests/a/test_y.py::u[a b] "
    code = f"print('{verbose}', flush=True); import time; time.sleep(60)"
    stopped = gpu.run(gpu.Check("suite", ("-c", code), 1, gpu.pytest_counts, (), gpu.failed_so_far), later, log)
    assert (stopped.status, stopped.result) == ("timed out after 1 s", "by then 1 passed, 1 failed: test_y.py::u[a b]")
    late = gpu.run(check("too late", "print(1)"), time.monotonic() + 1, log)
    assert (late.status, late.seconds, late.result) == ("not run: out of time", 0.0, "")
    assert len(log) == 7  # the seven that ran, with their commands


def test_gpu_suite_leaves_out_the_files_of_a_missing_tool_and_says_so(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    gpu = script(monkeypatch, "gpu")
    monkeypatch.setattr(gpu, "TOOLS", {"no_such_tool_here": ("tests/test_site.py",), "json": ("tests/x.py",)})
    suite = gpu.checks(False, tmp_path, 2)[1]
    assert suite.arguments[-1:] == ("--ignore=tests/test_site.py",)  # json is there: its file runs
    done = subprocess.CompletedProcess(suite.arguments, 0, "2 passed in 1.00s\n", "")
    assert suite.result(done) == "2 passed [test_site.py left out (no_such_tool_here not installed)]"


@pytest.mark.slow  # eight processes: about 45 s on 2 cores
def test_gpu_runs_every_check_at_a_tiny_size_and_writes_its_table(scales: Path, tmp_path: Path) -> None:
    out = run(scales, "bench/gpu.py", "--tiny", "--out", str(tmp_path / "gpu.md"), "--log", str(tmp_path / "log"))
    table = rows(out, "| check | status | seconds | result |")
    assert (tmp_path / "gpu.md").read_text() == out
    assert [cells[0] for cells in table][:1] == ["device"]
    names = [cells[0] for cells in table[1:]]
    assert names == [
        "pytest -n 2", "bench/attention.py at 16 and 64 positions", "bench/precision.py",
        "bench/graphs.py at 64 and 128 nodes", "bench/trees.py at 8 leaves", "bench/trees.py at 16 leaves",
        "bench/transformer.py", "kernels: bench/transformer.py --hlo", "poisson train --steps 2",
        "darcy train --steps 2",
    ]  # fmt: skip
    for name, status, seconds, result in table:
        assert status == "ok", (name, result)
        assert int(seconds) >= 0
    assert re.fullmatch(rf"cpu \(cpu, 1 device\); JAX {re.escape(jax.__version__)}, jaxlib .*", row(table, "device")[3])
    assert row(table, "pytest -n 2")[3] == "3 passed"
    assert re.fullmatch(
        rf"generic / hand-written: forward {NUMBER}, forward\+backward {NUMBER}; forward, 8 in flight {NUMBER}; "
        rf"forward\+backward, 8 in flight {NUMBER}; generic's extra host time {NUMBER} us forward, {NUMBER} us with "
        rf"the gradient",
        row(table, "bench/transformer.py")[3],
    )
    assert re.fullmatch(r"kernels: generic fwd \d+, hand fwd \d+, generic fwd\+bwd \d+, hand fwd\+bwd \d+",
                        row(table, "kernels: bench/transformer.py --hlo")[3])  # fmt: skip
    attention = row(table, "bench/attention.py at 16 and 64 positions")[3]
    part = rf"\d+ [^:;]+: {NUMBER} time(, {NUMBER} memory)?"
    assert re.fullmatch(rf"({part}; )+{part}", attention), attention
    assert attention.count("; ") == 7  # both sizes, each path but the fused one
    assert row(table, "bench/trees.py at 16 leaves")[3].count("not timed") == 2
    log = (tmp_path / "log").read_text()
    for leaves in ("8", "16"):  # the whole tables, in the log (the suite's only run of bench/trees.py)
        check_trees_table(
            logged(log, f"bench/trees.py --sizes {leaves} --chunk 3 --time-up-to 8"), leaves, leaves == "8"
        )
    assert re.fullmatch(rf"float32: {NUMBER} s a step, accuracy {NUMBER}; bfloat16: {NUMBER} s a step, accuracy "
                        rf"{NUMBER}; bfloat16/float32 time {NUMBER}", row(table, "bench/precision.py")[3])  # fmt: skip
    graph = rf"\d+ nodes, \d+ edges, (sparse|dense): {NUMBER} ms, {NUMBER} MB"
    assert re.fullmatch(rf"({graph} \(sparse / dense: time {NUMBER}, memory {NUMBER}\); {graph}(; )?){{2}}",
                        row(table, "bench/graphs.py at 64 and 128 nodes")[3])  # fmt: skip
    for task in ("poisson", "darcy"):
        assert re.fullmatch(rf"test error mean {NUMBER}, median {NUMBER} \(8 samples\); 2 steps in {NUMBER} s",
                            row(table, task)[3])  # fmt: skip
    assert len(re.findall(r"^\$ ", log, re.M)) == 11  # each check's command


# The training loop and the tasks' baselines, searches and checks


@pytest.mark.slow
def test_init_times_the_blocks_against_a_draw_per_weight_in_fresh_processes(shared: Path) -> None:
    out = bench(shared, "init.py", "--smoke")
    _, weights, scalars, *cases = row(rows(out, "| model | weights |"), "tiny")
    assert int(weights) > 10
    assert int(scalars.replace(",", "")) > 1000
    assert len(cases) == 3  # blocks, per weight eagerly, per weight under jit
    for cell in cases:
        first, again = (duration(part.strip()) for part in cell.split("/"))
        assert first > again  # the first call compiles
    last_line(out, "ratio first call, per weight / blocks")


@pytest.mark.end_to_end
def test_training_loop_times_the_loop_against_its_steps_for_both_tasks(scales: Path) -> None:
    out = bench(scales, "training_loop.py", "--smoke")
    for task in ("Poisson", "Darcy"):
        assert f"{task} (default model)" in out
    tables = re.findall(r"^\| 2 \|.*$", out, re.M)  # one row a task: batch 2
    assert len(tables) == 2, out
    for line in tables:
        for cell in line.strip("|").split("|")[1:]:
            positive(cell)
    last_line(out, "ratio loop/step")


@pytest.mark.end_to_end
def test_precision_trains_in_float32_and_bfloat16_and_prints_the_ratio(shared: Path) -> None:
    out = bench(shared, "precision.py", "--smoke")
    table = rows(out, "| compute | seconds a step | test token accuracy |")
    assert [row[0] for row in table] == ["float32", "bfloat16, float32 parameters"]
    for row in table:
        positive(row[1])
        assert 0 <= float(row[2]) <= 1
    last_line(out, "ratio bfloat16/float32 seconds a step")


@pytest.mark.end_to_end
def test_poisson_baselines_prints_its_three_tables(shared: Path) -> None:
    out = bench(shared, "poisson_baselines.py", "--smoke")
    accuracy = rows(out, "| predictor | mean | median | p95 | fit / training |")
    for cell in row(accuracy, "truncation floor")[1:4] + row(accuracy, "least squares on k = 16")[1:4]:
        positive(cell)
    timing = rows(out, "| predictor | batch 1 | ratio | batch 4 | ratio |")
    assert row(timing, "exact spectral solver")[2::2] == ["1.00", "1.00"]
    for cell in row(timing, "least squares, k = 16")[2::2]:
        positive(cell)
    families = rows(out, "| family | predictor |")
    assert {cells[0] for cells in families} >= {"in_distribution", "slow_decay"}


@pytest.mark.end_to_end
def test_darcy_baselines_prints_its_tables(shared: Path) -> None:
    out = bench(shared, "darcy_baselines.py", "--smoke")
    accuracy = rows(out, "| predictor | mean | median | p95 |")
    for cell in row(accuracy, "affine least squares on the normalised inputs")[1:]:
        positive(cell)
    speed = rows(out, "| predictor | parameters | training | per sample | ratio |")
    assert row(speed, "exact solver, GMRES")[4] == "1"
    dense = row(speed, "exact solver, dense LU (2 samples)")
    duration(dense[3])
    positive(dense[4])
    assert "## Out of distribution, kappa with twice the amplitude" in out


@pytest.mark.end_to_end
@pytest.mark.parametrize(("script", "trial"), [("poisson_search.py", "12"), ("darcy_search.py", "7")])
def test_search_trains_a_trial_and_prints_its_errors_and_time(scales: Path, script: str, trial: str) -> None:
    out = bench(scales, script, "--smoke", "--only", trial)
    lines = out.strip().splitlines()
    assert len(lines) == 2, out
    match = re.fullmatch(rf"{trial} +\S.*?  ({NUMBER})  ({NUMBER})  ({NUMBER}) +(\d+) s", lines[1])
    assert match, lines[1]
    for value in match.groups()[:3]:
        positive(value)


@pytest.mark.slow
def test_trust_trains_tiny_runs_and_prints_its_tables(scales: Path, tmp_path: Path) -> None:
    out = bench(scales, "trust.py", "--smoke", "--poisson", str(tmp_path / "p"), "--darcy", str(tmp_path / "d"))
    for task in ("Poisson", "Darcy"):
        assert f"(training the tiny {task} run into" in out
        assert f"## {task}: flagging the bad predictions" in out
        assert f"## {task}: time per sample at batch 8" in out
    errors = rows(out, "| set | samples | floor: median |")
    assert row(errors, "in distribution (held out)")[1] == "8"
    for cells in rows(out, "| | per sample |"):  # the first task's, Poisson
        duration(cells[1])
    assert out.count("| all sets pooled |") == 4
    assert re.search(r"^total \d+ s$", out, re.M)


# The tools


def test_mutants_lists_the_mutants(shared: Path) -> None:
    out = run(shared, "tools/mutants.py", "--list")
    listed = rows(out, "| id | file | applies | tests |")
    assert len(listed) >= 10
    for cells in listed:
        assert (ROOT / cells[1]).is_file(), cells
        assert cells[2] == "yes", cells  # each curated mutant's snippet found once: none gone stale unnoticed


def test_site_describes_itself_without_a_browser(shared: Path) -> None:
    out = run(shared, "tools/site.py", "--help")
    assert out.startswith("usage: site.py")
    assert "The documentation site in a real browser" in out


@pytest.mark.slow
def test_fno_darcy_trains_both_models_and_prints_the_table_beside_the_published_rows(shared: Path) -> None:
    out = bench(shared, "fno_darcy.py", "--smoke", "--solver-nodes", "40", "15")
    table = rows(out, "| method | all | first |")
    ours = ("image to function", "image to function, correcting the solver at 15 nodes",
            "image to function, a ViT token a cell")  # fmt: skip
    # every model's learning curve, its test error after each epoch: the table's error at the last
    header = next(line for line in out.splitlines() if line.startswith("| epoch |"))
    assert [cell.strip() for cell in header.strip("|").split("|")] == ["epoch", *ours, "FNO"]
    curves = rows(out, "| epoch |")
    assert [cells[0] for cells in curves] == ["1", "2"]
    for label, last in zip((*ours, "FNO"), curves[-1][1:], strict=True):
        final = row(table, "FNO, the paper" if label == "FNO" else f"{label}, N = 4")[1]
        assert float(last) == pytest.approx(float(final), rel=0.01), label  # both printed to 3 digits
    assert re.search(r"curves\.png: the learning curves$", out, re.M)
    names = (
        *(f"{label}, N = 4 (this project)" for label in ours), "FNO, the paper's settings, trained here",
        "mean of the training solutions", "the recipe's solver on the s = 15 input, 15 x 15 nodes",
        "the recipe's solver on the s = 15 input, 29 x 29",
    )  # fmt: skip
    for name in names:
        _, every, first, *_ = row(table, name)
        positive(every)
        positive(first)
    for label in ours:
        cells = row(table, f"{label}, N = 4")
        assert re.search(rf"2 epochs, {NUMBER} (s|ms)", cells[3]), cells
        assert re.search(rf"floor of its 4 x 4 series {NUMBER}", cells[4]), cells
    published = {cells[0]: float(cells[1]) for cells in table if cells[0].endswith("(published)")}
    assert published["FNO (published)"] == 1.08e-2
    assert min(published.values()) == 4.9e-3
    for label in ours:
        section = out.split(f"## {label}: one model at every grid")[1]
        grids = rows(section, "| input \\ output |")
        assert [cells[0] for cells in grids] == ["s = 15", "s = 29", "truncation floor, N = 4"]
        for cells in grids:
            assert len(cells) == 3
            for cell in cells[1:]:
                positive(cell)
    for label in ("exact solver", *(f"{label}, u at s = 15" for label in ours), "FNO at s = 15"):
        assert re.search(rf"^{re.escape(label)}.*: {NUMBER} (s|ms|us)", out, re.M), label
    curve = re.findall(
        rf"^the recipe's solver on the s = 15 input at (\d+) nodes: ({NUMBER}), {NUMBER} (?:s|ms|us)", out, re.M
    )
    assert [int(nodes) for nodes, _ in curve] == [8, 11, 15, 22, 29, 40]
    errors = {int(nodes): float(error) for nodes, error in curve}
    assert errors[15] == float(row(table, "the recipe's solver on the s = 15 input, 15 x 15")[1])
