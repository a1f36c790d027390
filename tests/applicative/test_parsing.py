"""The parsing example: its data against Python's own tokenizer and parser, its decode against
brute force and against Python's trees, its builder's mask, its minibatches against a reference draw, a
short training run against the right-branching baseline on held-out files, and its run directory:
a killed run resumed as an uninterrupted one, the command line, SIGTERM."""

import ast
import contextlib
import itertools
import json
import os
import shutil
import signal
import subprocess
import sys
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

import jax
import numpy as np
import pytest

from applicative.examples import parsing, syntax, trees
from applicative.examples.common import Optimisation
from applicative.examples.parsing import batches, decoding
from applicative.examples.syntax import Node
from applicative.instances.tree import Shape
from applicative.training.checkpoints import history
from applicative.training.files import CHECKPOINT, CONFIG
from applicative.training.loop import _killed_after

SOURCE = "x = f(a, b + 1)\n"
# x = f ( a , b + 1 ) : tokens 0 to 8


def test_a_statement_as_labelled_spans() -> None:
    tokens = syntax.tokens_of(SOURCE)
    assert [t.kind for t in tokens] == ["NAME", "=", "NAME", "(", "NAME", ",", "NAME", "+", "NUMBER", ")", "NEWLINE"]
    (statement,) = syntax.statement_trees(ast.parse(SOURCE), tokens)
    name = "Name(Load@0)"
    assert statement == Node(
        "Assign",
        (0, 9),
        (
            Node("Name(Store@0)", (0, 0)),
            Node(
                "Call",
                (2, 9),
                (
                    Node(name, (2, 2)),
                    Node(name, (4, 4)),
                    Node("BinOp(Add@1)", (6, 8), (Node(name, (6, 6)), Node("Constant", (8, 8)))),
                ),
            ),
        ),
    )


def test_blocks_keep_their_newlines_and_indents_and_dedents_close_where_the_block_ends() -> None:
    source = "def f(x):\n    if x:\n        y = 1\n    return x\n"
    tokens = syntax.tokens_of(source)
    kinds = [t.kind for t in tokens]
    assert kinds[:8] == ["def", "NAME", "(", "NAME", ")", ":", "NEWLINE", "INDENT"]
    dedent = kinds.index("DEDENT")
    assert kinds[dedent - 1 : dedent + 2] == ["NEWLINE", "DEDENT", "return"]
    trees_ = {t.label: t for t in syntax.statement_trees(ast.parse(source), tokens)}
    # The if covers "if x : NEWLINE INDENT y = 1"; its block's NEWLINE and DEDENT are the function's.
    assert [kinds[i] for i in range(trees_["If"].span[0], trees_["If"].span[1] + 1)] == [
        "if", "NAME", ":", "NEWLINE", "INDENT", "NAME", "=", "NUMBER",
    ]  # fmt: skip


def _check_nesting(node: Node, owner: dict[int, Node]) -> None:
    first, last = node.span
    inner = set()
    for elder, younger in itertools.pairwise(node.children):
        assert elder.span[1] < younger.span[0]
    for child in node.children:
        assert first <= child.span[0] <= child.span[1] <= last
        inner |= set(range(child.span[0], child.span[1] + 1))
        _check_nesting(child, owner)
    for token in set(range(first, last + 1)) - inner:
        assert token not in owner
        owner[token] = node


def test_real_fragments_nest_and_every_token_has_one_owner() -> None:
    fragments = list(itertools.islice(syntax.fragments(8, 64, "test"), 300))
    assert len(fragments) == 300
    for fragment in fragments:
        owner: dict[int, Node] = {}
        _check_nesting(fragment.tree, owner)
        assert sorted(owner) == list(range(len(fragment.tokens)))  # each token owned exactly once
        assert fragment.tree.span == (0, len(fragment.tokens) - 1)
        leaves = len(jax.tree_util.tree_leaves(syntax.binarised(fragment.tree), is_leaf=lambda s: s is None))
        assert leaves == sum(1 for _ in syntax.nodes(fragment.tree)) == syntax.size(fragment.tree)


