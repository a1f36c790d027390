"""Mutants of issue 63: graphs, attention over their edges, relational attention, and the CLRS port
(``tools/mutants.py`` runs them)."""

from __future__ import annotations

from mutant_records import NN, TA, mutant

GL, GR = "applicative/instances/graph_layout.py", "applicative/instances/graph.py"
EX = "applicative/examples/graphs/"
TG, TGE = TA + "test_graph.py::", TA + "test_graphs_example.py::"
TEST_MASKS = (TG + "test_masks_are_the_pairs_within_hops_against_breadth_first_search",)
TEST_SPARSE = (TG + "test_attention_over_the_edges_runs_on_the_pairs_and_equals_the_generic_definition",)
TEST_PORT = (TGE + "test_the_port_draws_the_benchmarks_graphs_and_outputs_sample_for_sample",)

MUTANTS = [
    mutant("graph-broken-layout-read", GL,
           "return jnp.where(whole[..., None], w, jnp.asarray(jnp.nan, kind))", "return w",
           "a layout JAX filled or whose slots it moved reads as a graph (no NaN)",
           TG + "test_a_map_over_every_leaf_is_refused_or_reads_nan"),
    mutant("graph-adjacency-transposed", GL,
           "dtype).at[r, s].max(valid.astype(dtype))", "dtype).at[s, r].max(valid.astype(dtype))",
           "a row of the adjacency lists what a node sends, not what it receives", *TEST_MASKS),
    mutant("graph-reach-without-itself", GL,
           "a = adjacency(lay, capacity, jnp.int32) | jnp.eye(capacity, dtype=jnp.int32)",
           "a = adjacency(lay, capacity, jnp.int32)",
           "the k-hop mask counts walks of exactly k edges, not of at most k", *TEST_MASKS),
    mutant("graph-reach-one-hop-more", GL,
           "steps = max(capacity - 1, 1) if hops is None else hops",
           "steps = max(capacity - 1, 1) if hops is None else hops + 1",
           "a mask of k hops sees k + 1", *TEST_MASKS),
    mutant("graph-reach-padding-seen", GL,
           "return out.astype(bool) & node_valid(lay, capacity)[:, None] & node_valid(lay, capacity)[None, :]",
           "return out.astype(bool)",
           "padding slots see themselves in a mask", *TEST_MASKS),
    mutant("graph-padding-edges-valid", GL,
           "    valid = edge[..., 0] == EDGE\n", "    valid = edge[..., 0] != NODE\n",
           "padding edge slots are edges (0 -> 0)", *TEST_MASKS, *TEST_SPARSE),
    mutant("graph-undirected-one-way", GR,
           "        if not directed:\n            pairs = np.unique(",
           "        if False:\n            pairs = np.unique(",
           "an undirected graph holds its edges one way only",
           TG + "test_a_graph_from_an_edge_list_an_adjacency_and_networkx_is_one_graph"),
    mutant("graph-pair-any-shapes", GR,
           "(mine is not theirs and not _traced(mine, theirs))", "False",
           "two graphs of different shapes zip", TG + "test_two_graphs_of_different_shapes_are_refused_by_name",
           equivalent="two concrete graphs of different shapes then meet the run-time check, which refuses them "
           "with the same ValueError, eagerly at once and under jit when the values are read: later, not never"),
    mutant("graph-traced-pair-unchecked", GR,
           '            data = _checked(data, jnp.stack([mine, theirs]), 1, "Graph.pair", "graph", _DIFFERENT)\n',
           "            pass\n",
           "two graphs of different shapes, arguments of a compiled function, zip",
           TG + "test_two_graphs_of_different_shapes_are_refused_by_name"),
    mutant("graph-counit-padding", GR,
           "return weighted_sum(m, self.weights(), self.data, self.capacity)",
           "return weighted_sum(m, None, self.data, self.capacity)",
           "the counit sums padding slots and ignores the measure",
           TG + "test_the_operations_agree_with_numpy_on_the_graphs_measure"),
    mutant("graph-cycle-accepted", GL,
           "    if len(order) < n:\n", "    if False:\n",
           "a DAG with a cycle is built (its order leaves nodes out)",
           TG + "test_a_dag_holds_its_topological_order_and_a_cycle_is_refused"),
    mutant("graph-edges-without-self", GR,
           "        if self.self_loops:\n            nodes = jnp.arange(g.capacity, dtype=jnp.int32)",
           "        if False:\n            nodes = jnp.arange(g.capacity, dtype=jnp.int32)",
           "the sparse mask's pairs leave each node's own out (its dense form keeps it)", *TEST_SPARSE),
    mutant("sparse-attention-unweighted", NN + "_sparse_attention.py",
           "        s = s + jnp.log(jnp.where(w[key] > 0, w[key], 1.0))\n", "",
           "attention over a sparse mask ignores the keys' measure", *TEST_SPARSE),
    mutant("relational-update-without-sender", NN + "_relational.py",
           "_relu(add(add(p[0], q[0]), edge_in(q[1])))", "_relu(add(p[0], edge_in(q[1])))",
           "a pair's message reads its receiver and itself, not its sender", TA + "test_relational.py",
           TA + "test_graphs_example.py::test_the_max_processors_step_is_its_formula_in_float64_numpy"),
    mutant("relational-values-without-pairs", NN + "_relational.py",
           "mixed = add(mul_mm(weights, v), weights.pair(pair_values).fmap(lambda p: mul_vm(p[0], p[1])))",
           "mixed = mul_mm(weights, v)",
           "the values read no pair vector", TA + "test_relational.py"),
    mutant("clrs-bfs-parent-overwritten", EX + "algorithms.py",
           "                    if pi[j] == j and j != s:", "                    if j != s:",
           "BFS's parent is the last frontier node to reach a node, not the first", *TEST_PORT),
    mutant("clrs-undirected-or", EX + "clrs.py",
           "        mat *= np.transpose(mat)", "        mat = np.maximum(mat, np.transpose(mat))",
           "an undirected edge where either draw holds it, not both", *TEST_PORT),
    mutant("clrs-score-counts-masked", EX + "clrs.py",
           "            keep = truth != MASKED", "            keep = truth == truth",
           "a mask's F1 counts the entries the benchmark masks (bridges' non-edges)",
           TGE + "test_the_score_is_the_mean_over_outputs_of_accuracy_or_f1"),
]  # fmt: skip
