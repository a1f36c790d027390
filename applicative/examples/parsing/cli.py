"""The command line: ``python -m applicative.examples.parsing train | evaluate | plot``.

    train --out DIR [--resume] [--seconds S] [--quiet] [--steps N --seed S --per-epoch N --seq2seq-steps N
          --train-fragments N --test-fragments N --bands K --width W --hidden H --heads N --head-features F
          --layers L --pointer P --learning-rate R --warmup N] [--figure PNG]
                       trains the parser into DIR (``runs.train``) and its seq2seq baseline, and prints the table
                       of their tests and the right-branching tree's on the held-out files
    evaluate DIR [--figure PNG]   the table of a trained run, the parser and the right-branching tree
    plot DIR                      DIR/loss.png: the loss per step and the held-out loss

Exit statuses are ``applicative.training.command.run``'s: 0; 75 after SIGTERM (checkpointed: ``--resume``
goes on); 1 with "python -m applicative.examples.parsing NAME: error: ..." after bad input, a run directory
that holds a run already (without ``--resume``) or another run's settings.
"""

from __future__ import annotations

import argparse
import dataclasses
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

from applicative.examples.parsing.batches import Data, load_data
from applicative.examples.parsing.decoding import parse
from applicative.examples.parsing.figure import plot
from applicative.examples.parsing.model import Config, Parser
from applicative.examples.parsing.runs import PER_EPOCH, STEPS, Result, Run, evaluate, load, train
from applicative.training import command

__all__ = ["main"]

PROG = "python -m applicative.examples.parsing"


def lines(result: Result) -> Iterator[str]:
    """The table of a run's tests, with its losses, its training fragments and its times."""
    yield f"loss {result.initial_loss:.3f} -> {result.final_loss:.3f}; trained on " + ", ".join(
        f"{n} fragments of {b.band.low}-{b.band.high} tokens"
        for n, b in zip(result.train_fragments, result.bands, strict=False)
    )
    yield (
        "| tokens (median) | fragments | parser: exact | F1 | malformed | s | right-branching: exact | F1 "
        "| seq2seq: exact | F1 | malformed | s |"
    )
    yield "|---|---|---|---|---|---|---|---|---|---|---|---|"
    for b in result.bands:
        s2s = b.seq2seq
        tail = (
            "| | | |"
            if s2s is None
            else f"{s2s.exact:.3f} | {s2s.f1:.3f} | {s2s.malformed} | {b.seq2seq_seconds:.0f} |"
        )
        yield (
            f"| {b.band.low}-{b.band.high} ({b.tokens[1]}) | {b.parser.trees} | {b.parser.exact:.3f} | "
            f"{b.parser.f1:.3f} | {b.parser.malformed} | {b.seconds:.0f} | {b.right_branching.exact:.3f} | "
            f"{b.right_branching.f1:.3f} | {tail}"
        )
    compiled = f" (the step compiled {result.compilations} times, once a band)" if result.compilations else ""
    baseline = f", seq2seq in {result.seq2seq_seconds:.0f} s" if result.seq2seq_seconds else ""
    yield f"parser trained {result.steps} steps in {result.seconds:.0f} s{compiled}{baseline}"


def _draw(parser: Parser, config: Config, data: Data, path: Path) -> None:
    """A held-out fragment of the first band (one of 20 tokens or more if any) under its two trees, to ``path``."""
    fragment = next((f for f in data.test[0] if len(f.tokens) >= 20), data.test[0][0])
    plot(fragment, parse(parser, config, [fragment], config.bands[0])[0], path)
    print(f"drew {fragment.name} to {path}")