def test_every_f_string_has_its_tree_on_every_python() -> None:
    """Statements holding f-strings of several parts, nested, with format specifiers, implicitly concatenated:
    each is a statement tree whose spans nest, every token owned once; before Python 3.12 (one STRING token an
    f-string) the f-string is a leaf, ``JoinedStr``, over its tokens; from 3.12 on, Python's own tree. None of
    the held-out standard library's statements is left out."""
    nested = 'name = f"{f"{inner}"}"\n' if sys.version_info >= (3, 12) else 'name = f"{inner!s}" f"{2 * x:{w}.{p}}"\n'
    source = 'x = f"{a} and {b!r:>{width}}" + g(y)\nprint(f"{n}", "plain" f"{m:.3f}")\n' + nested
    tokens = syntax.tokens_of(source)
    statements = syntax.statement_trees(ast.parse(source), tokens)
    assert len(statements) == 3
    owner: dict[int, Node] = {}
    for tree in statements:
        _check_nesting(tree, owner)
    assert sorted(owner) == [i for i, t in enumerate(tokens) if t.kind not in ("NEWLINE", "ENDMARKER")]
    strings = [n for tree in statements for n in syntax.nodes(tree) if n.label == "JoinedStr"]
    assert len(strings) >= 3
    if sys.version_info < (3, 12):
        assert all(not n.children for n in strings)
    else:
        assert any(n.children for n in strings)
    texts = []
    for name in trees.library_files("test")[:40]:
        with contextlib.suppress(UnicodeDecodeError):
            texts.append((trees.LIBRARY / name).read_bytes().decode("utf-8"))
    out, every = syntax.left_out(texts)
    assert (out, every > 1000) == (0, True)


def test_the_tokens_tell_an_f_string_from_a_plain_string() -> None:
    """Whatever the prefix's letters and case, a literal whose tokens hold an f-string (``FSTRING`` before
    Python 3.12, ``FSTRING_START`` from 3.12 on) is a ``JoinedStr`` and one whose tokens do not is a
    ``Constant``: the parser reads what decides the label. Checked against ``ast`` on the prefixes and on the
    held-out standard library's statements."""
    prefixes = ["", "r", "b", "Rb", "bR", "u", "f", "F", "rf", "fR", "Rf", "FR"]
    source = "".join(f"x = {p}'{{a}}'\n" for p in prefixes) + "y = 'a' f'{b}' 'c'\nz = 'a' 'b'\n"
    texts = [source]
    for name in trees.library_files("test")[:20]:
        with contextlib.suppress(UnicodeDecodeError):
            texts.append((trees.LIBRARY / name).read_bytes().decode("utf-8"))
    literals = Counter({"JoinedStr": 0, "Constant": 0})  # the nodes of literals, by label
    for text in texts:
        tokens = syntax.tokens_of(text)
        for tree in syntax.statement_trees(ast.parse(text), tokens):
            for node in syntax.nodes(tree):
                kinds = [tokens[i].kind for i in range(node.span[0], node.span[1] + 1)]
                if kinds[0] not in ("STRING", "FSTRING", "FSTRING_START") or node.label not in literals:
                    continue
                f_string = bool({"FSTRING", "FSTRING_START"} & set(kinds))
                assert node.label == ("JoinedStr" if f_string else "Constant"), (node, kinds)
                literals[node.label] += 1
    assert literals["JoinedStr"] >= 5
    assert literals["Constant"] >= 100


@pytest.mark.skipif(sys.version_info < (3, 12), reason="before 3.12 an f-string is one token, a leaf")
def test_the_empty_part_python_3_12_puts_before_a_specifiers_brace_is_no_node() -> None:
    """Python 3.12 gives ``f"{b:>{w}}"`` an empty string part of no text before the specifier's closing brace
    (3.13 does not): an ``ast.Constant`` of zero width, whose span did not nest, so that the statement was left
    out. Put where 3.12 puts it, it changes nothing: the tree is 3.13's."""
    source = 'x = f"{b:>{w}}" + 1\n'
    tokens = syntax.tokens_of(source)
    expected = syntax.statement_trees(ast.parse(source), tokens)
    module = ast.parse(source)
    spec = next(n.format_spec for n in ast.walk(module) if isinstance(n, ast.FormattedValue) and n.format_spec)
    assert isinstance(spec, ast.JoinedStr)
    line, column = spec.values[-1].end_lineno, spec.values[-1].end_col_offset
    assert line is not None
    assert column is not None
    spec.values.append(ast.Constant("", lineno=line, col_offset=column, end_lineno=line, end_col_offset=column))
    assert syntax.statement_trees(module, tokens) == expected
    assert len(expected) == 1


def test_a_source_without_its_final_newline_has_the_same_trees() -> None:
    # Strings users type end without one: tokenize adds a NEWLINE there, which no statement may own.
    names = trees.library_files("test")[:40]
    for name in names:
        source = (trees.LIBRARY / name).read_text(encoding="utf-8")
        cut = source.rstrip("\n")
        try:
            whole, bare = (syntax.statement_trees(ast.parse(s), syntax.tokens_of(s)) for s in (source, cut))
        except SyntaxError:
            continue
        assert bare == whole, name
    (statement,) = syntax.statement_trees(ast.parse("x = a + b * c"), syntax.tokens_of("x = a + b * c"))
    assert statement.span == (0, 6)  # NAME = NAME + NAME * NAME; the NEWLINE (7) is no one's
    assert statement.children[0] == Node("Name(Store@0)", (0, 0))


