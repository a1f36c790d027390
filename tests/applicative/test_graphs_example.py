"""The graphs example: the CLRS port against the benchmark's own samples and against networkx, its score,
and a run through the learning layer (trained, killed, resumed, evaluated, asked) from Python and from the
command line."""

from __future__ import annotations

import dataclasses
import os
import signal
import subprocess
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, cast

import jax
import jax.numpy as jnp
import networkx as nx
import numpy as np
import pytest
from jax import Array

from applicative import Dim, Graph, Vec, to_array
from applicative.examples.graphs import clrs
from applicative.examples.graphs.cli import main
from applicative.examples.graphs.model import (
    Config,
    Edge,
    Hidden,
    MaxStep,
    Model,
    Triplet,
    batch_of,
    init_model,
    loss,
    most_extra,
    predict,
    steps_on,
)
from applicative.examples.graphs.model import _process as process
from applicative.examples.graphs.training import (
    answer,
    describe,
    evaluate,
    optimiser,
    settings,
    train,
    training_data,
    trivial,
)
from applicative.stacked import element
from applicative.training import Drawn
from applicative.training.files import CONFIG
from applicative.training.loop import _killed_after
from tests.applicative.tolerance import float32

REFERENCE = Path(__file__).parent / "data" / "clrs_reference.npz"
"""Samples ``dm-clrs`` 2.0.3 made (tools/clrs_reference.py): 8 training graphs of 16 nodes (seed 1) and 2 test
graphs of 64 nodes (seed 3) of each algorithm, their inputs and outputs."""


@pytest.mark.parametrize("name", list(clrs.ALGORITHMS))
def test_the_port_draws_the_benchmarks_graphs_and_outputs_sample_for_sample(name: str) -> None:
    reference = np.load(REFERENCE)
    for n, seed in ((16, 1), (64, 3)):
        expected = reference[f"{name}/{n}/A"]
        samples = clrs.sample(name, n, expected.shape[0], seed)
        np.testing.assert_array_equal(np.stack([s.adjacency for s in samples]), expected)
        np.testing.assert_array_equal([s.source for s in samples], reference[f"{name}/{n}/source"])
        for output in clrs.ALGORITHMS[name].outputs:
            got = np.stack([s.outputs[output.name] for s in samples])
            np.testing.assert_array_equal(got, reference[f"{name}/{n}/{output.name}"], err_msg=output.name)


def _nx(a: np.ndarray, directed: bool) -> nx.Graph[int]:
    g: nx.Graph[int] = nx.DiGraph() if directed else nx.Graph()
    g.add_nodes_from(range(a.shape[0]))
    g.add_weighted_edges_from((int(i), int(j), float(a[i, j])) for i, j in zip(*np.nonzero(a), strict=True))
    return g


def _path_length(pi: np.ndarray, a: np.ndarray, v: int) -> tuple[float, int]:
    """(weight, hops) of the path from the root of v's tree in ``pi`` to v."""
    total, hops = 0.0, 0
    while pi[v] != v:
        total, hops, v = total + a[pi[v], v], hops + 1, int(pi[v])
        assert hops <= len(pi), "the pointers hold a cycle"
    return total, hops


