"""The parser's test: its sample against a reference draw, its figures against ``syntax.score``, its intervals
against a resampling written again with ``syntax.score``, the fragments training saw against brute force, and
the test on other code against where its files are."""

import ast
import contextlib
import dataclasses
import gzip
import itertools
import json
import sysconfig
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from applicative.examples import parsing, syntax, trees
from applicative.examples.parsing import batches, testing
from applicative.examples.syntax import Fragment, Node

BANDS = (parsing.Band(8, 16, 40), parsing.Band(17, 64, 80))


@pytest.fixture(scope="module")
def fragments() -> list[Fragment]:
    return list(itertools.islice(syntax.fragments(8, 64, "test"), 400))


def test_the_population_is_every_fragment_of_a_band_that_fits_it(
    fragments: list[Fragment], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    def read(low: int, high: int, side: str) -> Iterator[Fragment]:
        asked.append((low, high, side))
        return iter(fragments)

    def cleared() -> None:
        batches._population.cache_clear()
        batches.held.cache_clear()

    asked: list[tuple[int, int, str]] = []
    monkeypatch.setenv(batches.CACHE, str(tmp_path))
    monkeypatch.setattr(syntax, "fragments", read)
    config = parsing.Config(bands=BANDS)
    cleared()
    found = batches.population(config, "all")
    assert asked == [(1, batches.CEILING, "all")]  # every fragment a band within the ceiling could hold
    for band, members in zip(BANDS, found, strict=True):
        expected = [f for f in fragments if band.low <= len(f.tokens) <= band.high and batches.fits(f.tree, band)]
        assert members == expected
        assert members
    # kept on disk: the next process reads it back whole, and reads no file
    (kept,) = tmp_path.glob("population-all-*.json.gz")
    monkeypatch.setattr(syntax, "fragments", lambda low, high, side: pytest.fail("a file read"))
    cleared()
    assert batches.population(config, "all") == found
    # other bands within the ceiling are read from the same file: the bands filter it
    cleared()
    (one,) = batches.population(parsing.Config(bands=BANDS[1:]), "all")
    assert one == [f for f in fragments if len(f.tokens) >= BANDS[1].low and batches.fits(f.tree, BANDS[1])]
    # a truncated file, or one whose fragments were altered, is made anew (here: of the first 100 fragments)
    first = fragments[:100]
    monkeypatch.setattr(syntax, "fragments", lambda low, high, side: iter(first))
    header, text = gzip.decompress(kept.read_bytes()).split(b"\n", 1)
    groups = json.loads(text)
    groups[0][0][1][0] = "altered"  # a token kind of the first fragment, under the header of the whole
    for damaged in (kept.read_bytes()[:-20], gzip.compress(header + b"\n" + json.dumps(groups).encode())):
        kept.write_bytes(damaged)
        cleared()
        assert batches.population(config, "all") == [[f for f in band if f in first] for band in found]
    # a band above the ceiling reads fragments as long as its own, kept in another file
    asked.clear()
    monkeypatch.setattr(syntax, "fragments", read)
    cleared()
    above = parsing.Band(65, batches.CEILING + 88, 2 * batches.CEILING)
    batches.population(parsing.Config(bands=(*BANDS, above)), "all")
    assert asked == [(1, batches.CEILING + 88, "all")]
    assert len(list(tmp_path.glob("population-all-*.json.gz"))) == 2
    cleared()


def test_fragments_two_processes_ask_for_at_once_are_made_once(fragments: list[Fragment], tmp_path: Path) -> None:
    made: list[int] = []

    def make() -> tuple[tuple[Fragment, ...], ...]:
        made.append(1)
        time.sleep(0.5)  # the other asks meanwhile, and waits for these
        return (tuple(fragments[:50]),)

    path = tmp_path / "kept" / "population-test-0.json.gz"
    got: list[tuple[tuple[Fragment, ...], ...]] = []
    both = [threading.Thread(target=lambda: got.append(batches.cached(path, "key", make))) for _ in range(2)]
    for thread in both:
        thread.start()
    for thread in both:
        thread.join()
    assert made == [1]
    assert got == [(tuple(fragments[:50]),)] * 2
    # once kept, they are read without the lock (a folder others can only read serves them too)
    lock = path.with_name(path.name + ".lock")
    lock.unlink(missing_ok=True)  # (filelock leaves it on Unix)
    assert batches.cached(path, "key", lambda: pytest.fail("made again")) == got[0]
    assert not lock.exists()


def test_the_sample_is_a_reference_draw_from_each_band(fragments: list[Fragment]) -> None:
    population = [fragments[:300], fragments[300:]]
    drawn = batches.sample(population, 50, seed=7)
    rng = np.random.default_rng([7, 2])
    for members, got in zip(population, drawn, strict=True):
        chosen = np.sort(rng.choice(len(members), 50, replace=False))
        assert got == [members[i] for i in chosen]
    assert batches.sample(population, 1000, seed=7) == population  # fewer than asked: all of them
    assert batches.sample(population, 50, seed=8) != drawn
    assert drawn[0] != population[0][:50]  # not the first ones found
    assert max(population[0].index(f) for f in drawn[0]) > 250  # from all over the band


def _below_root(tree: Node) -> list[tuple[str, int, int]]:
    """The labelled spans of every node under the root (recursively), of more than one token."""
    spans = []
    for child in tree.children:
        if child.span[0] < child.span[1]:
            spans.append((child.label, *child.span))
        spans += _below_root(child)
    return spans


def _f1_inside(predicted: list[Node | None], gold: list[Node]) -> float:
    right = found = wanted = 0
    for p, g in zip(predicted, gold, strict=True):
        truth = Counter(_below_root(g))
        wanted += sum(truth.values())
        if p is not None:
            guess = Counter(_below_root(p))
            found += sum(guess.values())
            right += sum((guess & truth).values())
    return 2 * right / (found + wanted) if found + wanted else 0.0


def _perturbed(tree: Node, rng: np.random.Generator) -> Node | None:
    """``tree`` with some labels changed, or None (malformed) now and then."""
    if rng.random() < 0.1:
        return None

    def walk(node: Node) -> Node:
        label = node.label if rng.random() < 0.8 else "Wrong"
        return Node(label, node.span, tuple(walk(c) for c in node.children))

    return walk(tree)


def test_the_figures_are_syntax_score_s_and_the_intervals_a_resampling_of_files(fragments: list[Fragment]) -> None:
    rng = np.random.default_rng(0)
    chosen = fragments[:60]
    gold = [f.tree for f in chosen]
    predicted = [_perturbed(t, rng) for t in gold]
    files = [testing.file_of(f) for f in chosen]
    m = testing.measure(predicted, gold, files, seed=3)
    scores = syntax.score(predicted, gold)
    assert (m.trees, m.exact, m.precision, m.recall, m.f1, m.malformed) == pytest.approx(
        (scores.trees, scores.exact, scores.precision, scores.recall, scores.f1, scores.malformed)
    )
    assert m.f1_inside == pytest.approx(_f1_inside(predicted, gold))
    # The intervals: the same draws of files, every resample scored again by syntax.score.
    names = sorted(set(files))
    draws = np.random.default_rng(3).integers(0, len(names), (testing.RESAMPLES, len(names)))
    exact, f1 = [], []
    for draw in draws[:200]:
        members = [i for name in draw for i, f in enumerate(files) if f == names[name]]
        s = syntax.score([predicted[i] for i in members], [gold[i] for i in members])
        exact.append(s.exact)
        f1.append(s.f1)
    full = m
    short = _short_interval(predicted, gold, files, 200)
    assert short[0] == pytest.approx(np.percentile(exact, [2.5, 97.5]))
    assert short[1] == pytest.approx(np.percentile(f1, [2.5, 97.5]))
    assert full.exact_interval[0] <= full.exact <= full.exact_interval[1]
    assert full.f1_interval[0] <= full.f1 <= full.f1_interval[1]
    assert full.f1_inside_interval[0] <= full.f1_inside <= full.f1_inside_interval[1]


def _short_interval(
    predicted: list[Node | None], gold: list[Node], files: list[str], resamples: int
) -> tuple[tuple[float, float], tuple[float, float]]:
    """``measure``'s exact and F1 intervals with ``resamples`` resamples (the first of its draws)."""
    saved = testing.RESAMPLES
    try:
        testing.RESAMPLES = resamples
        m = testing.measure(predicted, gold, files, seed=3)
    finally:
        testing.RESAMPLES = saved
    return m.exact_interval, m.f1_interval


def test_intervals_narrow_with_more_files(fragments: list[Fragment]) -> None:
    # The same fragments in four times as many files (each file copied under new names): the same figures,
    # an interval about half as wide (the bootstrap's spread falls as one over the root of the files).
    rng = np.random.default_rng(1)
    chosen = fragments[::10]
    gold = [f.tree for f in chosen]
    predicted = [_perturbed(t, rng) for t in gold]
    files = [testing.file_of(f) for f in chosen]
    assert len(set(files)) >= 2
    small = testing.measure(predicted, gold, files)
    large = testing.measure(predicted * 4, gold * 4, [f"{name}#{k}" for k in range(4) for name in files])
    assert large.f1 == pytest.approx(small.f1)
    narrow, wide = large.f1_interval[1] - large.f1_interval[0], small.f1_interval[1] - small.f1_interval[0]
    assert 0.3 * wide < narrow < 0.75 * wide


def test_seen_is_the_same_tokens_with_the_same_tree(fragments: list[Fragment]) -> None:
    train = fragments[:200]
    seen = testing.seen_in(train)
    for fragment in fragments[200:]:
        brute = any(f.tokens == fragment.tokens and f.tree == fragment.tree for f in train)
        assert ((fragment.tokens, fragment.tree) in seen) == brute
    relabelled = Fragment("x:1", train[0].tokens, Node("Other", train[0].tree.span, train[0].tree.children))
    assert (relabelled.tokens, relabelled.tree) not in seen


def test_other_code_comes_from_installed_packages_not_the_standard_library() -> None:
    found = testing.other_code(parsing.Config(bands=BANDS), 20, seed=0, files=30)
    stdlib = Path(sysconfig.get_paths()["stdlib"]).resolve()
    names = {testing.file_of(f) for band in found for f in band}
    assert names
    assert all(name.split("/")[0] in testing.OTHER_PACKAGES for name in names)
    assert not any((stdlib / name).exists() for name in names)
    for band, members in zip(BANDS, found, strict=True):
        assert all(band.low <= len(f.tokens) <= band.high for f in members)
    assert testing.other_code(parsing.Config(bands=BANDS), 20, seed=0, files=30) == found  # a fixed draw


def test_the_training_fragments_are_drawn_file_by_file() -> None:
    """Against each file's own fragments (``syntax.file_fragments``): every training fragment is one of its file's,
    in the file's order, at most ``per_file`` of a file (as many where a file has more) drawn at random, from the
    standard library's training files and the packages named, never a held-out file; one seed's draw, another's
    not; with ``per_file`` 0, every fragment of each file."""
    config = parsing.Config(bands=BANDS, train_fragments=150, per_file=4, train_packages=("packaging", "tqdm"))
    drawn = batches.training(config, seed=3)
    assert len(drawn) == 150
    by_file: dict[str, list[Fragment]] = {}
    for fragment in drawn:
        by_file.setdefault(testing.file_of(fragment), []).append(fragment)
    packages = {name for name in by_file if name.split("/")[0] in config.train_packages}
    assert packages
    assert not any(trees.held_out(name) for name in set(by_file) - packages)
    files = {name: path for path, name in syntax.package_files(config.train_packages)}
    firsts = 0
    for name, kept in by_file.items():
        every = syntax.file_fragments(files.get(name, trees.LIBRARY / name), name, 8, 64)
        assert len(kept) == min(4, len(every)) or kept[-1] is drawn[-1]  # the last file may be cut short
        places = [every.index(f) for f in kept]
        assert places == sorted(places)
        firsts += len(every) >= 8 and places == [0, 1, 2, 3]  # a random 4 of 8 or more: 1 in 70 or fewer
    assert sum(len(kept) == 4 for kept in by_file.values()) > 20
    assert firsts <= 2
    assert batches.training(config, seed=3) == drawn
    assert batches.training(dataclasses.replace(config, train_fragments=20), seed=4) != drawn[:20]
    whole = batches.training(dataclasses.replace(config, train_fragments=100, per_file=0, train_packages=()), 3)
    names = dict.fromkeys(testing.file_of(f) for f in whole)  # the files, in the order read
    every = [f for name in names for f in syntax.file_fragments(trees.LIBRARY / name, name, 8, 64)]
    assert list(whole) == every[:100]  # per_file 0: every fragment of each file, the last file's cut short


def test_packages_are_read_whole_or_refused_by_name() -> None:
    files = syntax.package_files(["typing_extensions", "tqdm"])
    names = [name for _, name in files]
    assert names == sorted(names)
    assert "typing_extensions.py" in names  # a module of one file: itself, not its folder's every file
    assert {name.split("/")[0] for name in names} == {"typing_extensions.py", "tqdm"}
    assert all(path.suffix == ".py" and path.is_file() for path, _ in files)
    for missing in ("no_such_package", "no_such_package.module", ".relative"):
        with pytest.raises(ValueError, match=f"the package '{missing}' is not installed"):
            syntax.package_files(["tqdm", missing])
    with pytest.raises(ValueError, match="the test's packages tqdm are among the run's training packages"):
        testing.other_code(
            parsing.Config(bands=BANDS, train_packages=("tqdm",)), 20, seed=0, files=5, packages=("tqdm",)
        )


def _annotated(paths: list[Path]) -> float:
    """The share of the parameters (but ``self`` and ``cls``) of these files' functions that carry an annotation
    (a file that is not Python 3, as lib2to3's data, left out as training leaves it)."""
    found = []
    for path in paths:
        with contextlib.suppress(SyntaxError):
            tree = ast.parse(path.read_bytes())
            found += [n.annotation is not None for n in ast.walk(tree) if isinstance(n, ast.arg)
                      and n.arg not in ("self", "cls")]  # fmt: skip
    return sum(found) / len(found)


def test_the_default_training_packages_are_installed_annotated_code_that_no_test_draws_from() -> None:
    """The packages the default run trains on beside the standard library: every one installed with the
    project, none among the test on other code's, and their code annotated as the standard library's is not
    (0.8% of its parameters: the reason they are there)."""
    packages = parsing.Config().train_packages
    files = syntax.package_files(packages)  # a package not installed: ValueError naming it
    assert {name.split("/")[0] for _, name in files} == set(packages)
    assert not set(packages) & set(testing.OTHER_PACKAGES)
    library = [trees.LIBRARY / name for name in trees.library_files("train")]
    chosen = np.random.default_rng(0).choice(len(library), 100, replace=False)
    assert _annotated([path for path, _ in files]) > 10 * _annotated([library[i] for i in chosen])