@pytest.mark.parametrize("decorators", [1, 2, 3])
def test_every_decorator_s_at_sign_is_the_definition_s_own(decorators: int) -> None:
    source = "".join(f"@d{i}(x)\n" for i in range(decorators)) + "def f(a):\n    return a\n"
    tokens = syntax.tokens_of(source)
    definition = next(t for t in syntax.statement_trees(ast.parse(source), tokens) if t.label == "FunctionDef")
    owner: dict[int, Node] = {}
    _check_nesting(definition, owner)
    assert definition.span[0] == 0  # the first @
    ats = [i for i, t in enumerate(tokens) if t.kind == "@"]
    assert len(ats) == decorators
    assert all(owner[i] is definition for i in ats)
    assert sorted(owner) == list(range(definition.span[1] + 1))  # every token of it owned once


@pytest.mark.parametrize("decorator", ["@(a @ b)\n", "@(\n    d\n)\n"])
def test_a_parenthesised_decorator_s_at_sign_is_the_definition_s_own_too(decorator: str) -> None:
    # Its position is the expression's, inside the brackets: the token before it is "(", not "@".
    source = decorator + "def f(a):\n    return a\n"
    tokens = syntax.tokens_of(source)
    definition = next(t for t in syntax.statement_trees(ast.parse(source), tokens) if t.label == "FunctionDef")
    assert tokens[0].kind == "@"
    assert definition.span[0] == 0


@pytest.mark.parametrize("separator", ["\x0c", "\u2028", "\x1c", "\x85"])
def test_a_line_breaks_where_tokenize_breaks_it_not_where_splitlines_would(separator: str) -> None:
    # In a comment or a string, these break a line for str.splitlines but not for tokenize or ast: read off
    # the wrong line, every later token's byte offset was wrong, and so was every later tree.
    source = f"x = 'é'  # {separator}\ny = 'é' + 'ü'\n"
    second = syntax.statement_trees(ast.parse(source), syntax.tokens_of(source))[-1]
    (alone,) = syntax.statement_trees(ast.parse("y = 'é' + 'ü'\n"), syntax.tokens_of("y = 'é' + 'ü'\n"))
    assert second.label == alone.label == "Assign"
    assert [(n.label, n.span[0] - second.span[0], n.span[1] - second.span[0]) for n in syntax.nodes(second)] == [
        (n.label, *n.span) for n in syntax.nodes(alone)
    ]


def test_a_node_s_tokens_are_those_of_its_source() -> None:
    # Against Python: every call's span holds the tokens of ast.get_source_segment of the call.
    source = "value = compute(alpha, [beta, gamma(1)])\nprint(value, end='')\n"
    module = ast.parse(source)
    tokens = syntax.tokens_of(source)
    found = [n for s in syntax.statement_trees(module, tokens) for n in syntax.nodes(s) if n.label == "Call"]
    calls = sorted((n for n in ast.walk(module) if isinstance(n, ast.Call)), key=lambda n: (n.lineno, n.col_offset))
    assert len(found) == len(calls) == 3
    for node, call in zip(sorted(found, key=lambda n: n.span), calls, strict=True):
        segment = ast.get_source_segment(source, call)
        assert segment is not None
        expected = [t.kind for t in syntax.tokens_of(segment)][:-1]  # without the NEWLINE tokenize ends with
        assert [t.kind for t in tokens[node.span[0] : node.span[1] + 1]] == expected


def test_binarisation_is_the_trees_example_s() -> None:
    # On a syntax tree whose nodes all cover tokens, the two binarisations agree.
    tree = ast.parse("f(a, g(b), c)", mode="eval").body
    assert isinstance(tree, ast.Call)
    spans = syntax.statement_trees(ast.parse("f(a, g(b), c)\n"), syntax.tokens_of("f(a, g(b), c)\n"))[0]
    call = spans.children[0]  # Expr -> Call

    def without_contexts(node: ast.AST) -> Shape:
        kids = [without_contexts(c) for c in ast.iter_child_nodes(node) if not isinstance(c, ast.expr_context)]
        return trees.balanced([None, *kids])

    assert syntax.binarised(call) == without_contexts(tree)


def test_scores_count_labelled_spans_and_malformed_trees() -> None:
    gold = Node("A", (0, 2), (Node("B", (0, 0)), Node("C", (1, 2))))
    near = Node("A", (0, 2), (Node("B", (0, 0)), Node("D", (1, 2))))
    s = syntax.score([gold, near, None], [gold, gold, gold])
    assert s.trees == 3
    assert s.malformed == 1
    assert s.exact == pytest.approx(1 / 3)
    assert s.precision == pytest.approx(5 / 6)
    assert s.recall == pytest.approx(5 / 9)
    assert s.f1 == pytest.approx(2 * (5 / 6) * (5 / 9) / (5 / 6 + 5 / 9))
    rb = syntax.right_branching(3, "R", "X")
    assert rb == Node("R", (0, 2), (Node("X", (1, 2), (Node("X", (2, 2)),)),))