@pytest.mark.parametrize("name", list(clrs.ALGORITHMS))
def test_each_algorithms_output_is_what_networkx_says_of_its_graph(name: str) -> None:
    """An independent reference: networkx's algorithms on the same graphs (the outputs' ties aside)."""
    task = clrs.ALGORITHMS[name]
    for s in clrs.sample(name, 16, 6, 7) + clrs.sample(name, 32, 2, 8):
        a, n, out = s.adjacency, s.adjacency.shape[0], s.outputs
        g = _nx(a, task.graphs.directed)
        if name in ("bfs", "dijkstra", "bellman_ford", "dag_shortest_paths", "mst_prim"):
            pi = out["pi"]
            reached = nx.descendants(g, s.source) | {s.source}
            assert {v for v in range(n) if pi[v] != v} == reached - {s.source}
            assert all(a[pi[v], v] != 0 for v in reached - {s.source})
            if name == "bfs":
                hops = nx.single_source_shortest_path_length(g, s.source)
                assert all(_path_length(pi, a, v)[1] == hops[v] for v in reached)
            elif name == "mst_prim":
                tree = nx.minimum_spanning_tree(g.subgraph(reached))
                assert sum(a[pi[v], v] for v in reached - {s.source}) == pytest.approx(tree.size(weight="weight"))
            else:
                distance = nx.single_source_dijkstra_path_length(g, s.source)
                assert all(_path_length(pi, a, v)[0] == pytest.approx(distance[v]) for v in reached)
        elif name == "dfs":
            pi = out["pi"]
            assert all(pi[v] == v or a[pi[v], v] != 0 for v in range(n))
            roots = [v for v in range(n) if pi[v] == v]  # each tree's root: the least node it spans
            trees = {r: {v for v in range(n) if _root(pi, v) == r} for r in roots}
            assert all(min(nodes) == r for r, nodes in trees.items())
            for r in roots:  # a tree spans what its root reaches and no earlier tree spans
                assert trees[r] >= nx.descendants(g, r) - set().union(*(trees[q] for q in roots if q < r))
        elif name == "topological_sort":
            head = int(np.argmax(out["topo_head"]))
            order = [head]
            while out["topo"][order[-1]] != order[-1]:
                order.append(int(out["topo"][order[-1]]))
            assert sorted(order) == list(range(n))
            position = {v: i for i, v in enumerate(order)}
            assert all(position[u] < position[v] for u, v in g.edges)
        elif name in ("articulation_points", "bridges"):
            if name == "articulation_points":
                assert set(np.flatnonzero(out["is_cut"])) == set(nx.articulation_points(g))
            else:
                marked = {(int(i), int(j)) for i, j in zip(*np.nonzero(out["is_bridge"] == 1), strict=True) if i < j}
                found = cast(Iterable[tuple[int, int]], nx.bridges(g))  # (its stubs say nodes; it yields edges)
                assert marked == {(min(u, v), max(u, v)) for u, v in found}
                assert np.all((out["is_bridge"] == clrs.MASKED) == ((a + np.eye(n)) == 0))
        elif name == "strongly_connected_components":
            ids = out["scc_id"]
            assert isinstance(g, nx.DiGraph)
            for component in nx.strongly_connected_components(g):
                assert {int(ids[v]) for v in component} == {int(ids[next(iter(component))])}
                assert ids[next(iter(component))] in component
        elif name == "mst_kruskal":
            mask = out["in_mst"]
            np.testing.assert_array_equal(mask, mask.T)
            forest = nx.minimum_spanning_tree(g)
            assert np.sum(np.triu(mask) * a) == pytest.approx(forest.size(weight="weight"))
        else:  # floyd_warshall: Pi[i, j] is j's predecessor on a shortest path from i
            for i in range(n):
                distance = nx.single_source_dijkstra_path_length(g, i)
                for j, d in distance.items():
                    if j != i:
                        k = int(out["Pi"][i, j])
                        assert a[k, j] != 0
                        assert distance[k] + a[k, j] == pytest.approx(d)


def _root(pi: np.ndarray, v: int) -> int:
    while pi[v] != v:
        v = int(pi[v])
    return v


