"""The seq2seq baseline's command line (``python -m applicative.examples.seq2seq``):

    train --out DIR [--resume] [--seconds S] [--quiet] [--steps N] [--seed S] [--log-every N]
          [--min-tokens ... --test-fragments: the fragments, ``Data``] [--width ... --first-bucket: ``Config``]
    evaluate DIR [--batch B]      the finished (or stopped) run's scores on the test fragments: exact match,
                                  bracketing F1, malformed decodings (``parse``)
    plot DIR                      DIR/loss.png: the loss per step and the held-out loss (``command.plot``)

Exit statuses as every training command's (``applicative.training.command.run``): 0; 75 after SIGTERM or the
budget (checkpointed: ``train --resume`` goes on as if uninterrupted); 1 with "PROG NAME: error: ..." for bad input,
a run directory that holds a run (without ``--resume``) or none, a diverged run.
"""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from applicative.examples import syntax
from applicative.examples.seq2seq.decoding import parse
from applicative.examples.seq2seq.model import Config
from applicative.examples.seq2seq.training import Data, description, load, train
from applicative.training import command, settings
from applicative.training.checkpoints import history
from applicative.training.settings import from_dict, setting

__all__ = ["PROG", "STEPS", "Run", "main", "report"]

PROG = "python -m applicative.examples.seq2seq"
STEPS = 1000  # the default run's training steps


@dataclasses.dataclass(frozen=True)
class Run:
    """A command-line run's settings (its config.json holds them beside its fragments' digests)."""

    steps: int = setting(STEPS, help="training steps")
    seed: int = setting(0, help="the files' order and the run's")
    log_every: int = setting(50, help="steps an epoch: a line, a checkpoint, the held-out loss")
    data: Data = setting(Data(), help="the fragments", flat=True)
    config: Config = setting(Config(), help="the model and its optimisation", flat=True)


def _train(args: argparse.Namespace) -> int | None:
    saved = None
    if args.resume:
        run = description(args.out)
        if run["data"] is None:
            raise ValueError(f"{args.out} was trained from Python on fragments of its caller's: resume it there")
        saved = from_dict(Run, {key: run[key] for key in ("steps", "seed", "log_every", "data", "config")})
    chosen = settings.chosen(Run, args, saved, str(args.out))
    fragments, held_out = chosen.data.training(chosen.seed)
    trained = train(fragments, chosen.steps, config=chosen.config, seed=chosen.seed, log_every=chosen.log_every,
                    out=args.out, resume=args.resume, seconds=args.seconds, progress=not args.quiet,
                    held_out=held_out, data=chosen.data)  # fmt: skip
    done = len(trained.losses)
    spent = "" if done == chosen.steps else ": the --seconds budget is spent, --resume goes on"
    print(f"trained {done} of {chosen.steps} steps in {trained.seconds:.0f} s into {args.out}{spent}")
    return command.UNFINISHED if done < chosen.steps else None


def report(directory: Path, batch: int = 32) -> list[str]:
    """The lines ``evaluate`` prints: the run's steps, seconds and losses, its last held-out loss, and its
    scores on its ``Data``'s test fragments. ValueError for a run trained from Python (no ``Data``)."""
    trained, run = load(directory)
    if run["data"] is None:
        raise ValueError(f"{directory} was trained on fragments of its caller's: no test fragments to score it on")
    data = Data(**run["data"])
    losses, held_out = history(directory)
    last = np.mean(losses[-run["log_every"] :]) if losses else float("nan")
    lines = [
        f"{directory}: step {len(trained.losses)} of {run['steps']}, {trained.seconds:.0f} s; loss "
        f"{losses[0] if losses else float('nan'):.3f} -> {last:.3f} (the last epoch's mean)"
        + (f", held-out {held_out[-1][1]:.3f} (epoch {held_out[-1][0]})" if held_out else "")
    ]
    test = data.test()
    if not test:
        return [*lines, f"no test fragments of {data.min_tokens}-{data.max_tokens} tokens"]
    scores = syntax.score(parse(trained, test, batch=batch), (f.tree for f in test))
    lines.append(
        f"test: {scores.trees} fragments of {data.min_tokens}-{data.max_tokens} tokens: exact {scores.exact:.3f}, "
        f"F1 {scores.f1:.3f} (precision {scores.precision:.3f}, recall {scores.recall:.3f}), "
        f"malformed {scores.malformed}"
    )
    return lines


def _evaluate(args: argparse.Namespace) -> None:
    if args.batch < 1:
        raise ValueError(f"--batch {args.batch} must be positive")
    for line in report(args.directory, args.batch):
        print(line)


def _plot(args: argparse.Namespace) -> None:
    print(f"wrote {command.plot(args.directory, description(args.directory)['log_every'])}")


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line ``argv`` (default: ``sys.argv[1:]``); its exit status."""
    parser = argparse.ArgumentParser(prog=PROG, description="The seq2seq baseline: tokens to linearised trees.")
    commands = parser.add_subparsers(dest="command", required=True)
    training = commands.add_parser("train", help="train a run into --out")
    command.add_flags(training)
    settings.add_flags(training, Run)
    evaluating = commands.add_parser("evaluate", help="score a run on its test fragments")
    evaluating.add_argument("directory", type=Path)
    evaluating.add_argument("--batch", type=int, default=32, help="fragments decoded at once (default: %(default)s)")
    plotting = commands.add_parser("plot", help="draw a run's losses to DIR/loss.png")
    plotting.add_argument("directory", type=Path)
    args = parser.parse_args(argv)
    actions: dict[str, Callable[[argparse.Namespace], int | None]] = {
        "train": _train, "evaluate": _evaluate, "plot": _plot,
    }  # fmt: skip
    return command.run(PROG, args.command, lambda: actions[args.command](args))
