"""The outputs of the CLRS benchmark's twelve graph algorithms, as its code computes them (``dm-clrs``'s
``algorithms/graphs.py``, Apache 2.0; its probes, the intermediate states, left out): each is
``algorithm(a, s) -> {output name: array}`` of the weighted adjacency ``a`` (``a[i, j]`` the weight of the
edge from i to j, 0 where none) and the source ``s`` (ignored where the task has none), its tie-breaking the
benchmark's (neighbours visited in index order, times in steps of 0.01). ``clrs`` draws the graphs and
scores the outputs; ``tests/applicative/test_graphs_example.py`` checks these against the benchmark's own
samples and against networkx.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

__all__ = [
    "MASKED",
    "articulation_points",
    "bellman_ford",
    "bfs",
    "bridges",
    "dag_shortest_paths",
    "dfs",
    "dijkstra",
    "floyd_warshall",
    "mst_kruskal",
    "mst_prim",
    "strongly_connected_components",
    "topological_sort",
]

MASKED = -1.0
"""An entry of an output that no score counts (the benchmark's ``OutputClass.MASKED``: bridges' non-edges)."""


def _dfs_forest(
    a: np.ndarray, order: Sequence[int] | np.ndarray, visit: Callable[..., None] | None = None
) -> dict[str, np.ndarray]:
    """The benchmark's iterative DFS (its ``s_prev`` stack, neighbours in index order, times in steps of
    0.01): pi, discovery and finishing times, and ``visit(event, u, v, state)`` at each event."""
    n = a.shape[0]
    color, pi = np.zeros(n, np.int32), np.arange(n)
    d, f, s_prev = np.zeros(n), np.zeros(n), np.arange(n)
    time = 0.0
    for s in order:
        if color[s] != 0:
            continue
        s_last = u = s
        while True:
            if color[u] == 0 or d[u] == 0.0:
                time += 0.01
                d[u] = time
                color[u] = 1
                if visit:
                    visit("discover", u, u, locals())
            for v in range(n):
                if a[u, v] != 0:
                    if color[v] == 0:
                        pi[v] = u
                        color[v] = 1
                        s_prev[v] = s_last
                        s_last = v
                        if visit:
                            visit("tree", u, v, locals())
                        break
                    if visit:
                        visit("back", u, v, locals())
            if s_last == u:
                color[u] = 2
                time += 0.01
                f[u] = time
                if visit:
                    visit("finish", u, u, locals())
                if s_prev[u] == u:
                    break
                pr = s_prev[s_last]
                s_prev[s_last] = s_last
                s_last = pr
            u = s_last
    return {"pi": pi, "d": d, "f": f}


def dfs(a: np.ndarray, _: int) -> dict[str, np.ndarray]:
    return {"pi": _dfs_forest(a, range(a.shape[0]))["pi"]}


def bfs(a: np.ndarray, s: int) -> dict[str, np.ndarray]:
    n = a.shape[0]
    reach, pi = np.zeros(n), np.arange(n)
    reach[s] = 1
    while True:
        prev = np.copy(reach)
        for i in range(n):
            for j in range(n):
                if a[i, j] > 0 and prev[i] == 1:
                    if pi[j] == j and j != s:
                        pi[j] = i
                    reach[j] = 1
        if np.all(reach == prev):
            return {"pi": pi}


def topological_sort(a: np.ndarray, _: int) -> dict[str, np.ndarray]:
    n = a.shape[0]
    topo = np.arange(n)
    state = {"head": 0}

    def visit(event: str, u: int, v: int, scope: dict[str, object]) -> None:
        if event == "finish":
            done = scope["color"]
            assert isinstance(done, np.ndarray)
            if done[state["head"]] == 2:
                topo[u] = state["head"]
            state["head"] = u

    _dfs_forest(a, range(n), visit)
    head = np.zeros(n)
    head[state["head"]] = 1
    return {"topo": topo, "topo_head": head}


def _low_links(a: np.ndarray, bridges: bool) -> np.ndarray:
    """Articulation points (``bridges`` False) or bridges, as the benchmark's DFS with low links computes them."""
    n = a.shape[0]
    low, child = np.zeros(n), np.zeros(n)
    is_cut = np.zeros(n)
    adj = ((a + np.eye(n)) != 0) * 1.0
    is_bridge = np.zeros((n, n)) + MASKED + adj

    def visit(event: str, u: int, v: int, scope: dict[str, object]) -> None:
        d, pi = scope["d"], scope["pi"]
        assert isinstance(d, np.ndarray)
        assert isinstance(pi, np.ndarray)
        if event == "discover":
            low[u] = d[u]
        elif event == "tree":
            child[u] += 0.01
        elif event == "back" and v != pi[u]:
            low[u] = min(low[u], d[v])
        elif event == "finish":
            for w in range(n):
                if pi[w] == u:
                    low[u] = min(low[u], low[w])
                    if bridges and low[w] > d[u]:
                        is_bridge[u, w] = is_bridge[w, u] = 1
                    if not bridges and pi[u] != u and low[w] >= d[u]:
                        is_cut[u] = 1
            if not bridges and pi[u] == u and child[u] > 0.01:
                is_cut[u] = 1

    _dfs_forest(a, range(n), visit)
    return is_bridge if bridges else is_cut


def articulation_points(a: np.ndarray, _: int) -> dict[str, np.ndarray]:
    return {"is_cut": _low_links(a, bridges=False)}


def bridges(a: np.ndarray, _: int) -> dict[str, np.ndarray]:
    return {"is_bridge": _low_links(a, bridges=True)}


