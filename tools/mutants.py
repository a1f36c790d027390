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

ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Mutant:
    id: str
    file: str
    old: str
    new: str
    description: str
    tests: tuple[str, ...]
    equivalent: str = ""
    """Why the mutant cannot change behaviour ("" if it can)."""


def mutant(id: str, file: str, old: str, new: str, description: str, *tests: str, equivalent: str = "") -> Mutant:
    return Mutant(id, file, old, new, description, tests, equivalent)


NN, FF = "applicative/nn/", "funcformer/"
TA, TF = "tests/applicative/", "tests/funcformer/"
TEST_NN = TA + "test_nn.py::"
DY = "applicative/instances/dyadic.py"
TEST_DYADIC = (TA + "test_dyadic.py", DY)  # and the module's doctest
TEST_TRUST = (TF + "test_solver_trust.py",)
TEST_RESOLUTION = (TF + "test_resolution.py",)
TEST_CHECKPOINTS = (
    TF + "test_runs.py::test_a_checkpoint_reads_back_its_step_losses_seconds_and_stored_scale",
    TF + "test_runs.py::test_a_transposed_weight_is_refused_though_its_size_fits",
    TF + "test_poisson_train.py::test_a_resumed_runs_seconds_add_to_those_saved_in_its_checkpoint",
)
TEST_LOOP = (
    TF + "test_poisson_train.py::test_a_resumed_run_equals_an_uninterrupted_one",
    TF + "test_poisson_train.py::test_a_resumed_runs_seconds_add_to_those_saved_in_its_checkpoint",
    TF + "test_poisson_train.py::test_the_progress_bar_is_tqdms_and_counts_from_the_resumed_step",
)
DT, LW, PD = "applicative/instances/dense_tree.py", "applicative/laws/_dense.py", "applicative/protocols/dense.py"
TM, TS = "applicative/instances/_tree_meta.py", "applicative/instances/_tree_slots.py"  # dense_tree's
ST, LA = "applicative/stacked.py", "applicative/linalg.py"
FP, OP = "applicative/fast_paths.py", "applicative/operands.py"
TDT, TSM, TLW = TA + "test_dense_tree.py::", TA + "test_shape_and_measure.py::", TA + "test_laws.py::"
TEST_DT_DENSE_ONLY = (
    TDT + "test_pairing_trees_of_one_known_shape_is_a_zip",
    TDT + "test_dense_formulas_run_where_the_trees_share_a_shape",
    TDT + "test_training_on_a_batch_of_shapes_runs_only_dense_formulas",
)
TEST_SM_REFUSED = (
    TSM + "test_a_function_whose_values_are_trees_maps_their_values_and_keeps_their_shape",
    TSM + "test_a_function_whose_values_are_trees_of_different_shapes_is_refused",
    TSM + "test_trees_whose_rows_are_trees_of_different_shapes_contract_each_row_on_its_own_shape",
)
TEST_SM_ATTEND = (TSM + "test_a_function_attends_over_trees_by_their_values_not_their_layout",)
TEST_SM_NUMPY = (TSM + "test_numpy_leaves_take_the_formula_they_take_under_jit",)
TEST_SM_MEASURES = (TSM + "test_two_measures_of_one_tag_and_size_never_meet_in_a_dense_formula",)
TEST_SM_APART = (TSM + "test_functions_whose_values_are_trees_of_one_shape_built_apart_are_one_structure",)
TEST_DT_RECORDED = (
    TDT + "test_a_shape_recorded_inside_a_trace_is_kept_there_and_dropped_outside_it",
    TDT + "test_a_shape_recorded_inside_a_trace_is_known_in_a_vmap_inside_it",
)
TEST_DT_ADD_KINDS = (TDT + "test_add_takes_trees_of_different_capacities_as_one_kind_of_element_and_names_others",)
TEST_DT_JIT_VALUES = (TDT + "test_a_jit_serves_stacks_of_every_shape_with_their_own",)
TEST_GRADIENTS = (TA + "test_tree_gradients.py",)
TMO = TA + "test_maps_over_trees.py::"
TEST_MOVES = (TMO + "test_a_map_that_moves_whole_slots_moves_each_interval_with_its_value",)
TEST_FILLS = (TMO + "test_a_fill_is_the_constant_function_wherever_it_is_read",)
TEST_LW_TRANSPOSED = (TLW + "test_the_dense_check_catches_a_formula_that_reads_a_matrix_transposed",)
TUS, TDA = TA + "test_users_structures.py::", TA + "test_dense_attention.py::"
TEST_US_REFUSED = (TUS + "test_a_structure_that_transforms_every_leaf_is_refused_where_a_tree_is_rebuilt",
                   TUS + "test_a_tree_built_with_a_layout_that_is_no_layout_is_refused")  # fmt: skip
