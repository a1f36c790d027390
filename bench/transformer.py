"""Benchmark: the generic encoder on Vec against a hand-written jax.numpy encoder.

Both networks use the same weights (extracted once from the generic model's
pytree; the hand-written one is bench/transformer_handwritten.py), are jitted,
and are timed side by side, forward and forward+backward
(value_and_grad of mean(out^2) w.r.t. all parameters), with the measurements
interleaved so that machine noise affects both equally. With ``--blocks`` a
second table times the sub-blocks of one layer (attention, MLP, layer norm)
the same way, with gradients w.r.t. parameters and input.

    python bench/transformer.py           # the whole encoder (about a minute on 2 CPU cores)
    python bench/transformer.py --blocks  # also the per-block table
    python bench/transformer.py --smoke   # a tiny encoder, 1 repeat: checks that the script runs, in seconds
    python bench/transformer.py --hlo     # the kernels each compiles to (bench/_hlo.py), instead of the timing

Each call is timed alone (dispatched, then waited for) and ``IN_FLIGHT`` at a time (dispatched back to
back, as a training loop runs them: the host's work for one call overlaps the device's for the ones
before); a third row times the host's part alone (a function of the same arguments that computes
nothing), whose difference is the per-call cost of flattening and rebuilding the generic model's
pytree. The lines ``ratio forward: X.XX`` and ``ratio forward+backward: X.XX`` give generic time over
hand-written time for calls alone, ``ratio forward, 8 in flight: X.XX`` and the like for calls in
flight; with ``--hlo``, a table of kernels by opcode.
"""

from __future__ import annotations

import argparse
import pathlib
import sys
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))  # the repository root

from _hlo import kernels  # bench/, the script's directory
from _timing import race
from transformer_handwritten import extract, ref_attention, ref_forward, ref_layer_norm, ref_mlp

import applicative.nn as nn
from applicative import Dim, Vec, to_array

SEQ, MODEL, HIDDEN, HEADS, LAYERS, BATCH = 256, 128, 512, 4, 4, 8
HEAD_FEATURES = MODEL // HEADS
SMOKE = (8, 8, 16, 2, 1, 2)
"""``--smoke``'s SEQ, MODEL, HIDDEN, HEADS, LAYERS, BATCH."""


class Seq(Dim): ...


class Model(Dim): ...


class Hidden(Dim): ...


class Head(Dim): ...


class HeadFeatures(Dim): ...


def template(n: int, tag: type[Dim]) -> Vec[Any, jax.Array]:
    return Vec.from_array(np.zeros(n, np.float32), tag)


# The generic model


def build_generic(key: jax.Array) -> nn.Encoder[Any, Any, Any, Any]:
    k_init, k_noise = jax.random.split(key)
    options = nn.AttentionOptions(
        heads=template(HEADS, Head), model=template(MODEL, Model), head_features=template(HEAD_FEATURES, HeadFeatures)
    )
    model = nn.init_encoder(
        k_init,
        options,
        inputs=template(MODEL, Model),
        hidden=template(HIDDEN, Hidden),
        layers=LAYERS,
        outputs=None,
        positions=None,
    )
    # Biases start at 0 and norms at (1, 0): perturb every leaf so that the
    # comparison exercises all of them. In numpy: eager jax ops would compile once per leaf shape.
    leaves, treedef = jax.tree_util.tree_flatten(model)
    rng = np.random.default_rng(np.asarray(jax.random.key_data(k_noise)))
    noisy = [jnp.asarray(a + 0.1 * rng.standard_normal(a.shape).astype(a.dtype)) for a in map(np.asarray, leaves)]
    return jax.tree_util.tree_unflatten(treedef, noisy)  # type: ignore[no-any-return]


def generic_forward(model: nn.Encoder[Any, Any, Any, Any], xs: jax.Array) -> jax.Array:
    """(batch, seq, model) -> (batch, seq, model), one example at a time under vmap."""

    def one(x: jax.Array) -> jax.Array:
        return to_array(model.encode(Vec.from_array(x, Seq, Model)))

    return jax.vmap(one)(xs)


# Timing


def loss_of(f: Callable[[Any, jax.Array], jax.Array]) -> Callable[[Any, jax.Array], jax.Array]:
    return lambda params, xs: jnp.mean(jnp.square(f(params, xs)))


def forward_and_grad(
    generic: Callable[[Any, jax.Array], jax.Array],
    reference: Callable[[Any, jax.Array], jax.Array],
    model: Any,
    params: Any,
    xs: jax.Array,
    argnums: int | tuple[int, ...] = 0,
) -> dict[str, Callable[[], Any]]:
    gf, rf = jax.jit(generic), jax.jit(reference)
    gb = jax.jit(jax.value_and_grad(loss_of(generic), argnums))
    rb = jax.jit(jax.value_and_grad(loss_of(reference), argnums))
    return {
        "generic fwd": lambda: gf(model, xs),
        "reference fwd": lambda: rf(params, xs),
        "generic fwd+bwd": lambda: gb(model, xs),
        "reference fwd+bwd": lambda: rb(params, xs),
    }