def test_the_score_is_the_mean_over_outputs_of_accuracy_or_f1() -> None:
    """Counted one entry at a time, apart from ``clrs.score``'s arrays."""
    rng = np.random.default_rng(0)
    for name in ("bfs", "bridges", "topological_sort", "floyd_warshall", "articulation_points"):
        samples = clrs.sample(name, 12, 5, 4)
        guesses = []
        for s in samples:
            guess = {}
            for output in clrs.ALGORITHMS[name].outputs:
                truth = s.outputs[output.name]
                if output.kind == "pointer":
                    wrong = rng.integers(0, 12, truth.shape)
                    guess[output.name] = np.where(rng.random(truth.shape) < 0.3, wrong, truth)
                elif output.kind == "mask_one":
                    guess[output.name] = np.eye(12)[int(rng.integers(0, 2)) * int(np.argmax(truth))]
                else:
                    guess[output.name] = np.where(rng.random(truth.shape) < 0.2, 1.0 - (truth > 0.5), truth > 0.5)
            guesses.append(guess)
        scores = []
        for output in clrs.ALGORITHMS[name].outputs:
            right = total = tp = fp = fn = 0
            for s, guess in zip(samples, guesses, strict=True):
                for t, p in zip(s.outputs[output.name].ravel(), guess[output.name].ravel(), strict=True):
                    total += 1
                    right += int(t == p)
                    if t != clrs.MASKED:
                        tp, fp, fn = tp + (p > 0.5 and t > 0.5), fp + (p > 0.5 and t < 0.5), fn + (p < 0.5 and t > 0.5)
            if output.kind == "pointer":
                scores.append(right / total)
            elif output.kind == "mask_one":
                scores.append(sum(bool(np.argmax(g[output.name]) == np.argmax(s.outputs[output.name]))
                                  for s, g in zip(samples, guesses, strict=True)) / len(samples))  # fmt: skip
            else:
                scores.append(2 * tp / (2 * tp + fp + fn))
        assert clrs.score(name, guesses, samples) == pytest.approx(np.mean(scores), rel=1e-12)
        assert clrs.score(name, [s.outputs for s in samples], samples) == 1.0
        assert trivial(name, samples) < 1.0
        # the interval: percentiles of the score of resamples of the graphs, the same draws taken by hand
        picks = np.random.default_rng(0).integers(0, 5, size=(200, 5))
        resampled = [clrs.score(name, [guesses[i] for i in p], [samples[i] for i in p]) for p in picks]
        low, high = clrs.interval(name, guesses, samples, draws=200)
        assert (low, high) == (np.percentile(resampled, 2.5), np.percentile(resampled, 97.5))
        assert low <= clrs.score(name, guesses, samples) <= high
        assert clrs.interval(name, [s.outputs for s in samples], samples, draws=50) == (1.0, 1.0)


def test_a_bad_algorithm_name_is_named_with_the_twelve() -> None:
    with pytest.raises(KeyError, match="'bsf' is not one of the benchmark's graph algorithms: bfs, dfs"):
        clrs.sample("bsf", 16, 1, 0)
    with pytest.raises(ValueError, match="'bsf' is not one of the benchmark's graph algorithms"):
        train("bsf")


@pytest.mark.parametrize(
    ("algorithm", "nodes", "edges", "source", "message"),
    [
        ("bfs", 0, [], 0, "no node|at least one node"),
        ("bfs", 3, [(0, 3)], 0, r"\(0 -> 3\) names a node that does not exist \(nodes 0 to 2\)"),
        ("bfs", 3, [(0, 1)], 5, "needs a source node between 0 and 2, got 5"),
        ("topological_sort", 3, [(0, 1), (1, 2), (2, 0)], -1, "cycle"),
        ("dag_shortest_paths", 2, [(0, 1), (1, 0)], 0, "cycle"),
    ],
    ids=["empty", "a missing node", "a source outside", "a cycle", "a cycle with a source"],
)
def test_asking_a_run_about_a_bad_graph_names_what_is_wrong(
    algorithm: str, nodes: int, edges: list[tuple[int, int]], source: int, message: str, tmp_path: Path
) -> None:
    (tmp_path / CONFIG).write_text(describe(algorithm, 1, 0, Config()), encoding="utf-8")
    with pytest.raises(ValueError, match=message):
        answer(tmp_path, nodes, edges, source)


TINY = Config(width=16, edge_width=8, key_width=8, hidden=16, steps=2, batch=8, train_samples=32, held_out=8,
              test_nodes=24, test_samples=4)  # fmt: skip
TINY_FLAGS = ["--config", '{"width": 16, "edge_width": 8, "key_width": 8, "hidden": 16, "steps": 2, "batch": 8, '
              '"train_samples": 32, "held_out": 8, "test_nodes": 24, "test_samples": 4}']  # fmt: skip


