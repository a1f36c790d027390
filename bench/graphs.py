"""Benchmark: attention over a graph's edges, in memory linear in the edges, beside the same attention with
the edges as a dense mask, forward and backward, at 1,024 to 16,384 nodes.

A random directed graph of n nodes and about ``--edges-per-node`` x n edges (senders drawn uniformly for
each receiver), every node a ``Vec`` of 64 float32 features; one call is ``value_and_grad`` of the sum of
squares of ``nn.attention(g, g, g, mask=...)`` with respect to the node features, jitted:

- ``sparse``: ``mask=g.edges()``, a ``SparseMask``: one score a pair, a softmax per receiver by segment
  sums (``applicative.nn._sparse_attention``): temporaries pairs x features;
- ``dense``: ``mask=g.mask(hops=1)``, the same pairs as an n x n mask: the dense formula (the scores in
  chunks of 128 queries above 1,024 nodes: ``Softmax()``'s default), temporaries n x n for the mask.

Both compute the same values (``tests/applicative/test_graph.py`` checks them equal to numpy). The time is
the median over ``--repeats`` calls of each, side by side (``_timing.paired``: the ratio is the median of
the pairs' ratios); the memory is XLA's account of the compiled call's temporary buffers
(``memory_analysis``). A path whose compilation does not fit in memory is a row that says so.

    python bench/graphs.py                        # 1,024, 4,096 and 16,384 nodes (30 minutes on 2 CPU cores:
                                                  # the dense path at 16,384 nodes takes 3 minutes a call)
    python bench/graphs.py --nodes 256 --smoke    # one repeat: checks that the script runs

The columns: nodes, edges, path, forward+backward ms, sparse / dense time, temporary MB, sparse / dense memory.
"""

from __future__ import annotations

import argparse
import pathlib
import sys
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))  # the repository root

from _timing import DoesNotFit, or_does_not_fit, paired  # bench/, the script's directory

from applicative import Dim, Graph, Vec, nn, to_array

FEATURES = 64
HEADER = (
    "| nodes | edges | path | forward+backward ms | sparse / dense time | temporary MB | sparse / dense memory |\n"
    "|---|---|---|---|---|---|---|"
)


class Feature(Dim):
    """A node's feature."""


def random_graph(n: int, per_node: int, seed: int = 0) -> Graph[Vec[Feature, jax.Array]]:
    """n nodes of 64 float32 features, and per_node edges into each node from senders drawn at random."""
    rng = np.random.default_rng(seed)
    receivers = np.repeat(np.arange(n), per_node)
    senders = rng.integers(0, n, size=receivers.size)
    features = rng.normal(size=(n, FEATURES)).astype(np.float32)
    g = Graph.from_edges(np.stack([senders, receivers]), features)
    return g.fmap(lambda x: Vec.from_array(x, Feature))


def call(mask: str) -> Callable[[Graph[Any]], Any]:
    """``value_and_grad`` of the sum of squares of attention with this mask, over the node features."""

    def loss(values: Any, g: Graph[Any]) -> jax.Array:
        x = g.with_elements(values)
        m = x.edges() if mask == "sparse" else x.mask(hops=1)
        return jnp.sum(to_array(nn.attention(x, x, x, mask=m)) ** 2)

    grad = jax.value_and_grad(loss)
    return lambda g: grad(g.data, g)


def measure(n: int, per_node: int, repeats: int) -> list[str]:
    g = random_graph(n, per_node)
    edges = int(np.asarray(g.edge_valid()).sum())
    compiled: dict[str, Any] = {}
    memory: dict[str, float | DoesNotFit] = {}
    for path in ("sparse", "dense"):
        lowered = jax.jit(call(path)).lower(g)

        def compile_it(lowered: Any = lowered) -> Any:
            return lowered.compile()

        result = or_does_not_fit(compile_it)
        if isinstance(result, DoesNotFit):
            memory[path] = result
            continue
        compiled[path] = result
        analysis = result.memory_analysis()
        memory[path] = float(analysis.temp_size_in_bytes) / 1e6 if analysis is not None else float("nan")
    rows = []
    if len(compiled) == 2:
        sparse, dense, ratio = paired(lambda: compiled["sparse"](g), lambda: compiled["dense"](g), 1, repeats)
        times: dict[str, str] = {"sparse": f"{sparse * 1e3:.1f}", "dense": f"{dense * 1e3:.1f}"}
        time_ratio = f"{ratio:.3f}"
    else:
        times, time_ratio = dict.fromkeys(("sparse", "dense"), ""), ""
    s, d = memory["sparse"], memory["dense"]
    memory_ratio = f"{s / d:.4f}" if isinstance(s, float) and isinstance(d, float) and d > 0 else ""
    for path in ("sparse", "dense"):
        mb = memory[path]
        cell = f"{mb:.1f}" if isinstance(mb, float) else str(mb)
        first = path == "sparse"
        rows.append(
            f"| {n} | {edges} | {path} | {times[path]} | {time_ratio if first else ''} | {cell} | "
            f"{memory_ratio if first else ''} |"
        )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, nargs="+", default=[1024, 4096, 16384])
    parser.add_argument("--edges-per-node", type=int, default=6)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--smoke", action="store_true", help="one repeat a size")
    args = parser.parse_args()
    print(f"# {jax.devices()[0].platform}, JAX {jax.__version__}; {FEATURES} float32 features a node, "
          f"{args.edges_per_node} edges into each node")  # fmt: skip
    print(HEADER)
    for n in args.nodes:
        for row in measure(n, args.edges_per_node, 1 if args.smoke else args.repeats):
            print(row, flush=True)


if __name__ == "__main__":
    main()
