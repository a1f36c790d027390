"""The CLRS algorithmic reasoning benchmark's graph tasks, made by code: its samplers, tasks and score.

A port of the benchmark's samplers (here) and of the output stage of its twelve graph algorithms
(``algorithms``; Veličković et al., 2022, "The CLRS Algorithmic Reasoning Benchmark"; the ``dm-clrs``
package, Apache 2.0, its ``samplers.py`` and ``algorithms/graphs.py``), sample for sample: the same
``numpy.random.RandomState`` draws in the same order, so that a seed gives the benchmark's graphs (CLRS-30:
training graphs of 16 nodes, 1,000 of them from seed 1; the test set 32 graphs of 64 nodes from seed 3), and
the same outputs, the algorithms' own tie-breaking kept. ``tests/applicative/test_graphs_example.py`` checks
both against samples ``dm-clrs`` 2.0.3 made (``tests/applicative/data/clrs_reference.npz``; docs/graphs.md
says how they were made). Hints (the algorithms' intermediate states) are not ported: the models here learn the outputs.

    ALGORITHMS                 name -> Task: its Graphs (how they are drawn), the algorithm, the outputs' kinds
    sample(name, n, count, seed)   ``count`` Samples of graphs of ``n`` nodes
    drawn(name, n, count, rng, p)  the same from a RandomState, each graph's edge probability one of ``p``
    varied(name)               the edge probabilities the published models train with (0.1 ... 0.9)
    score(name, predicted, samples)   the benchmark's score of predictions: for a pointer, the fraction of
                               nodes (pairs) pointing right; for a mask, F1 over the entries that are not
                               masked (bridges: the edges), for a mask_one the fraction right; the mean
                               over the task's outputs (its "micro-F1")
    interval(name, predicted, samples)   a 95% bootstrap interval of that score over the graphs

A Sample holds the benchmark's inputs, ``adjacency`` (the weighted A: ``A[i, j]`` the weight of the edge from
i to j, 0 where none) and ``source`` (a node, or -1 where the task has none), and ``outputs``: name ->
array (node pointers and masks of shape (n,), edge masks and pointers (n, n)).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import numpy as np

from applicative.examples.graphs.algorithms import (
    MASKED,
    articulation_points,
    bellman_ford,
    bfs,
    bridges,
    dag_shortest_paths,
    dfs,
    dijkstra,
    floyd_warshall,
    mst_kruskal,
    mst_prim,
    strongly_connected_components,
    topological_sort,
)

__all__ = [
    "ALGORITHMS", "MASKED", "Graphs", "Output", "Sample", "Task", "drawn", "interval", "sample", "score", "varied",
]


class Output(NamedTuple):
    name: str
    location: str  # "node" or "edge"
    kind: str  # "pointer", "mask" or "mask_one"


class Graphs(NamedTuple):
    """A task's graphs, as the benchmark draws them: Erdos-Renyi graphs of edge probability ``p`` (directed or
    not, acyclic or not, weights uniform in [0, 1) or 1), or, for ``community``, four dense communities sparsely
    linked; a source node drawn after the graph where the task has one."""

    p: float
    directed: bool
    acyclic: bool = False
    weighted: bool = False
    source: bool = False
    community: bool = False

    def draw(self, rng: np.random.RandomState, n: int, p: tuple[float, ...] = ()) -> tuple[np.ndarray, int]:
        """(the weighted adjacency, the source node or -1); ``p``: the edge probabilities the graph's own is
        drawn from (the benchmark's sampler's ``p``; (): this task's alone)."""
        ps = p or (self.p,)
        if self.community:
            return _community(rng, n, p=rng.choice(ps)), -1
        a = _er(rng, n, rng.choice(ps), self.directed, self.acyclic, self.weighted)
        return a, int(rng.choice(n)) if self.source else -1


class Task(NamedTuple):
    graphs: Graphs
    algorithm: Callable[[np.ndarray, int], dict[str, np.ndarray]]
    outputs: tuple[Output, ...]


class Sample(NamedTuple):
    adjacency: np.ndarray  # (n, n) float64: the weighted A
    source: int  # -1 where the task has none
    outputs: dict[str, np.ndarray]


# The samplers: the benchmark's graphs, its RandomState draws in its order.


def _er(rng: np.random.RandomState, n: int, p: float, directed: bool, acyclic: bool, weighted: bool) -> np.ndarray:
    """``Sampler._random_er_graph``: an Erdos-Renyi graph, weights uniform in [0, 1)."""
    mat = rng.binomial(1, p, size=(n, n))
    if not directed:
        mat *= np.transpose(mat)
    elif acyclic:
        mat = np.triu(mat, k=1)
        perm = rng.permutation(n)
        mat = mat[perm, :][:, perm]
    if weighted:
        weights = rng.uniform(low=0.0, high=1.0, size=(n, n))
        if not directed:
            weights *= np.transpose(weights)
            weights = np.sqrt(weights + 1e-3)
        return np.asarray(mat.astype(float) * weights)
    return mat.astype(float)


def _community(rng: np.random.RandomState, n: int, k: int = 4, p: float = 0.5, eps: float = 0.01) -> np.ndarray:
    """``Sampler._random_community_graph`` (directed, cyclic, unweighted): k communities, sparse links."""
    mat = np.zeros((n, n))
    los, his, lo = [], [], 0
    for i in range(k):
        hi = n if i == k - 1 else lo + n // k
        mat[lo:hi, lo:hi] = _er(rng, hi - lo, p, True, False, False)
        los.append(lo)
        his.append(hi)
        lo = hi
    toggle = _er(rng, n, eps, True, False, False)
    for i in range(k):
        for j in range(i):
            toggle[los[i] : his[i], los[j] : his[j]] *= 0
    mat = np.where(toggle > 0.0, (1.0 - (mat > 0.0)) * toggle, mat)
    perm = rng.permutation(n)
    return np.asarray(mat[perm, :][:, perm])


_NODE_POINTER = (Output("pi", "node", "pointer"),)
_WEIGHTED = Graphs(0.5, directed=False, weighted=True, source=True)
ALGORITHMS: dict[str, Task] = {
    "bfs": Task(Graphs(0.5, directed=False, source=True), bfs, _NODE_POINTER),
    "dfs": Task(Graphs(0.5, directed=True), dfs, _NODE_POINTER),
    "topological_sort": Task(
        Graphs(0.5, directed=True, acyclic=True),
        topological_sort,
        (Output("topo", "node", "pointer"), Output("topo_head", "node", "mask_one")),
    ),
    "articulation_points": Task(Graphs(0.2, directed=False), articulation_points, (Output("is_cut", "node", "mask"),)),
    "bridges": Task(Graphs(0.2, directed=False), bridges, (Output("is_bridge", "edge", "mask"),)),
    "strongly_connected_components": Task(
        Graphs(0.5, directed=True, community=True),
        strongly_connected_components,
        (Output("scc_id", "node", "pointer"),),
    ),
    "mst_kruskal": Task(Graphs(0.2, directed=False, weighted=True), mst_kruskal, (Output("in_mst", "edge", "mask"),)),
    "mst_prim": Task(_WEIGHTED, mst_prim, _NODE_POINTER),
    "bellman_ford": Task(_WEIGHTED, bellman_ford, _NODE_POINTER),
    "dijkstra": Task(_WEIGHTED, dijkstra, _NODE_POINTER),
    "dag_shortest_paths": Task(
        Graphs(0.5, directed=True, acyclic=True, weighted=True, source=True), dag_shortest_paths, _NODE_POINTER
    ),
    "floyd_warshall": Task(
        Graphs(0.5, directed=False, weighted=True), floyd_warshall, (Output("Pi", "edge", "pointer"),)
    ),
}
"""The benchmark's twelve graph algorithms, by its names."""


_SPARSE = ("articulation_points", "bridges", "mst_kruskal")


def varied(name: str) -> tuple[float, ...]:
    """The edge probabilities the published models' training graphs are drawn from (the benchmark's own
    training script, which Ibarz et al. run): 0.1, 0.2, ..., 0.9, halved for articulation points, bridges and
    MST-Kruskal, whose graphs it keeps sparse (their CLRS-30 probability is 0.2, the others' 0.5)."""
    ps = tuple(0.1 + 0.1 * i for i in range(9))  # the script's own expression, to its last bit
    return tuple(p / 2 for p in ps) if name in _SPARSE else ps


def sample(name: str, n: int, count: int, seed: int) -> list[Sample]:
    """``count`` samples of the task ``name`` on graphs of ``n`` nodes, from ``seed`` (the benchmark's own
    stream: CLRS-30's training set is ``sample(name, 16, 1000, 1)``, its test set ``sample(name, 64, 32, 3)``).
    A KeyError names the algorithm and lists the twelve."""
    if name not in ALGORITHMS:
        raise KeyError(f"{name!r} is not one of the benchmark's graph algorithms: {', '.join(ALGORITHMS)}")
    return drawn(name, n, count, np.random.RandomState(seed))


def drawn(name: str, n: int, count: int, rng: np.random.RandomState, p: tuple[float, ...] = ()) -> list[Sample]:
    """``count`` samples of the task ``name`` on graphs of ``n`` nodes, drawn from ``rng``, each graph's edge
    probability one of ``p`` (drawn with it; (): the task's own)."""
    task, out = ALGORITHMS[name], []
    for _ in range(count):
        a, s = task.graphs.draw(rng, n, p)
        out.append(Sample(a, s, task.algorithm(a, s)))
    return out


def score(name: str, predicted: list[dict[str, np.ndarray]], samples: list[Sample]) -> float:
    """The benchmark's score of ``predicted`` outputs (name -> an integer array of pointers, or a 0/1 mask) over
    ``samples``: each output's over every sample together, then their mean."""
    scores = []
    for output in ALGORITHMS[name].outputs:
        truth = np.stack([s.outputs[output.name] for s in samples])
        guess = np.stack([p[output.name] for p in predicted])
        if output.kind == "pointer":
            scores.append(float(np.mean(guess == truth)))
        elif output.kind == "mask_one":
            scores.append(float(np.mean(np.argmax(guess, -1) == np.argmax(truth, -1))))
        else:
            keep = truth != MASKED
            tp = np.sum((guess > 0.5) & (truth > 0.5) & keep)
            fp = np.sum((guess > 0.5) & (truth < 0.5) & keep)
            fn = np.sum((guess < 0.5) & (truth > 0.5) & keep)
            precision = tp / (tp + fp) if tp + fp > 0 else 1.0
            recall = tp / (tp + fn) if tp + fn > 0 else 1.0
            scores.append(float(2 * precision * recall / (precision + recall)) if precision + recall > 0 else 0.0)
    return float(np.mean(scores))


def interval(
    name: str, predicted: list[dict[str, np.ndarray]], samples: list[Sample], draws: int = 1000, seed: int = 0
) -> tuple[float, float]:
    """A 95% bootstrap interval of ``score``: the 2.5th and 97.5th percentiles of the score of ``draws``
    resamples of the graphs, with replacement (the spread a test set of this many graphs leaves)."""
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, len(samples), size=(draws, len(samples)))
    scores = [score(name, [predicted[i] for i in pick], [samples[i] for i in pick]) for pick in picks]
    low, high = np.percentile(scores, [2.5, 97.5])
    return float(low), float(high)