@pytest.mark.slow  # a small model compiled (about 20 s): CI runs it
def test_a_killed_run_resumes_bit_for_bit_and_reads_back(tmp_path: Path) -> None:
    straight = train("bfs", 10, 0, TINY, tmp_path / "a", log=False)
    with _killed_after(6):  # past the checkpoint of epoch 1 (steps 1-4)
        train("bfs", 10, 0, TINY, tmp_path / "b", log=False)
    resumed = train("bfs", 10, 0, TINY, tmp_path / "b", resume=True, log=False)
    assert resumed == straight._replace(seconds=resumed.seconds)
    assert straight.final_loss < straight.initial_loss
    report = evaluate(tmp_path / "b")
    assert (report.steps, report.of, report.test, report.trivial) == (10, 10, straight.test, straight.trivial)
    assert [epoch for epoch, _ in report.held_out] == [1, 2, 3]
    # the benchmark's model selection: best.npz, the state of the first lowest validation error, alike resumed
    errors = [error for _, error in report.held_out]
    first_lowest = errors.index(min(errors))
    chosen = evaluate(tmp_path / "b", best=True)
    assert chosen.best
    assert chosen.held_out == report.held_out[: first_lowest + 1]
    assert TINY.train_samples // TINY.batch == 4  # steps an epoch: 10 steps end epochs at 4, 8 and 10
    epoch_ends = [4, 8, 10]
    assert chosen.steps == epoch_ends[first_lowest]
    assert chosen == evaluate(tmp_path / "a", best=True)._replace(seconds=chosen.seconds)
    # the run's answer on a graph of the user's: a BFS tree's pointers, one a node, into the nodes
    pi = answer(tmp_path / "b", 5, [(0, 1), (1, 2), (3, 4)], source=0)["pi"]
    assert pi.shape == (5,)
    assert set(pi.tolist()) <= set(range(5))
    np.testing.assert_array_equal(pi, answer(tmp_path / "a", 5, [(1, 0), (2, 1), (4, 3)], source=0)["pi"])


