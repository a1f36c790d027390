"""Benchmark: attention at 1,024 to 65,536 positions on every structure, each path's time and memory beside
the fused kernel's (``jax.nn.dot_product_attention``), forward and backward.

One call is ``value_and_grad`` of sum(attention(q, k, v) * w) with respect to q, k and v, jitted, for a
batch of 8 heads of 64 features (self-attention: queries, keys and values of n positions each):

- ``fused``: ``jax.nn.dot_product_attention`` on (1, n, 8, 64) arrays: cuDNN's flash attention on an
  NVIDIA GPU for bfloat16 and float16, elsewhere XLA's formula, which materialises the scores;
- ``Vec``: ``nn.attention`` on a ``Vec`` of ``Vec``s, vmapped over the heads, the library's default
  (``Softmax()``: the scores materialised up to 1,024 x 1,024, in chunks of 128 queries above); where
  the backend has a fused kernel for the type, the dense path takes it
  (``applicative.nn._dense_attention``);
- ``Vec, materialised``: the same with ``Softmax(chunk=None)``;
- ``tree``: a ``DenseTree`` of n leaves (a random shape, every slot a leaf), its measure 2^-depth the
  log-weight bias of each key, the default ``Softmax()``;
- ``function``: a ``Cheb`` of n coefficients of ``Cheb`` features, the generic definition (its
  softmax samples the function: n x n), at most ``--function-up-to`` positions;
- ``torch``: ``torch.nn.functional.scaled_dot_product_attention`` on the same arrays, in the same dtype,
  where PyTorch is installed (its time; its memory on a GPU, ``torch.cuda.max_memory_allocated``, all it
  has allocated: the arrays too). JAX then allocates the device's memory as it needs it.

The time is the median of ``--repeats`` calls, every path of a size in turn (``_timing.race``); the
memory is XLA's account of the compiled call's temporary buffers (``memory_analysis``), what grows with
the positions. A path whose temporaries pass 60% of the device's memory is not timed, and one whose
compilation does not fit in memory is a row that says so.

    python bench/attention.py                          # 1,024 to 16,384 positions (on 2 CPU cores: minutes)
    python bench/attention.py --positions 1024 65536 --dtype bfloat16   # on a GPU: cuDNN's kernel
    python bench/attention.py --smoke                  # tiny sizes, one repeat: checks that the script runs

The table's columns: positions, path, dtype, milliseconds, time / fused, temporary MB, memory / fused.
"""

from __future__ import annotations

import argparse
import os
import pathlib
import sys
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))  # the repository root

from _timing import DoesNotFit, device_memory, or_does_not_fit, race  # bench/, the script's directory

from applicative import Cheb, DenseTree, Dim, Vec, nn, to_array
from applicative.examples.trees import data as tree_data

HEADS, FEATURES = 8, 64
SMOKE_HEADS, SMOKE_FEATURES = 2, 8
HEADER = (
    "| positions | path | dtype | ms | time / fused | temporary MB | memory / fused |\n"
    "|---|---|---|---|---|---|---|"
)


class Position(Dim):
    """A position of the sequence."""


class Feature(Dim):
    """A head's feature."""


Operands = tuple[jax.Array, jax.Array, jax.Array]
"""Queries, keys and values: (heads, positions, features) each."""


def fused(q: jax.Array, k: jax.Array, v: jax.Array) -> jax.Array:
    out = jax.nn.dot_product_attention(*(jnp.swapaxes(a, 0, 1)[None] for a in (q, k, v)))
    return jnp.swapaxes(out[0], 0, 1)


def on_vec(chunk: int | str | None) -> Callable[[jax.Array, jax.Array, jax.Array], jax.Array]:
    normalise = nn.Softmax() if chunk == "default" else nn.Softmax(chunk=chunk)  # type: ignore[arg-type]

    def one(q: jax.Array, k: jax.Array, v: jax.Array) -> jax.Array:
        q_, k_, v_ = (Vec.from_array(a, Position, Feature) for a in (q, k, v))
        return to_array(nn.attention(q_, k_, v_, normalise=normalise))

    return jax.vmap(one)


def on_tree(n: int) -> Callable[[jax.Array, jax.Array, jax.Array], jax.Array]:
    """Attention on a tree of n leaves (a random shape drawn once, capacity n), its leaves the rows."""
    config = tree_data.Config(min_leaves=n, max_leaves=n, capacity=n)
    (shape,) = tree_data.random_shapes(0, 1, config)
    layout = DenseTree.from_shape(shape, np.float32(0.0), n)

    def one(q: jax.Array, k: jax.Array, v: jax.Array) -> jax.Array:
        q_, k_, v_ = (layout.with_elements(jax.vmap(lambda r: Vec.from_array(r, Feature))(a)) for a in (q, k, v))
        out: Any = nn.attention(q_, k_, v_).elements()
        return to_array(out)

    return jax.vmap(one)


def on_function(q: jax.Array, k: jax.Array, v: jax.Array) -> jax.Array:
    def one(q: jax.Array, k: jax.Array, v: jax.Array) -> jax.Array:
        q_, k_, v_ = (Cheb.from_array(a, Position, Feature) for a in (q, k, v))
        return to_array(nn.attention(q_, k_, v_))

    return jax.vmap(one)(q, k, v)


def trained(f: Callable[[jax.Array, jax.Array, jax.Array], jax.Array]) -> Callable[..., Any]:
    """The timed call: ``value_and_grad`` of sum(f(q, k, v) * w) with respect to q, k, v."""
    return jax.jit(jax.value_and_grad(lambda q, k, v, w: jnp.sum(f(q, k, v) * w), argnums=(0, 1, 2)))