def _tag_sequences(tokens: Sequence[str]) -> list[tuple[int, ...]]:
    """Every sequence of tags over ``tokens`` in which no child begins with a continuation and every child holds
    each of its brackets with its match."""
    valid = []
    for tags in itertools.product(range(3), repeat=len(tokens)):
        if any(t == parsing.CONTINUE and p == parsing.OWN for p, t in itertools.pairwise((parsing.OWN, *tags))):
            continue
        if all(_matched(tokens[first : last + 1]) for first, last in _spans(tags)):
            valid.append(tags)
    return valid


def _spans(tags: Sequence[int], offset: int = 0) -> list[tuple[int, int]]:
    """The children's spans a sequence of tags gives, its first tag at token ``offset``."""
    spans: list[tuple[int, int]] = []
    for i, t in enumerate(tags):
        if t == parsing.BEGIN:
            spans.append((offset + i, offset + i))
        elif t == parsing.CONTINUE:
            spans[-1] = (spans[-1][0], offset + i)
    return spans


def _matched(tokens: Sequence[str]) -> bool:
    """Each bracket with its match, by a stack."""
    stack: list[str] = []
    for token in tokens:
        if token in "([{":
            stack.append(token)
        elif token in ")]}" and (not stack or "([{".index(stack.pop()) != ")]}".index(token)):
            return False
    return not stack


def _nested(rng: np.random.Generator, length: int, brackets: bool) -> list[str]:
    """``length`` tokens as Python's: names, commas and (if ``brackets``) brackets, each closing one its opener's."""
    tokens, open_ = [], []
    for _ in range(length):
        choice = int(rng.integers(4 if brackets else 2))
        if choice == 2:
            open_.append(str(rng.choice(list("([{"))))
            tokens.append(open_[-1])
        elif choice == 3 and open_:
            tokens.append(")]}"["([{".index(open_.pop())])
        else:
            tokens.append(["NAME", ","][choice % 2])
    return tokens


def test_children_are_the_most_likely_valid_tagging() -> None:
    """Against every tagging of the span, on tokens holding brackets (no child may hold a bracket without its
    match) and without."""
    rng = np.random.default_rng(0)
    for length in range(1, 7):
        for draw in range(20):
            tokens = ["(", *_nested(rng, length, brackets=draw % 4 != 0), ")"]  # (the node's span: 1 ... length)
            scores = rng.normal(size=(3, length + 2)) * 3
            logp = scores[:, 1 : length + 1] - np.log(np.sum(np.exp(scores[:, 1 : length + 1]), axis=0))
            valid = _tag_sequences(tokens[1 : length + 1])
            best = max(valid, key=lambda tags: sum(logp[t, i] for i, t in enumerate(tags)))
            assert decoding.children(scores, (1, length), tokens) == _spans(best, offset=1)


def test_python_s_trees_keep_the_decode_s_rule_on_brackets_but_in_comprehensions_and_match_cases() -> None:
    """The decode's rule on brackets (``decoding.children``) holds in Python's own trees, but for comprehensions
    whose parenthesised iterable the project's span of a ``comprehension`` cuts, and match cases."""
    fragments = list(itertools.islice(syntax.fragments(1, 128, "test"), 2000))
    broken = [
        n.label for f in fragments for n in syntax.nodes(f.tree) if not _matched(f.tokens[n.span[0] : n.span[1] + 1])
    ]
    assert len(fragments) == 2000
    assert set(broken) <= {"comprehension", "match_case"}


def test_the_decode_rebuilds_python_s_tree_from_its_own_targets() -> None:
    # Scores that put every tag and label where Python's tree has them: the rounds of the decode,
    # fed the teacher-forcing targets of the same rounds, rebuild the tree exactly.
    fragments = list(itertools.islice(syntax.fragments(8, 64, "test"), 40))
    labels = sorted({n.label for f in fragments for n in syntax.nodes(f.tree)})
    band = parsing.Band(8, 64, 80)
    for fragment in fragments:
        tree = Node("", fragment.tree.span)
        for round_ in range(syntax.depth(fragment.tree) + 1):
            kept = [(n, d) for n, d in batches.walk(fragment.tree) if d <= round_]
            scores = np.zeros((3, band.nodes, band.high))
            for slot, (node, depth) in enumerate(kept):
                if depth == round_:
                    row = np.full(band.high, -1, np.int8)
                    batches._tags(row, node)
                    for tag in range(3):
                        scores[tag, slot] = np.where(row == tag, 10.0, 0.0)
            grown = decoding.grown(tree, scores, round_, fragment.tokens)
            if grown == tree:
                break
            tree = grown
        logits = np.zeros((band.nodes, len(labels)))
        for slot, node in enumerate(syntax.nodes(fragment.tree)):
            logits[slot, labels.index(node.label)] = 1.0
        assert decoding.labelled(tree, logits, labels) == fragment.tree