IN_FLIGHT = 8
"""Calls dispatched back to back, then waited for, in the pipelined timing: as a training loop runs, the
host's work for one call (flattening the arguments, dispatching, rebuilding the outputs) overlaps the
device's for the calls before it."""


def pipelined(cases: dict[str, Callable[[], Any]]) -> dict[str, Callable[[], Any]]:
    """Each case as ``IN_FLIGHT`` calls in a row (one timed unit: divide by ``IN_FLIGHT``)."""
    return {f"pipelined {name}": lambda fn=fn: [fn() for _ in range(IN_FLIGHT)][-1] for name, fn in cases.items()}


def host_only(model: Any, params: Any, xs: jax.Array) -> dict[str, Callable[[], Any]]:
    """The host's part of a call alone: a jitted function of the same arguments that computes nothing (its
    forward flattens the model and returns a number; its "backward" also returns the model, rebuilt as a
    gradient is)."""
    forward = jax.jit(lambda p, xs: xs[0, 0, 0])
    both = jax.jit(lambda p, xs: (xs[0, 0, 0], p))
    return {
        "host generic fwd": lambda: forward(model, xs),
        "host reference fwd": lambda: forward(params, xs),
        "host generic fwd+bwd": lambda: both(model, xs),
        "host reference fwd+bwd": lambda: both(params, xs),
    }


def print_pair(label: str, t: dict[str, float], prefix: str = "") -> tuple[float, float]:
    f = t[f"{prefix}generic fwd"] / t[f"{prefix}reference fwd"]
    b = t[f"{prefix}generic fwd+bwd"] / t[f"{prefix}reference fwd+bwd"]
    print(
        f"{label:<22}{t[f'{prefix}generic fwd'] * 1e3:9.2f}{t[f'{prefix}reference fwd'] * 1e3:9.2f}{f:7.2f}"
        f"{t[f'{prefix}generic fwd+bwd'] * 1e3:11.2f}{t[f'{prefix}reference fwd+bwd'] * 1e3:10.2f}{b:7.2f}"
    )
    return f, b


HEADER = f"{'':<22}{'generic':>9}{'hand':>9}{'ratio':>7}{'generic':>11}{'hand':>10}{'ratio':>7}"
SUBHEADER = f"{'(ms, median)':<22}{'fwd':>9}{'fwd':>9}{'':>7}{'fwd+bwd':>11}{'fwd+bwd':>10}{'':>7}"


def per_block(model: Any, params: dict[str, Any], xs: jax.Array, warmup: int, repeats: int) -> None:
    """Time the sub-blocks of the first layer alone, generic against hand-written."""
    layer, p = model.layers[0], params["layers"][0]
    blocks: dict[str, tuple[Any, Any, Any, Any]] = {
        "attention (MHA)": (
            layer.attention,
            lambda m, x: to_array(m(Vec.from_array(x, Seq, Model))),
            p,
            ref_attention,
        ),
        "MLP (per position)": (
            layer.mlp,
            lambda m, x: to_array(Vec.from_array(x, Seq, Model).fmap(m)),
            p,
            ref_mlp,
        ),
        "layer norm": (
            layer.norms[0],
            lambda m, x: to_array(Vec.from_array(x, Seq, Model).fmap(m)),
            p["ln1"],
            ref_layer_norm,
        ),
    }
    cases: dict[str, Callable[[], Any]] = {}
    for name, (gmod, gone, rparams, rfn) in blocks.items():

        def generic(m: Any, x: jax.Array, gone: Any = gone) -> jax.Array:
            return jax.vmap(lambda e: gone(m, e))(x)

        out_g = jax.jit(generic)(gmod, xs)
        out_r = jax.jit(rfn)(rparams, xs)
        diff = float(jnp.max(jnp.abs(out_g - out_r)))
        assert diff < 1e-3 * max(1.0, float(jnp.max(jnp.abs(out_r)))), (name, diff)
        # Gradients w.r.t. the parameters and the input, as inside the network.
        for key, fn in forward_and_grad(generic, rfn, gmod, rparams, xs, argnums=(0, 1)).items():
            cases[f"{name}/{key}"] = fn
    times = race(cases, warmup, repeats)
    print()
    print(f"one layer's blocks alone, input {xs.shape}; gradients w.r.t. parameters and input")
    print(HEADER)
    print(SUBHEADER)
    for name in blocks:
        print_pair(name, times, prefix=f"{name}/")