TEST_US_ONE_SHAPE = (TUS + "test_a_stack_of_trees_of_one_shape_is_one_shape_under_jit",)
TEST_US_COMPOSE = (TUS + "test_a_compose_of_a_function_of_trees_runs_its_generic_definitions",)
TEST_SM_SHIFT = (TSM + "test_the_softmax_shift_reads_values_never_a_shape", TDA + "test_on_a_grid_of_trees")
TEST_FIT = (TA + "test_training_fit.py",)
TEST_VIT_ANSWER = (
    TF + "test_fno_darcy_model.py::test_the_vit_answers_with_the_least_squares_series_of_its_values_in_the_datas_units",
)
TEST_BAD_ATTENTION = (TA + "test_bad_input.py::test_bad_input_raises_clearly_or_gives_the_right_value",)
DA, FD = "applicative/nn/_dense_attention.py", FF + "fno_darcy/"
# One mutant a few lines, not one argument a line:
# fmt: off
MUTANTS = [
    # Protocols and the law suite
    mutant("pointwise-add", "applicative/protocols/algebra.py",
           "self.inner.add(p[0], p[1])", "self.inner.add(p[0], p[0])",
           "Pointwise.add adds a to itself", TA + "test_laws.py::test_pointwise_module_laws_on_vectors",
           TA + "test_tree.py"),
    mutant("lift-a2-swap", "applicative/protocols/applicative.py",
           "return x.pair(y).fmap(lambda p: f(p[0], p[1]))", "return x.pair(y).fmap(lambda p: f(p[1], p[0]))",
           "lift_a2 passes its operands swapped", TA + "test_vector.py", TA + "test_chebyshev.py"),
    mutant("counit-module", "applicative/protocols/integration.py",
           "x.counit(module if module is not None else arithmetic())", "x.counit(arithmetic())",
           "counit ignores the Module it is given", TA + "test_distribution.py"),
    mutant("pairing-law-vacuous", "applicative/protocols/integration.py",
           "return counit(x.pair(y).fmap(lambda p: p[0]), m), counit(x, m)", "return counit(x, m), counit(x, m)",
           "the law 'counit respects pairing' compares counit(x) with itself", TA + "test_tree.py",
           TA + "test_laws.py::test_the_suite_catches_a_broken_instance",
           TA + "test_laws.py::test_the_suite_catches_a_counit_that_depends_on_refinement"),
    # Vec, Cheb, Tree, DenseTree, distributions
    mutant("vec-pair-size", "applicative/instances/vector.py",
           "if other.tag is not self.tag or other.size != self.size:", "if other.tag is not self.tag:",
           "Vec.pair no longer checks sizes", TA + "test_vector.py"),
    mutant("cheb-weights-sign", "applicative/instances/chebyshev.py",
           "np.where(k == 1, 1.0, 1.0 - k**2)", "np.where(k == 1, 1.0, 1.0 + k**2)",
           "integral weights 2/(1+k^2) for 2/(1-k^2)", TA + "test_chebyshev.py"),
    mutant("cheb-gram-parity", "applicative/instances/chebyshev.py",
           "np.where((i + j) % 2 == 0, w, 0.0)", "np.where((i + j) % 2 == 1, w, 0.0)",
           "Gram matrix keeps the odd i + j entries", TA + "test_chebyshev.py", TA + "test_fast_paths.py"),
    mutant("cheb-recurrence-sign", "applicative/instances/chebyshev.py",
           "2.0 * x * t[-1] - t[-2]", "2.0 * x * t[-1] + t[-2]",
           "three-term recurrence with + T_{n-2}", TA + "test_chebyshev.py"),
    mutant("cheb-points", "applicative/instances/cheb.py",
           "p = 2 * size if points is None else points", "p = size if points is None else points",
           "fmap samples N points by default, not 2N", TA + "test_chebyshev.py"),
    mutant("tree-counit-half", "applicative/instances/tree.py",
           "return m.scale(0.5, m.add(self.left.counit(m), self.right.counit(m)))",
           "return m.add(self.left.counit(m), self.right.counit(m))",
           "Tree counit drops the 1/2 of each node", TA + "test_tree.py"),
    mutant("tree-leaf-pair-swap", "applicative/instances/tree.py",
           "fmap(lambda b: (x, b))", "fmap(lambda b: (b, x))",
           "Leaf.pair against a Node swaps the pair", TA + "test_tree.py"),
    mutant("dyadic-root-weight", "applicative/instances/dyadic.py",
           "jnp.where(depth >= 0, power", "jnp.where(depth > 0, power",
           "a leaf at depth 0 (the root) weighs 0", TA + "test_dense_tree.py"),
    mutant("dyadic-layout-check", "applicative/instances/dyadic.py",
           "!= 1 << MAX_DEPTH or np.any(starts % lengths):", "!= 1 << MAX_DEPTH:",
           "layout accepts misaligned dyadic intervals",
           TA + "test_dense_tree.py::test_bad_trees_and_capacities_are_named"),
    # dyadic: the layout's bounds and words, the common refinement, shapes <-> depths (tests/applicative/test_dyadic.py
    # against exact integer arithmetic, and the module's doctest)
    mutant("dyadic-depth-limit", DY,
           "if (deepest := int(d.max())) > MAX_DEPTH:", "if (deepest := int(d.max())) >= MAX_DEPTH:",
           "a leaf at depth MAX_DEPTH = 60 exactly is refused", *TEST_DYADIC),
    mutant("dyadic-capacity-exact", DY,
           "capacity < d.size", "capacity <= d.size",
           "a tree of exactly `capacity` leaves is refused", *TEST_DYADIC),
    mutant("dyadic-lo-word", DY,
           "starts & (_END - 1)", "starts & _END",
           "the low word masked with 2^30, not 2^30 - 1", *TEST_DYADIC),
    mutant("dyadic-weights-unclamped", DY,
           "jnp.clip(depth, 0, MAX_DEPTH)", "depth",
           "padding's weight built as 2^1 before the mask", *TEST_DYADIC,
           equivalent="the where keeps 0 on padding (depth -1) whatever the other branch holds; 2^1 is finite, "
           "and an integer depth carries no gradient"),
    mutant("refine-capacity", DY,
           "capacity = n + m - 1", "capacity = n + m",
           "the refinement at capacity n + m, not n + m - 1", *TEST_DYADIC),
    mutant("refine-low-word-ignored", DY,
           "(hi[1:] != hi[:-1]) | (lo[1:] != lo[:-1])", "(hi[1:] != hi[:-1]) & (lo[1:] != lo[:-1])",
           "breakpoints that differ in one word only are merged", *TEST_DYADIC),
    mutant("refine-first-copy", DY,
           "last = jnp.append((hi[1:] != hi[:-1]) | (lo[1:] != lo[:-1]), True)",
           "last = jnp.append(True, (hi[1:] != hi[:-1]) | (lo[1:] != lo[:-1]))",
           "a shared breakpoint read at its first copy (one tree's start not yet seen)", *TEST_DYADIC),
    mutant("refine-keeps-end", DY,
           "keep = last & (hi < _END)", "keep = last",
           "the breakpoint 1 (padding's start) kept as a refined leaf", *TEST_DYADIC),
    mutant("refine-depth-min", DY,
           "jnp.maximum(ia.depth[slot_a]", "jnp.minimum(ia.depth[slot_a]",
           "a refined leaf takes the larger of the two leaves (the smaller depth)", *TEST_DYADIC),
    mutant("refine-filled-one-more", DY,
           "filled = jnp.arange(capacity) < jnp.sum(keep)", "filled = jnp.arange(capacity) <= jnp.sum(keep)",
           "the first padding slot of a refinement gets a depth", *TEST_DYADIC),
    mutant("refine-padding-start", DY,
           "place(hi, _END)", "place(hi, 0)",
           "a refinement's padding stored as starting at 0, not 1", *TEST_DYADIC,
           equivalent="a padding slot (depth code 0) is read as starting at 1 whatever its words hold"),
    mutant("shape-of-root-depth", DY,
           "if len(stack) != 1 or stack[0][0] != 0:", "if len(stack) != 1:",
           "shape_of accepts depths whose one subtree is not the root ([2, 2])", *TEST_DYADIC),
    mutant("depths-of-order", DY,
           'stack += [(s[1], depth + 1, f"{at}[1]"), (s[0], depth + 1, f"{at}[0]")]',
           'stack += [(s[0], depth + 1, f"{at}[0]"), (s[1], depth + 1, f"{at}[1]")]',
           "depths_of lists the leaves right to left", *TEST_DYADIC),
    mutant("dense-tree-valid", "applicative/instances/dense_tree.py",
           "return dyadic.intervals(self._slots()).depth >= 0", "return dyadic.intervals(self._slots()).depth > 0",
           "valid() excludes a root leaf", TA + "test_dense_tree.py"),
    mutant("dense-tree-pair-zip", "applicative/instances/dense_tree.py",
           "if mine is theirs:", "if self.capacity == other.capacity:",
           "pair zips trees of one capacity, whatever their shapes", TA + "test_dense_tree.py"),
    mutant("dense-tree-largest-padding", "applicative/instances/dense_tree.py",
           "return jnp.max(jnp.where(mask, leaf, -jnp.inf))", "return jnp.max(leaf)",
           "the softmax shift includes padding slots",
           TA + "test_dense_tree.py::test_attention_on_64_leaves_is_the_softmax_against_the_dyadic_measure",
           TA + "test_dense_tree.py::test_attention_and_the_encoder_agree_with_the_specification",
           equivalent="padding holds a copy of the first leaf, so the maximum is the same; and the softmax "
           "is invariant under the shift, which only keeps exp in range"),
    mutant("distribution-pair-transposed", "applicative/instances/distribution.py",
           "(self.weights[:, None] * o.weights[None, :])", "(self.weights[None, :] * o.weights[:, None])",
           "pair's weights transposed against its outcomes", TA + "test_distribution.py"),
    mutant("quantum-no-conjugate", "applicative/instances/distribution.py",
           "jnp.real(jnp.conj(self.weights) * together)", "jnp.real(self.weights * together)",
           "traced Born rule without the complex conjugate", TA + "test_distribution.py"),
    mutant("distribution-total-one-sided", "applicative/instances/distribution.py",
           "if abs(total - 1.0) > TOLERANCE:", "if total - 1.0 > TOLERANCE:",
           "a total below one is accepted", TA + "test_distribution.py", TA + "test_bad_input.py"),
    # Linear algebra, stacked storage, records
    mutant("dot-generic-square", "applicative/linalg.py",
           "return r.mul(p[0], p[1])",
           "return r.mul(p[0], p[0])",
           "generic dot multiplies a by itself", TA + "test_linalg.py", TA + "test_tree.py"),
    mutant("mul-mmt-layout", "applicative/linalg.py",
           '"mul_mmt", "fg,hg->hf"', '"mul_mmt", "fg,hg->fh"',
           "dense mul_mmt returns the transposed result", TA + "test_linalg.py"),
    mutant("gram-transposed", FP,
           "jnp.tensordot(array, gram, axes=[[i], [0]])", "jnp.tensordot(array, gram, axes=[[i], [1]])",
           "a Gram matrix applied transposed", TA + "test_fast_paths.py",
           equivalent="Gram matrices are symmetric: G^T = G"),
    mutant("scale-scalar-check", "applicative/linalg.py",
           "if isinstance(r, Applicative) or jnp.ndim(r) != 0:", "if isinstance(r, Applicative):",
           "scale accepts an array that broadcasts", TA + "test_linalg.py", TA + "test_bad_input.py"),
    mutant("weighted-sum-unweighted", "applicative/stacked.py",
           "jnp.sum(_along(_like(weights, leaf), leaf) * leaf, 0)", "jnp.sum(leaf, 0)",
           "leafwise weighted sum drops the weights", TA + "test_chebyshev.py"),
    mutant("weighted-sum-fold-unscaled", "applicative/stacked.py",
           "(module.scale(weights[i], element(data, i)) for i in range(n))", "(element(data, i) for i in range(n))",
           "the Module fold drops the weights", TA + "test_distribution.py"),
    mutant("record-rebuilt-through-init", "applicative/records.py",
           "jax.tree_util.register_pytree_with_keys(cls, flatten_with_keys, unflatten, flatten)",
           "jax.tree_util.register_dataclass(cls, data_fields=list(children), meta_fields=list(metadata))",
           "JAX rebuilds records through __init__, running their checks",
           TA + "test_nn_blocks.py::test_a_model_is_checked_when_built_and_never_when_jax_rebuilds_it",
           TA + "test_distribution.py"),
    # nn: attention, softmax, masks, MLP, layer norm, initialisers, transformer
    mutant("mha-init-heads-scaling", NN + "_multi_head.py",
           "Std(variance(values), variance(options.heads), options.output_gain)",
           "Std(variance(values), gain=options.output_gain)",
           "MultiHeadAttention.init without 1/sqrt(heads) on the output", TA + "test_init.py",
           TEST_NN + "test_multi_head_attention_matches_numpy"),
    mutant("softmax-unscaled", NN + "_normalisations.py",
           "lambda row, keep: _softmax_row(scale(factor, row), keep)", "lambda row, keep: _softmax_row(row, keep)",
           "Softmax without 1/sqrt(d_k)", TEST_NN + "test_attention_matches_numpy"),
    mutant("softmax-mask-inverted", NN + "_normalisations.py",
           "jnp.where(p[1], p[0], -jnp.inf)", "jnp.where(p[1], -jnp.inf, p[0])",
           "the mask hides the keys it should show", TEST_NN + "test_attention_matches_numpy",
           TA + "test_nn_users.py"),
    mutant("softmax-empty-row", NN + "_normalisations.py",
           "scale(1.0 / jnp.where(total > 0, total, 1.0), e)", "scale(1.0 / total, e)",
           "a fully masked row divides by zero", TEST_NN + "test_a_fully_masked_row_gives_zeros"),
    mutant("softmax-shift-gradient", NN + "_normalisations.py",
           "shift = jax.lax.stop_gradient(largest(row))", "shift = largest(row)",
           "the softmax shift is differentiated", TEST_NN + "test_gradients_match_finite_differences",
           TA + "test_dense_tree.py::test_gradients_agree_with_the_specification",
           equivalent="softmax is invariant under the shift, so its derivative through the shift is zero"),
    mutant("attention-dk-axis", NN + "_attention.py",
           "d_k = measure(counit(keys, Pointwise(ARITHMETIC)))", "d_k = measure(keys)",
           "d_k measures the keys, not the key features", TEST_NN + "test_attention_matches_numpy"),
    mutant("dot-product-transposed", NN + "_scores.py",
           "return mul_mmt(keys, queries)", "return mul_mmt(queries, keys)",
           "scores are one row per key", TEST_NN + "test_attention_matches_numpy"),
    mutant("relu-attention-measure", NN + "_normalisations.py",
           "per_key = factor / measure(row)", "per_key = factor",
           "ReluAttention not divided by the keys' measure", TEST_NN + "test_attention_matches_numpy"),
    mutant("linear-init-fan-out", NN + "_linear.py",
           "Std(variance(inputs), gain=gain)", "Std(variance(outputs), gain=gain)",
           "Linear.init scaled by fan-out", TA + "test_init.py"),
    mutant("draws-one-key", NN + "_base.py",
           "return jax.random.fold_in(self.root, next(self.requests))", "return jax.random.fold_in(self.root, 0)",
           "every request of an initialiser draws from one key (queries = keys = values)", TA + "test_init.py"),
    mutant("normal-blocks-one-key", NN + "_base.py",
           "jax.random.normal(jax.random.fold_in(key, j), (BLOCK,), dtype)", "jax.random.normal(key, (BLOCK,), dtype)",
           "a weight of several blocks repeats its first", TA + "test_init.py"),
    mutant("mlp-no-activation", NN + "_mlp.py",
           "self.output(self.hidden(x).fmap(self.activation))", "self.output(self.hidden(x))",
           "the MLP drops its activation", TEST_NN + "test_encoder_layer_and_encoder_match_numpy"),
    mutant("layer-norm-variance", NN + "_mlp.py",
           "counit(centred.fmap(jnp.square)) / n + self.eps", "counit(centred.fmap(jnp.square)) / (n - 1) + self.eps",
           "LayerNorm divides the variance by n - 1", TEST_NN + "test_encoder_layer_and_encoder_match_numpy"),
    mutant("layer-norm-eps-init", NN + "_mlp.py",
           "eps: float = 1e-5) -> LayerNorm[D]:", "eps: float = 1e-3) -> LayerNorm[D]:",
           "LayerNorm.init's eps 1e-5 -> 1e-3", TA + "test_init.py",
           TEST_NN + "test_encoder_layer_and_encoder_match_numpy"),
    mutant("layer-norm-eps-field", NN + "_mlp.py",
           "eps: float = static(default=1e-5)", "eps: float = static(default=1e-3)",
           "LayerNorm's field default eps 1e-5 -> 1e-3", TA + "test_init.py", TF + "test_funcformer.py"),
    mutant("encoder-mlp-residual", NN + "_blocks.py",
           "return add(x, norm_each(self.norm, x).fmap(self.mlp))", "return norm_each(self.norm, x).fmap(self.mlp)",
           "the feed-forward block drops its residual", TEST_NN + "test_encoder_layer_and_encoder_match_numpy"),
    mutant("decoder-cross-norm", NN + "_layers.py",
           "CrossAttentionBlock(self.cross, n2)", "CrossAttentionBlock(self.cross, n1)",
           "cross attention uses the self-attention's norm", TEST_NN + "test_encoder_decoder_matches_numpy",
           TA + "test_nn_users.py"),
    mutant("fixed-positions-gradient", NN + "_transformer.py",
           "self.positions if self.learned else jax.lax.stop_gradient(self.positions)", "self.positions",
           "fixed positional encodings get a gradient", TEST_NN + "test_positional_encodings"),
    mutant("causal-mask-upper", "applicative/nn/_sequence.py",
           "jnp.tril(jnp.ones((length, length), bool))", "jnp.triu(jnp.ones((length, length), bool))",
           "causal mask sees the future", TEST_NN + "test_decoder_is_autoregressive",
           TEST_NN + "test_encoder_decoder_matches_numpy", TA + "test_bad_input.py"),
    mutant("padding-mask-off-by-one", "applicative/nn/_sequence.py",
           "keep = jnp.arange(size) < length", "keep = jnp.arange(size) <= length",
           "padding mask shows one padded key", TA + "test_nn_users.py"),
    # funcformer: the model, the metric, training, the solver, the tasks
    mutant("along-y-no-transpose-back", FF + "model.py",
           "return transpose(self.layer(transpose(h)))", "return self.layer(transpose(h))",
           "a layer along y returns the transposed state", TF + "test_funcformer.py"),
    mutant("funcformer-residual-init", FF + "model.py",
           "1.0 / np.sqrt(2.0 * config.layers)", "1.0 / np.sqrt(config.layers)",
           "residual projections scaled by 1/sqrt(layers), not 1/sqrt(2 layers)", TF + "test_funcformer.py",
           TF + "test_init.py"),
    mutant("funcformer-samples", FF + "model.py",
           "return self.points or 2 * self.n", "return self.points or self.n",
           "nonlinear maps sample N points by default, not 2N", TF + "test_funcformer.py"),
    mutant("metric-grid-32", FF + "learning/metric.py",
           "GRID = 64\n", "GRID = 32\n",
           "the metric's grid 64 -> 32", TF + "test_poisson_task.py"),
    mutant("metric-norm-axis", FF + "learning/metric.py",
           "/ (u**2).sum(axis=(1, 2)))", "/ (u**2).sum())",
           "relative L2 divides by the whole batch's norm", TF + "test_poisson_task.py"),
    mutant("series-norm-transposed", "applicative/instances/collocation.py",
           "np.sum((gram(c.shape[-2]) @ c", "np.sum((gram(c.shape[-2]).T @ c",
           "norm2d (series_norm), a transposed Gram matrix", TF + "test_poisson_task.py", TA + "test_collocation.py",
           equivalent="the Gram matrix is symmetric"),
    mutant("minibatch-seed-per-run", "applicative/training/steps.py",
           "default_rng([seed, epoch])", "default_rng([seed, 0])",
           "the minibatch order is the same every epoch", TF + "test_poisson_train.py"),
    mutant("final-checkpoint", "applicative/training/loop.py",
           "if end % every == 0 or end == plan.steps or spent or stopped:", "if end % every == 0 or spent or stopped:",
           "no checkpoint at the last step unless it is a multiple of checkpoint_every",
           TF + "test_poisson_train.py", TF + "test_runs.py"),
    mutant("loss-unnormalised", FF + "learning/steps.py",
           "return l2_norm(predicted - target) / l2_norm(target)", "return l2_norm(predicted - target)",
           "the loss is the absolute, not relative, L2 error", TF + "test_poisson_train.py"),
    mutant("warmup-unclamped", "applicative/training/optimisers.py",
           "min(warmup, steps // 10)", "warmup",
           "the warm-up is not capped at a tenth of the steps", TF + "test_runs.py", TF + "test_poisson_train.py"),
    mutant("solver-output-scale", FF + "learning/solver.py",
           ".astype(work) * scale", ".astype(work)",
           "the solver drops the run's output scale", TF + "test_poisson_solver.py"),
    mutant("solver-floor-exponent", FF + "learning/solver.py",
           "np.clip(np.round(log2),", "np.clip(np.floor(log2),",
           "the factor split at floor(log2 c), not round", TF + "test_poisson_solver.py",
           equivalent="2^k 2^(l - k) u' is c u' for any integer k; round only keeps both factors in range"),
    mutant("poisson-normalise-exponent", FF + "poisson/__init__.py",
           "np.log2(norm) + exponent", "np.log2(norm) - exponent",
           "Poisson's factor with the exponent's sign flipped", TF + "test_poisson_task.py",
           TF + "test_poisson_solver.py"),
    mutant("darcy-normalise-sign", FF + "darcy/__init__.py",
           "return shifted, -m / np.log(2.0)", "return shifted, m / np.log(2.0)",
           "Darcy's factor exp(m) for exp(-m)", TF + "test_darcy_task.py", TF + "test_darcy_train.py"),
    mutant("darcy-gmres-tolerance", FF + "darcy/__init__.py",
           "_TOLERANCE = 1e-13\n", "_TOLERANCE = 1e-8\n",
           "GMRES stops at 1e-8, not 1e-13", TF + "test_darcy_task.py"),
    # funcformer: trust, a user's arrays, the resolution projection, checkpoints, the loop's accounting
    mutant("trust-spread-unfloored", FF + "learning/trust.py",
           "spread = np.maximum(std, FLOOR * np.max(std))", "spread = std",
           "a coefficient the training inputs never vary gets spread 0", *TEST_TRUST),
    mutant("trust-floor-absolute", FF + "learning/trust.py",
           "spread = np.maximum(std, FLOOR * np.max(std))", "spread = np.maximum(std, FLOOR)",
           "the spread's floor is 1e-3, not 1e-3 times the largest spread", *TEST_TRUST),
    mutant("trust-constant-inputs", FF + "learning/trust.py",
           "np.max(std) > 0", "np.max(std) >= 0",
           "training inputs that do not vary are calibrated against (spread 0)", *TEST_TRUST),
    mutant("trust-reference-mean", FF + "learning/trust.py",
           "float(np.median(draft.distance(train)))", "float(np.mean(draft.distance(train)))",
           "distances relative to the mean, not the median, training z", *TEST_TRUST),
    mutant("trust-distance-unreferenced", FF + "learning/trust.py",
           "distances = draft.distance(test_inputs) / reference", "distances = draft.distance(test_inputs)",
           "the distance threshold taken from z, not z / reference", *TEST_TRUST),
    mutant("trust-z-summed", FF + "learning/trust.py",
           "z = np.sqrt(np.mean(((", "z = np.sqrt(np.sum(((",
           "z sums the squared scores over the n x n coefficients instead of averaging them", *TEST_TRUST),
    mutant("trust-thresholds-swapped", FF + "learning/trust.py",
           "float(np.quantile(test_residuals, quantile)),\n        float(np.quantile(distances, quantile)),",
           "float(np.quantile(distances, quantile)),\n        float(np.quantile(test_residuals, quantile)),",
           "the residual and distance thresholds swapped", *TEST_TRUST),
    mutant("trust-zero-over-zero", FF + "learning/trust.py",
           "np.where(norms > 0, np.inf, 0.0)", "np.where(norms >= 0, np.inf, 0.0)",
           "relative: 0 / 0 is inf (a zero prediction of a zero input flagged)", *TEST_TRUST),
    mutant("trust-stored-zero-spread", FF + "learning/trust.py",
           "np.all(spread > 0)", "np.all(spread >= 0)",
           "a stored calibration with a spread of 0 is accepted", *TEST_TRUST),
    mutant("trust-stored-zero-threshold", FF + "learning/trust.py",
           "np.isfinite(v) and v > 0", "np.isfinite(v) and v >= 0",
           "a stored calibration with a threshold of 0 is accepted", *TEST_TRUST),
    mutant("solver-flag-at-threshold", FF + "learning/solver.py",
           "np.flatnonzero(~(values <= threshold))", "np.flatnonzero(~(values < threshold))",
           "a check exactly at its threshold is flagged", *TEST_TRUST),
    mutant("solver-flag-nan", FF + "learning/solver.py",
           "np.flatnonzero(~(values <= threshold))", "np.flatnonzero(values > threshold)",
           "a NaN check is not flagged", *TEST_TRUST),
    mutant("arrays-test-rows-last", FF + "learning/arrays.py",
           "rows = slice(train, train + count)", "rows = slice(samples - count, samples)",
           "an evaluation on fewer samples than the test set takes its last ones, not its first",
           TF + "test_arrays.py"),
    mutant("arrays-test-count-exact", FF + "learning/arrays.py",
           "if count > data.test_samples:", "if count >= data.test_samples:",
           "an evaluation on the whole test set is refused", TF + "test_arrays.py"),
    mutant("arrays-scale-rows", FF + "learning/arrays.py",
           "rows = slice(0, min(count, train))", "rows = slice(0, count)",
           "the output scale averages test samples too (training set under 1024)", TF + "test_arrays.py"),
    mutant("arrays-train-count-exact", FF + "learning/arrays.py",
           "elif count > train:", "elif count >= train:",
           "a run on the whole training set is refused", TF + "test_arrays.py"),
    mutant("arrays-exact-truncated", FF + "learning/arrays.py",
           "u[rows] if fine else None", "targets[rows] if fine else None",
           "the exact outputs are the truncated ones (the floor is 0)", TF + "test_arrays.py"),
    mutant("arrays-batch-default", FF + "learning/arrays.py",
           '"batch": min(_BATCH, train)', '"batch": _BATCH',
           "the default minibatch is not lowered to a smaller training set", TF + "test_arrays.py"),
    mutant("solver-normalise-unprojected", FF + "learning/solver.py",
           "inputs, log2_factors = problem.normalise(a.astype(work))",
           "inputs, log2_factors = problem.normalise(given.astype(work)); inputs = resized(inputs, n, n)",
           "the normalisation's factor taken from the input before its projection", *TEST_RESOLUTION),
    mutant("resized-axis", FF + "learning/metric.py",
           "a, b = min(p, c.shape[1]), min(q, c.shape[2])", "a, b = min(p, c.shape[1]), min(p, c.shape[2])",
           "the projection cuts y at x's count", *TEST_RESOLUTION),
    mutant("resized-one-axis-shortcut", FF + "learning/metric.py",
           "if c.shape[1:] == (p, q):", "if c.shape[1] == p:",
           "an input at the model's count in x is not projected in y", *TEST_RESOLUTION),
    mutant("solver-answer-at-model-count", FF + "learning/solver.py",
           "return resized(result, *given.shape[1:]), inputs, unit", "return result, inputs, unit",
           "the answer at the model's count, not the input's", *TEST_RESOLUTION),
    mutant("solver-answer-transposed-count", FF + "learning/solver.py",
           "resized(result, *given.shape[1:])", "resized(result, *given.shape[:0:-1])",
           "the answer at Q x P for a P x Q input", *TEST_RESOLUTION),
    mutant("checkpoint-seconds-lost", "applicative/training/checkpoints.py",
           'seconds = float(stored["seconds"])', "seconds = 0.0",
           "a checkpoint's training seconds are not read back", *TEST_CHECKPOINTS),
    mutant("checkpoint-zero-scale", "applicative/training/checkpoints.py",
           "np.isfinite(stored_scale) and stored_scale > 0", "np.isfinite(stored_scale) and stored_scale >= 0",
           "a stored output scale of 0 is accepted", *TEST_CHECKPOINTS),
    mutant("checkpoint-scale-override", "applicative/training/checkpoints.py",
           'stored_scale = float(stored["output_scale"]) if "output_scale" in stored.files else None',
           'stored_scale = scale if scale is not None else float(stored["output_scale"]) '
           'if "output_scale" in stored.files else None',
           "a scale passed to load overrides the stored one", *TEST_CHECKPOINTS),
    mutant("checkpoint-shape-by-size", "applicative/training/checkpoints.py",
           "if leaf.shape != array.shape:", "if leaf.size != array.size:",
           "a transposed weight (its size right, its shape not) is accepted", *TEST_CHECKPOINTS),
    mutant("loop-resumed-seconds", "applicative/training/loop.py",
           "start, first = time.perf_counter() - state.seconds, state.step",
           "start, first = time.perf_counter(), state.step",
           "a resumed run's seconds restart from 0", *TEST_LOOP),
    mutant("loop-resumed-losses", "applicative/training/loop.py",
           "losses, pending = list(state.losses), list[jax.Array]()", "losses, pending = [], list[jax.Array]()",
           "a resumed run forgets the losses before it", *TEST_LOOP),
    mutant("loop-epoch-ceil", "applicative/training/data.py",
           "return self.count // self.batch", "return -(-self.count // self.batch)",
           "an epoch counts the last incomplete batch",
           TF + "test_poisson_train.py::test_the_loop_takes_the_documented_minibatches_on_the_device"),
    mutant("loop-saved-step", "applicative/training/loop.py",
           "State(model, opt_state, end, losses", "State(model, opt_state, end - 1, losses",
           "a checkpoint counts one step fewer than it holds", *TEST_LOOP),
    mutant("loop-mid-epoch-order", "applicative/training/loop.py",
           "if epoch != self.epoch:", "if epoch != self.epoch and step % data.per_epoch == 0:",
           "a run resumed mid-epoch draws no order for it", *TEST_LOOP),
    mutant("loop-bar-initial", "applicative/training/loop.py",
           "initial=first", "initial=0",
           "the progress bar of a resumed run counts from 0", *TEST_LOOP),
    mutant("loop-diverged-step", "applicative/training/loop.py",
           "at step {len(losses)}; stopped", "at step {len(losses) + 1}; stopped",
           "a non-finite loss reported one step late",
           TF + "test_runs.py::test_a_non_finite_loss_is_reported_at_its_own_step_after_the_last_checkpoint",
           TF + "test_runs.py::test_the_progress_bars_reads_change_no_loss_checkpoint_or_report"),
    mutant("loop-read-all-pending", "applicative/training/loop.py",
           "read(len(pending) - 1)", "read(len(pending))",
           "the progress bar waits for the newest step's loss",
           TF + "test_runs.py::test_the_progress_bars_reads_change_no_loss_checkpoint_or_report",
           TF + "test_poisson_train.py::test_the_progress_bar_is_tqdms_and_counts_from_the_resumed_step",
           equivalent="only when losses are read changes (one step behind, between checkpoints): they are "
           "appended in step order either way, every checkpoint reads all of them first, and a non-finite one is "
           "reported with the same step"),
    # dense_tree with _tree_meta and _tree_slots (pair's zip, a stack's one shape, restack, provenance, the Dense
    # hook), laws.check_dense, Axis equality, along and sums_leafwise, linalg's meeting levels, coordinates and
    # alike elements
    # (docs/mutants.md, "The dense tree and the Dense hook")
    mutant("dt-pair-zip-own-layout", DT,
           'mine, theirs = self._shape("pair"), other._shape("pair")', "mine, theirs = self.layout, other.layout",
           "pair zips trees of one layout object only, never rows of one origin (they refine)",
           TDT + "test_pairing_trees_of_one_known_shape_is_a_zip", *TEST_SM_APART),
    mutant("dt-pair-zip-origin-dropped", DT,
           "return _tree((self.data, other.data), self.layout, self.capacity, self.origin)",
           "return _tree((self.data, other.data), self.layout, self.capacity)",
           "a zip of two rows of one origin forgets it", *TEST_SM_APART),
    mutant("dt-shape-stack-as-one", TM,
           "if jnp.ndim(self.layout) == 1 and dyadic.is_layout(self.layout):",
           "if jnp.ndim(self.layout) >= 1 and dyadic.is_layout(self.layout):",
           "a stack of trees of different shapes is taken for one tree", *TEST_SM_REFUSED),
    mutant("dt-one-shape-origin-ignored", TM,
           "if (shape := self._shape(None)) is not None:",
           "if jnp.ndim(self.layout) == 1 and (shape := self._shape(None)) is not None:",
           "a stack's origin is not consulted, only its rows (traced rows: refused)", *TEST_SM_ATTEND),
    mutant("dt-alike-rows-any", TM,
           "if not (rows == rows[:1]).all():", "if not (rows == rows[:1]).any():",
           "rows alike in one word of one slot pass for one shape", *TEST_SM_REFUSED),
    mutant("dt-alike-rows-self", TM,
           "if not (rows == rows[:1]).all():", "if not (rows[:1] == rows[:1]).all():",
           "each row compared with row 0 reads row 0 twice", *TEST_SM_REFUSED),
    mutant("dt-alike-rows-single", TM,
           "if jnp.ndim(layout) < 2 or", "if jnp.ndim(layout) <= 2 or",
           "a stack of one axis of trees is never read as one shape", *TEST_SM_REFUSED,
           TDT + "test_a_tree_whose_rows_are_trees_of_one_shape_contracts_them_by_the_dense_formula",
           TA + "test_users_structures.py::test_to_array_reads_a_structure_of_trees_made_inside_jit"),
    mutant("dt-interned-uncached", DY,
           "@functools.lru_cache(maxsize=4096)\n", "",
           "layouts of one shape are not interned (stacks built apart: two origins)", *TEST_SM_APART),
    mutant("dt-restack-element-axes-after", DT,
           "(jnp.ndim(before[0]) - jnp.ndim(self.layout))", "(jnp.ndim(after[0]) - jnp.ndim(self.layout))",
           "the element axes counted on the mapped values (an evaluation drops a stack axis)", *TEST_SM_REFUSED),
    mutant("dt-restack-unbroadcast", DT,
           "jnp.broadcast_to(shape, (*stack_axes, self.capacity)), self.capacity, shape)",
           "shape, self.capacity, shape)",
           "the layout is not broadcast along the new stack axes", *TEST_SM_REFUSED),
    mutant("dt-restack-origin-dropped", DT,
           "jnp.broadcast_to(shape, (*stack_axes, self.capacity)), self.capacity, shape)",
           "jnp.broadcast_to(shape, (*stack_axes, self.capacity)), self.capacity)",
           "a restacked stack forgets its one shape (inside jit: the next transform refuses it)", *TEST_SM_ATTEND),
    mutant("dt-build-unshared", DT,
           "return DenseTree(_shared(data), lay, capacity)", "return DenseTree(data, lay, capacity)",
           "a tree built of trees of one shape does not record it (its rows never meet)",
           TDT + "test_a_tree_whose_rows_are_trees_of_one_shape_contracts_them_by_the_dense_formula"),
    mutant("dt-apart-layout-ignored", TM,
           "own = layout._trace if isinstance(layout, jax.core.Tracer) else None", "own = None",
           "values traced with their layout count as traced apart (a scan's outputs of several shapes: one)",
           TDT + "test_trees_are_carried_through_scan_cond_and_loops",
           TDT + "test_a_stack_made_in_a_trace_is_one_shape_only_where_its_rows_are"),
    mutant("dt-unflatten-origin-unchecked", TM,
           "(tangent or meta.one) and _visible(meta.shape, (data, layout)):", "(tangent or meta.one):",
           "a recorded shape is trusted wherever the tree is rebuilt (a finished trace's, a first call's)",
           *TEST_DT_RECORDED, *TEST_DT_JIT_VALUES),
    mutant("dt-visible-concrete-staged", TM,
           "return not any(_staged(leaf) for leaf in traced)", "return True",
           "a concrete shape is trusted inside a jit (which serves other values)", *TEST_DT_JIT_VALUES),
    mutant("dt-concrete-stack-trusts-record", TM,
           "origin = None if stacked and not tangent and not isinstance(layout, jax.core.Tracer) else meta.shape",
           "origin = meta.shape",
           "a concrete stack takes the recorded shape (a jit's first call's), not its own first row",
           *TEST_DT_JIT_VALUES),
    mutant("dt-visible-placeholders", TM,
           'object.__setattr__(tree, "_meta", meta)  # JAX', "None  # JAX",
           "placeholders (a tree_map's axis spec) lose the metadata they were built from", *TEST_DT_RECORDED),
    mutant("dt-visible-own-trace", TM,
           "return any(trace is shape._trace for leaf in traced for trace in _traces(leaf))", "return bool(traced)",
           "a traced shape is visible wherever the tree is traced (a finished trace's too)", *TEST_DT_RECORDED),
    mutant("dt-visible-no-parent", TM,
           'trace = getattr(trace, "parent_trace", None)', "trace = None",
           "an origin is visible in its own trace only, not in a vmap or grad inside it",
           TDT + "test_training_on_a_batch_of_shapes_runs_only_dense_formulas", *TEST_DT_RECORDED),
    mutant("dt-counit-module", DT,
           "m = module if module is not None else arithmetic()\n        return weighted_sum(m, self.weights()",
           "m = arithmetic()\n        return weighted_sum(m, self.weights()",
           "DenseTree.counit ignores the Module it is given",
           TDT + "test_the_counit_folds_through_the_module_it_is_given"),
    mutant("dt-plain-sum-padding", DT,
           "weighted_sum(m, self.valid().astype(jnp.result_type(float)), self.data, self.capacity)",
           "weighted_sum(m, None, self.data, self.capacity)",
           "plain_sum adds the padding slots too", TDT + "test_pair_is_the_common_refinement"),
    mutant("dt-largest-padding-zero", DT,
           "jnp.where(mask, leaf, -jnp.inf)", "jnp.where(mask, leaf, 0.0)",
           "largest reads padding as 0 (leaves all negative: 0)",
           TDT + "test_the_largest_value_is_a_leafs_when_every_leaf_is_negative"),
    mutant("dt-take-traced-on-host", TS,
           "(isinstance(index, np.ndarray) and not _device_only(leaf))", "isinstance(index, np.ndarray)",
           "a traced value laid out on the host (DenseTree.stack inside jit)",
           TDT + "test_trees_are_built_from_values_traced_inside_jit"),
    mutant("dt-take-numpy-on-device", TS,
           "if isinstance(leaf, np.ndarray) or (isinstance", "if (isinstance",
           "numpy values gathered at a device index (pair's) on the device", *TEST_SM_NUMPY,
           TDT + "test_pair_is_the_common_refinement",
           equivalent="where the gather runs changes, not its values: jnp.take of a numpy leaf at a device index "
           "is the np.take of it"),
    mutant("dt-build-padding-last", DT,
           "np.zeros(capacity - n, int)", "np.full(capacity - n, n - 1)",
           "padding holds copies of the last leaf, not the first",
           TDT + "test_conversions_round_trip_and_keep_the_shape"),
    mutant("dt-axes-identity-gram", DT,
           "dyadic.weights(shape), _Shared(shape)", "None, _Shared(shape)",
           "the Gram matrix of a tree's axis is the identity (the counting measure)", *TEST_SM_NUMPY),
    mutant("dt-axes-gram-own-layout", DT,
           "dyadic.weights(shape), _Shared(shape)", "dyadic.weights(self.layout), _Shared(shape)",
           "a stack's Gram diagonal taken from its stacked layout (a matrix), not its one shape",
           TDT + "test_cross_attention_between_trees_vectors_and_functions",
           TDT + "test_the_linear_algebra_agrees_with_the_specification"),
    mutant("dt-axes-shared-own-layout", DT,
           "dyadic.weights(shape), _Shared(shape)", "dyadic.weights(shape), _Shared(self.layout)",
           "a stack's axis identified by its stacked layout (never meets the tree it came from)",
           *TEST_DT_DENSE_ONLY),
    mutant("dt-with-elements-own-layout", DT,
           '_tree(elements, self._shape("with_elements"), self.capacity)',
           "_tree(elements, self.layout, self.capacity, self.origin)",
           "with_elements keeps a stack's own layout (and takes any stack)",
           TDT + "test_the_linear_algebra_agrees_with_the_specification",
           TDT + "test_with_elements_refuses_a_stack_of_trees_of_different_shapes"),
    # laws.check_dense
    mutant("laws-gram-symmetry-self", LW,
           "not np.allclose(g, g.T, rtol=1e-12", "not np.allclose(g, g, rtol=1e-12",
           "the Gram matrix's symmetry compared with itself",
           TLW + "test_the_dense_check_catches_an_asymmetric_gram_matrix"),
    mutant("laws-definite-floor-strict", LW,
           "np.min(eigenvalues) <= floor)", "np.min(eigenvalues) < floor)",
           "a Gram matrix whose smallest eigenvalue is exactly the floor (a zero matrix: 0) is definite",
           TLW + "test_the_dense_check_refuses_a_gram_matrix_of_zeros"),
    mutant("laws-semidefinite-dropped", LW,
           "(axis.shape is None and np.min(eigenvalues) <= floor)", "np.min(eigenvalues) <= floor",
           "a measure that is data (a tree's, 0 on padding) must be definite too",
           TLW + "test_structure_laws[default-DenseTree]"),
    mutant("laws-negative-weight-accepted", LW,
           "if np.min(eigenvalues) < -floor or (", "if (",
           "a negative eigenvalue (a negative weight of a measure that is data) is accepted",
           TLW + "test_the_dense_check_refuses_a_negative_weight_of_a_measure_that_is_data"),
    mutant("laws-exact-zero", LW,
           "if not 1 <= exact <= axis.size:", "if not 0 <= exact <= axis.size:",
           "Axis.exact = 0 (nothing compared) is accepted",
           TLW + "test_the_dense_check_refuses_an_exactness_that_leaves_nothing_to_compare"),
    mutant("laws-exact-unbounded", LW,
           "if not 1 <= exact <= axis.size:", "if not 1 <= exact:",
           "Axis.exact beyond the axis's size is accepted",
           TLW + "test_the_dense_check_refuses_an_exactness_beyond_the_axis"),
    mutant("laws-counit-unchecked", LW,
           "        _check_counit(x, y, xyz, rtol, atol)\n", "",
           "the counit's own laws are not checked first (a wrong counit blamed on the hook)",
           TLW + "test_the_dense_check_blames_a_wrong_counit_not_the_hook"),
    mutant("laws-mmt-one-matrix", LW,
           '"mul_mmt": lambda: mul_mmt(a, b),', '"mul_mmt": lambda: mul_mmt(a, a),',
           "mul_mmt checked on one matrix (a a^T: a transposed result passes)",
           TLW + "test_the_dense_check_catches_a_formula_that_transposes_its_result"),
    mutant("laws-b-symmetric", LW,
           "add(outer(y, z), outer(x, x))", "add(outer(y, z), outer(z, y))",
           "b is symmetric (a formula that reads b transposed passes)", *TEST_LW_TRANSPOSED),
    mutant("laws-a-symmetric", LW,
           "a, b = add(outer(x, y), outer(z, x))", "a, b = add(outer(x, y), outer(y, x))",
           "a is symmetric (a formula that reads a transposed passes)", *TEST_LW_TRANSPOSED),
    mutant("laws-outer-one-vector", LW,
           '"outer": lambda: outer(x, y),', '"outer": lambda: outer(x, x),',
           "outer checked on one vector (a transposed outer product passes)",
           TLW + "test_the_dense_check_catches_an_outer_product_transposed"),
    mutant("laws-any-formula-ran", LW,
           "if op not in taken:", "if not taken:",
           "an operation passes if any dense formula ran (mul_mm declined, its rows' mul_vm ran)",
           TLW + "test_the_dense_check_catches_a_hook_that_declines_a_product_of_matrices"),
    mutant("laws-exact-one-more", LW,
           "(jnp.arange(axis.size) < exact)", "(jnp.arange(axis.size) <= exact)",
           "one coordinate beyond Axis.exact kept (a Cheb's product then truncated)",
           TLW + "test_structure_laws[default-Cheb]"),
    # Axis equality
    mutant("axis-eq-shape-ignored", PD,
           " or self.shape != other.shape:", ":",
           "two trees of one capacity meet whatever their shapes",
           TDT + "test_the_linear_algebra_agrees_with_the_specification"),
    mutant("axis-eq-shape-needs-gram", PD,
           "return self.shape is not None or _same_gram(self.gram, other.gram)",
           "return _same_gram(self.gram, other.gram)",
           "axes of one shape also compare their Gram matrices (traced: never equal)", *TEST_DT_DENSE_ONLY),
    mutant("axis-eq-size-ignored", PD,
           "(self.kind, self.tag, self.size) != (other.kind, other.tag, other.size)",
           "(self.kind, self.tag) != (other.kind, other.tag)",
           "axes of different sizes are equal", TA + "test_linalg.py::test_dimension_mismatches_name_both_sides",
           TA + "test_fast_paths.py::test_mismatched_levels_are_named"),
    mutant("same-gram-identity-dropped", PD,
           "    if a is b:\n        return True\n", "",
           "one traced Gram matrix is not equal to itself", *TEST_SM_MEASURES),
    mutant("same-gram-traced-compared", PD,
           " or isinstance(a, jax.core.Tracer) or isinstance(b, jax.core.Tracer):", ":",
           "traced Gram matrices compared by value", *TEST_SM_MEASURES),
    mutant("same-gram-none-unchecked", PD,
           "if a is None or b is None or isinstance(a", "if isinstance(a",
           "a None Gram matrix (the identity) compared as an array", *TEST_SM_MEASURES,
           equivalent="np.asarray(None) is a 0-d object array: np.array_equal of it and a Gram matrix (1-D or 2-D) "
           "is False, as the check returns; two Nones are one object, caught by `a is b`"),
    mutant("same-gram-close", PD,
           "np.array_equal(np.asarray(a), np.asarray(b))", "np.allclose(np.asarray(a), np.asarray(b))",
           "Gram matrices equal to rounding are one measure", *TEST_SM_MEASURES,
           TSM + "test_gram_matrices_that_differ_in_their_last_bit_are_two_measures"),
    # along, sums_leafwise
    mutant("along-into-shaped", ST,
           "return cast(T, jax.tree_util.tree_map(one, data, is_leaf=_shaped))",
           "return cast(T, jax.tree_util.tree_map(one, data))",
           "along maps a tree's layout too (the DCT of its depths)", *TEST_SM_REFUSED),
    mutant("along-restack-flat", ST,
           "x.restack(lambda inner: along(inner, f, what), what)", "x.restack(f, what)",
           "a tree's values mapped by f as one array, not leaf by leaf through along",
           TSM + "test_a_function_whose_values_are_trees_of_vectors_is_evaluated_leaf_by_leaf"),
    mutant("sums-leafwise-shaped", ST,
           "return not any(_shaped(node) for node in jax.tree_util.tree_leaves(data, is_leaf=_shaped))",
           "return True",
           "stacked trees summed leaf by leaf (their layouts added)",
           TDT + "test_ordinary_arithmetic_adds_trees_through_pair"),
    # The dense formulas and the operand checks: levels that meet, coordinates, alike elements
    mutant("meet-capacity-raises", FP,
           "(x.size == y.size or x.shape is not None)", "x.size == y.size",
           "trees of different capacities raise a dimension mismatch instead of refining",
           TDT + "test_pair_is_the_common_refinement"),
    mutant("meet-size-ignored", FP,
           "x.kind == y.kind and x.tag == y.tag and (x.size == y.size or x.shape is not None)",
           "x.kind == y.kind and x.tag == y.tag",
           "levels of different sizes take the generic definition instead of raising",
           TA + "test_linalg.py::test_dimension_mismatches_name_both_sides",
           TA + "test_fast_paths.py::test_mismatched_levels_are_named"),
    mutant("coordinates-numpy-refused", FP,
           "if not isinstance(x, jax.Array | np.ndarray) or x.ndim", "if not isinstance(x, jax.Array) or x.ndim",
           "numpy coordinates take the generic definition", *TEST_SM_NUMPY),
    mutant("coordinates-asarray-dropped", FP,
           "    x = jnp.asarray(x)  # numpy coordinates", "    pass  # numpy coordinates",
           "numpy coordinates enter the formula as numpy arrays", *TEST_SM_NUMPY,
           equivalent="every later use is a jnp function (einsum, tensordot, moveaxis, a product with a jnp array), "
           "which converts a numpy array as jnp.asarray does; shape, ndim, size and dtype read the same on both"),
    mutant("one-kind-shaped-unmatched", OP,
           "            if type(u) is not type(w):\n                return False\n", "",
           "a tree and another Shaped structure (or an array) pass for one kind", *TEST_DT_ADD_KINDS),
    # Issue 43: a user's structure as safe as the library's own; the mutants an independent seeding of the newest
    # code left alive (docs/mutants.md, "A user's structure"), and the code written for the issue
    mutant("dense-attention-nodal-any", DA,
           "return all(axis.nodal for axis in level)", "return any(axis.nodal for axis in level)",
           "keys with one nodal axis of two (a Compose of a Vec and coefficients) take the dense formula",
           TDA + "test_keys_on_a_compose_of_coefficients_take_the_generic_path"),
    mutant("dense-attention-log-weight-sum", DA,
           "w = along if w is None else w * along", "w = along if w is None else w + along",
           "the product measure of two weighted axes (a grid of trees) taken as the sum of the weights",
           TDA + "test_on_a_grid_of_trees"),
    mutant("coarse-solution-cell-centres", FD + "data.py",
           "spline, back = _spline(r, n, subsampled=True), _spline(out, n, back=True, subsampled=True)",
           "spline, back = _spline(r, n), _spline(out, n, back=True, subsampled=True)",
           "the solver's input read at the r-grid's own cell centres, not at the benchmark's points",
           TF + "test_fno_darcy_data.py::test_coarse_solution_reads_its_input_at_the_benchmarks_points"),
    mutant("fno-fit-order-restarts-on-resume", "applicative/training/loop.py",
           "self.order = place(epoch_order(plan.seed, epoch, data.count)",
           "self.order = place(epoch_order(plan.seed, self.epoch + 1, data.count)",
           "a resumed run visits its epochs in the orders of the first ones", *TEST_FIT),
    mutant("fno-fit-one-order", "applicative/training/loop.py",
           "self.order = place(epoch_order(plan.seed, epoch, data.count)",
           "self.order = place(epoch_order(plan.seed, 0, data.count)",
           "every epoch visits the training set in one order", *TEST_FIT),
    mutant("fno-fit-seconds-lost", "applicative/training/loop.py",
           "start, first = time.perf_counter() - state.seconds, state.step",
           "start, first = time.perf_counter(), state.step",
           "the training seconds are the last session's, not every session's", *TEST_FIT),
    mutant("fit-no-held-out-every-k", "applicative/training/loop.py",
           "(epoch + 1) % plan.validate_every == 0 or epoch == last", "epoch == last",
           "the held-out error only at the last epoch", *TEST_FIT),
    mutant("fit-budget-ignored", "applicative/training/loop.py",
           "time.perf_counter() - session > plan.seconds", "time.perf_counter() - session > 1e30",
           "a budget in seconds never stops the run", *TEST_FIT),
    mutant("preemption-ignored", "applicative/training/loop.py",
           "stopped = preempted(end)", "stopped = False",
           "SIGTERM is recorded but never stops the run", *TEST_FIT),
    mutant("rendezvous-duplicate-id", "applicative/training/hosting.py",
           "if i in peers:  # an id given twice", "if False:",
           "a second process with a taken id replaces the first", TF + "test_rendezvous.py"),
    mutant("rendezvous-proof-unchecked", "applicative/training/hosting.py",
           'if not proven(hello["proof"]', 'if False and not proven(hello["proof"]',
           "process 0 takes any hello of the protocol, proven or not", TF + "test_rendezvous.py"),
    mutant("lifeline-goodbye-ignored", "applicative/training/lifeline.py",
           "if _is(line, BYE):", "if False:",
           "a process that ends in order is reported dead", TF + "test_lifeline.py"),
    mutant("sigterm-not-deferred", "applicative/training/stopping.py",
           "    if _state.deferring:", "    if False:",
           "SIGTERM cuts a run directory from its config.json", TA + "test_training_command.py"),
    mutant("resume-refuses-a-run-without-checkpoint", "applicative/training/loop.py",
           'return stored(out) if (out / CHECKPOINT).exists() else b""', "return stored(out)",
           "--resume of a run stopped before its first checkpoint is refused", TA + "test_training_command.py"),
    mutant("augment-key-per-run", "applicative/training/steps.py",
           "learner.augment(jax.random.fold_in(jax.random.key(seed), i), inputs, targets)",
           "learner.augment(jax.random.key(seed), inputs, targets)",
           "every step draws the same symmetries", TA + "test_training_symmetry.py"),
    mutant("augment-targets-unmoved", "applicative/training/symmetry.py",
           "return moved(x, k), moved(t, k)", "return moved(x, k), t",
           "an input moved by a symmetry keeps its unmoved target", TA + "test_training_symmetry.py"),
    mutant("augment-moments-unsymmetrised", FD + "recipes.py",
           "mean, square = symmetrised(mean), symmetrised(std**2 + mean**2)", "square = std**2 + mean**2",
           "the augmented ViT's output unit from the unaugmented data's moments",
           TF + "test_fno_darcy_model.py::test_the_augmented_vits_unit_is_the_symmetric_datas"),
    mutant("vit-window-unpadded", FD + "vit.py",
           "padded = jnp.pad(image, c) if c else image", "padded = image",
           "the windows cut from the image unpadded (JAX clamps the indices past its edge)",
           TF + "test_fno_darcy_model.py::test_the_vits_tokens_are_each_cells_window_of_the_zero_padded_image"),
    mutant("vit-moments-decayed", FD + "vit.py",
           "lambda path, _: path[0] not in fixed", "lambda path, _: True",
           "the weight decay shrinks the data's moments too",
           *TEST_VIT_ANSWER),
    mutant("vit-scale-dropped", FD + "vit.py",
           "return (mean + std * out) * self.scale", "return mean + std * out",
           "the ViT's answer not in the training targets' unit",
           *TEST_VIT_ANSWER),
    mutant("image-scaling-hard-coded", FD + "model.py",
           "middle, half = (high + low) / 2, (high - low) / 2", "middle, half = 7.5, 4.5",
           "the image read between 3 and 12 whatever the data's values",
           TF + "test_fno_darcy_model.py::test_the_input_is_read_between_the_datas_two_values"),
    mutant("patches-untransposed", FD + "model.py",
           "image.reshape(g // p, p, g // p, p).transpose(0, 2, 1, 3).reshape(",
           "image.reshape(g // p, p, g // p, p).reshape(",
           "tokens are strips of p rows, not p x p patches",
           TF + "test_fno_darcy_model.py::test_patches_are_the_p_by_p_blocks_of_the_image_row_by_row"),
    mutant("laws-scale-by-one", LW,
           '"scale": lambda: scale(-1.5, x),', '"scale": lambda: scale(1.0, x),',
           "check_dense checks scale with the factor 1 (a scale that ignores its factor passes)",
           TLW + "test_the_dense_check_catches_a_scale_that_ignores_its_factor"),
    mutant("laws-tolerance-per-entry", LW,
           "scale = float(np.max(np.abs(y), initial=0.0, where=np.isfinite(y)))", "scale = np.abs(y)",
           "check_dense's tolerance entry by entry: a right hook fails on a product's rounding",
           TLW + "test_the_dense_check_judges_each_result_at_its_own_scale"),
    mutant("same-gram-traced-one-side", PD,
           "or isinstance(a, jax.core.Tracer) or isinstance(b, jax.core.Tracer):",
           "or isinstance(a, jax.core.Tracer) and isinstance(b, jax.core.Tracer):",
           "a traced Gram matrix compared by value with a concrete one (reads the tracer)", *TEST_SM_MEASURES),
    mutant("refine-slot-fill", DY,
           "slot_a, slot_b = place(in_a, 0), place(in_b, 0)", "slot_a, slot_b = place(in_a, 1), place(in_b, 1)",
           "a refinement's padding gathers the second leaf, not the first", *TEST_DYADIC),
    mutant("refine-before-first-start", DY,
           "index[jax.lax.cummax(jnp.where(source == 0, position, 0))]",
           "index[jax.lax.cummax(jnp.where(source == 0, position, -1))]",
           "a position before a's first start reads the last entry, not the first", *TEST_DYADIC,
           equivalent="both trees start at 0, so every kept breakpoint comes after a start of each: the cummax "
           "there is a's position whatever comes before"),
    mutant("refine-slot-order", DY,
           "index[jax.lax.cummax(jnp.where(source == 0, position, 0))]",
           "jax.lax.cummax(jnp.where(source == 0, index, 0))",
           "a's leaf at a breakpoint read as its largest slot so far (right only for slots in order)",
           *TEST_DYADIC, *TEST_MOVES),
    mutant("dt-layout-any-dtype", TM,
           "kind = layout.dtype == dyadic.LAYOUT or layout.dtype == jax.dtypes.float0", "kind = True",
           "an array of any dtype in a layout's place is rebuilt (and read as a shape)", *TEST_US_REFUSED),
    mutant("dt-layout-no-tangents", TM,
           "kind = layout.dtype == dyadic.LAYOUT or layout.dtype == jax.dtypes.float0",
           "kind = layout.dtype == dyadic.LAYOUT",
           "a tree's tangent (float0 layout) is refused", *TEST_GRADIENTS),
    mutant("dt-layout-slots-unchecked", TM,
           "if kind and jnp.ndim(layout) >= 1 and jnp.shape(layout)[-1] == capacity:",
           "if kind and jnp.ndim(layout) >= 1:",
           "a layout whose slots were sliced is rebuilt", *TEST_US_REFUSED),
    mutant("dt-layout-numpy-unchecked", TM,
           "    if not isinstance(layout, jax.Array | np.ndarray):\n        return\n    kind",
           "    if not isinstance(layout, jax.Array):\n        return\n    kind",
           "a numpy array in a layout's place is rebuilt unchecked", *TEST_US_REFUSED),
    mutant("dyadic-fill-leaves", DY,
           "root = jnp.all(code == 0, axis=-1, keepdims=True) & (jnp.arange(code.shape[-1]) == 0)",
           "root = jnp.zeros_like(code, bool)",
           "a fill of a layout (zeros_like) reads as a tree with no leaf, not the one-leaf tree", *TEST_FILLS),
    mutant("dyadic-words-plain", DY,
           "w1 = xp.asarray(hi).astype(xp.uint32) ^ w2\n    return xp.stack([code ^ w1, w1, w2], axis=-1)",
           "w1 = xp.asarray(hi).astype(xp.uint32)\n    return xp.stack([code, w1, w2], axis=-1)",
           "the words stored as they are, not as differences (decoded as differences)", *TEST_DYADIC),
    mutant("dyadic-slots-in-place", DY,
           "return leaves[np.lexsort((lo[leaves], hi[leaves]))]", "return leaves",
           "a tree's leaves read in slot order, not by their starts", *TEST_MOVES),
    mutant("dt-meta-compares-one", TM,
           "return self.capacity, self.stacked and self.one", "return self.capacity, self.one",
           "a single tree's metadata differs inside and outside a trace (vjp refuses its cotangents)",
           *TEST_GRADIENTS),
    mutant("dt-meta-ignores-one", TM,
           "return self.capacity, self.stacked and self.one", "return self.capacity, False",
           "a jit compiled for a stack of one shape serves a stack of several (reads one shape off row 0)",
           *TEST_DT_JIT_VALUES),
    mutant("dt-tangent-shapeless", TM,
           "(tangent or meta.one) and _visible", "meta.one and _visible",
           "a tree's tangent does not know its tree's shape", *TEST_GRADIENTS),
    mutant("dt-row-unmarked", TM,
           "origin = cast(Layout, layout)  # a row", "origin = None  # a row",
           "a row of a stack of one shape does not say so (a vmap of its values: several shapes)",
           *TEST_US_ONE_SHAPE, TDT + "test_one_compilation_serves_every_shape_and_jit_does_not_change_results"),
    mutant("dt-element-forgets-shape", DT,
           "return _tree(element(self.data, i), self.layout[i], self.capacity, self._shape(None))",
           "return _tree(element(self.data, i), self.layout[i], self.capacity)",
           "the trees of a stack of one shape, read one by one, refine against each other", *TEST_GRADIENTS),
    mutant("stack-records-nothing", ST,
           "return cast(T, jax.tree_util.tree_map(_stacked_from, stacked, *elements, is_leaf=_shaped))",
           "return cast(T, stacked)",
           "stack() of trees of one shape records no shape (refused under jit)", *TEST_US_ONE_SHAPE),
    mutant("dt-stacked-from-first-shape", DT,
           "all(s is shapes[0] or _equal(s, shapes[0]) for s in shapes)", "True",
           "a stack of trees of different shapes recorded as the first one's shape", *TEST_US_ONE_SHAPE),
    mutant("dt-stack-pair-rows-unchecked", DT,
           "            if stacks[0] != stacks[1]:", "            if False:",
           "stacks of different numbers of trees pair (one broadcast over the other)",
           TDT + "test_stacks_of_trees_pair_and_map_tree_by_tree"),
    mutant("dt-largest-reads-layout", DT,
           "            if isinstance(leaf, Shaped):\n                return largest(leaf)\n", "",
           "a tree whose values are trees reads their layouts as values", *TEST_SM_SHIFT),
    mutant("stacked-largest-reads-layouts", ST,
           "parts = jax.tree_util.tree_leaves(x, is_leaf=_shaped)", "parts = jax.tree_util.tree_leaves(x)",
           "the largest value of a structure holding trees reads their layouts' words as values", *TEST_SM_SHIFT),
    mutant("compose-largest-coefficients", "applicative/instances/compose.py",
           "return stacked.largest(self.outer.fmap(stacked.largest))", "return stacked.largest(self.outer)",
           "a Compose's largest value read off its inner series' coefficients", *TEST_SM_SHIFT),
    mutant("cheb-largest-coefficients", "applicative/instances/cheb.py",
           "return largest(along(self.data, lambda leaf: chebyshev.to_values(leaf, self.points), what))",
           "return largest(self.data)",
           "a series' largest value read off its coefficients", *TEST_SM_SHIFT),
    mutant("attention-keys-values-unchecked", NN + "_attention.py",
           '(("the keys are on", level(keys)), ("the values on", level(values))),\n', "",
           "keys and values on two structures are not named as attention's mistake", *TEST_BAD_ATTENTION),
    mutant("dot-scalars-unchecked", LA,
           '        scalars("dot", r, *p)\n', "",
           "a product of structures in the generic dot is not pointed to Compose",
           TUS + "test_a_product_of_structures_points_to_compose"),
    mutant("one-kind-shaped-structure", OP,
           "tree_structure(x, is_leaf=_is_shaped)\n"
           "    if structure != jax.tree_util.tree_structure(y, is_leaf=_is_shaped)",
           "tree_structure(x)\n    if structure != jax.tree_util.tree_structure(y)",
           "trees of different capacities are different kinds (add refuses them)", *TEST_DT_ADD_KINDS),
]


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
        command = [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider",
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
