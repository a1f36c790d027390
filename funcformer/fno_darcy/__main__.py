"""``python -m funcformer.fno_darcy``: the FNO paper's Darcy benchmark as a task (docs/fno_darcy.md).

    generate --out DATA                        the data, made once into DATA (run again: finishes a killed run)
    train --data DATA --out DIR [--model vit|image|fno] [--epochs E] [--seconds S] [--resume]
                                               a model trained at s = 85 (``applicative.training.fit``: a line an
                                               epoch, the error on a held-out slice of the test set every
                                               --validate-every epochs, a checkpoint an epoch), then evaluated;
                                               by default the best learned model (``recipes.Recipe()``: the ViT
                                               with the square's symmetries, 50 epochs)
    evaluate DIR --data DATA                   the test error of DIR's model, written to DIR/metrics.json
    export --data DATA --out FILE [--s 85]     the dataset at one grid in one file (``export``), which --data takes
    plot DIR --data DATA [--sample K]          DIR/loss.png (the loss an epoch, the held-out errors) and
                                               DIR/prediction.png (test sample K: a, u, the prediction, the error)

The image-to-function model reads the coefficient between the data's two values (``ImageConfig.low``, ``high``).
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, TypeVar

import numpy as np
import optax

from applicative.training import Learner, State, command, settings
from applicative.training.checkpoints import read, stored, template
from applicative.training.files import CONFIG, METRICS, holding_run, read_config, write_atomically
from applicative.training.plots import plot_loss
from applicative.training.settings import setting
from funcformer import parameter_count
from funcformer.fno_darcy import SHARD_SIZE, export, fno, generate, load
from funcformer.fno_darcy.data import LOW, NODES
from funcformer.fno_darcy.model import ImageConfig
from funcformer.fno_darcy.recipes import IMAGE, Recipe, image_learner, predict_image, train_image
from funcformer.fno_darcy.vit import ViTConfig
from funcformer.learning.metric import mean_values_relative_l2
from funcformer.learning.plots import plot_values

MODELS = ("image", "vit", "fno")
P = TypeVar("P")


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line ``argv`` (default: the process's); the exit status (1 on a refused request or a diverged
    training, 75 after a SIGTERM: ``Preempted``)."""
    parser = argparse.ArgumentParser(prog="python -m funcformer.fno_darcy", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    commands = parser.add_subparsers(dest="command", required=True)
    make = commands.add_parser("generate", help="make (or finish making) the training and test sets in DIR")
    make.add_argument("--out", required=True, help="the dataset's directory (created if need be)")
    make.add_argument("--train", type=int, default=1000, help="training samples (default 1000)")
    make.add_argument("--test", type=int, default=200, help="test samples (default 200)")
    make.add_argument("--s", type=int, default=NODES, help=f"grid points per axis (default {NODES})")
    make.add_argument("--low", type=float, default=LOW, help=f"the coefficient where g < 0 (default {LOW:g})")
    make.add_argument("--workers", type=int, default=None, help="processes (default: every core)")
    make.add_argument("--shard-size", type=int, default=SHARD_SIZE, help=f"samples per shard (default {SHARD_SIZE})")
    copy = commands.add_parser("export", help="the dataset at one grid in one float32 file (for a lent machine)")
    copy.add_argument("--data", type=Path, required=True, help="the dataset's directory")
    copy.add_argument("--out", type=Path, required=True, help="the file to write (.npz)")
    copy.add_argument("--s", type=int, default=85, help="the grid (default 85)")
    learn = commands.add_parser("train", help="train a model into DIR, then evaluate it")
    learn.add_argument("--data", type=Path, required=True, help="the dataset's directory (generate), or an export")
    command.add_flags(learn)  # --out, --resume, --seconds, --quiet: every training command line's
    settings.add_flags(learn, Flags)
    learn.add_argument("--held-out", type=int, default=50, help="test samples of the per-epoch error (default 50)")
    learn.add_argument("--validate-every", type=int, default=1, help="epochs between held-out errors (default 1)")
    draw = commands.add_parser("plot", help="figures of a trained run: DIR/loss.png and DIR/prediction.png")
    draw.add_argument("run", type=Path, help="the run's directory")
    draw.add_argument("--data", type=Path, required=True, help="the dataset's directory, or an export")
    draw.add_argument("--sample", type=int, default=0, help="which test sample to plot (default 0)")
    check = commands.add_parser("evaluate", help="the test error of a trained run (DIR/metrics.json)")
    check.add_argument("run", type=Path, help="the run's directory")
    check.add_argument("--data", type=Path, required=True, help="the dataset's directory")
    check.add_argument("--test", type=int, default=200, help="test samples (default 200)")
    args = parser.parse_args(argv)
    start = time.perf_counter()

    def act() -> int | None:
        if args.command == "generate":
            made = generate(args.out, args.train, args.test, args.s, low=args.low, workers=args.workers,
                            shard_size=args.shard_size)  # fmt: skip
            print(f"{args.out}: {made} samples made in {time.perf_counter() - start:.1f} s, "
                  f"{args.train + args.test} in all")  # fmt: skip
        elif args.command == "export":
            path = export(args.data, args.out, args.s)
            print(f"{path}: the dataset at s = {args.s}, {path.stat().st_size / 1e6:.1f} MB (give it as --data)")
        elif args.command == "plot":
            for path in plot(args.run, args.data, args.sample):
                print(f"wrote {path}")
        elif args.command == "train":
            if not train(args):
                print(f"stopped by the --seconds budget, checkpointed in {args.out}: continue the run with --resume")
                return command.UNFINISHED
            print(json.dumps(evaluate(args.out, args.data), indent=2))
        else:
            print(json.dumps(evaluate(args.run, args.data, args.test), indent=2))
        return None

    return command.run(parser.prog, args.command, act)


@dataclass(frozen=True)
class Flags:
    """A run's settings as ``train``'s flags say them, read back from its config.json by ``of``; a setting None
    (``--epochs``, ``--batch``, ``--augment``), the model's recipe's."""

    model: Literal["image", "vit", "fno"] = setting("vit", help="vit (the default, the best): a token a cell "
                                                    "(vit.py); image: Chebyshev queries attending to patches "
                                                    "(model.py); fno: the FNO")  # fmt: skip
    s: int = setting(85, help="the training grid")
    train: int = setting(1000, help="training samples, the first of the set")
    epochs: int | None = setting(None, help="epochs (default: the recipe's, vit 50, image 40, FNO 500)")
    batch: int | None = setting(None, help="samples a minibatch (default: the recipe's, vit 10, image and FNO 20)")
    architecture: dict[str, Any] = setting({}, help="the model's settings as JSON, fields of ImageConfig, ViTConfig "
                                           "or FNOConfig over their defaults")  # fmt: skip
    augment: bool | None = setting(None, help="image and vit: minibatches moved by the square's symmetries "
                                   "(default: the recipe's, vit yes, image no)")  # fmt: skip

    @staticmethod
    def of(directory: Path) -> Flags:
        """The settings of the run in ``directory``; FileNotFoundError where it holds none."""
        run = json.loads(read_config(directory))
        if run["model"] == "fno":
            training = run["training"]
            return Flags("fno", run["s"], run["train"], training["epochs"], training["batch"], run["config"], None)
        recipe = run["recipe"]
        return Flags(run["model"], run["s"], run["train"], recipe["epochs"], recipe["batch"], recipe["model"],
                     recipe["augment"])  # fmt: skip


def train(args: argparse.Namespace) -> bool:
    """The ``train`` command: the model of the run's ``Flags`` (a resumed run's read back) on its first ``train``
    samples at its grid ``s``."""
    flags = settings.chosen(Flags, args, Flags.of(args.out) if args.resume else None, str(args.out))
    a, u = (x[: flags.train] for x in load(args.data, "train", flags.s))
    held_a, held_u = (x[: args.held_out] for x in load(args.data, "test", flags.s))
    progress, every = not args.quiet, args.validate_every
    if flags.model in ("image", "vit"):
        values = {"low": float(a.min()), "high": float(a.max())}  # the data's two values
        kind = ImageConfig if flags.model == "image" else ViTConfig
        default = IMAGE if flags.model == "image" else Recipe()
        recipe = dataclasses.replace(
            default, model=kind(**{**values, **flags.architecture}), epochs=flags.epochs or default.epochs,
            batch=flags.batch or default.batch, augment=default.augment if flags.augment is None else flags.augment,
        )
        state = train_image(
            recipe, a, u, args.out, resume=args.resume, progress=progress, log=True, seconds=args.seconds,
            validate=lambda model: mean_values_relative_l2(predict_image(model, held_a), held_u), validate_every=every,
        )  # fmt: skip
        return state.step == recipe.epochs * (len(u) // recipe.batch)
    else:
        epochs = flags.epochs or fno.TrainConfig().epochs  # fewer than 500: the schedule compressed, halved 5 times
        batch = flags.batch or fno.TrainConfig().batch
        run = fno.TrainConfig(epochs=epochs, batch=batch, step_size=max(1, epochs // 5))
        config = fno.FNOConfig(**flags.architecture)
        trained, _ = fno.train(
            a, u, args.out, config, run, resume=args.resume, progress=progress, log=True,
            seconds=args.seconds, validate_every=every,
            validate=lambda params, n: mean_values_relative_l2(fno.predict(params, n, held_a, config), held_u),
        )  # fmt: skip
        return trained.step == run.epochs * (len(u) // run.batch)


def evaluate(directory: Path, data: Path, test: int = 200) -> dict[str, Any]:
    """The run in ``directory`` (its config.json, its checkpoint) on the first ``test`` test samples at its grid:
    the benchmark's figure, written to metrics.json beside the training time and epochs."""
    with holding_run(directory):
        run = _restored(directory, data)
        test_a, test_u = (x[:test] for x in load(data, "test", run.s))
        metrics = {
            "model": run.settings["model"], "s": run.s, "test_samples": len(test_u),
            "relative_l2": mean_values_relative_l2(run.predict(test_a), test_u),
            "epochs": len(run.state.losses) // run.per_epoch, "training_seconds": run.state.seconds,
            "parameters": parameter_count(run.state.model), "held_out": run.state.held_out,
        }  # fmt: skip
        write_atomically(directory / METRICS, json.dumps(metrics, indent=2))
    return metrics


def plot(directory: Path, data: Path, sample: int = 0) -> tuple[Path, Path]:
    """DIR/loss.png, the training loss a step with the held-out errors (and the test error of metrics.json,
    if ``evaluate`` wrote it), and DIR/prediction.png, test sample ``sample`` at the run's grid."""
    with holding_run(directory):
        run = _restored(directory, data)
        test_a, test_u = load(data, "test", run.s)
        if not 0 <= sample < len(test_a):
            raise ValueError(f"plot: --sample must be an index of the {len(test_a)} test samples, got {sample}")
        metrics = directory / METRICS
        error = json.loads(metrics.read_text(encoding="utf-8"))["relative_l2"] if metrics.exists() else None
        held_out = [(epoch * run.per_epoch - 1, value) for epoch, value in run.state.held_out]
        return (
            plot_loss(run.state.losses, directory / "loss.png", error, held_out),
            plot_values(test_a[sample], test_u[sample], run.predict(test_a[sample : sample + 1])[0],
                        directory / "prediction.png"),
        )  # fmt: skip


@dataclass(frozen=True)
class _Run:
    """A trained run read back: its settings, its state, its grid and epoch, and its answers (count, s, s)."""

    settings: dict[str, Any]
    state: State[Any]
    s: int
    per_epoch: int
    predict: Callable[[np.ndarray], np.ndarray]


def _restored(directory: Path, data: Path) -> _Run:
    """The run in ``directory``, whose holder the caller is: its description and checkpoint, checked."""
    description = read_config(directory)
    settings = json.loads(description)
    s, count = int(settings["s"]), int(settings["train"])
    if settings["model"] in ("image", "vit"):
        fields, kind = settings["recipe"], ViTConfig if settings["model"] == "vit" else ImageConfig
        recipe = Recipe(**{**fields, "model": kind(**fields["model"])})
        learner = image_learner(recipe.model, s, settings["scale"])
        image = _read(directory, description, learner, recipe.optimiser(count), recipe.seed)
        return _Run(settings, image, s, count // recipe.batch, lambda a: predict_image(image.model, a))
    if settings["model"] == "fno":
        config, training = fno.FNOConfig(**settings["config"]), fno.TrainConfig(**settings["training"])
        a, u = (x[:count] for x in load(data, "train", s))
        normalisers = fno.Normalisers(fno.Normaliser.fit(a), fno.Normaliser.fit(u))
        opt = training.optimiser(count // training.batch)
        fitted = _read(directory, description, fno.learner(config, normalisers), opt, training.seed)
        predict = functools.partial(fno.predict, fitted.model, normalisers, config=config)
        return _Run(settings, fitted, s, count // training.batch, predict)
    raise ValueError(f"{directory / CONFIG}: model {settings['model']!r} is none of {', '.join(MODELS)}")


def _read(
    directory: Path, description: str, learner: Learner[P, Any, Any, Any], opt: optax.GradientTransformation, seed: int
) -> State[P]:
    """The run's checkpoint, checked against its description and the learner's shapes."""
    return read(stored(directory), description, template(learner, seed, opt), directory)


if __name__ == "__main__":
    command.end_process(main())
