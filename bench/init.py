"""Benchmark: what initialising a model costs, drawn from ``jax.random``.

``applicative.nn`` draws every weight's standard normals in blocks of ``nn.BLOCK`` scalars, so that one
compiled draw a dtype serves every weight of every model (``applicative/nn/_base.py``). Beside it, what a
JAX user writes first: one ``jax.random.normal`` a weight (each from its own ``fold_in`` of the key), eagerly
and under one ``jit``. The same weights' shapes, from the model's own initialiser (``jax.eval_shape``).

Each case runs in a fresh process (nothing compiled yet; JAX's persistent compilation cache off), twice:
the first call (compiling) and the next, with another key. Models: the default Funcformer (float32) at
1, 2, 4 and 8 layers, and at 16 channels. Prints a Markdown table and a last line ``ratio first call,
per weight / blocks: X.XX`` (the smallest over models: what a process saves at least).

    python bench/init.py           # every model, about 5 minutes on 2 CPU cores
    python bench/init.py --smoke   # a tiny model: checks that the script runs
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import subprocess
import sys
import time
from typing import Any

import jax
import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))  # the repository root

from funcformer.model import ModelConfig, init, parameter_count

MODELS = {
    "1 layer": {"layers": 1},
    "2 layers": {"layers": 2},
    "4 layers (the default)": {},  # ModelConfig(): attention layers
    "8 layers": {"layers": 8},
    "4 layers, 16 channels": {"channels": 16, "hidden_channels": 32},
}
SMOKE = {
    "tiny (2 channels, 1 layer)": {"channels": 2, "heads": 1, "head_channels": 1, "hidden_channels": 2, "layers": 1}
}
CASES = {
    "blocks": "nn's initialiser: blocks of nn.BLOCK normals",
    "per weight": "one jax.random.normal a weight, eagerly",
    "per weight, jit": "one jax.random.normal a weight, under one jit",
}


def _per_weight(config: ModelConfig, jitted: bool) -> Any:
    """A function of a key: the model's weights drawn one ``jax.random.normal`` each."""
    leaves, structure = jax.tree_util.tree_flatten(jax.eval_shape(lambda: init(0, config)))

    def draw(key: jax.Array) -> Any:
        return structure.unflatten(
            [jax.random.normal(jax.random.fold_in(key, i), leaf.shape, leaf.dtype) for i, leaf in enumerate(leaves)]
        )

    return jax.jit(draw) if jitted else draw


def measure(case: str, sizes: dict[str, Any]) -> dict[str, float]:
    """In this process: seconds of the first call and of the next, and the model's weights and scalars."""
    config = ModelConfig(**sizes)
    if case == "blocks":
        call = lambda seed: init(seed, config)
    else:
        draw = _per_weight(config, jitted=case == "per weight, jit")
        call = lambda seed: draw(jax.random.key(seed))
    seconds = []
    for seed in (0, 1):
        start = time.perf_counter()
        model = jax.block_until_ready(call(seed))
        seconds.append(time.perf_counter() - start)
    weights = jax.tree_util.tree_leaves(model)
    return {"first": seconds[0], "next": seconds[1], "weights": len(weights), "scalars": parameter_count(model)}


def in_fresh_process(case: str, sizes: dict[str, Any]) -> dict[str, float]:
    env = {**os.environ, "JAX_ENABLE_COMPILATION_CACHE": "false"}
    command = [sys.executable, __file__, "--child", json.dumps([case, sizes])]
    result = subprocess.run(command, env=env, capture_output=True, text=True, check=True)
    measured: dict[str, float] = json.loads(result.stdout.strip().splitlines()[-1])
    return measured


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--smoke", action="store_true", help="a tiny model only")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(measure(*json.loads(args.child))))
        return
    print(f"{jax.default_backend()}, {os.cpu_count()} CPU cores, JAX {jax.__version__}; each case a fresh process")
    print()
    print("| model | weights | scalars | " + " | ".join(f"{c}: first call / next" for c in CASES) + " |")
    print("|---|---|---|" + "---|" * len(CASES))
    ratios = []
    for name, sizes in (SMOKE if args.smoke else MODELS).items():
        results = {case: in_fresh_process(case, sizes) for case in CASES}
        facts = results["blocks"]
        cells = [f"{r['first']:.2f} s / {r['next']:.3f} s" for r in results.values()]
        print(f"| {name} | {facts['weights']:.0f} | {facts['scalars']:,.0f} | " + " | ".join(cells) + " |")
        ratios.append(min(results[c]["first"] for c in CASES if c != "blocks") / facts["first"])
    print()
    print(f"ratio first call, per weight / blocks: {np.min(ratios):.2f}")


if __name__ == "__main__":
    main()
