"""Mutants of the examples' own code: the parser's model, data and decode (``tools/mutants.py`` runs them)."""

from __future__ import annotations

from mutant_records import TA, mutant

PARSING = "applicative/examples/parsing/"
TEST_PARSING = TA + "test_parsing.py"

MUTANTS = [
    mutant("parsing-builder-unmasked", PARSING + "model.py",
           "h = builder.layer(i)(h, shallower, memory, sees)", "h = builder.layer(i)(h, None, memory, sees)",
           "the builder's nodes see deeper ones: a round differs from the teacher-forced pass",
           TEST_PARSING + "::test_no_node_sees_a_deeper_one"),
    mutant("parsing-nesting-closes-before", PARSING + "batches.py",
           "        brackets[t], blocks[t] = open_brackets, open_blocks\n        open_brackets -= kind in _CLOSING",
           "        open_brackets -= kind in _CLOSING\n        brackets[t], blocks[t] = open_brackets, open_blocks",
           "a closing bracket is counted outside its pair",
           TEST_PARSING + "::test_nesting_counts_the_brackets_and_blocks_around_each_token"),
]  # fmt: skip
