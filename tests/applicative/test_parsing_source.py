"""The parser on a user's own code: statements and their bands against ``syntax``'s own reading of the same
source, bad input (too long, too short, empty, invalid, unseen kinds and labels) reported, the predicted
``DenseTree`` against its ``Node``, and the command line."""

import ast
import itertools
import json
import re
from pathlib import Path

import jax
import numpy as np
import pytest

from applicative.examples import parsing, syntax
from applicative.examples.common import Optimisation
from applicative.examples.parsing import batches
from applicative.examples.parsing import source as user

SOURCE = '''\
import os


@cache
@wraps(f)
def join(a, b=1, *rest):
    """Join them."""
    if a:
        return os.path.join(a, str(b), *rest)
    return b


x = y
total = sum(value * weight for value, weight in zip(values, weights)) + offset - correction * (scale + b[i + 1])'''
# (no final newline)

BANDS = (parsing.Band(8, 32, 40, 4), parsing.Band(33, 64, 80, 4))


CONFIG = parsing.Config(
    width=16, hidden=32, heads=2, head_features=8, reader_layers=1, builder_layers=1, pointer=8, batch=4,
    optimisation=Optimisation(learning_rate=3e-3, warmup=2), bands=BANDS, train_share=(0.5, 0.5),
    train_fragments=300, test_fragments=4,
)  # fmt: skip


@pytest.fixture(scope="module")
def untrained() -> tuple[parsing.Parser, parsing.Config]:
    """A parser as initialised, with the vocabularies of 300 training fragments: what is read, chosen and
    reported does not depend on how well it parses."""
    config = batches.with_vocabularies(CONFIG, list(itertools.islice(syntax.fragments(8, 64, "train"), 300)))
    return parsing.init_parser(jax.random.PRNGKey(0), config), config


def test_every_top_level_statement_is_read_as_syntax_reads_it_in_its_band(
    untrained: tuple[parsing.Parser, parsing.Config],
) -> None:
    parser, config = untrained
    parsed = user.parse_source(parser, config, SOURCE)
    module = ast.parse(SOURCE)
    assert [p.line for p in parsed] == [1, 4, 13, 14]  # a decorated definition starts at its first @
    assert len(parsed) == len(module.body)
    tokens = syntax.tokens_of(SOURCE + "\n")  # a final newline changes nothing
    trees = {t.span[0]: t for t in syntax.statement_trees(ast.parse(SOURCE + "\n"), tokens)}
    for p in parsed:
        first = next(i for i, t in enumerate(tokens) if t.start[0] == p.line)
        expected = trees[first]
        assert p.kinds == tuple(t.kind for t in tokens[first : expected.span[1] + 1])
        assert p.python.span == (0, expected.span[1] - first)
        assert [n.label for n in syntax.nodes(p.python)] == [n.label for n in syntax.nodes(expected)]
    decorated = parsed[1]
    assert decorated.kinds[0] == "@"
    assert decorated.python.label == "FunctionDef"
    inside = {t for child in decorated.python.children for t in range(child.span[0], child.span[1] + 1)}
    owned = set(range(len(decorated.kinds))) - inside
    assert {i for i, k in enumerate(decorated.kinds) if k == "@"} <= owned  # every @ is the definition's own
    short, long = parsed[2], parsed[3]
    assert short.band == BANDS[0]
    assert "shorter than the 8 of the smallest band trained on" in short.problem
    assert long.band == BANDS[1]
    assert not long.problem
    for p in parsed:
        if p.predicted is not None:
            assert p.tree is not None
            assert p.tree.capacity == len(list(syntax.nodes(p.predicted)))
            labels = [config.labels.index(n.label) for n in syntax.nodes(p.predicted)]  # its leaves: the preorder
            np.testing.assert_array_equal(np.asarray(p.tree.elements()), labels)


def test_a_statement_longer_than_every_band_is_named_and_the_others_are_parsed(
    untrained: tuple[parsing.Parser, parsing.Config],
) -> None:
    parser, config = untrained
    long = "x = [" + ", ".join(f"a{i}" for i in range(40)) + "]\n"  # 83 tokens (and its NEWLINE), over 64
    parsed = user.parse_source(parser, config, "y = f(a, b) + g(c)\n" + long + "z = 1 + 2 * 3 - 4 / 5\n")
    assert [p.band is None for p in parsed] == [False, True, False]
    assert parsed[1].predicted is None
    assert parsed[1].problem == "83 tokens: over the parser's limit of 64 (its largest band); not parsed"
    with pytest.raises(ValueError, match=r"has 83 tokens, more than the band 8-32 holds"):
        parsing.parse(parser, config, [syntax.Fragment("long", parsed[1].kinds, parsed[1].python)], BANDS[0])


def test_empty_invalid_and_unseen_input(untrained: tuple[parsing.Parser, parsing.Config]) -> None:
    parser, config = untrained
    assert user.parse_source(parser, config, "") == []
    assert user.parse_source(parser, config, "# only a comment\n\n") == []
    with pytest.raises(SyntaxError) as error:
        user.parse_source(parser, config, "x = = 1 + 2\n")
    assert (error.value.lineno, error.value.offset) == (1, 5)
    source = "x **= 2\nx //= 2\nx <<= 1\nx >>= 1\nx ^= 1\nresult = a < b < c\n"
    for p in user.parse_source(parser, config, source):
        assert p.unseen_kinds == tuple(sorted({k for k in p.kinds if k not in config.kinds}))
        assert p.unseen_labels == tuple(
            sorted({n.label for n in syntax.nodes(p.python) if n.label not in config.labels})
        )
    kinds = {k for p in user.parse_source(parser, config, source) for k in p.unseen_kinds}
    assert kinds >= {k for k in ("**=", "//=", "<<=", ">>=", "^=") if k not in config.kinds}
    assert kinds  # a tiny training set has not seen all of them
    compared = user.compared(user.parse_source(parser, config, "x **= 2\n")[0])
    assert "never seen in training" in compared