ShortRun = tuple[parsing.Parser, parsing.Config, parsing.Result, Path]


@pytest.fixture(scope="module")
def short_run(tmp_path_factory: pytest.TempPathFactory) -> ShortRun:
    # 100 steps of a small parser on fragments of 8 to 32 tokens: about 30 s, most of it compiling. (At 60 steps
    # it had not yet left the flat trees on Python 3.11's library: F1 0.0.)
    band = parsing.Band(8, 32, 40)
    config = parsing.Config(
        width=32, hidden=64, heads=2, head_features=16, reader_layers=1, builder_layers=1, pointer=16,
        optimisation=Optimisation(learning_rate=1e-2, warmup=10), bands=(band,), train_share=(1.0,),
        train_fragments=800, test_fragments=32,
    )  # fmt: skip
    out = tmp_path_factory.mktemp("parsing") / "run"
    return *parsing.train(100, config=config, seq2seq_steps=0, log=lambda _: None, progress=False, out=out), out


@pytest.mark.slow  # a short training run: CI runs it
def test_a_short_run_beats_the_right_branching_tree_on_held_out_files(short_run: ShortRun) -> None:
    _, _, result, out = short_run
    (band,) = result.bands
    assert band.parser.trees == band.right_branching.trees == 32
    assert result.final_loss < 0.5 * result.initial_loss
    # F1 0.434 against 0.041 measured on Python 3.11's library, 0.513 against 0.047 on 3.13's.
    assert band.parser.f1 > band.right_branching.f1 + 0.05
    assert band.parser.precision > 3 * band.right_branching.precision
    assert band.parser.malformed < band.parser.trees
    assert result.compilations == 1  # one compiled step for every pair of shapes in the band
    losses, held = history(out)  # the run's checkpoint: every step's loss, the held-out loss of its one epoch
    assert (len(losses), losses[0], losses[-1]) == (100, result.initial_loss, result.final_loss)
    assert [epoch for epoch, _ in held] == [1]
    assert held[0][1] < 0.8 * result.initial_loss  # 0.65 measured: the held-out fragments learned too


@pytest.mark.slow  # a short training run: CI runs it
def test_a_run_loads_back_and_parses_alike(short_run: ShortRun, tmp_path: Path) -> None:
    parser, config, _, out = short_run
    loaded, same = parsing.load(out)
    assert same == config  # the vocabularies included: config.json holds them
    fragments = list(itertools.islice(syntax.fragments(8, 32, "test", seed=1), 8))
    band = config.bands[0]
    assert parsing.parse(loaded, same, fragments, band) == parsing.parse(parser, config, fragments, band)
    broken = tmp_path / "run"
    shutil.copytree(out, broken)
    (broken / CHECKPOINT).write_bytes(b"not a parser")
    with pytest.raises(ValueError, match=str(broken / CHECKPOINT)):
        parsing.load(broken)
    older = json.loads((out / CONFIG).read_text())
    del older["config"]["train_packages"], older["config"]["per_file"]  # as written before they were settings
    (broken / CONFIG).write_text(json.dumps(older))
    with pytest.raises(ValueError, match="a run of an older version, whose training fragments are drawn no more"):
        parsing.load(broken)
    (broken / CONFIG).write_text('{"example": "trees"}')
    with pytest.raises(ValueError, match="does not describe a run of the parser"):
        parsing.load(broken)


def test_fragments_come_from_their_side_of_the_split() -> None:
    for side in ("train", "test"):
        for fragment in itertools.islice(syntax.fragments(8, 32, side), 50):
            assert trees.held_out(fragment.name.rsplit(":", 1)[0]) == (side == "test")


def test_a_node_over_its_parent_s_span_gets_no_child_over_it_too() -> None:
    # Scores that ask every node for one child over its whole span: the root (0-3) gets it, the
    # child over the root's span does not; a node over a smaller span would.
    band = parsing.Band(8, 8, 8)
    whole = np.zeros((3, band.nodes, band.high))
    whole[parsing.BEGIN, :, 0] = 10.0
    whole[parsing.CONTINUE, :, 1:4] = 10.0
    root = Node("", (0, 3))
    tokens = ["NAME"] * 8
    once = decoding.grown(root, whole, 0, tokens)
    assert once == Node("", (0, 3), (Node("", (0, 3)),))
    assert decoding.grown(once, whole, 1, tokens) == once


