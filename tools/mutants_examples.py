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
    mutant("syntax-decorator-at-left-out", "applicative/examples/syntax.py",
           "first = min(first, bisect_left(starts, at))",
           "first = first",
           "a decorated definition leaves its first @ out, as Python's position does",
           TA + "test_parsing.py::test_every_decorator_s_at_sign_is_the_definition_s_own"),
    mutant("syntax-eof-newline-owned", "applicative/examples/syntax.py",
           "elif t.type == tokenize.NEWLINE and not t.string:", "elif False:",
           "a source without a final newline gives its last statement the NEWLINE",
           TA + "test_parsing.py::test_a_source_without_its_final_newline_has_the_same_trees"),
    mutant("syntax-f-string-read-as-string", "applicative/examples/syntax.py",
           'return "FSTRING"', 'return "STRING"',
           "before Python 3.12 an f-string's token reads as a plain string's: JoinedStr and Constant look alike",
           TA + "test_parsing.py::test_the_tokens_tell_an_f_string_from_a_plain_string"),
    mutant("test-sample-takes-the-first", PARSING + "batches.py",
           "chosen = np.sort(rng.choice(len(fragments), min(n, len(fragments)), replace=False))",
           "chosen = np.arange(min(n, len(fragments)))",
           "the test takes the first fragments found, not a random sample",
           TA + "test_parsing_testing.py::test_the_sample_is_a_reference_draw_from_each_band"),
    mutant("test-resamples-one-file", PARSING + "testing.py",
           "resampled = by_file[rng.integers(0, len(names), (RESAMPLES, len(names)))].sum(1)",
           "resampled = by_file[rng.integers(0, 1, (RESAMPLES, len(names)))].sum(1)",
           "the bootstrap resamples one file over and over",
           TA + "test_parsing_testing.py"),
    mutant("population-cache-unchecked", PARSING + "batches.py",
           'if json.loads(header) == {"key": key, "sha256": hashlib.sha256(text).hexdigest()}:', "if True:",
           "a kept population is read back whatever it was written for, altered or not",
           TA + "test_parsing_testing.py"),
    mutant("population-cache-key-without-bands", PARSING + "batches.py",
           "json.dumps([sys.version, str(LIBRARY), repr(bands), side,", "json.dumps([sys.version, str(LIBRARY), side,",
           "the population of other bands is read from the same file",
           TA + "test_parsing_testing.py"),
]  # fmt: skip