def strongly_connected_components(a: np.ndarray, _: int) -> dict[str, np.ndarray]:
    n = a.shape[0]
    finish = _dfs_forest(a, range(n))["f"]
    scc_id = np.arange(n)
    roots = np.zeros(n, np.int64)

    def visit(event: str, u: int, v: int, scope: dict[str, object]) -> None:
        if event == "discover":
            scc_id[u] = roots[0]

    order = np.argsort(-finish)
    at = a.T
    color = np.zeros(n, np.int32)
    for s in order:  # (the second pass's forest, one tree a component; its root names it)
        if color[s] == 0:
            roots[0] = s
            tree = _dfs_forest(np.where(_mask(color, n), at, 0.0), [s], visit)
            color[np.flatnonzero(tree["f"])] = 2
    return {"scc_id": scc_id}


def _mask(color: np.ndarray, n: int) -> np.ndarray:
    """Edges into nodes not yet in a component (the second pass sees only those)."""
    return np.broadcast_to(color[None, :] == 0, (n, n))


def mst_kruskal(a: np.ndarray, _: int) -> dict[str, np.ndarray]:
    n = a.shape[0]
    pi = np.arange(n)
    in_mst = np.zeros((n, n))
    lx, ly, wts = [], [], []
    for i in range(n):
        for j in range(i + 1, n):
            if a[i, j] > 0:
                lx.append(i)
                ly.append(j)
                wts.append(a[i, j])
    for ind in np.argsort(wts):
        u, v = lx[ind], ly[ind]
        root_u, root_v = u, v
        mask_u, mask_v = np.zeros(n), np.zeros(n)
        mask_u[u] = mask_v[v] = 1
        while pi[root_u] != root_u:
            root_u = pi[root_u]
            pi[mask_u == 1] = root_u
            mask_u[root_u] = 1
        while pi[root_v] != root_v:
            root_v = pi[root_v]
            pi[mask_v == 1] = root_v
            mask_v[root_v] = 1
        if root_u != root_v:
            in_mst[u, v] = in_mst[v, u] = 1
            if root_u < root_v:
                pi[root_u] = root_v
            else:
                pi[root_v] = root_u
    return {"in_mst": in_mst}


def _greedy(a: np.ndarray, s: int, through: bool) -> np.ndarray:
    """Prim's (``through`` False: the key is the edge) or Dijkstra's (the key is the path) pointers."""
    n = a.shape[0]
    key, mark, in_queue, pi = np.zeros(n), np.zeros(n), np.zeros(n), np.arange(n)
    in_queue[s] = 1
    for _ in range(n):
        u = np.argsort(key + (1.0 - in_queue) * 1e9)[0]
        if in_queue[u] == 0:
            break
        mark[u], in_queue[u] = 1, 0
        for v in range(n):
            if a[u, v] != 0:
                candidate = key[u] + a[u, v] if through else a[u, v]
                if mark[v] == 0 and (in_queue[v] == 0 or candidate < key[v]):
                    pi[v], key[v], in_queue[v] = u, candidate, 1
    return pi


def mst_prim(a: np.ndarray, s: int) -> dict[str, np.ndarray]:
    return {"pi": _greedy(a, s, through=False)}


def dijkstra(a: np.ndarray, s: int) -> dict[str, np.ndarray]:
    return {"pi": _greedy(a, s, through=True)}


def bellman_ford(a: np.ndarray, s: int) -> dict[str, np.ndarray]:
    n = a.shape[0]
    d, pi, msk = np.zeros(n), np.arange(n), np.zeros(n)
    msk[s] = 1
    while True:
        prev_d, prev_msk = np.copy(d), np.copy(msk)
        for u in range(n):
            for v in range(n):
                if prev_msk[u] == 1 and a[u, v] != 0:
                    if msk[v] == 0 or prev_d[u] + a[u, v] < d[v]:
                        d[v] = prev_d[u] + a[u, v]
                        pi[v] = u
                    msk[v] = 1
        if np.all(d == prev_d):
            return {"pi": pi}


def dag_shortest_paths(a: np.ndarray, s: int) -> dict[str, np.ndarray]:
    n = a.shape[0]
    topo = np.arange(n)
    state = {"head": 0}

    def visit(event: str, u: int, v: int, scope: dict[str, object]) -> None:
        if event == "finish":
            color = scope["color"]
            assert isinstance(color, np.ndarray)
            if color[state["head"]] == 2:
                topo[u] = state["head"]
            state["head"] = u

    _dfs_forest(a, [s], visit)
    head = state["head"]
    d, mark, pi = np.zeros(n), np.zeros(n), np.arange(n)
    mark[head] = 1
    while topo[head] != head:
        i = head
        mark[head] = 1
        for j in range(n):
            if a[i, j] != 0.0 and (mark[j] == 0 or d[i] + a[i, j] < d[j]):
                d[j], pi[j], mark[j] = d[i] + a[i, j], i, 1
        head = topo[head]
    return {"pi": pi}


def floyd_warshall(a: np.ndarray, _: int) -> dict[str, np.ndarray]:
    n = a.shape[0]
    dist = np.copy(a)
    pointers = np.tile(np.arange(n)[:, None], (1, n)).astype(float)
    msk = ((a + np.eye(n)) != 0) * 1.0
    for k in range(n):
        prev_d, prev_msk = np.copy(dist), np.copy(msk)
        for i in range(n):
            for j in range(n):
                if prev_msk[i, k] > 0 and prev_msk[k, j] > 0:
                    if msk[i, j] == 0 or prev_d[i, k] + prev_d[k, j] < dist[i, j]:
                        dist[i, j] = prev_d[i, k] + prev_d[k, j]
                        pointers[i, j] = pointers[k, j]
                    else:
                        dist[i, j] = prev_d[i, j]
                    msk[i, j] = 1
    return {"Pi": pointers}