def test_training_refuses_what_it_cannot_run() -> None:
    with pytest.raises(ValueError, match="at least one step, got 0"):
        parsing.train(0, log=lambda _: None, progress=False)
    with pytest.raises(ValueError, match="2 training shares for 3 bands"):
        parsing.train(1, config=parsing.Config(train_share=(0.5, 0.5)), log=lambda _: None, progress=False)


def _pools_of_two_bands() -> tuple[list[list[syntax.Fragment]], parsing.Config]:
    config = parsing.Config(bands=(parsing.Band(8, 32, 40, 4), parsing.Band(33, 64, 80, 2)), train_share=(0.6, 0.4))
    data = parsing.Data(tuple(itertools.islice(syntax.fragments(8, 64, "train"), 60)), ((), ()))
    return batches.pools(data, config), batches.with_vocabularies(config, data.train)


def test_step_s_minibatch_is_a_function_of_seed_and_step() -> None:
    # A band by its share, then its batch of fragments, from default_rng([seed, step]): asked for any step, in
    # any order (a resumed run), the minibatches draw the same.
    pools, config = _pools_of_two_bands()
    shares = np.array(config.train_share)
    expected = []
    for step in range(8):
        rng = np.random.default_rng([3, step])
        b = int(rng.choice(2, p=shares / shares.sum()))
        chosen = rng.choice(len(pools[b]), config.bands[b].batch)
        expected.append((b, [pools[b][i] for i in chosen]))
    assert {b for b, _ in expected} == {0, 1}
    draws = parsing.Minibatches(pools, shares, config)
    assert [draws.choice(3, s) for s in range(8)] == expected
    for s in (5, 2, 7, 0, 6):  # backwards (a resumed run), then forwards again
        assert parsing.Minibatches(pools, shares, config).choice(3, s) == expected[s] == draws.choice(3, s)
    assert draws.choice(4, 0) != expected[0]  # another seed, other draws
    for s, (b, fragments) in enumerate(expected):  # one shape a band: one compilation a band
        (inputs, lengths, nodes), (labels, tags) = draws(3, s)
        band = config.bands[b]
        features = len(config.kinds) + parsing.POSITION_FEATURES + 2 * parsing.NESTING_FEATURES
        assert inputs.shape == (band.batch, band.high, features)
        assert (lengths.shape, nodes.layout.shape[0]) == ((band.batch,), band.batch)
        assert (labels.shape, tags.shape) == ((band.batch, band.nodes), (band.batch, band.nodes, band.high))
        expected_inputs, _ = batches.token_inputs(fragments, batches.ids(config.kinds), band.high)
        np.testing.assert_array_equal(inputs, expected_inputs)


def test_nesting_counts_the_brackets_and_blocks_around_each_token() -> None:
    # Against a reference written as running sums: an opening bracket counts from itself on, a closing one
    # up to itself; an INDENT opens a block from itself on, a DEDENT closes one from itself on.
    for fragment in itertools.islice(syntax.fragments(8, 200, "test"), 200):
        kinds = np.array(fragment.tokens)
        opening, closing = np.isin(kinds, ["(", "[", "{"]), np.isin(kinds, [")", "]", "}"])
        brackets = np.cumsum(opening) - np.concatenate([[0], np.cumsum(closing)[:-1]])
        blocks = np.cumsum((kinds == "INDENT").astype(int) - (kinds == "DEDENT"))
        found = batches.nesting(fragment.tokens)
        np.testing.assert_array_equal(found[0], brackets)
        np.testing.assert_array_equal(found[1], blocks)
        assert found[0].min() >= 0
        assert found[0][-1] == closing[-1]
    assert [list(d) for d in batches.nesting(("NAME", "(", "[", "NAME", "]", ")", "NEWLINE"))] == [
        [0, 1, 2, 2, 2, 1, 0], [0] * 7,
    ]  # fmt: skip


