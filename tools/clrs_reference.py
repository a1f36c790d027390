"""Write tests/applicative/data/clrs_reference.npz: samples of the CLRS benchmark's twelve graph tasks made by the
benchmark's own code (``dm-clrs``), for ``tests/applicative/test_graphs_example.py`` to check the port
``applicative.examples.graphs.clrs`` against, sample for sample.

``dm-clrs`` needs TensorFlow and Haiku for its datasets and models, none for its samplers, which this reads
alone: install it without its dependencies, with the three its samplers import, and run

    pip install --no-deps dm-clrs==2.0.3 && pip install attrs chex absl-py
    python tools/clrs_reference.py

For each algorithm: the first 8 graphs of 16 nodes of its training stream (seed 1) and the first 2 of 64 of
its test stream (seed 3): the weighted adjacency ``A``, the source (-1 where the task has none) and every
output, as ``<algorithm>/<n>/<name>``.
"""

from __future__ import annotations

import pathlib
import sys
import types
from collections.abc import Callable

import numpy as np

OUT = pathlib.Path(__file__).resolve().parent.parent / "tests" / "applicative" / "data" / "clrs_reference.npz"
SETS = ((16, 8, 1), (64, 2, 3))  # (nodes, samples, seed)


def samplers() -> types.ModuleType:
    """``clrs._src.samplers``, imported without the package's __init__ (which imports its models) and with a
    stand-in for TensorFlow, which its samplers never call."""
    import importlib.util

    spec = importlib.util.find_spec("clrs")
    if spec is None or spec.submodule_search_locations is None:
        raise SystemExit("dm-clrs is not installed: see this script's docstring")
    root = next(iter(spec.submodule_search_locations))
    tensorflow = types.ModuleType("tensorflow")
    tensorflow.Tensor = type("Tensor", (), {})  # type: ignore[attr-defined]
    sys.modules.setdefault("tensorflow", tensorflow)
    for name, path in (("clrs", root), ("clrs._src", f"{root}/_src")):
        package = types.ModuleType(name)
        package.__path__ = [path]
        sys.modules[name] = package
    from clrs._src import samplers as module  # type: ignore[import-not-found]

    return module  # type: ignore[no-any-return]


def main() -> None:
    sys.path.insert(0, str(OUT.parents[3]))
    from applicative.examples.graphs.clrs import ALGORITHMS

    module, arrays = samplers(), {}
    for name in ALGORITHMS:
        for n, count, seed in SETS:
            sampler, _ = module.build_sampler(name, num_samples=count, length=n, seed=seed)
            feedback = sampler.next()
            inputs = {i.name: np.asarray(i.data) for i in feedback.features.inputs}
            arrays[f"{name}/{n}/A"] = inputs["A"]
            arrays[f"{name}/{n}/source"] = np.argmax(inputs["s"], -1) if "s" in inputs else np.full(count, -1)
            for output in feedback.outputs:
                arrays[f"{name}/{n}/{output.name}"] = np.asarray(output.data)
    OUT.parent.mkdir(parents=True, exist_ok=True)
    savez: Callable[..., None] = np.savez_compressed  # numpy's stubs would let a dict fill allow_pickle
    savez(OUT, **arrays)
    print(f"wrote {OUT} ({OUT.stat().st_size // 1024} kB, {len(arrays)} arrays)")


if __name__ == "__main__":
    main()