@pytest.mark.slow  # about 20 s: CI runs it
def test_the_command_line_trains_evaluates_plots_and_answers(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = tmp_path / "run"
    args = ["train", "--algorithm", "topological_sort", "--out", str(run), "--steps", "8", "--quiet", *TINY_FLAGS]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "test (4 graphs of 24 nodes): " in out  # TINY's test set, not CLRS-30's
    assert "validation (8 graphs of 16 nodes): " in out
    assert "topological_sort: loss" in out
    assert main(["evaluate", str(run)]) == 0
    evaluated = capsys.readouterr().out.splitlines()
    assert evaluated[0].startswith("topological_sort: 8 steps")
    assert evaluated[1].startswith("test (4 graphs of 24 nodes): ")
    assert main(["evaluate", str(run), "--best"]) == 0
    assert capsys.readouterr().out.startswith("topological_sort: the state of the best validation score, after step ")
    assert main(["plot", str(run)]) == 0
    assert (run / "loss.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert main(["answer", str(run), "--nodes", "3", "--edges", "0-1,1-2"]) == 0
    assert capsys.readouterr().out.splitlines()[1].startswith("topo: [")
    assert main(["answer", str(run), "--nodes", "3", "--edges", "0-1,1-2,2-0"]) == 1
    assert "cycle" in capsys.readouterr().err
    with pytest.raises(SystemExit) as usage:  # argparse's: a usage line and status 2
        main(["answer", str(run), "--nodes", "3", "--edges", "0-x"])
    assert usage.value.code == 2
    assert "edges are sender-receiver pairs of node numbers, '0-1,1-2'; got '0-x'" in capsys.readouterr().err
    assert main(["train", "--algorithm", "bsf", "--out", str(tmp_path / "other")]) == 1
    assert "'bsf' is not one of the benchmark's graph algorithms" in capsys.readouterr().err
    # --resume reads the run's own settings (not the flags' defaults); a flag given must agree with them
    assert main(["train", "--out", str(run), "--resume", "--quiet", "--steps", "8", "--config", '{"width": 16}']) == 0
    assert "topological_sort: loss" in capsys.readouterr().out
    assert main(["train", "--out", str(run), "--resume", "--steps", "9", "--config", '{"width": 16, "batch": 4}']) == 1
    assert capsys.readouterr().err.endswith(
        f"train: error: --resume continues {run} with its own settings; given otherwise: --steps: 8 in the run, 9 "
        "given; --config batch: 8 in the run, 4 given\n"
    )


@pytest.mark.slow  # two processes that each import JAX and compile: CI runs it
def test_sigterm_stops_a_run_that_resume_finishes(tmp_path: Path) -> None:
    command = [sys.executable, "-m", "applicative.examples.graphs", "train", "--algorithm", "bfs", "--out",
               str(tmp_path), "--steps", "400", *TINY_FLAGS]  # fmt: skip
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env) as process:
        assert process.stdout is not None
        for line in process.stdout:
            if line.startswith("epoch 1/"):
                process.send_signal(signal.SIGTERM)
                break
        _, err = process.communicate(timeout=120)
    assert process.returncode == 75, err
    assert "stopped by SIGTERM after step" in err
    finished = subprocess.run([*command, "--resume"], capture_output=True, text=True, env=env, timeout=300)
    assert finished.returncode == 0, finished.stderr
    assert "in 400 steps" in finished.stdout


def test_a_batch_of_the_benchmarks_graphs_is_one_stack_of_graphs() -> None:
    """The model's input: each sample a Graph of its n nodes, its edges the input graph's (both ways for an
    undirected task), stacked; the pair inputs A_ij, the edge, A_ji and the edge back."""
    samples = clrs.sample("dag_shortest_paths", 10, 3, 5)
    inputs, targets = batch_of(samples, "dag_shortest_paths")
    assert inputs.nodes.shape == (3, 10, 2)
    assert inputs.pairs.shape == (3, 10, 10, 4)
    for b, s in enumerate(samples):
        np.testing.assert_array_equal(element(inputs.graphs, b).adjacency_matrix(), s.adjacency != 0)
        np.testing.assert_allclose(np.asarray(inputs.pairs[b, ..., 0]), s.adjacency, rtol=1e-6)
        np.testing.assert_allclose(np.asarray(inputs.pairs[b, ..., 2]), s.adjacency.T, rtol=1e-6)
        assert float(inputs.nodes[b, s.source, 1]) == 1.0
        np.testing.assert_array_equal(np.asarray(targets["pi"][b]), s.outputs["pi"])


@pytest.mark.parametrize(("mask", "triplets"), [("all", 0), ("edges", 0), ("edges", 4)])
def test_the_max_processors_step_is_its_formula_in_float64_numpy(mask: str, triplets: int) -> None:
    """``MaxStep`` on a directed graph of 5 nodes: m_ij = relu(R x_i + S x_j + E e_ij), node i's new vector
    O max_j m_ij over every j (``mask="all"``) or its in-neighbours and itself, the pairs' e_ij + W m_ij, and with
    triplet messages + P max_k (A x_i + B x_j + C x_k + D e_ij + E e_ik + F e_kj) over every k, against the same
    written in float64 numpy from each map's matrix and bias."""
    rng = np.random.default_rng(5)
    n, width, edge, hidden = 5, 4, 3, 6
    adjacency = (rng.random((n, n)) < 0.4).astype(np.float32)
    np.fill_diagonal(adjacency, 0)
    g = Graph.from_adjacency(adjacency, np.zeros(n, np.float32), capacity=n, edge_capacity=n * n)

    def vec(size: int, tag: type[Dim]) -> Vec[Any, Array]:
        return Vec.from_array(np.zeros(size, np.float32), tag)

    step = MaxStep.init(jax.random.PRNGKey(3), vec(width, Model), vec(edge, Edge), vec(hidden, Hidden), triplets)
    x, e = rng.normal(size=(n, width)).astype(np.float32), rng.normal(size=(n, n, edge)).astype(np.float32)
    nodes = g.with_elements(jax.vmap(lambda v: Vec.from_array(v, Model))(x))
    pairs = g.pairs(jax.vmap(jax.vmap(lambda v: Vec.from_array(v, Edge)))(e))
    y, e_next = step(nodes, pairs, g.mask(1) if mask == "edges" else None)

    def matrix(linear: Callable[[Vec[Any, Array]], Any], size: int, tag: type[Dim]) -> tuple[np.ndarray, np.ndarray]:
        """A Linear's (matrix, bias), read through its action on zero and on the basis vectors."""

        def call(v: np.ndarray) -> np.ndarray:
            return np.asarray(to_array(linear(Vec.from_array(np.asarray(v, np.float32), tag))), np.float64)

        bias = call(np.zeros(size))
        return np.stack([call(row) - bias for row in np.eye(size)]), bias

    (r, rb), (s, sb) = matrix(step.receiver, width, Model), matrix(step.sender, width, Model)
    (k, kb), (o, ob) = matrix(step.edge, edge, Edge), matrix(step.node_out, hidden, Hidden)
    w, wb = matrix(step.edge_out, hidden, Hidden)
    x64, e64 = x.astype(np.float64), e.astype(np.float64)
    m = np.maximum((x64 @ r + rb)[:, None] + (x64 @ s + sb)[None, :] + e64 @ k + kb, 0.0)
    keep = np.ones((n, n), bool) if mask == "all" else (adjacency.T > 0) | np.eye(n, dtype=bool)
    largest = np.where(keep[..., None], m, -np.inf).max(axis=1)
    np.testing.assert_allclose(np.asarray(to_array(y)), largest @ o + ob, **float32(1e-5))
    through = np.zeros((n, n, edge))
    if triplets:
        assert step.triplets is not None
        (a, ab), (b, bb), (c, cb) = (matrix(f, width, Model) for f in step.triplets.maps[:3])
        (d, db), (f, fb), (h, hb) = (matrix(f, edge, Edge) for f in step.triplets.maps[3:])
        (p, pb) = matrix(step.triplets.out, triplets, Triplet)
        t = np.empty((n, n, n, triplets))
        for i, j, k_ in np.ndindex(n, n, n):
            t[i, j, k_] = (x64[i] @ a + ab + x64[j] @ b + bb + x64[k_] @ c + cb + e64[i, j] @ d + db
                           + e64[i, k_] @ f + fb + e64[k_, j] @ h + hb)  # fmt: skip
        through = t.max(axis=2) @ p + pb
        with pytest.raises(ValueError, match=r"triplets 4 must be 0, or at least 1 with processor 'max'"):
            Config(triplets=4)  # the attention processor has none
    else:
        assert step.triplets is None
    np.testing.assert_allclose(np.asarray(to_array(e_next)), e64 + m @ w + wb + through, **float32(1e-5))


def test_the_processors_steps_follow_the_graphs_size_under_the_nodes_rule() -> None:
    """``step_rule="nodes"``: as many steps on n nodes as ``steps`` on ``train_nodes``, in proportion, rounded
    up (32 on the test set's 64 nodes for 8 on 16); ``"fixed"``: ``steps`` on every graph."""
    scaled, fixed = Config(steps=8, step_rule="nodes"), Config(steps=8)
    assert [steps_on(scaled, n) for n in (4, 7, 11, 16, 64)] == [2, 4, 6, 8, 32]
    assert {steps_on(fixed, n) for n in (4, 16, 64)} == {8}


def test_drawn_minibatches_are_of_one_size_each_and_repeat_from_seed_and_step() -> None:
    """With ``sizes``, each minibatch is drawn afresh from (seed, step) alone: graphs of one of the sizes, the
    task's outputs on them (the port's, checked above against dm-clrs and networkx), positions the sorted
    uniform draws in [0, 1) with ``positions="random"``; sizes outside 1 ... train_nodes are refused."""
    config = Config(sizes=(4, 7), positions="random", batch=3)
    data = training_data("bfs", config, [])
    assert isinstance(data, Drawn)
    seen = set()
    for step in range(12):
        inputs, targets = data.draw(0, step)
        again, _ = data.draw(0, step)
        np.testing.assert_array_equal(np.asarray(inputs.pairs), np.asarray(again.pairs))
        n = inputs.nodes.shape[1]
        seen.add(n)
        positions = np.asarray(inputs.nodes[..., 0])
        assert np.all(np.diff(positions, axis=1) > 0)
        assert np.all((positions >= 0) & (positions < 1))
        assert not np.allclose(positions, np.arange(n) / n)
        for b in range(3):
            adjacency, source = np.asarray(inputs.pairs[b, ..., 0], np.float64), int(np.argmax(inputs.nodes[b, :, 1]))
            expected = clrs.ALGORITHMS["bfs"].algorithm(adjacency, source)["pi"]
            np.testing.assert_array_equal(np.asarray(targets["pi"][b]), expected)
    assert seen == {4, 7}
    assert not np.array_equal(np.asarray(data.draw(1, 0)[0].pairs), np.asarray(data.draw(0, 0)[0].pairs))
    with pytest.raises(ValueError, match=r"sizes \[4, 20\] must lie between 1 and train_nodes 16"):
        Config(sizes=(4, 20))
    assert settings(describe("bfs", 1, 0, config)).config == config  # JSON's list read back as the tuple


@pytest.mark.parametrize(("name", "density"), [("dfs", lambda p: p), ("mst_kruskal", lambda p: (15 * p * p + p) / 16)])
def test_varied_densities_draw_each_graphs_edge_probability_from_the_published_training(
    name: str, density: Callable[[float], float]
) -> None:
    """``densities="varied"``: each drawn graph's edge probability is one of ``clrs.varied``'s, 0.1 ... 0.9
    (halved for MST-Kruskal), so the drawn graphs' densities follow that mixture: their mean and spread are
    its (a directed graph's entries are 1 with probability p; an undirected one's off the diagonal with p
    squared, an entry and its mirror both drawn), where the task's own probability alone leaves the binomial
    spread; refused without ``sizes``."""
    ps = np.asarray(clrs.varied(name))
    np.testing.assert_allclose(ps, np.arange(1, 10) / (20 if name == "mst_kruskal" else 10), rtol=1e-12)
    cells = 16 * 16
    q = np.asarray([density(float(p)) for p in ps])  # each probability's chance of an entry
    mean, spread = q.mean(), np.sqrt(q.var() + np.mean(q * (1 - q)) / cells)
    for densities in ("varied", "task"):
        data = training_data(name, Config(sizes=(16,), batch=8, densities=densities), [])
        assert isinstance(data, Drawn)
        seen = np.concatenate([
            (np.asarray(data.draw(0, step)[0].pairs)[..., 0] > 0).mean(axis=(1, 2)) for step in range(40)
        ])
        if densities == "varied":
            assert abs(seen.mean() - mean) < 4 * spread / np.sqrt(seen.size)
            assert 0.8 * spread < seen.std() < 1.2 * spread
        else:
            assert seen.std() < 0.3 * spread
    with pytest.raises(ValueError, match="densities 'varied' draws graphs afresh: it needs sizes"):
        Config(densities="varied")


def test_the_injected_recurrence_holds_no_sum_over_the_steps() -> None:
    """``recurrence="injected"``: each step reads the inputs' encoding beside the state, and the new state is
    the step's output alone. A processor whose output maps are zero gives the same nodes and pairs after 1, 2
    or 5 steps (a fixed point after one); the residual recurrence sums its steps, so its nodes move with each."""
    sample = clrs.sample("bfs", 6, 1, 0)[0]
    inputs, _ = batch_of([sample], "bfs")
    g, nodes, pairs = element(inputs.graphs, 0), inputs.nodes[0], inputs.pairs[0]
    outputs = clrs.ALGORITHMS["bfs"].outputs

    def run(recurrence: str, steps: int) -> tuple[np.ndarray, np.ndarray]:
        config = Config(width=8, edge_width=4, key_width=4, hidden=8, steps=steps, processor="max",
                        recurrence=cast(Any, recurrence))  # fmt: skip
        model = init_model(jax.random.PRNGKey(0), config, outputs)
        silent = model.processor
        assert isinstance(silent, MaxStep)
        zero = jax.tree_util.tree_map(np.zeros_like, (silent.node_out, silent.edge_out))
        model = dataclasses.replace(model, processor=dataclasses.replace(silent, node_out=zero[0], edge_out=zero[1]))
        x, e = process(model, config, g, nodes, pairs)
        return np.asarray(x), np.asarray(e)

    injected = [run("injected", k) for k in (1, 2, 5)]
    for x, e in injected[1:]:
        np.testing.assert_allclose(x, injected[0][0], **float32(1e-6))
        np.testing.assert_allclose(e, injected[0][1], **float32(1e-6))
    residual = [run("residual", k)[0] for k in (1, 2)]
    assert np.max(np.abs(residual[1] - residual[0])) > 1e-2


def test_an_overrun_trains_each_graph_for_steps_of_its_own_and_tests_with_steps_on() -> None:
    """``overrun``: each training graph runs ``steps_on`` + k steps, k drawn uniformly from 0 ... ``most_extra``
    (overrun times steps_on) with the minibatch, from (seed, step), after the graphs (which it leaves as they
    are: none is drawn without an overrun, so earlier runs repeat). The loss's loop of the longest runs each
    graph's own steps: the batch's loss is the mean of each graph's under a model of steps_on + k steps;
    prediction runs steps_on."""
    small: dict[str, Any] = {"width": 8, "edge_width": 4, "key_width": 4, "hidden": 8, "processor": "max",
                             "recurrence": "injected"}  # fmt: skip
    config = Config(**small, steps=2, sizes=(6,), batch=4, overrun=1.5)
    assert (steps_on(config, 6), most_extra(config, 6)) == (2, 3)
    plain = training_data("bfs", dataclasses.replace(config, overrun=0.0), [])
    data = training_data("bfs", config, [])
    assert isinstance(data, Drawn)
    assert isinstance(plain, Drawn)
    seen: set[int] = set()
    for step in range(8):
        inputs, _ = data.draw(0, step)
        same, _ = plain.draw(0, step)
        np.testing.assert_array_equal(np.asarray(inputs.pairs), np.asarray(same.pairs))
        np.testing.assert_array_equal(np.asarray(data.draw(0, step)[0].extra), np.asarray(inputs.extra))
        assert not np.any(np.asarray(same.extra))
        seen |= set(np.asarray(inputs.extra).tolist())
    assert seen == {0, 1, 2, 3}
    with pytest.raises(ValueError, match=r"overrun -1\.0 must be at least 0"):
        Config(overrun=-1.0)

    inputs, targets = data.draw(0, 5)
    model = init_model(jax.random.PRNGKey(1), config, clrs.ALGORITHMS["bfs"].outputs)
    losses = jax.jit(loss, static_argnums=(1, 2))
    each = []
    for b, k in enumerate(np.asarray(inputs.extra).tolist()):
        one = jax.tree_util.tree_map(lambda a, b=b: a[b : b + 1], inputs)._replace(extra=jnp.zeros(1, jnp.int32))
        each.append(float(losses(model, Config(**small, steps=2 + k), "bfs", one, {"pi": targets["pi"][b : b + 1]})))
    assert len(set(np.asarray(inputs.extra).tolist())) > 1  # graphs of different steps in the one batch
    np.testing.assert_allclose(float(losses(model, config, "bfs", inputs, targets)), np.mean(each), **float32(1e-6))
    tested = predict(model, Config(**small, steps=2), "bfs", inputs._replace(extra=inputs.extra * 0))
    np.testing.assert_array_equal(np.asarray(predict(model, config, "bfs", inputs)["pi"]), np.asarray(tested["pi"]))


@pytest.mark.parametrize("decay", ["none", "cosine"])
def test_the_optimiser_is_adam_clipped_at_norm_1_at_a_constant_or_cosine_decayed_rate(decay: str) -> None:
    """Float64 numpy's Adam (beta 0.9 and 0.999, epsilon 1e-8) on gradients clipped to norm 1, at the rate
    ``learning_rate`` or, with ``decay="cosine"``, learning_rate (1 + cos(pi k / steps)) / 2 at step k: 0 at
    the run's last step's end."""
    steps, rate = 5, 0.1
    transform = optimiser(Config(learning_rate=rate, decay=cast(Any, decay)), steps)
    rng = np.random.default_rng(0)
    params = {"a": np.zeros(3), "b": np.zeros((2, 2))}
    state = transform.init(params)
    m = {k: np.zeros_like(v) for k, v in params.items()}
    v = {k: np.zeros_like(x) for k, x in params.items()}
    for k in range(steps):
        grads = {"a": rng.normal(size=3) * (k + 1), "b": rng.normal(size=(2, 2))}  # norms above 1 and below
        norm = np.sqrt(sum(np.sum(g**2) for g in grads.values()))
        clipped = {key: g / max(1.0, norm) for key, g in grads.items()}
        at = rate * (1 + np.cos(np.pi * k / steps)) / 2 if decay == "cosine" else rate
        updates, state = transform.update(grads, state, params)
        for key, g in clipped.items():
            m[key] = 0.9 * m[key] + 0.1 * g
            v[key] = 0.999 * v[key] + 0.001 * g**2
            step = -at * (m[key] / (1 - 0.9 ** (k + 1))) / (np.sqrt(v[key] / (1 - 0.999 ** (k + 1))) + 1e-8)
            np.testing.assert_allclose(np.asarray(updates[key]), step, rtol=1e-10, atol=1e-14)
    with pytest.raises(ValueError, match="decay"):
        settings(describe("bfs", 10, 0, Config()).replace('"decay": "none"', '"decay": "linear"'))