def test_no_node_sees_a_deeper_one() -> None:
    # What makes the teacher-forced loss every round of a decode at once: the builder's outputs for the nodes
    # of depth <= k do not depend on the deeper nodes (their spans and features drawn anew here), so round k
    # of a decode computes them as the pass over Python's whole tree does, but for the tree's measure (a
    # node's weight 2^-depth of its leaf, which deepens once its children are in: docs/parsing.md).
    # (The mutant "parsing-builder-unmasked" shows an unmasked builder fails it.)
    config = batches.with_vocabularies(
        parsing.Config(width=16, hidden=32, heads=2, head_features=8, reader_layers=1, builder_layers=2, pointer=8),
        list(itertools.islice(syntax.fragments(8, 64, "train"), 50)),
    )
    parser = parsing.init_parser(jax.random.PRNGKey(0), config)
    band = parsing.Band(8, 64, 80)
    fragment = next(f for f in syntax.fragments(20, 64, "test") if syntax.depth(f.tree) >= 4)
    inputs, lengths = batches.token_inputs([fragment], batches.ids(config.kinds), band.high)
    memory = jax.jit(parsing.read)(parser, inputs[0], lengths[0])
    nodes = jax.tree.map(lambda a: a[0], batches.stack([batches.nodes_of(fragment.tree, band.nodes)]))
    build = jax.jit(parsing.build)  # (eagerly, the generic attention pads the tree to another capacity)
    labels, scores = (np.asarray(a) for a in build(parser, memory, lengths[0], nodes))
    depths, rng = np.asarray(nodes.depth), np.random.default_rng(0)
    real = len(list(syntax.nodes(fragment.tree)))
    for k in range(syntax.depth(fragment.tree) - 1):
        deeper = (depths > k) & (np.arange(band.nodes) < real)
        moved = nodes._replace(
            first=np.where(deeper, rng.integers(0, len(fragment.tokens), band.nodes), nodes.first),
            last=np.where(deeper, rng.integers(0, len(fragment.tokens), band.nodes), nodes.last),
            extras=np.where(deeper[:, None], rng.normal(size=np.shape(nodes.extras)), nodes.extras).astype(
                nodes.extras.dtype
            ),  # float32 as the first pass's: a float64 pass would differ by a GPU's TF32 products
        )
        other_labels, other_scores = (np.asarray(a) for a in build(parser, memory, lengths[0], moved))
        kept = ~deeper & (np.arange(band.nodes) < real)
        np.testing.assert_allclose(other_labels[kept], labels[kept], atol=1e-5)
        np.testing.assert_allclose(other_scores[:, kept], scores[:, kept], atol=1e-5)
        assert not np.allclose(other_labels[deeper], labels[deeper], atol=1e-3)  # the deeper ones did move


# Run directories: a tiny parser, the one the command line's TINY flags make (so that all share a compiled step)

TINY = parsing.Config(
    width=16, hidden=32, heads=2, head_features=8, reader_layers=1, builder_layers=1, pointer=8,
    optimisation=Optimisation(learning_rate=3e-3, warmup=2), bands=(parsing.Band(1, 32, 40),), train_share=(0.5,),
    train_fragments=200, test_fragments=8,
)  # fmt: skip
TINY_FLAGS = [
    "--steps", "6", "--per-epoch", "2", "--bands", "1", "--width", "16", "--hidden", "32", "--heads", "2",
    "--head-features", "8", "--layers", "1", "--pointer", "8", "--warmup", "2", "--train-fragments", "200",
    "--test-fragments", "8", "--seq2seq-steps", "0", "--quiet",
]  # fmt: skip


def _tiny(out: Path, resume: bool = False) -> tuple[parsing.Parser, parsing.Config, parsing.Result]:
    return parsing.train(6, config=TINY, seq2seq_steps=0, log=lambda _: None, progress=False, out=out, per_epoch=2,
                         resume=resume)  # fmt: skip


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[parsing.Result, Path]:
    out = tmp_path_factory.mktemp("parsing") / "tiny"
    _, _, result = _tiny(out)
    return result, out


def _scores(result: parsing.Result) -> list[tuple[object, ...]]:
    """Band by band, the scores of a run's test without the times they took."""
    return [(b.band, b.tokens, b.parser, b.right_branching, b.seq2seq) for b in result.bands]


def _row(table: str) -> list[str]:
    """The table's first row of the band of 1-32 tokens (the parser's), without its seconds."""
    (row,) = [line for line in table.splitlines() if line.startswith("| 1-32 (")]
    cells = row.split("|")
    return cells[:8] + cells[9:]


def _leaves(parser: parsing.Parser) -> list[np.ndarray]:
    return [np.asarray(leaf) for leaf in jax.tree_util.tree_leaves(parser)]


@pytest.mark.slow  # a tiny training run, compiled: CI runs it
def test_a_killed_run_resumes_to_the_uninterrupted_run_bit_for_bit(
    tiny_run: tuple[parsing.Result, Path], tmp_path: Path
) -> None:
    result, whole = tiny_run
    with _killed_after(3):  # the checkpoint of step 2 stays: the resumed run draws steps 2 ... 5 afresh
        _, _, stopped = _tiny(tmp_path)
    assert (stopped.steps, stopped.bands) == (3, ())
    _, _, resumed = _tiny(tmp_path, resume=True)
    assert history(tmp_path) == history(whole)  # every loss and held-out loss
    assert parsing.VALIDATE_EVERY > 3
    assert [epoch for epoch, _ in history(whole)[1]] == [3]  # a held-out loss every VALIDATE_EVERY epochs, the last
    for a, b in zip(_leaves(parsing.load(tmp_path)[0]), _leaves(parsing.load(whole)[0]), strict=True):
        np.testing.assert_array_equal(a, b)
    assert _scores(resumed) == _scores(result)
    assert _scores(parsing.evaluate(whole)) == _scores(result)  # read back: the same parser, the same trees