def _train(args: argparse.Namespace) -> None:
    start = time.perf_counter()
    defaults = Config()
    if args.bands > len(defaults.bands):
        raise ValueError(f"--bands {args.bands}: there are {len(defaults.bands)} bands")
    config = Config(
        width=args.width, hidden=args.hidden, heads=args.heads, head_features=args.head_features,
        reader_layers=args.layers, builder_layers=args.layers, pointer=args.pointer,
        optimisation=dataclasses.replace(defaults.optimisation, learning_rate=args.learning_rate, warmup=args.warmup),
        bands=defaults.bands[: args.bands],
        train_share=defaults.train_share[: args.bands], train_fragments=args.train_fragments,
        test_fragments=args.test_fragments,
    )  # fmt: skip
    data = load_data(config, args.seed)
    trained, config, result = train(
        args.steps, args.seed, config, data, args.seq2seq_steps, progress=not args.quiet, out=args.out,
        resume=args.resume, seconds=args.seconds, per_epoch=args.per_epoch,
    )  # fmt: skip
    if result.steps < args.steps:
        print(f"stopped after step {result.steps} of {args.steps}, checkpointed in {args.out}: continue with --resume")
        return
    for line in lines(result):
        print(line)
    print(f"the run is in {args.out} ({PROG} evaluate {args.out} reads it back)")
    if args.figure is not None:
        _draw(trained, config, data, args.figure)
    print(f"in {time.perf_counter() - start:.0f} s")


def _evaluate(args: argparse.Namespace) -> None:
    run = Run.read(args.run)
    data = load_data(run.config, run.seed)
    for line in lines(evaluate(args.run, data)):
        print(line)
    if args.figure is not None:
        parser, config = load(args.run)
        _draw(parser, config, data, args.figure)


def _plot(args: argparse.Namespace) -> None:
    print(f"wrote {command.plot(args.run, Run.read(args.run).per_epoch)}")


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {text}")
    return value


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line ``argv`` (default: the process's); the exit status."""
    parser = argparse.ArgumentParser(prog=PROG, description="Train a transformer to parse Python: tokens to trees.")
    commands = parser.add_subparsers(dest="command", required=True)
    training = commands.add_parser("train", help="train the parser and its seq2seq baseline, then test them")
    command.add_flags(training)
    d = Config()
    settings: list[tuple[str, Callable[[str], object], object, str]] = [
        ("--steps", _positive, STEPS, "training steps"),
        ("--seed", int, 0, "random seed"),
        ("--per-epoch", _positive, PER_EPOCH, "steps an epoch: a line, a checkpoint, a held-out loss"),
        ("--seq2seq-steps", int, None, "the seq2seq baseline's steps, 0: none (default: --steps)"),
        ("--train-fragments", _positive, d.train_fragments, "training fragments, all bands together"),
        ("--test-fragments", int, d.test_fragments, "held-out fragments a band"),
        ("--bands", _positive, len(d.bands), "the first K bands of 8-32, 33-128 and 129-512 tokens"),
        ("--width", _positive, d.width, "features of the model's states"),
        ("--hidden", _positive, d.hidden, "features inside the MLP"),
        ("--heads", _positive, d.heads, "attention heads"),
        ("--head-features", _positive, d.head_features, "features of a head"),
        ("--layers", _positive, d.reader_layers, "layers of the reader, and of the builder"),
        ("--pointer", _positive, d.pointer, "features of the pointer's projections"),
        ("--learning-rate", float, d.optimisation.learning_rate, "the peak learning rate"),
        ("--warmup", int, d.optimisation.warmup, "warm-up steps"),
    ]
    for flag, kind, default, what in settings:
        said = what if default is None else f"{what} (default: %(default)s)"
        training.add_argument(flag, type=kind, default=default, help=said)
    training.add_argument("--figure", type=Path, help="draw a held-out fragment's trees to this PNG")
    evaluating = commands.add_parser("evaluate", help="test a trained run on the held-out files")
    evaluating.add_argument("run", type=Path, help="the run directory")
    evaluating.add_argument("--figure", type=Path, help="draw a held-out fragment's trees to this PNG")
    plotting = commands.add_parser("plot", help="DIR/loss.png: the loss per step and the held-out loss")
    plotting.add_argument("run", type=Path, help="the run directory")
    args = parser.parse_args(argv)
    action = {"train": _train, "evaluate": _evaluate, "plot": _plot}[args.command]
    return command.run(PROG, args.command, lambda: action(args))
