"""The digit reverser's training, through the learning layer (``applicative.training.fit``), and its command line.

    train(steps, seed, config, out=...)   a run into a directory (config.json, checkpoint.npz): a line an epoch
                                          with the held-out error, a checkpoint an epoch; the ``Result``
    evaluate(DIR)                         the ``Result`` of the run in DIR, read back (``restore``)
    main(argv)                            ``python -m applicative.examples.digits train|evaluate|plot``

The run's settings (``Config``, the step count and the seed: ``Run``, the command line's flags) are its
description, config.json: ``--resume`` reads them back (a flag given beside it must agree), ``fit`` refuses a
resume of other settings, and ``evaluate`` and ``plot`` read them back from the run alone.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import json
import math
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import NamedTuple

import jax
import optax

from applicative.examples.common import Optimisation
from applicative.examples.digits.data import keys, source, test_set
from applicative.examples.digits.model import VOCABULARY, Config, DigitModel, accuracy, init_model, loss, predict
from applicative.training import Learner, State, command, fit, restore
from applicative.training import settings as settings_
from applicative.training.files import CONFIG
from applicative.training.settings import setting

__all__ = ["Result", "description", "evaluate", "learner", "main", "optimiser", "settings", "train"]

PROG = "python -m applicative.examples.digits"
_EXAMPLE = "digits"


class Result(NamedTuple):
    """What a training run achieved: its first and last minibatch losses (each taken before its step's update,
    so the first is the untrained model's), the test token accuracy of its model, its training time (every
    session of a resumed run, the held-out errors left out) and the steps it made (fewer than asked when a
    ``seconds`` budget stopped it)."""

    initial_loss: float
    final_loss: float
    test_accuracy: float
    seconds: float
    step: int


@functools.lru_cache(maxsize=8)
def learner(config: Config) -> Learner[DigitModel]:
    """The model as ``fit`` trains it: ``init_model`` from the model key of ``data.keys(seed)``, the mean cross
    entropy per token, the predicted digits. One value a config, so that runs of one config share one
    compilation."""
    return Learner(lambda seed: init_model(keys(seed)[0], config), loss, predict)


@functools.lru_cache(maxsize=8)
def optimiser(config: Config, steps: int) -> optax.GradientTransformation:
    """AdamW on a warm-up and a cosine decay over ``steps``, after clipping (``config.optimisation``)."""
    return config.optimisation.optimiser(steps)


_accuracy = jax.jit(accuracy)


def description(config: Config, steps: int, seed: int) -> str:
    """The run's config.json: every setting at the top level (the optimiser's too), with the step count (the
    training keys depend on it, ``data.source``) and the seed."""
    fields = dataclasses.asdict(config)
    fields.update(fields.pop("optimisation"))
    return json.dumps({"example": _EXAMPLE, "steps": steps, "seed": seed, **fields}, indent=2)


def settings(text: str) -> tuple[Config, int, int]:
    """(config, steps, seed) from a run's config.json text (``description``). ValueError: not a digits run, or
    settings missing, unknown or out of range."""
    try:
        fields = json.loads(text)
    except ValueError as error:
        raise ValueError(f"{CONFIG} is not JSON: {error}") from error
    if not isinstance(fields, dict) or fields.pop("example", None) != _EXAMPLE:
        raise ValueError(f"{CONFIG} does not describe a run of the {_EXAMPLE} example")
    names = {field.name for field in dataclasses.fields(Optimisation)}
    try:
        steps, seed = fields.pop("steps"), fields.pop("seed")
        optimisation = Optimisation(**{name: fields.pop(name) for name in names})
        config = Config(**fields, optimisation=optimisation)
    except (KeyError, TypeError) as error:
        raise ValueError(f"{CONFIG} is not a run of the {_EXAMPLE} example's settings ({error})") from error
    if not (isinstance(steps, int) and steps >= 1 and isinstance(seed, int)):
        raise ValueError(f"{CONFIG}: steps = {steps!r} must be a positive integer and seed = {seed!r} an integer")
    return config, steps, seed


@dataclasses.dataclass(frozen=True)
class Run:
    """A run's settings as its command line gives them (``settings_``): its config.json holds them (``description``,
    every setting at the top level)."""

    steps: int = setting(300, help="training steps")
    seed: int = setting(0, help="random seed")
    config: Config = setting(Config(), help="the model, its data and its optimisation", flat=True)


def train(
    steps: int,
    seed: int = 0,
    config: Config = Config(),  # noqa: B008 (a frozen dataclass, which ruff cannot see across modules)
    *,
    out: Path | None = None,
    resume: bool = False,
    seconds: float | None = None,
    log: bool = True,
    progress: bool = False,
) -> Result:
    """Train on ``steps`` minibatches of fresh sequences (``data.source``) into the run directory ``out`` (None: a
    temporary one, removed afterwards), with ``resume`` from its checkpoint; with ``log``, a line every
    ``config.per_epoch`` steps with the held-out error, 1 - the test token accuracy on ``config.test_size``
    sequences from an independent key; with ``seconds``, a budget (the run stops, checkpointed, at the first
    epoch's end past it). Then the test on those sequences. ``applicative.training.fit``'s errors: a run already
    in ``out`` without ``resume`` (FileExistsError), a resume of other settings (ValueError), SIGTERM
    (``Preempted``, checkpointed); ValueError: a step count below 1."""
    if steps < 1:
        raise ValueError(f"train: steps = {steps} must be positive")
    if out is None:
        if resume:
            raise ValueError("train: resume needs the run's directory, out")
        with tempfile.TemporaryDirectory() as temporary:
            return train(steps, seed, config, out=Path(temporary), seconds=seconds, log=log, progress=progress)
    tokens, targets = test_set(seed, config.test_size)

    def validate(model: DigitModel) -> float:
        return 1.0 - float(_accuracy(model, tokens, targets))

    state = fit(learner(config), optimiser(config, steps), source(config.batch, steps, config.per_epoch), out,
                description=description(config, steps, seed), steps=steps, seed=seed, resume=resume,
                progress=progress, log=log, validate=validate, seconds=seconds)  # fmt: skip
    return _result(state, config, seed)


def evaluate(directory: str | Path) -> Result:
    """The ``Result`` of the run in ``directory`` (finished, or stopped and checkpointed), its model tested again on
    its test set. FileNotFoundError: no run there; ValueError: not a digits run, or a damaged checkpoint."""
    config, steps, seed = _settings_of(Path(directory))
    return _result(restore(directory, learner(config), optimiser(config, steps), seed), config, seed)


def _settings_of(directory: Path) -> tuple[Config, int, int]:
    path = directory / CONFIG
    if not path.exists():
        raise FileNotFoundError(f"no trained run at {directory}: {CONFIG} is missing")
    return settings(path.read_text(encoding="utf-8", errors="replace"))


def _result(state: State[DigitModel], config: Config, seed: int) -> Result:
    if not state.losses:
        raise ValueError("the run has not made a step yet")
    tested = float(_accuracy(state.model, *test_set(seed, config.test_size)))
    return Result(state.losses[0], state.losses[-1], tested, state.seconds, state.step)


def report(result: Result, steps: int) -> str:
    """The lines that ``train`` and ``evaluate`` print: the loss against chance, the test accuracy."""
    done = "" if result.step == steps else f"stopped at step {result.step} of {steps}: continue with --resume\n"
    return (
        f"{done}loss {result.initial_loss:.3f} -> {result.final_loss:.4f} "
        f"(chance ln {VOCABULARY} = {math.log(VOCABULARY):.3f})\n"
        f"test token accuracy: {result.test_accuracy:.3f} in {result.seconds:.1f} s of training"
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line ``argv`` (default: the process's); its exit status (``command.run``: 0; 75 after
    SIGTERM or the --seconds budget, checkpointed; 1 with "PROG COMMAND: error: ..." on stderr after bad input)."""
    parser = argparse.ArgumentParser(prog=PROG, description="Train a Vec transformer to reverse digit sequences.")
    commands = parser.add_subparsers(dest="command", required=True)
    learn = commands.add_parser("train", help="train a model into --out, then test it")
    command.add_flags(learn)
    settings_.add_flags(learn, Run)
    for name, what in (("evaluate", "test the model of a run again"), ("plot", "the run's losses: DIR/loss.png")):
        commands.add_parser(name, help=what).add_argument("run", type=Path, help="the run's directory")
    args = parser.parse_args(argv)

    def action() -> int | None:
        if args.command == "train":
            saved = None
            if args.resume:
                config, steps, seed = _settings_of(args.out)
                saved = Run(steps, seed, config)
            run = settings_.chosen(Run, args, saved, str(args.out))
            result = train(run.steps, run.seed, run.config, out=args.out, resume=args.resume, seconds=args.seconds,
                           progress=not args.quiet)  # fmt: skip
            print(report(result, run.steps))
            return command.UNFINISHED if result.step < run.steps else None
        elif args.command == "evaluate":
            print(report(evaluate(args.run), _settings_of(args.run)[1]))
        else:
            print(f"wrote {command.plot(args.run, _settings_of(args.run)[0].per_epoch)}")
        return None

    return command.run(parser.prog, args.command, action)