def print_kernels(model: Any, params: dict[str, Any], xs: jax.Array) -> None:
    """The kernels of the four compiled functions (``_hlo.kernels``: the optimised HLO's entry
    computation, by opcode), on the backend that runs the script."""
    generic, reference = loss_of(generic_forward), loss_of(ref_forward)
    functions = {
        "generic fwd": (generic_forward, model),
        "hand fwd": (ref_forward, params),
        "generic fwd+bwd": (jax.value_and_grad(generic), model),
        "hand fwd+bwd": (jax.value_and_grad(reference), params),
    }
    counts = {name: kernels(jax.jit(f).lower(p, xs).compile().as_text()) for name, (f, p) in functions.items()}
    opcodes = sorted(set().union(*counts.values()), key=lambda op: (op != "fusion", op))
    print()
    print(f"kernels of the optimised HLO's entry computation, on {jax.devices()[0].platform}")
    print(f"{'':18}" + "".join(f"{op:>13}" for op in opcodes) + f"{'all':>7}")
    for name, count in counts.items():
        print(f"{name:18}" + "".join(f"{count[op]:13d}" for op in opcodes) + f"{sum(count.values()):7d}")


def main() -> None:
    global SEQ, MODEL, HIDDEN, HEADS, LAYERS, BATCH, HEAD_FEATURES
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=12)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--blocks", action="store_true", help="also time one layer's blocks (about 40 s more)")
    parser.add_argument(
        "--hlo", action="store_true", help="count the kernels both encoders compile to (bench/_hlo.py); no timing"
    )
    parser.add_argument(
        "--smoke", action="store_true", help="a tiny encoder, 1 repeat: checks that the script runs, in seconds"
    )
    args = parser.parse_args()
    if args.smoke:
        SEQ, MODEL, HIDDEN, HEADS, LAYERS, BATCH = SMOKE
        HEAD_FEATURES = MODEL // HEADS
        args.repeats, args.warmup = 1, 0

    print(f"jax {jax.__version__} on {jax.devices()[0].platform} ({jax.devices()[0].device_kind})")
    print(
        f"encoder: {LAYERS} layers, seq {SEQ}, model {MODEL}, hidden {HIDDEN}, "
        f"{HEADS} heads x {HEAD_FEATURES}, batch {BATCH}, float32"
    )
    k_model, k_x = jax.random.split(jax.random.key(0))
    model = build_generic(k_model)
    params = extract(model)
    xs = jax.random.normal(k_x, (BATCH, SEQ, MODEL), jnp.float32)

    jitted = forward_and_grad(generic_forward, ref_forward, model, params, xs)
    out_g, out_r = jitted["generic fwd"](), jitted["reference fwd"]()
    diff = float(np.max(np.abs(np.asarray(out_g) - np.asarray(out_r))))
    scale = float(np.max(np.abs(np.asarray(out_r))))
    print(f"max |generic - hand-written| = {diff:.3e} (max |output| = {scale:.3f})")
    assert out_g.shape == out_r.shape == (BATCH, SEQ, MODEL)
    assert diff < 1e-3 * max(1.0, scale), "the generic and hand-written encoders disagree"

    # The gradients agree too (same parameters, two pytree layouts).
    (loss_g, grad_g), (loss_r, grad_r) = jitted["generic fwd+bwd"](), jitted["reference fwd+bwd"]()
    # (The key bias's gradient is 0 in exact arithmetic, so compare against the largest gradient entry.)
    # (In numpy: eager jax ops would compile once per leaf shape.)
    flat_g = [np.asarray(g) for g in jax.tree_util.tree_leaves(extract(grad_g))]
    flat_r = [np.asarray(g) for g in jax.tree_util.tree_leaves(grad_r)]
    gscale = max(float(np.max(np.abs(b))) for b in flat_r)
    gdiff = max(float(np.max(np.abs(a - b))) for a, b in zip(flat_g, flat_r, strict=True)) / gscale
    print(f"loss {float(loss_g):.6f} vs {float(loss_r):.6f}; max gradient difference / max |gradient| = {gdiff:.3e}")
    assert gdiff < 1e-3, "the gradients disagree"

    if args.hlo:
        print_kernels(model, params, xs)
        return

    if args.blocks:
        per_block(model, params, xs, args.warmup, args.repeats)

    times = race({**jitted, **pipelined(jitted), **host_only(model, params, xs)}, args.warmup, args.repeats)
    times.update({name: t / IN_FLIGHT for name, t in times.items() if name.startswith("pipelined ")})
    print()
    print(f"whole encoder ({args.repeats} interleaved repeats after {args.warmup} warmups)")
    print(HEADER)
    print(SUBHEADER)
    fwd, both = print_pair("encoder", times)
    in_flight = print_pair(f"{IN_FLIGHT} calls in flight", times, prefix="pipelined ")
    print_pair("host alone", times, prefix="host ")
    extra = [1e6 * (times[f"host generic {p}"] - times[f"host reference {p}"]) for p in ("fwd", "fwd+bwd")]
    print(f"the generic model's host time per call over the hand-written one's: {extra[0]:.0f} us forward, "
          f"{extra[1]:.0f} us with the gradient")  # fmt: skip
    print(f"ratio forward: {fwd:.2f}")
    print(f"ratio forward+backward: {both:.2f}")
    print(f"ratio forward, {IN_FLIGHT} in flight: {in_flight[0]:.2f}")
    print(f"ratio forward+backward, {IN_FLIGHT} in flight: {in_flight[1]:.2f}")


if __name__ == "__main__":
    main()