def temporaries(call: Callable[..., Any], args: tuple[jax.Array, ...]) -> float:
    """MB of the compiled call's temporary buffers, by XLA's account (nan where it gives none)."""
    analysis = call.lower(*args).compile().memory_analysis()  # type: ignore[attr-defined]
    return float("nan") if analysis is None else analysis.temp_size_in_bytes / 1e6


def torch_case(args: tuple[jax.Array, ...]) -> tuple[Callable[[], Any], Callable[[], float]] | None:
    """PyTorch's scaled_dot_product_attention on the same arrays, in their dtype, forward and backward (a
    failed allocation raised as a ``MemoryError``), and its peak memory (MB on a GPU, nan elsewhere); None
    where PyTorch is not installed."""
    try:
        import torch  # type: ignore[import-not-found]
    except ImportError:
        return None
    device = "cuda" if torch.cuda.is_available() else "cpu"
    dtype = getattr(torch, jnp.dtype(args[0].dtype).name)
    q, k, v, w = (torch.tensor(np.asarray(a, np.float32), device=device).to(dtype) for a in args)
    q, k, v = (a.requires_grad_() for a in (q, k, v))

    def call() -> Any:
        try:
            out = torch.nn.functional.scaled_dot_product_attention(q, k, v)
            (out * w).sum().backward()
            if device == "cuda":
                torch.cuda.synchronize()
        except torch.cuda.OutOfMemoryError as error:
            raise MemoryError(str(error)) from error
        return None

    def memory() -> float:
        return torch.cuda.max_memory_allocated() / 1e6 if device == "cuda" else float("nan")

    return call, memory


def cell(x: float | DoesNotFit | None, digits: str) -> str:
    if x is None or (isinstance(x, float) and np.isnan(x)):
        return ""
    return str(x) if isinstance(x, DoesNotFit) else format(x, digits)


def rows(n: int, dtype: Any, heads: int, features: int, repeats: int, function_up_to: int) -> list[str]:
    """The table's rows at n positions: each path's time and memory, and their ratios to the fused path's."""
    rng = np.random.default_rng(n)
    args = tuple(jnp.asarray(rng.standard_normal((heads, n, features)), dtype) for _ in range(4))
    paths: dict[str, Callable[[jax.Array, jax.Array, jax.Array], jax.Array]] = {
        "fused": fused, "Vec": on_vec("default"), "Vec, materialised": on_vec(None), "tree": on_tree(n),
        **({"function": on_function} if n <= function_up_to else {}),
    }  # fmt: skip
    fits = 600 * device_memory()  # MB: 60% of the device's memory
    memory: dict[str, float | DoesNotFit] = {}
    cases: dict[str, Callable[[], Any]] = {}
    for name, f in paths.items():
        call = trained(f)
        memory[name] = or_does_not_fit(lambda call=call: temporaries(call, args))
        if isinstance(memory[name], float) and memory[name] <= fits:
            cases[name] = lambda call=call: call(*args)
    timed = or_does_not_fit(lambda: race(cases, warmup=1, repeats=repeats)) if cases else {}
    times = {} if isinstance(timed, DoesNotFit) else timed
    torch = torch_case(args)
    if torch is not None:  # timed on its own: a failed allocation of PyTorch's is its row's alone
        call = torch[0]
        timed = or_does_not_fit(lambda: race({"torch": call}, warmup=1, repeats=repeats))
        times |= {} if isinstance(timed, DoesNotFit) else timed
        memory["torch"] = timed if isinstance(timed, DoesNotFit) else torch[1]()
    lines = []
    for name in [*paths, *(["function"] if "function" not in paths else []), *(["torch"] if torch else [])]:
        ms, mb = times.get(name), memory.get(name)
        time_ratio = ms / times["fused"] if ms is not None and "fused" in times else None
        fused_mb = memory.get("fused")
        memory_ratio = mb / fused_mb if isinstance(mb, float) and isinstance(fused_mb, float) and fused_mb else None
        why = cell(mb, ".1f") if name in memory else "not run (above --function-up-to)"
        if ms is None and isinstance(mb, float):
            why += " (not timed)" if name in cases else " (not timed: above 60% of the device's memory)"
        cells = [str(n), name, jnp.dtype(dtype).name, cell(None if ms is None else 1e3 * ms, ".2f"),
                 cell(time_ratio, ".2f"), why, cell(memory_ratio, ".2f")]  # fmt: skip
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--positions", type=int, nargs="+", default=[1024, 4096, 16384])
    parser.add_argument("--dtype", default="float32", choices=["float32", "bfloat16", "float16"])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--function-up-to", type=int, default=1024, help="the largest size the function path runs at")
    parser.add_argument("--smoke", action="store_true", help=f"{SMOKE_HEADS} heads of {SMOKE_FEATURES}, one repeat")
    args = parser.parse_args(argv)
    # PyTorch's row shares the device: JAX takes memory as it needs it, not 75% of it at start (read when its
    # backend starts, below)
    os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    heads, features, repeats = (SMOKE_HEADS, SMOKE_FEATURES, 1) if args.smoke else (HEADS, FEATURES, args.repeats)
    device = jax.devices()[0]
    print(f"{device.device_kind} ({jax.default_backend()}), JAX {jax.__version__}; {heads} heads of {features} "
          "features, value_and_grad of sum(attention * w)", flush=True)  # fmt: skip
    print(HEADER, flush=True)
    for n in args.positions:
        for line in rows(n, jnp.dtype(args.dtype), heads, features, repeats, args.function_up_to):
            print(line, flush=True)


if __name__ == "__main__":
    main()
