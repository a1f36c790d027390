"""``python -m applicative.examples.trees``: the trees example's command line.

    train --out DIR [--resume] [--seconds S] [--quiet] [--steps N] [--seed S] [--per-epoch K] [--config JSON]
                       a run into DIR (``training.train``: a line an epoch with the held-out error, a checkpoint an
                       epoch), then its tests; --config: fields of ``Config`` as JSON (the others default)
    evaluate DIR       the run in DIR read back and tested again
    plot DIR           DIR/loss.png: the loss a step and the held-out errors

Exit statuses (``applicative.training.command.run``): 0; 75 after SIGTERM or the --seconds budget (checkpointed:
``--resume`` goes on as if it had not stopped); 1 with "python -m applicative.examples.trees COMMAND: error: ..." on
bad input.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

from applicative.examples.trees.training import Run, evaluate, lines, report_lines, train
from applicative.examples.trees.training import settings as read
from applicative.training import command, settings
from applicative.training.files import read_config

__all__ = ["PROG", "main"]

PROG = "python -m applicative.examples.trees"


def _saved(directory: Path) -> Run:
    """The settings of the run in ``directory``; FileNotFoundError where it holds none."""
    return read(read_config(directory))


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line ``argv`` (default: the process's); its exit status."""
    parser = argparse.ArgumentParser(prog=PROG, description=__doc__.splitlines()[0] if __doc__ else None)
    commands = parser.add_subparsers(dest="command", required=True)
    learn = commands.add_parser("train", help="train a transformer on trees to compare leaves with the integral")
    command.add_flags(learn)
    settings.add_flags(learn, Run)
    check = commands.add_parser("evaluate", help="the tests of the run in DIR")
    check.add_argument("run", type=Path, help="the run's directory")
    draw = commands.add_parser("plot", help="DIR/loss.png: the loss a step and the held-out errors")
    draw.add_argument("run", type=Path, help="the run's directory")
    args = parser.parse_args(argv)

    def action() -> int | None:
        if args.command == "train":
            run = settings.chosen(Run, args, _saved(args.out) if args.resume else None, str(args.out))
            result = train(run.steps, run.seed, run.config, args.out, per_epoch=run.per_epoch, resume=args.resume,
                           seconds=args.seconds, progress=not args.quiet)  # fmt: skip
            if result.steps < run.steps:
                print(f"stopped after step {result.steps} of {run.steps}, checkpointed: --resume goes on")
            for line in lines(result):
                print(line)
            return command.UNFINISHED if result.steps < run.steps else None
        elif args.command == "evaluate":
            for line in report_lines(evaluate(args.run)):
                print(line)
        else:
            print(f"wrote {command.plot(args.run, _saved(args.run).per_epoch)}")
        return None

    return command.run(PROG, args.command, action)
