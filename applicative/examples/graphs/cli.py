"""``python -m applicative.examples.graphs``: the CLRS graph tasks' command line.

    train --algorithm NAME --out DIR [--resume] [--seconds S] [--quiet] [--steps N] [--seed S] [--config JSON]
                       a run into DIR (``training.train``: a line an epoch with the validation error, a checkpoint
                       an epoch), then its score on the benchmark's test set; --config: fields of ``Config``
    evaluate DIR [--best]   the run in DIR read back and tested again: its last state, or with --best the
                       state of its best validation score (the benchmark's model selection)
    plot DIR           DIR/loss.png: the loss a step and the validation errors
    answer DIR --nodes N --edges "0-1,1-2" [--source S]   the run's outputs on a graph of yours

Exit statuses (``applicative.training.command.run``): 0; 75 after SIGTERM or the --seconds budget (checkpointed:
``--resume`` goes on as if it had not stopped); 1 with "python -m applicative.examples.graphs COMMAND: error: ..."
on bad input (an algorithm the benchmark does not have, a graph of no node, an edge naming a node that does not
exist, a cycle given to a task on acyclic graphs).
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

from applicative.examples.graphs.training import Run, answer, evaluate, lines, report_lines, train
from applicative.examples.graphs.training import settings as read
from applicative.training import command, settings
from applicative.training.files import read_config

__all__ = ["PROG", "main"]

PROG = "python -m applicative.examples.graphs"


def _saved(directory: Path) -> Run:
    """The settings of the run in ``directory``; FileNotFoundError where it holds none."""
    return read(read_config(directory))


def _edges(text: str) -> list[tuple[int, int]]:
    try:
        return [(int(a), int(b)) for a, b in (pair.split("-") for pair in text.split(",") if pair.strip())]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"edges are sender-receiver pairs of node numbers, '0-1,1-2'; got {text!r}"
        ) from None


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line ``argv`` (default: the process's); its exit status."""
    parser = argparse.ArgumentParser(prog=PROG, description=__doc__.splitlines()[0] if __doc__ else None)
    commands = parser.add_subparsers(dest="command", required=True)
    learn = commands.add_parser("train", help="train a model on one of the benchmark's graph tasks")
    command.add_flags(learn)
    settings.add_flags(learn, Run)
    check = commands.add_parser("evaluate", help="the test score of the run in DIR")
    check.add_argument("run", type=Path, help="the run's directory")
    check.add_argument("--best", action="store_true", help="test the state of the best validation score")
    draw = commands.add_parser("plot", help="DIR/loss.png: the loss a step and the validation errors")
    draw.add_argument("run", type=Path, help="the run's directory")
    ask = commands.add_parser("answer", help="the run's outputs on a graph of yours")
    ask.add_argument("run", type=Path, help="the run's directory")
    ask.add_argument("--nodes", type=int, required=True, help="the graph's node count")
    ask.add_argument("--edges", type=_edges, default=[], help="sender-receiver pairs: '0-1,1-2'")
    ask.add_argument("--source", type=int, default=-1, help="the source node, where the task has one")
    args = parser.parse_args(argv)

    def action() -> int | None:
        if args.command == "train":
            run = settings.chosen(Run, args, _saved(args.out) if args.resume else None, str(args.out))
            result = train(run.algorithm, run.steps, run.seed, run.config, args.out, resume=args.resume,
                           seconds=args.seconds, progress=not args.quiet)  # fmt: skip
            if result.steps < run.steps:
                print(f"stopped after step {result.steps} of {run.steps}, checkpointed: --resume goes on")
            for line in lines(result):
                print(line)
            return command.UNFINISHED if result.steps < run.steps else None
        elif args.command == "evaluate":
            for line in report_lines(evaluate(args.run, args.best)):
                print(line)
        elif args.command == "answer":
            for name, value in answer(args.run, args.nodes, args.edges, args.source).items():
                print(f"{name}: {value.astype(int).tolist()}")
        else:
            config = _saved(args.run).config
            print(f"wrote {command.plot(args.run, config.train_samples // config.batch)}")
        return None

    return command.run(PROG, args.command, action)