@pytest.mark.slow  # the tiny run through the command line: CI runs it
def test_the_command_line_trains_evaluates_and_plots_a_run_and_refuses_to_overwrite_it(
    tiny_run: tuple[parsing.Result, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "run"
    assert parsing.main(["train", "--out", str(out), *TINY_FLAGS, "--seconds", "1e-9"]) == 75  # the budget: 1 epoch
    assert "stopped after step 2 of 6" in capsys.readouterr().out
    assert parsing.main(["train", "--out", str(out), *TINY_FLAGS]) == 1
    assert "already holds a run: resume it (--resume" in capsys.readouterr().err
    assert parsing.main(["train", "--out", str(out), *TINY_FLAGS, "--resume", "--warmup", "3"]) == 1
    assert capsys.readouterr().err.endswith(
        f"--resume continues {out} with its own settings; given otherwise: --warmup: 2 in the run, 3 given\n"
    )
    assert parsing.main(["train", "--out", str(out), "--resume", "--quiet"]) == 0  # the run's settings, read back
    trained = capsys.readouterr().out
    assert "| 1-32 (" in trained
    assert "parser trained 6 steps" in trained
    _, whole = tiny_run
    assert (out / CONFIG).read_text() == (whole / CONFIG).read_text()  # the flags make TINY's run
    assert history(out) == history(whole)  # stopped by a budget, resumed: the run all the same
    assert parsing.main(["evaluate", str(out), "--figure", str(tmp_path / "tree.png"), "--other-files", "0"]) == 0
    assert _row(capsys.readouterr().out) == _row(trained)
    assert parsing.main(["evaluate", str(out), "--other-files", "5"]) == 0
    both = capsys.readouterr().out
    assert "other code: 5 files of numpy, scipy, jax, optax, matplotlib drawn at random" in both
    left = [line for line in both.splitlines() if line.startswith("statements of the files tested left out")]
    assert len(left) == 2
    assert all(line.split(": ")[1].startswith("0 of ") for line in left)  # f-strings included, on every Python
    assert both.count("| parser |") == 2  # the held-out files' table, then other code's
    assert parsing.main(["evaluate", str(out), "--other-files", "3", "--other-packages", "pluggy,iniconfig"]) == 0
    assert "other code: 3 files of pluggy, iniconfig drawn at random" in capsys.readouterr().out
    assert parsing.main(["evaluate", str(out), "--other-files", "3", "--other-packages", "numpy,no_such_package"]) == 1
    assert "the package 'no_such_package' is not installed here" in capsys.readouterr().err
    assert (tmp_path / "tree.png").stat().st_size > 0
    assert parsing.main(["plot", str(out)]) == 0
    assert (out / "loss.png").stat().st_size > 0
    assert parsing.main(["evaluate", str(tmp_path / "none")]) == 1
    assert "no trained run at" in capsys.readouterr().err


@pytest.mark.slow  # two processes, each compiling: CI runs it
def test_sigterm_stops_the_command_line_with_75_and_resume_finishes(tmp_path: Path) -> None:
    out, root = tmp_path / "run", str(Path(__file__).parents[2])
    # argparse: the last --steps and --per-epoch count; 95 steps to spare for a late signal (5 s), 20 epochs
    flags = [*TINY_FLAGS, "--steps", "100", "--per-epoch", "5"]
    env = {**os.environ, "PYTHONPATH": root, "PYTHONUNBUFFERED": "1"}
    command = [sys.executable, "-m", "applicative.examples.parsing", "train", "--out", str(out), *flags]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    assert process.stdout is not None
    for line in process.stdout:
        if line.startswith("epoch 1/20:"):
            process.send_signal(signal.SIGTERM)
            break
    _, err = process.communicate(timeout=300)
    assert process.returncode == 75, err
    stopped = len(history(out)[0])
    assert 5 <= stopped < 100
    assert f"stopped by SIGTERM after step {stopped}, checkpointed there" in err
    finished = subprocess.run([*command, "--resume"], capture_output=True, text=True, env=env, timeout=300)
    assert finished.returncode == 0, finished.stderr
    assert len(history(out)[0]) == 100
    assert "parser trained 100 steps" in finished.stdout
