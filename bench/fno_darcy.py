"""The FNO paper's Darcy benchmark, side by side (docs/fno_darcy.md): this project's image-to-function model,
alone and correcting the data's solver run on its input, and an FNO with the paper's settings, all trained
here on the same regenerated data, beside the published rows and that solver alone.

    python bench/fno_darcy.py                 the default budget (docs/fno_darcy.md gives its time)
    python bench/fno_darcy.py --smoke         tiny sizes, seconds (the suite runs it)
    python bench/fno_darcy.py --data FILE.npz the dataset at s = 85 alone (``funcformer.fno_darcy.export``: 32 MB, for
                                              a lent GPU): the tables at s = 85, no exact solves at 421

It generates the data if they are not in --data (``funcformer.fno_darcy.generate``: 1,000 + 200 samples at
421, about 14 minutes on two cores), trains the image-to-function model (``recipes.Recipe``, --epochs), the
same model correcting the solver at 85 and at 127 nodes (``ImageConfig.solver_nodes``, --corrected-epochs) and
the FNO
(``fno.TrainConfig``, --fno-epochs: 500 is the paper's) at s = 85 on the first --train samples,
checkpointing each after every epoch in --runs (a rerun resumes, a finished run is read back), and prints:
the table at s = 85 on all --test samples and on the first 100 (the FNO script's ntest), each run's training
time, beside the recipe's own solver run on the s = 85 input (``data.coarse_solution``, what a numerical
analyst tries first) at s and 2s - 1 nodes, and at five node counts from s / 2 to 2s - 1 with its time per
sample; this project's models answering at every grid from inputs at every grid, beside the truncation floor
of their N x N series (the best N x N series fit of what each learns at those points); and the exact solver's
time per sample beside each model's.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # before numpy: the solver times one sample on one core
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the repository root

import numpy as np
from _report import duration, header  # bench/, the script's directory
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from applicative.instances.collocation import vandermonde
from funcformer import parameter_count
from funcformer.fno_darcy import data, fno, generate, load
from funcformer.fno_darcy.data import grid_points
from funcformer.fno_darcy.model import ImageConfig
from funcformer.fno_darcy.recipes import IMAGE, Recipe, predict_image, solver_part, train_image
from funcformer.fno_darcy.vit import ViTConfig
from funcformer.learning import default_cache
from funcformer.learning.metric import mean_values_relative_l2

PUBLISHED = (
    ("FNO", 1.08e-2, "the FNO paper (s = 141: 1.09e-2, 211: 1.09e-2, 421: 0.98e-2)"),
    ("U-NO", 1.13e-2, "the LSM and Transolver papers' tables"),
    ("GNOT", 1.05e-2, "the LSM and Transolver papers' tables"),
    ("OFormer", 1.24e-2, "the LSM and Transolver papers' tables"),
    ("F-FNO", 7.7e-3, "the LSM and Transolver papers' tables"),
    ("U-Net", 8.0e-3, "the LSM and Transolver papers' tables"),
    ("Galerkin Transformer", 8.4e-3, "the LSM and Transolver papers' tables"),
    ("LSM", 6.5e-3, "the LSM paper"),
    ("Transolver", 5.7e-3, "the Transolver paper"),
    ("LNO", 4.9e-3, "the LNO paper"),
    ("Transolver++", 4.9e-3, "the Transolver++ paper"),
)
"""The published relative L2 errors at s = 85 (1,000 training samples, 100 or 200 test samples)."""

CORRECTED_EPOCHS = 20
"""The corrected model's budget: it starts from the solver's error, not from zero."""

SMOKE = {"stored": 29, "s": 15, "train": 8, "test": 4, "epochs": 2, "fno_epochs": 2}
SMOKE_MODEL = ImageConfig(
    grid=15, patch=5, width=4, hidden=4, encoder_layers=1, n=4, channels=2, heads=1, head_channels=1,
    hidden_channels=2, axes="xy",
)  # fmt: skip
SMOKE_FNO = fno.FNOConfig(modes=2, width=2, hidden=4)
SMOKE_VIT = ViTConfig(grid=15, patch=5, context=1, width=8, hidden=8, mixers="ka", heads=2, n=4)
VIT_BATCH = 10
"""The ViT's minibatch: more steps an epoch than the FNO's 20 (docs/fno_darcy.md, the search)."""


def floor(u: np.ndarray, n: int, part: np.ndarray) -> float:
    """The mean relative L2 error of the best prediction ``part`` + an n x n series (least squares at the grid
    points of each u): the truncation floor of a model whose series adds to ``part`` (zeros: u's own)."""
    v = vandermonde(2.0 * grid_points(u.shape[-1]) - 1.0, n)
    project = v @ np.linalg.pinv(v)  # onto the span of T_0, ..., T_(n-1) at the points
    return mean_values_relative_l2(part + project @ (u - part) @ project.T, u)


def per_sample(fn: Callable[[], object], count: int) -> float:
    """Seconds per sample of a batch call ``fn()`` over ``count`` samples, the second of two calls."""
    fn()
    start = time.perf_counter()
    fn()
    return (time.perf_counter() - start) / count


def solver_baseline(a: np.ndarray, nodes: int) -> tuple[np.ndarray, float]:
    """The recipe's solver on each coefficient of ``a`` at ``nodes`` nodes (``data.coarse_solution``), and its
    seconds per sample on one core."""
    start = time.perf_counter()
    solved = np.stack([data.coarse_solution(x, nodes) for x in a])
    return solved, (time.perf_counter() - start) / len(a)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--data", type=Path, default=default_cache() / "fno_darcy", help="the dataset's directory, or an export",
    )  # fmt: skip
    parser.add_argument("--runs", type=Path, default=None, help="checkpoints (default: DATA/runs)")
    parser.add_argument(
        "--epochs", type=int, default=IMAGE.epochs,
        help="the image-to-function model's epochs (0: neither it nor its corrections are trained)",
    )  # fmt: skip
    parser.add_argument(
        "--vit-epochs", type=int, default=0,
        help=f"the ViT image-to-function model's (funcformer.fno_darcy.vit; batch {VIT_BATCH}; 0: not trained)",
    )  # fmt: skip
    parser.add_argument(
        "--augment", action="store_true", help="the ViT's minibatches moved by the square's symmetries (Recipe.augment)"
    )
    parser.add_argument(
        "--corrected-epochs", type=int, default=CORRECTED_EPOCHS,
        help="the same model correcting the recipe's solver on its input at 85 and at 127 nodes (0: not trained)",
    )  # fmt: skip
    parser.add_argument(
        "--fno-epochs", type=int, default=fno.TrainConfig().epochs, help="the FNO's (500: the paper's; its rate halves "
        "every fifth of them, every 100 of 500)",
    )  # fmt: skip
    parser.add_argument("--train", type=int, default=1000)
    parser.add_argument("--test", type=int, default=200)
    parser.add_argument("--solves", type=int, default=3, help="exact solves timed at 421")
    parser.add_argument(
        "--solver-nodes", type=int, nargs="+", default=(),
        help="more node counts for the solver on the input (always: s / 2, 3s / 4, s, 3s / 2, 2s - 1)",
    )  # fmt: skip
    parser.add_argument(
        "--seconds", type=float, default=None,
        help="a budget per model: each stops at the first epoch's end past it (the error at the epochs reached)",
    )  # fmt: skip
    parser.add_argument("--curve-every", type=int, default=1, help="epochs between the learning curves' test errors")
    parser.add_argument("--figure", type=Path, default=None, help="a PNG of the learning curves (error against epoch)")
    parser.add_argument("--smoke", action="store_true", help="tiny sizes in a temporary directory")
    args = parser.parse_args()
    header(sys.argv[1:])
    if args.smoke:
        with tempfile.TemporaryDirectory() as tmp:
            directory = Path(tmp)
            generate(directory, SMOKE["train"], SMOKE["test"], SMOKE["stored"], workers=1, progress=False)
            recipe = Recipe(model=SMOKE_MODEL, epochs=SMOKE["epochs"], batch=4, warmup=0, augment=False)
            run = fno.TrainConfig(epochs=SMOKE["fno_epochs"], batch=4)
            ours = ours_and_corrected(recipe, SMOKE["epochs"], (SMOKE["s"],))
            ours["vit"] = Recipe(model=SMOKE_VIT, epochs=SMOKE["epochs"], batch=4, warmup=0, augment=False)
            s, more = SMOKE["s"], tuple(args.solver_nodes)
            report(directory, directory / "runs", ours, SMOKE_FNO, run, s, (15, 29), SMOKE["test"], 1, None, more,
                   budget=Budget(args.seconds, args.curve_every, args.figure or directory / "curves.png"))  # fmt: skip
        return
    exported = args.data.is_file()
    if not exported:
        generate(args.data, 1000, 200)  # makes only what is missing
    ours = {}
    if args.epochs:
        ours = ours_and_corrected(dataclasses.replace(IMAGE, epochs=args.epochs), args.corrected_epochs, (85, 127))
    if args.vit_epochs:
        vit = Recipe(model=ViTConfig(), epochs=args.vit_epochs, batch=VIT_BATCH, augment=args.augment)
        ours["vit-symmetries" if args.augment else "vit"] = vit
    # fewer epochs than the paper's 500: its schedule compressed, the rate halved every fifth of the run
    run = dataclasses.replace(fno.TrainConfig(), epochs=args.fno_epochs, step_size=max(1, args.fno_epochs // 5))
    runs = args.runs or (args.data.parent / "runs" if exported else args.data / "runs")
    grids, solves = ((85,), 0) if exported else ((85, 141, 211, 421), args.solves)
    report(
        args.data, runs, ours, fno.FNOConfig(), run, 85, grids, args.test, solves, args.train, args.solver_nodes,
        budget=Budget(args.seconds, args.curve_every, args.figure),
    )  # fmt: skip


def ours_and_corrected(recipe: Recipe, epochs: int, nodes: tuple[int, ...]) -> dict[str, Recipe]:
    """This project's runs by their checkpoints' names: the recipe's model alone, and the same model correcting
    the recipe's solver on its input at each of ``nodes`` (``ImageConfig.solver_nodes``) for ``epochs`` (none
    if ``epochs`` is 0)."""
    if not epochs:
        return {"image": recipe}
    corrected = {
        f"corrected{n}": dataclasses.replace(
            recipe, model=dataclasses.replace(recipe.model, solver_nodes=n), epochs=epochs
        )
        for n in nodes
    }
    return {"image": recipe, **corrected}


@dataclasses.dataclass(frozen=True)
class Budget:
    """Each model's training budget beyond its epochs, and how often its learning curve is measured."""

    seconds: float | None = None
    curve_every: int = 1
    figure: Path | None = None


def name(recipe: Recipe) -> str:
    """A run's name in the tables."""
    if isinstance(recipe.model, ViTConfig):
        return "image to function, a ViT token a cell" + (", symmetries" if recipe.augment else "")
    nodes = recipe.model.solver_nodes
    return f"image to function, correcting the solver at {nodes} nodes" if nodes else "image to function"


def plot_curves(curves: dict[str, dict[int, float]], path: Path, title: str) -> None:
    """The learning curves, relative L2 test error against epoch (log scale), as a PNG at ``path``."""
    figure = Figure(figsize=(6.4, 4.2), layout="constrained")
    FigureCanvasAgg(figure)
    axes = figure.add_subplot()
    for label, curve in curves.items():
        epochs = sorted(curve)
        axes.semilogy(epochs, [curve[e] for e in epochs], marker="o", markersize=3, label=label)
    axes.set(xlabel="epoch", ylabel="relative L2 error (test)", title=title)
    axes.grid(True, which="both", alpha=0.3)
    axes.legend()
    figure.savefig(path, dpi=120)
    print(f"\n{path}: the learning curves")


def report(
    directory: Path,
    runs: Path,
    ours: dict[str, Recipe],
    fno_config: fno.FNOConfig,
    fno_run: fno.TrainConfig,
    s: int,
    grids: tuple[int, ...],
    test: int,
    solves: int,
    train: int | None = None,
    solver_nodes: tuple[int, ...] = (),
    budget: Budget = Budget(),
) -> None:
    runs.mkdir(parents=True, exist_ok=True)
    a, u = load(directory, "train", s)
    a, u = a[:train], u[:train]
    tests = {g: tuple(x[:test] for x in load(directory, "test", g)) for g in grids}  # (a, u) at every grid, once
    test_a, test_u = tests[s]
    print(f"\nData: {len(a)} training and {len(test_a)} test samples at s = {s} (regenerated from the recipe).")

    def error(predicted: np.ndarray) -> float:
        return mean_values_relative_l2(predicted, test_u)

    # every model trains through applicative.training.fit: a line an epoch, the test error every curve_every
    # epochs (its learning curve), a checkpoint an epoch in runs/NAME (a rerun resumes, a finished run is read)
    models = {}
    for run, recipe in ours.items():
        print(f"\n{name(recipe)}: {recipe.epochs} epochs")
        models[name(recipe)] = (recipe, train_image(
            recipe, a, u, runs / run, resume=(runs / run / "checkpoint.npz").exists(), progress=True, log=True,
            validate=lambda model: error(predict_image(model, test_a)), validate_every=budget.curve_every,
            seconds=budget.seconds,
        ))  # fmt: skip
    print(f"\nFNO: {fno_run.epochs} epochs")
    fitted, normalisers = fno.train(
        a, u, runs / "fno", fno_config, fno_run, resume=(runs / "fno" / "checkpoint.npz").exists(), progress=True,
        log=True, validate=lambda params, n: error(fno.predict(params, n, test_a, fno_config)),
        validate_every=budget.curve_every, seconds=budget.seconds,
    )  # fmt: skip
    per_epoch = len(a) // fno_run.batch
    curves = {label: dict(image.held_out) for label, (_, image) in models.items()} | {"FNO": dict(fitted.held_out)}
    print(f"\n## Learning curves: the relative L2 error on the {len(test_u)} test samples after each epoch\n")
    print("| epoch | " + " | ".join(curves) + " |\n|---|" + "---|" * len(curves))
    for epoch in sorted(set().union(*curves.values())):
        print(f"| {epoch} | " + " | ".join(f"{c[epoch]:.2e}" if epoch in c else "" for c in curves.values()) + " |")
    if budget.figure is not None:
        plot_curves(curves, budget.figure, f"{len(a)} training samples at s = {s}; error on {len(test_u)} test samples")

    first = min(100, len(test_u))

    def row(label: str, p: np.ndarray, training: str, note: str) -> str:
        errors = f"{error(p):.2e} | {mean_values_relative_l2(p[:first], test_u[:first]):.2e}"
        return f"| {label} | {errors} | {training} | {note} |"

    print(f"\n## Relative L2 error at s = {s}: all {len(test_u)} test samples | the first {first}\n")
    print("| method | all | first | training here | note |\n|---|---|---|---|---|")
    for label, (recipe, image) in models.items():
        n, part = recipe.model.n, solver_part(recipe.model, test_a, s)
        print(row(
            f"{label}, N = {n} (this project)", predict_image(image.model, test_a),
            f"{len(image.losses) // (len(a) // recipe.batch)} epochs, {duration(image.seconds)}",
            f"{parameter_count(image.model):,} parameters; floor of its {n} x {n} series {floor(test_u, n, part):.2e}",
        ))  # fmt: skip
    print(row(
        "FNO, the paper's settings, trained here", fno.predict(fitted.model, normalisers, test_a, fno_config),
        f"{len(fitted.losses) // per_epoch} epochs, {duration(fitted.seconds)}",
        f"{parameter_count(fitted.model):,} parameters",
    ))  # fmt: skip
    print(
        row(
            "mean of the training solutions", np.broadcast_to(u.mean(axis=0), test_u.shape), "", "the simplest baseline"
        )
    )
    every = sorted({(s + 1) // 2, (3 * s + 1) // 4, s, 3 * s // 2, 2 * s - 1, *solver_nodes})
    coarse = {nodes: solver_baseline(test_a, nodes) for nodes in every}
    for nodes in (s, 2 * s - 1):
        solved, seconds = coarse[nodes]
        label = f"the recipe's solver on the s = {s} input, {nodes} x {nodes} nodes"
        print(row(label, solved, "none", f"{duration(seconds)} a sample, one core (data.coarse_solution)"))
    for label, published, source in PUBLISHED:
        print(f"| {label} (published) | {published:.2e} | | | {source} |")

    for label, (recipe, image) in models.items():
        print(
            f"\n## {label}: one model at every grid, rows the input's s, columns the output's s "
            f"({len(test_u)} test samples)\n"
        )
        print("| input \\ output | " + " | ".join(f"s = {g}" for g in grids) + " |\n|---|" + "---|" * len(grids))
        for g_in in grids:
            cells = [
                f"{mean_values_relative_l2(predict_image(image.model, tests[g_in][0], g), tests[g][1]):.2e}"
                for g in grids
            ]
            print(f"| s = {g_in} | " + " | ".join(cells) + " |")
        floors = [floor(tests[g][1], recipe.model.n, solver_part(recipe.model, tests[g][0], g)) for g in grids]
        print(f"| truncation floor, N = {recipe.model.n} | " + " | ".join(f"{f:.2e}" for f in floors) + " |")

    print("\n## Time per sample\n")
    stored = tests[grids[-1]][0]
    start = time.perf_counter()
    for i in range(solves):
        data.solution(stored[i])
    solver = (time.perf_counter() - start) / max(solves, 1)

    def speed(seconds: float) -> str:
        return f", {solver / seconds:.3g}x the exact solver's speed" if solves else ""

    if solves:
        print(f"exact solver (s = {grids[-1]}, one core, {solves} samples): {duration(solver)}")
    for nodes, (solved, seconds) in coarse.items():
        label = f"the recipe's solver on the s = {s} input at {nodes} nodes"
        print(f"{label}: {mean_values_relative_l2(solved, test_u):.2e}, {duration(seconds)}{speed(seconds)}")
    for label, (_, image) in models.items():
        seconds = per_sample(lambda: predict_image(image.model, test_a), len(test_a))  # noqa: B023 (called here)
        print(f"{label}, u at s = {s} (batches of 50): {duration(seconds)}{speed(seconds)}")
    theirs_time = per_sample(lambda: fno.predict(fitted.model, normalisers, test_a, fno_config), len(test_a))
    print(f"FNO at s = {s} (batches of 100): {duration(theirs_time)}{speed(theirs_time)}")


if __name__ == "__main__":
    main()
