"""The FNO paper's Darcy benchmark, side by side (docs/fno_darcy.md): this project's image-to-function model
and an FNO with the paper's settings, both trained here on the same regenerated data, beside the published rows.

    python bench/fno_darcy.py                 the default budget (docs/fno_darcy.md gives its time)
    python bench/fno_darcy.py --smoke         tiny sizes, seconds (the suite runs it)

It generates the data if they are not in --data (``funcformer.fno_darcy.generate``: 1,000 + 200 samples at
421, about 14 minutes on two cores), trains the image-to-function model (``recipes.Recipe``, --epochs) and the
FNO (``fno.TrainConfig``, --fno-epochs: 500 is the paper's) at s = 85 on the first --train samples,
checkpointing each after every epoch in --runs (a rerun resumes, a finished run is read back), and prints:
the table at s = 85 on all --test samples and on the first 100 (the FNO script's ntest), each run's training
time; this project's model answering at every grid from inputs at every grid, beside the truncation floor
of its N x N output (the best N x N series fit of u at those points); and the exact solver's time per sample
beside each model's.
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

from funcformer.fno_darcy import data, fno, generate, load
from funcformer.fno_darcy.model import ImageConfig, grid_vandermonde, parameter_count
from funcformer.fno_darcy.recipes import Recipe, at_grid, predict_image, solve_image, train_image
from funcformer.learning import default_cache

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

SMOKE = {"stored": 29, "s": 15, "train": 8, "test": 4, "epochs": 2, "fno_epochs": 2}
SMOKE_MODEL = ImageConfig(
    grid=15, patch=5, width=4, hidden=4, encoder_layers=1, n=4, channels=2, heads=1, head_channels=1,
    hidden_channels=2, axes="xy",
)  # fmt: skip
SMOKE_FNO = fno.FNOConfig(modes=2, width=2, hidden=4)


def floor(u: np.ndarray, n: int) -> float:
    """The mean relative L2 error of the best n x n series fit of each u (least squares at its grid points)."""
    v = grid_vandermonde(u.shape[-1], n)
    project = v @ np.linalg.pinv(v)  # onto the span of T_0, ..., T_(n-1) at the points
    return data.mean_relative_l2(project @ u @ project.T, u)


def per_sample(fn: Callable[[], object], count: int) -> float:
    """Seconds per sample of a batch call ``fn()`` over ``count`` samples, the second of two calls."""
    fn()
    start = time.perf_counter()
    fn()
    return (time.perf_counter() - start) / count


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=default_cache() / "fno_darcy", help="the dataset's directory")
    parser.add_argument("--runs", type=Path, default=None, help="checkpoints (default: DATA/runs)")
    parser.add_argument("--epochs", type=int, default=Recipe().epochs, help="the image-to-function model's epochs")
    parser.add_argument(
        "--fno-epochs", type=int, default=fno.TrainConfig().epochs, help="the FNO's (500: the paper's; its rate halves "
        "every fifth of them, every 100 of 500)",
    )  # fmt: skip
    parser.add_argument("--train", type=int, default=1000)
    parser.add_argument("--test", type=int, default=200)
    parser.add_argument("--solves", type=int, default=3, help="exact solves timed at 421")
    parser.add_argument("--smoke", action="store_true", help="tiny sizes in a temporary directory")
    args = parser.parse_args()
    header(sys.argv[1:])
    if args.smoke:
        with tempfile.TemporaryDirectory() as tmp:
            directory = Path(tmp)
            generate(directory, SMOKE["train"], SMOKE["test"], SMOKE["stored"], workers=1, progress=False)
            recipe = Recipe(model=SMOKE_MODEL, epochs=SMOKE["epochs"], batch=4, warmup=0)
            run = fno.TrainConfig(epochs=SMOKE["fno_epochs"], batch=4)
            report(directory, directory / "runs", recipe, SMOKE_FNO, run, SMOKE["s"], (15, 29), SMOKE["test"], 1)
        return
    generate(args.data, 1000, 200)  # makes only what is missing
    recipe = dataclasses.replace(Recipe(), epochs=args.epochs)
    # fewer epochs than the paper's 500: its schedule compressed, the rate halved every fifth of the run
    run = dataclasses.replace(fno.TrainConfig(), epochs=args.fno_epochs, step_size=max(1, args.fno_epochs // 5))
    runs = args.runs or args.data / "runs"
    report(args.data, runs, recipe, fno.FNOConfig(), run, 85, (85, 141, 211, 421), args.test, args.solves, args.train)


def report(
    directory: Path,
    runs: Path,
    recipe: Recipe,
    fno_config: fno.FNOConfig,
    fno_run: fno.TrainConfig,
    s: int,
    grids: tuple[int, ...],
    test: int,
    solves: int,
    train: int | None = None,
) -> None:
    runs.mkdir(parents=True, exist_ok=True)
    a, u = load(directory, "train", s)
    a, u = a[:train], u[:train]
    tests = {g: tuple(x[:test] for x in load(directory, "test", g)) for g in grids}  # (a, u) at every grid, once
    test_a, test_u = tests[s]
    print(f"\nData: {len(a)} training and {len(test_a)} test samples at s = {s} (regenerated from the recipe).")

    image = train_image(recipe, a, u, checkpoint=runs / "image.npz", progress=True)
    model = image.params
    fitted, normalisers = fno.train(a, u, fno_config, fno_run, checkpoint=runs / "fno.npz", progress=True)

    ours = predict_image(model, test_a)
    theirs = fno.predict(fitted.params, normalisers, test_a, fno_config)
    mean = np.broadcast_to(u.mean(axis=0), test_u.shape)
    first = min(100, len(test_u))
    n = recipe.model.n

    def row(name: str, p: np.ndarray, training: str, note: str) -> str:
        errors = f"{data.mean_relative_l2(p, test_u):.2e} | {data.mean_relative_l2(p[:first], test_u[:first]):.2e}"
        return f"| {name} | {errors} | {training} | {note} |"

    print(f"\n## Relative L2 error at s = {s}: all {len(test_u)} test samples | the first {first}\n")
    print("| method | all | first | training here | note |\n|---|---|---|---|---|")
    print(row(
        f"image to function, N = {n} (this project)", ours, f"{len(image.losses)} epochs, {duration(image.seconds)}",
        f"{parameter_count(model):,} parameters; floor of its {n} x {n} output {floor(test_u, n):.2e}",
    ))  # fmt: skip
    print(row(
        "FNO, the paper's settings, trained here", theirs,
        f"{len(fitted.losses)} epochs, {duration(fitted.seconds)}",
        f"{fno.parameter_count(fitted.params):,} parameters",
    ))  # fmt: skip
    print(row("mean of the training solutions", mean, "", "the simplest baseline"))
    for name, error, source in PUBLISHED:
        print(f"| {name} (published) | {error:.2e} | | | {source} |")

    print(
        "\n## This project's model, one model at every grid: rows the input's s, columns the output's s "
        f"({len(test_u)} test samples)\n"
    )
    print("| input \\ output | " + " | ".join(f"s = {g}" for g in grids) + " |\n|---|" + "---|" * len(grids))
    for g_in in grids:
        series = solve_image(model, tests[g_in][0])
        cells = [f"{data.mean_relative_l2(at_grid(series, g), tests[g][1]):.2e}" for g in grids]
        print(f"| s = {g_in} | " + " | ".join(cells) + " |")
    print(
        "| truncation floor, N = " + str(n) + " | " + " | ".join(f"{floor(tests[g][1], n):.2e}" for g in grids) + " |"
    )

    print("\n## Time per sample\n")
    stored = tests[grids[-1]][0]
    start = time.perf_counter()
    for i in range(solves):
        data.solution(stored[i])
    solver = (time.perf_counter() - start) / solves
    print(f"exact solver (s = {grids[-1]}, one core, {solves} samples): {duration(solver)}")
    ours_time = per_sample(lambda: solve_image(model, test_a), len(test_a))
    speed = f"{solver / ours_time:.3g}x the solver's speed"
    print(f"image to function, the series of u (batches of 50): {duration(ours_time)}, {speed}")
    theirs_time = per_sample(lambda: fno.predict(fitted.params, normalisers, test_a, fno_config), len(test_a))
    print(f"FNO at s = {s} (batches of 100): {duration(theirs_time)}, {solver / theirs_time:.3g}x the solver's speed")


if __name__ == "__main__":
    main()