def test_every_file_a_user_has_is_read_as_python_reads_it(
    tmp_path: Path, untrained: tuple[parsing.Parser, parsing.Config]
) -> None:
    """A latin-1 file with its PEP 263 line, a UTF-8 file with a byte-order mark, a notebook's code cells (IPython's
    magic lines blanked), a directory of them: each source's text is what Python compiles (``compile`` of the
    file's bytes agrees); a binary file, a notebook that is not one, a directory with no Python: a ValueError
    naming it."""
    latin = tmp_path / "latin.py"
    latin.write_bytes('# -*- coding: latin-1 -*-\nname = "café"\n'.encode("latin-1"))
    bom = tmp_path / "bom.py"
    bom.write_bytes(b"\xef\xbb\xbfx = 1\n")
    for path in (latin, bom):
        [(name, text)] = user.sources(path)
        assert name == str(path)
        assert ast.dump(ast.parse(text)) == ast.dump(compile(path.read_bytes(), name, "exec", ast.PyCF_ONLY_AST))
    assert 'name = "café"' in user.sources(latin)[0][1]
    parser, config = untrained
    assert [p.python for p in user.parse_source(parser, config, bom.read_bytes())] == [
        p.python for p in user.parse_source(parser, config, "x = 1\n")
    ]
    notebook = tmp_path / "sub" / "notes.ipynb"
    notebook.parent.mkdir()
    cells = [{"cell_type": "markdown", "source": "# notes"},
             {"cell_type": "code", "source": ["%matplotlib inline\n", "import os\n"]},
             {"cell_type": "code", "source": "!ls\ny = os.sep"}]  # fmt: skip
    notebook.write_text(json.dumps({"cells": cells, "nbformat": 4}), encoding="utf-8")
    assert user.sources(notebook) == [
        (f"{notebook}, cell 2", "\nimport os\n"),
        (f"{notebook}, cell 3", "\ny = os.sep\n"),
    ]
    (tmp_path / "readme.txt").write_text("not Python", encoding="utf-8")
    names = [name for name, _ in user.sources(tmp_path)]
    assert names == [str(bom), str(latin), f"{notebook}, cell 2", f"{notebook}, cell 3"]
    binary = tmp_path / "image.py"
    binary.write_bytes(bytes(range(256)))
    empty = tmp_path / "empty"
    empty.mkdir()
    broken = tmp_path / "broken.ipynb"
    broken.write_text("{}", encoding="utf-8")
    for path, words in [(binary, "not Python source text"), (broken, "not a Jupyter notebook (KeyError"),
                        (empty, "a directory with no Python file")]:  # fmt: skip
        with pytest.raises(ValueError, match=re.escape(f"{path}: {words}")):
            user.sources(path)
    with pytest.raises(FileNotFoundError, match=re.escape(f"{tmp_path / 'gone.py'}: no such file")):
        user.sources(tmp_path / "gone.py")
    with pytest.raises(TypeError, match="source must be Python source, str or bytes, got NoneType"):
        user.parse_source(parser, config, None)  # type: ignore[arg-type]


@pytest.mark.slow  # a tiny training run: CI runs it
def test_the_command_line_parses_a_file_and_refuses_invalid_code(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "run"
    parsing.train(4, config=CONFIG, seq2seq_steps=0, log=lambda _: None, progress=False, out=out)
    path = tmp_path / "code.py"
    path.write_text(SOURCE, encoding="utf-8")
    assert parsing.main(["parse", str(out), str(path)]) == 0
    printed = capsys.readouterr().out
    assert printed.count("python:") == 4
    assert printed.strip().splitlines()[-1].startswith("4 statements: 4 decoded")
    path.write_text("x = = 1\n", encoding="utf-8")
    assert parsing.main(["parse", str(out), str(path)]) == 1
    assert f"{path}, line 1, column 5: invalid syntax" in capsys.readouterr().err
    path.write_text("\n", encoding="utf-8")
    assert parsing.main(["parse", str(out), str(path)]) == 0
    assert capsys.readouterr().out == f"{path}: no statement to parse\n"
    # a directory: each file parsed, one that is not Python named, the status 1
    (tmp_path / "code" / "bad.py").parent.mkdir()
    (tmp_path / "code" / "bad.py").write_text("x = = 1\n", encoding="utf-8")
    (tmp_path / "code" / "good.py").write_text(SOURCE, encoding="utf-8")
    assert parsing.main(["parse", str(out), str(tmp_path / "code")]) == 1
    both = capsys.readouterr()
    assert f"{tmp_path / 'code' / 'bad.py'}, line 1, column 5: invalid syntax" in both.err
    assert f"== {tmp_path / 'code' / 'good.py'}" in both.out
    assert both.out.strip().splitlines()[-1].startswith("2 sources (1 not Python): 4 statements: 4 decoded")
    (tmp_path / "code" / "bad.py").write_bytes(bytes(range(256)))
    assert parsing.main(["parse", str(out), str(tmp_path / "code" / "bad.py")]) == 1
    assert f"parse: error: {tmp_path / 'code' / 'bad.py'}: not Python source text" in capsys.readouterr().err
