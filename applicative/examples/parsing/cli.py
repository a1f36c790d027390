"""The command line: ``python -m applicative.examples.parsing train | evaluate | parse | plot``.

    train --out DIR [--resume] [--seconds S] [--quiet] [--steps N --seed S --per-epoch N --seq2seq-steps N
          --train-fragments N --per-file N --train-packages A,B,... --test-fragments N --bands K --width W
          --hidden H --heads N --head-features F --layers L --pointer P --learning-rate R --warmup N]
          [--figure PNG]
                       trains the parser into DIR (``runs.train``), with ``--seq2seq-steps N`` its seq2seq baseline
                       too, and prints the table of their tests and the right-branching tree's on held-out files
    evaluate DIR [--figure PNG] [--other-files N] [--other-packages A,B,...]   the tables of a trained run (the
                       parser, the right-branching tree, the seq2seq baseline if it trained one) on held-out files
                       and on N files of other code (of the installed packages named)
    parse DIR FILE                the predicted tree of every statement of FILE (- for standard input; a notebook's
                                  code cells; a directory's files), beside Python's
    plot DIR                      DIR/loss.png: the loss per step and the held-out loss

Exit statuses are ``applicative.training.command.run``'s: 0; 75 after SIGTERM or the --seconds budget
(checkpointed: ``--resume`` goes on, the run's settings read back: ``Flags``); 1 with "python -m
applicative.examples.parsing NAME: error: ..." after bad input, a run directory that holds a run already (without
``--resume``), or a flag given with ``--resume`` that differs from the run's.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import sys
import time
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path

from applicative.examples import syntax
from applicative.examples.parsing import testing
from applicative.examples.parsing.batches import Data, load_data
from applicative.examples.parsing.decoding import parse
from applicative.examples.parsing.figure import plot
from applicative.examples.parsing.model import Config, Parser
from applicative.examples.parsing.runs import PER_EPOCH, STEPS, VALIDATE_EVERY, Result, Run, evaluate, load, train
from applicative.examples.parsing.source import Parsed, compared, decoded, parse_source, sources, unread
from applicative.examples.parsing.testing import Measured
from applicative.examples.trees import LIBRARY
from applicative.training import command, settings
from applicative.training.settings import setting

__all__ = ["main"]

PROG = "python -m applicative.examples.parsing"


def _row(band: str, model: str, m: Measured, files: str, seconds: str) -> str:
    def with_interval(value: float, interval: tuple[float, float]) -> str:
        return f"{value:.3f} [{interval[0]:.3f}, {interval[1]:.3f}]"

    return (
        f"| {band} | {model} | {m.trees}{files} | {with_interval(m.exact, m.exact_interval)} | "
        f"{with_interval(m.f1, m.f1_interval)} | {with_interval(m.f1_inside, m.f1_inside_interval)} | "
        f"{m.malformed} | {seconds} |"
    )


def lines(result: Result) -> Iterator[str]:
    """The table of a run's tests (``testing.measure``'s figures, 95% intervals by resampling files), with its
    losses, its training fragments and its times."""
    yield f"loss {result.initial_loss:.3f} -> {result.final_loss:.3f}; trained on " + ", ".join(
        f"{n} fragments of {b.band.low}-{b.band.high} tokens"
        for n, b in zip(result.train_fragments, result.bands, strict=False)
    )
    yield "| tokens (median) | model | fragments | exact | F1 | F1 inside | malformed | s |"
    yield "|---|---|---|---|---|---|---|---|"
    for b in result.bands:
        band = f"{b.band.low}-{b.band.high} ({b.tokens[1]})"
        yield _row(band, "parser", b.parser, f" ({b.files} files)", f"{b.seconds:.0f}")
        yield _row("", "parser, unseen", b.unseen, "", "")
        yield _row("", "parser, seen in training", b.seen, "", "")
        yield _row("", "right-branching", b.right_branching, "", "")
        if b.seq2seq is not None:
            yield _row("", "seq2seq", b.seq2seq, "", f"{b.seq2seq_seconds:.0f}")
    compiled = f" (the step compiled {result.compilations} times, once a band)" if result.compilations else ""
    baseline = f", seq2seq in {result.seq2seq_seconds:.0f} s" if result.seq2seq_seconds else ""
    yield f"parser trained {result.steps} steps in {result.seconds:.0f} s{compiled}{baseline}"


def _draw(parser: Parser, config: Config, data: Data, path: Path) -> None:
    """A held-out fragment of the first band (one of 20 tokens or more if any) under its two trees, to ``path``."""
    fragment = next((f for f in data.test[0] if len(f.tokens) >= 20), data.test[0][0])
    plot(fragment, parse(parser, config, [fragment], config.bands[0])[0], path)
    print(f"drew {fragment.name} to {path}")


_D = Config()


def _names(text: str) -> tuple[str, ...]:
    """A comma-separated list of names (of packages): ``a,b`` is ``("a", "b")``, ``''`` none."""
    return tuple(name.strip() for name in text.split(",") if name.strip())


@dataclasses.dataclass(frozen=True)
class Flags:
    """A run's settings as its command line says them (``runs.Run``'s: ``run``, and back, ``of``): the model's
    layers one count for the reader and the builder, the bands the first K."""

    steps: int = setting(STEPS, help="training steps")
    seed: int = setting(0, help="random seed")
    per_epoch: int = setting(
        PER_EPOCH, help=f"steps an epoch: a line, a checkpoint (a held-out loss every {VALIDATE_EVERY} epochs)"
    )
    train_fragments: int = setting(_D.train_fragments, help="training fragments, all bands together")
    per_file: int = setting(_D.per_file, help="training fragments of one file at most, 0: all of them")
    train_packages: tuple[str, ...] = setting(
        _D.train_packages, parse=_names, help="installed packages whose files train beside the standard library's "
        "(comma-separated; '' for none)"
    )  # fmt: skip
    test_fragments: int = setting(_D.test_fragments, help="held-out fragments a band, drawn at random from all")
    bands: int = setting(len(_D.bands), help="the first K bands of 1-32, 33-128 and 129-512 tokens")
    width: int = setting(_D.width, help="features of the model's states")
    hidden: int = setting(_D.hidden, help="features inside the MLP")
    heads: int = setting(_D.heads, help="attention heads")
    head_features: int = setting(_D.head_features, help="features of a head")
    layers: int = setting(_D.reader_layers, help="layers of the reader, and of the builder")
    pointer: int = setting(_D.pointer, help="features of the pointer's projections")
    learning_rate: float = setting(_D.optimisation.learning_rate, help="the peak learning rate")
    warmup: int = setting(_D.optimisation.warmup, help="warm-up steps")

    def __post_init__(self) -> None:
        for name in ("steps", "per_epoch", "train_fragments", "bands", "width", "hidden", "heads", "head_features",
                     "layers", "pointer"):  # fmt: skip
            if getattr(self, name) < 1:
                raise ValueError(f"--{name.replace('_', '-')} must be at least 1, got {getattr(self, name)}")
        if self.per_file < 0:
            raise ValueError(f"--per-file must be at least 0 (0: every fragment of a file), got {self.per_file}")
        if self.bands > len(_D.bands):
            raise ValueError(f"--bands {self.bands}: there are {len(_D.bands)} bands")

    def run(self) -> Run:
        config = dataclasses.replace(
            _D, width=self.width, hidden=self.hidden, heads=self.heads, head_features=self.head_features,
            reader_layers=self.layers, builder_layers=self.layers, pointer=self.pointer,
            optimisation=dataclasses.replace(_D.optimisation, learning_rate=self.learning_rate, warmup=self.warmup),
            bands=_D.bands[: self.bands], train_share=_D.train_share[: self.bands],
            train_fragments=self.train_fragments, per_file=self.per_file, train_packages=self.train_packages,
            test_fragments=self.test_fragments,
        )  # fmt: skip
        return Run(self.steps, self.seed, self.per_epoch, config)

    @staticmethod
    def of(run: Run) -> Flags:
        c = run.config
        return Flags(run.steps, run.seed, run.per_epoch, c.train_fragments, c.per_file, c.train_packages,
                     c.test_fragments, len(c.bands), c.width,
                     c.hidden, c.heads, c.head_features, c.reader_layers, c.pointer, c.optimisation.learning_rate,
                     c.optimisation.warmup)  # fmt: skip


def _train(args: argparse.Namespace) -> int | None:
    start = time.perf_counter()
    run = settings.chosen(Flags, args, Flags.of(Run.read(args.out)) if args.resume else None, str(args.out)).run()
    data = load_data(run.config, run.seed)
    trained, config, result = train(
        run.steps, run.seed, run.config, data, args.seq2seq_steps, progress=not args.quiet, out=args.out,
        resume=args.resume, seconds=args.seconds, per_epoch=run.per_epoch,
    )  # fmt: skip
    if result.steps < run.steps:
        print(f"stopped after step {result.steps} of {run.steps}, checkpointed in {args.out}: continue with --resume")
        return command.UNFINISHED
    for line in lines(result):
        print(line)
    print(f"the run is in {args.out} ({PROG} evaluate {args.out} reads it back)")
    if args.figure is not None:
        _draw(trained, config, data, args.figure)
    print(f"in {time.perf_counter() - start:.0f} s")
    return None


def _evaluate(args: argparse.Namespace) -> None:
    run = Run.read(args.run)
    if args.test_fragments is not None:
        run = dataclasses.replace(run, config=dataclasses.replace(run.config, test_fragments=args.test_fragments))
    data = load_data(run.config, run.seed)
    print("held-out files of the standard library:")
    for line in lines(evaluate(args.run, data)):
        print(line)
    print(_left_out(LIBRARY / name for name in sorted({testing.file_of(f) for band in data.test for f in band})))
    if args.other_files:
        packages = args.other_packages
        other = testing.other_code(run.config, run.config.test_fragments, run.seed, args.other_files, packages)
        print(f"\nother code: {args.other_files} files of {', '.join(packages)} drawn at random:")
        for line in lines(evaluate(args.run, data, other)):
            print(line)
        print(_left_out(path for path, _ in testing.other_files(run.seed, args.other_files, packages)))
    if args.figure is not None:
        parser, config = load(args.run)
        _draw(parser, config, data, args.figure)


def _left_out(paths: Iterable[Path]) -> str:
    """The line saying how many statements of the files tested have no reference tree (positions that do not
    nest), out of how many: they are in no test."""

    def texts() -> Iterator[str]:
        for path in paths:
            with contextlib.suppress(UnicodeDecodeError):
                yield path.read_bytes().decode("utf-8")

    out, every = syntax.left_out(texts())
    return f"statements of the files tested left out (Python's positions do not nest): {out} of {every}"


def _parse(args: argparse.Namespace) -> int | None:
    parser, config = load(args.run)
    stdin = str(args.file) == "-"
    found = [("<stdin>", decoded(sys.stdin.buffer.read(), "<stdin>"))] if stdin else sources(args.file)
    parsed: list[Parsed] = []
    left: list[int] = []
    failed = 0
    for name, source in found:
        if len(found) > 1:
            print(f"== {name}")
        try:
            here = parse_source(parser, config, source, name)
        except SyntaxError as error:
            where = f"{name}, line {error.lineno}, column {error.offset}: {error.msg} (Python's own SyntaxError)"
            if len(found) == 1:
                raise ValueError(where) from None
            print(f"{PROG} parse: error: {where}", file=sys.stderr)
            failed += 1
            continue
        for statement in here:
            print(compared(statement), end="\n\n")
        lines = unread(source, here)
        for line in lines:
            print(f"line {line}: not parsed: Python's positions in it do not nest\n")
        parsed, left = parsed + here, left + lines
    if not parsed and not left and not failed:
        print(f"{found[0][0] if len(found) == 1 else args.file}: no statement to parse")
        return None
    within = [p for p in parsed if p.band is not None]
    scores = syntax.score([p.predicted for p in within], [p.python for p in within])
    print(
        (f"{len(found)} sources ({failed} not Python): " if len(found) > 1 else "")
        + f"{len(parsed) + len(left)} statements: {len(within)} decoded, exact {scores.exact:.3f}, "
        f"F1 {scores.f1:.3f}, {scores.malformed} malformed; {sum(bool(p.unseen_kinds) for p in parsed)} with token "
        f"kinds and {sum(bool(p.unseen_labels) for p in parsed)} with labels never seen in training; "
        f"{len(parsed) - len(within)} over the limit, {sum(bool(p.problem) for p in within)} shorter than trained"
        + (f"; {len(left)} without a reference tree (not parsed)" if left else "")
    )
    return 1 if failed else None


def _plot(args: argparse.Namespace) -> None:
    print(f"wrote {command.plot(args.run, Run.read(args.run).per_epoch)}")


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line ``argv`` (default: the process's); the exit status."""
    parser = argparse.ArgumentParser(prog=PROG, description="Train a transformer to parse Python: tokens to trees.")
    commands = parser.add_subparsers(dest="command", required=True)
    training = commands.add_parser("train", help="train the parser (and its seq2seq baseline), then test them")
    command.add_flags(training)
    settings.add_flags(training, Flags)
    baseline = "the seq2seq baseline's steps, trained after the parser, 0: none (default: 0)"
    training.add_argument("--seq2seq-steps", type=int, default=0, help=baseline)
    training.add_argument("--figure", type=Path, help="draw a held-out fragment's trees to this PNG")
    evaluating = commands.add_parser("evaluate", help="test a trained run on the held-out files")
    evaluating.add_argument("run", type=Path, help="the run directory")
    evaluating.add_argument("--test-fragments", type=int, help="fragments a band (default: the run's)")
    evaluating.add_argument(
        "--other-files", type=int, default=300, help="files of other code to test on, 0: none (default: %(default)s)"
    )
    evaluating.add_argument(
        "--other-packages", type=_names, default=testing.OTHER_PACKAGES, metavar="A,B,...",
        help=f"the installed packages of the test on other code (default: {','.join(testing.OTHER_PACKAGES)})",
    )  # fmt: skip
    evaluating.add_argument("--figure", type=Path, help="draw a held-out fragment's trees to this PNG")
    parsing = commands.add_parser("parse", help="parse a file of Python with a trained run's parser")
    parsing.add_argument("run", type=Path, help="the run directory")
    parsing.add_argument("file", type=Path, help="a Python file, a notebook, a directory of them; - for standard input")
    plotting = commands.add_parser("plot", help="DIR/loss.png: the loss per step and the held-out loss")
    plotting.add_argument("run", type=Path, help="the run directory")
    args = parser.parse_args(argv)
    action = {"train": _train, "evaluate": _evaluate, "parse": _parse, "plot": _plot}[args.command]
    return command.run(PROG, args.command, lambda: action(args))
