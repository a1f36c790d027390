"""``python -m funcformer.<task> {train,evaluate,plot}``: the command line of every operator-learning task.

Each task's ``__main__`` calls ``main(PROBLEM)``:

train --out DIR [options]   train a Funcformer into DIR (config.json, checkpoint.npz), then evaluate it
train --out DIR --resume    continue DIR's run from its last checkpoint
evaluate DIR                test metrics and the trust calibration (written to DIR/metrics.json)
plot DIR                    DIR/prediction.png (target, prediction, error) and DIR/loss.png
cache [--clear]             where this task's datasets are cached, and their sizes; --clear deletes them

``train`` runs on several processes (hosts) when given ``--coordinator HOST:PORT --processes N
--process-id I`` (or their environment variables, or ``--cluster``): the same command on each
process, ``processes.initialize`` joining them (``--startup-timeout``, ``--coordinator-bind``, the run's secret
in ``$APPLICATIVE_RUN_SECRET``); process 0 alone writes DIR and evaluates. After SIGTERM (a preemption), at any
moment, ``train`` exits with status 75 and says what DIR holds: ``--resume`` continues it, or starts it again.

``evaluate`` and ``plot`` refuse a run of another task. A run directory is held by one process at a
time: a second ``train``, ``evaluate`` or ``plot`` of a run in use fails at once.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from applicative.training import command, settings
from applicative.training.files import METRICS, holding_run
from applicative.training.loop import opening
from applicative.training.processes import ENVIRONMENT, STARTUP_TIMEOUT, from_owner, initialize, is_owner, owning
from applicative.training.settings import setting
from funcformer.learning.cache import default_cache
from funcformer.learning.checkpoints import load
from funcformer.learning.loop import train
from funcformer.learning.problem import Problem
from funcformer.learning.settings import RunConfig, read_run

__all__ = ["main"]


def _positive(kind: Callable[[str], Any]) -> Callable[[str], Any]:
    def parse(text: str) -> Any:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
        if not value > 0:
            raise argparse.ArgumentTypeError(f"must be positive, got {text}")
        return value

    return parse


_positive_int, _positive_float = _positive(int), _positive(float)


@dataclasses.dataclass(frozen=True)
class Flags:
    """A run's settings as ``train``'s flags say them: ``RunConfig``'s own and those of its model the command line
    sets (``run``: the ``RunConfig`` of a problem; ``of``: back). Its defaults are a problem's (``Flags.of(
    RunConfig.of(problem))``)."""

    steps: int = setting(help="optimiser steps", parse=_positive_int)
    batch: int = setting(help="samples per minibatch", parse=_positive_int)
    learning_rate: float = setting(help="peak learning rate (Adam)", parse=_positive_float)
    warmup: int = setting(help="linear warm-up steps (at most a tenth of the run)")
    clip: float = setting(help="global gradient-norm clip", parse=_positive_float)
    train_size: int = setting(help="training samples", parse=_positive_int)
    seed: int = setting(help="seed of the training set, initialisation and minibatches")
    checkpoint_every: int = setting(help="steps between checkpoints", parse=_positive_int)
    channels: int = setting(help="channels of the residual stream", parse=_positive_int)
    heads: int = setting(help="attention heads", parse=_positive_int)
    head_channels: int = setting(help="channels of a head's queries, keys, values", parse=_positive_int)
    hidden_channels: int = setting(help="channels of the MLP's hidden layer", parse=_positive_int)
    layers: int = setting(help="encoder layers", parse=_positive_int)
    axes: str = setting(help="axis of successive layers, cycled: a string of 'x' and 'y' (e.g. 'xy', 'xxyy')")
    normalise: str = setting(help="attention normalisation: 'values' or 'coefficients'")
    points: int = setting(help="Chebyshev points for nonlinear maps (0: 2n)")
    mixers: str = setting(help="successive layers, cycled: 'a' attention + MLP, 'k' kernel integral, 'm' MLP")
    layer_norm: bool = setting(help="pre-norm layer normalisation")

    _MODEL = ("channels", "heads", "head_channels", "hidden_channels", "layers", "axes", "normalise", "points",
              "mixers", "layer_norm")  # fmt: skip

    def run(self, problem: Problem[Any]) -> RunConfig:
        fields = dataclasses.asdict(self)
        model = dataclasses.replace(problem.model, **{name: fields.pop(name) for name in self._MODEL})
        return RunConfig.of(problem, model=model, **fields)

    @staticmethod
    def of(run: RunConfig) -> Flags:
        names = [f.name for f in dataclasses.fields(Flags)]
        return Flags(**{name: getattr(run.model if name in Flags._MODEL else run, name) for name in names})


def _parser(problem: Problem[Any]) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=problem.command,
        description=f"The {problem.title} operator-learning task: train, evaluate, plot.",
    )
    commands = parser.add_subparsers(dest="command", required=True)

    t = commands.add_parser("train", help="train a Funcformer, then evaluate it")
    command.add_flags(t)  # --out, --resume, --seconds, --quiet: every training command line's
    settings.add_flags(t, Flags, Flags.of(RunConfig.of(problem)))
    t.add_argument("--test-size", type=_positive(int), default=1024, help="test samples (default 1024)")
    several = t.add_argument_group(
        "several processes",
        "one run on several processes (hosts), each with its devices, joined by jax.distributed: start the same "
        "command on each, with its own --process-id. Process 0 alone writes --out.",
    )
    several.add_argument(
        "--coordinator", metavar="HOST:PORT", help=f"process 0's address (default ${ENVIRONMENT['coordinator']})"
    )
    several.add_argument(
        "--processes", type=_positive(int), help=f"how many processes (default ${ENVIRONMENT['processes']})"
    )
    several.add_argument(
        "--process-id", type=int, help=f"this process's number, from 0 (default ${ENVIRONMENT['process_id']})"
    )
    several.add_argument(
        "--startup-timeout",
        type=_positive(float),
        default=STARTUP_TIMEOUT,
        metavar="SECONDS",
        help=f"how long the processes wait for each other to start (default {STARTUP_TIMEOUT:g})",
    )
    several.add_argument(
        "--coordinator-bind",
        metavar="HOST:PORT",
        help="where process 0's coordinator listens (default --coordinator itself; [::]:PORT: every interface)",
    )
    several.add_argument(
        "--cluster",
        action="store_true",
        help="take what is not given from the cluster JAX detects (Slurm, Open MPI, Cloud TPU, Kubernetes)",
    )

    e = commands.add_parser("evaluate", help="test metrics of a trained run")
    e.add_argument("run", type=Path, help="run directory")
    e.add_argument("--test-size", type=_positive(int), default=1024, help="test samples (default 1024)")

    p = commands.add_parser("plot", help="plots of a trained run")
    p.add_argument("run", type=Path, help="run directory")
    p.add_argument("--sample", type=int, default=0, help="which test sample to plot (default 0)")
    p.add_argument("--test-size", type=_positive(int), default=1024, help="test samples (default 1024)")

    c = commands.add_parser("cache", help="where the datasets are cached ($FUNCFORMER_CACHE), and their sizes")
    c.add_argument("--clear", action="store_true", help=f"delete the cached {problem.title} datasets")
    return parser


def _train(problem: Problem[Any], args: argparse.Namespace) -> int | None:
    from funcformer.learning.evaluation import evaluate

    defaults = Flags.of(RunConfig.of(problem))  # a new run's settings, checked before anything is written:
    run = None if args.resume else settings.chosen(Flags, args, defaults=defaults).run(problem)
    start = "resumes the run (--resume)" if args.resume else "starts a new run"
    initialize(args.coordinator, args.processes, args.process_id, cluster=args.cluster, timeout=args.startup_timeout,
               bind=args.coordinator_bind, start=start)  # fmt: skip
    # held through training and its evaluation; a new run's directory is made with its config.json, in one go
    with owning(args.out, resume=True) if run is None else opening(args.out, run.to_json(), resume=False):
        if run is None:
            run = RunConfig.from_json(
                from_owner(lambda: read_run(args.out, problem).to_json().encode()).decode(), problem, str(args.out)
            )
            settings.chosen(Flags, args, Flags.of(run), str(args.out))  # the flags given agree with it, or refused
        state = train(run, args.out, resume=args.resume, progress=not args.quiet, log=True, seconds=args.seconds)
        if state.step < run.steps:  # stopped by the budget, checkpointed
            print(f"stopped after step {state.step} of {run.steps} (--seconds): continue the run with --resume")
            return command.UNFINISHED
        if is_owner():
            _print_metrics(problem, evaluate(args.out, problem, args.test_size))
    return None


def _print_metrics(problem: Problem[Any], metrics: dict[str, Any]) -> None:
    def line(name: str, values: dict[str, float]) -> str:
        return f"{name:<28}mean {values['mean']:.3e}  median {values['median']:.3e}  p95 {values['p95']:.3e}"

    solve = metrics["seconds_per_solve"]  # None: a problem without an exact solver (a user's data)
    print(
        f"test relative L2 error ({metrics['test_size']} held-out samples):\n"
        f"{line('  model', metrics['test'])}\n"
        f"{line('  truncation floor (n x n)', metrics['truncation_floor'])}\n"
        f"{line('  mean of the training set', metrics['mean_predictor'])}\n"
        f"{line('  least squares (linear)', metrics['least_squares'])}\n"
        f"parameters {metrics['parameters']}, {metrics['steps']} steps in {metrics['train_seconds']:.0f} s; "
        f"{metrics['seconds_per_prediction'] * 1e6:.0f} us per prediction"
        + (" (no exact solver to time)" if solve is None else f" vs {solve * 1e6:.0f} us per exact solve")
    )
    trust = metrics.get("trust")  # absent: a problem without a residual, nothing to calibrate
    if trust is None:
        return
    print(
        f"funcformer.learning.load_solver(DIR, funcformer.{problem.name}.PROBLEM, check=True) flags residuals above "
        f"{trust['residual_threshold']:.3e} and distances "
        f"above {trust['distance_threshold']:.3g} (the test set's {trust['quantile']:.0%} quantiles)"
    )


def _evaluate(problem: Problem[Any], args: argparse.Namespace) -> None:
    from funcformer.learning.evaluation import evaluate

    _print_metrics(problem, evaluate(args.run, problem, args.test_size))


def _plot(problem: Problem[Any], args: argparse.Namespace) -> None:
    from applicative.training.plots import plot_loss
    from funcformer.learning.plots import plot_prediction
    from funcformer.learning.solver import as_solver

    if not 0 <= args.sample < args.test_size:
        raise ValueError(f"--sample must be an index of the {args.test_size}-sample test set, got {args.sample}")
    with holding_run(args.run):
        run = read_run(args.run, problem)
        state = load(args.run, run)
        test = problem.dataset(default_cache(), run.data_config, problem.test_seed, args.test_size, True)
        x = test.inputs[args.sample : args.sample + 1]
        predicted = as_solver(state.model, state.scale, run, args.run)(x)[0]
        metrics_path = args.run / METRICS
        error = json.loads(metrics_path.read_text())["test"]["mean"] if metrics_path.exists() else None
        for path in (
            plot_prediction(x[0], test.exact()[args.sample], predicted, args.run / "prediction.png", problem=problem),
            plot_loss(state.losses, args.run / "loss.png", error, _in_steps(state.held_out, run)),
        ):
            print(f"wrote {path}")


def _in_steps(held_out: list[tuple[int, float]], run: RunConfig) -> list[tuple[int, float]]:
    """The learning curve's (epoch, error) pairs at each epoch's last step."""
    per_epoch = run.train_size // run.batch
    return [(epoch * per_epoch - 1, error) for epoch, error in held_out]


def _cache(problem: Problem[Any], args: argparse.Namespace) -> None:
    cache = default_cache()
    files = sorted(cache.glob(f"{problem.name}_*.npz"))
    sizes = [path.stat().st_size for path in files]
    for path, size in zip(files, sizes, strict=True):
        print(f"{size / 1e6:10.1f} MB  {path.name}")
    print(f"{sum(sizes) / 1e6:.1f} MB of {problem.title} datasets in {len(files)} files under {cache}")
    if args.clear:
        for path in files:
            path.unlink(missing_ok=True)
        print("deleted them")


def main(problem: Problem[Any], argv: Sequence[str] | None = None) -> int:
    """Run the command line ``argv`` (default: the process's) of ``problem``'s task; the exit status."""
    parser = _parser(problem)
    args = parser.parse_args(argv)
    action = {"train": _train, "evaluate": _evaluate, "plot": _plot, "cache": _cache}[args.command]
    return command.run(parser.prog, args.command, lambda: action(problem, args))
