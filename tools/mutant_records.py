"""The mutants' record and the tests that cover them (``tools/mutants.py``; the records themselves are in the
mutants_*.py modules beside it, one module an area of the code)."""

from __future__ import annotations

from dataclasses import dataclass


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
TM, TS = "applicative/instances/_layouts.py", "applicative/instances/_tree_slots.py"  # dense_tree's
TP = "applicative/instances/_layout_pytree.py"  # and its pytree registration
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
    TDT + "test_a_stack_the_librarys_vmap_makes_knows_its_shape_inside_the_trace",
)
TEST_DT_ADD_KINDS = (TDT + "test_add_takes_trees_of_different_capacities_as_one_kind_of_element_and_names_others",)
TEST_DT_JIT_VALUES = (TDT + "test_a_jit_serves_stacks_of_every_shape_with_their_own",)
TMV = TA + "test_trees_moved_by_jax.py::"
TEST_MOVED_WHERE = (TMV + "test_a_where_with_a_predicate_per_tree_picks_each_whole_tree",)
TEST_MOVED_BATCH = (TMV + "test_a_batch_of_sequences_each_of_one_shape_is_one_shape_sequence_by_sequence",)
TEST_MOVED_GRID = (TMV + "test_a_where_that_mixes_the_trees_of_one_sequence_of_a_batch_is_read_or_refused",)
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
