"""The generic encoder compiles to no more kernels than its hand-written twin.

bench/transformer.py times the generic encoder on ``Vec`` against a hand-written ``jax.numpy`` one
(bench/transformer_handwritten.py). On a GPU the time of a model this size goes by kernel: each fusion,
copy or transpose that the generic formulation adds is a launch and a trip through memory that the
hand-written one does not pay. (On an H100 it took 1.49x the hand-written one's time forward while, on
the CPU, it compiled to a copy of every head's query, key and value weights more, and to a softmax that
XLA did not fuse.) Here both compile on the CPU at a small size, forward
and forward+backward (``value_and_grad`` of mean(out^2)), and the generic one's optimised HLO must hold
no more fusions, copies, transposes or kernels in all (``bench/_hlo.py``'s ``kernels``) than the
hand-written one's, on whatever backend runs the test. For a GPU, the programs XLA:GPU starts from are
compared here too, lowered for CUDA on any machine: the same matrix products, no more transposes.
``python bench/transformer.py --hlo`` prints the kernel counts on the backend that runs it.
"""

from __future__ import annotations

import importlib.util
import re
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import applicative.nn as nn
from applicative import Dim, Vec, to_array
from tests.applicative.dims import Hidden, Model, Seq

ROOT = Path(__file__).resolve().parents[2]
SEQ, MODEL, HIDDEN, HEADS, LAYERS, BATCH = 16, 16, 32, 2, 1, 2
COUNTED = ("fusion", "copy", "transpose")
"""The kinds of kernel compared one by one (the total is compared too)."""


class Head(Dim):
    """An attention head."""


class HeadFeature(Dim):
    """A head's query, key and value feature."""


def bench(name: str) -> ModuleType:
    """bench/NAME.py, loaded from its file: bench/ is a directory of scripts, not a package."""
    spec = importlib.util.spec_from_file_location(f"bench_{name}", ROOT / "bench" / f"{name}.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


HLO, HANDWRITTEN = bench("_hlo"), bench("transformer_handwritten")


def template(n: int, tag: type[Dim]) -> Vec[Any, jax.Array]:
    return Vec.from_array(np.zeros(n, np.float32), tag)


def encoder() -> nn.Encoder[Any, Any, Any, Any]:
    """The bench's encoder at a small size, float32, every weight (biases and norms included) drawn in
    numpy into the structure ``init_encoder`` gives: nothing compiled but the functions compared."""
    options = nn.AttentionOptions(
        heads=template(HEADS, Head), model=template(MODEL, Model), head_features=template(MODEL // HEADS, HeadFeature)
    )

    def init(key: jax.Array) -> nn.Encoder[Any, Any, Any, Any]:
        return nn.init_encoder(
            key, options, inputs=template(MODEL, Model), hidden=template(HIDDEN, Hidden),
            layers=LAYERS, outputs=None, positions=None,
        )  # fmt: skip

    leaves, treedef = jax.tree_util.tree_flatten(jax.eval_shape(init, jax.random.key(0)))
    rng = np.random.default_rng(1)
    drawn = [jnp.asarray(0.3 * rng.standard_normal(leaf.shape).astype(leaf.dtype)) for leaf in leaves]
    return jax.tree_util.tree_unflatten(treedef, drawn)  # type: ignore[no-any-return]


def generic(model: nn.Encoder[Any, Any, Any, Any], xs: jax.Array) -> jax.Array:
    return jax.vmap(lambda x: to_array(model.encode(Vec.from_array(x, Seq, Model))))(xs)


def forward_and_backward(f: Callable[[Any, jax.Array], jax.Array]) -> Callable[[Any, jax.Array], Any]:
    return jax.value_and_grad(lambda params, xs: jnp.mean(jnp.square(f(params, xs))))


@pytest.fixture(scope="module")
def operands() -> tuple[nn.Encoder[Any, Any, Any, Any], dict[str, Any], jax.Array]:
    model = encoder()
    xs = jnp.asarray(np.random.default_rng(2).standard_normal((BATCH, SEQ, MODEL)).astype(np.float32))
    return model, HANDWRITTEN.extract(model), xs


def test_the_twins_compute_the_same_encoder(operands: tuple[Any, dict[str, Any], jax.Array]) -> None:
    model, params, xs = operands
    got, expected = jax.jit(generic)(model, xs), jax.jit(HANDWRITTEN.ref_forward)(params, xs)
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("pass_", ["forward", "forward+backward"])
def test_the_generic_encoder_compiles_to_no_more_kernels_than_the_hand_written(
    operands: tuple[Any, dict[str, Any], jax.Array], pass_: str
) -> None:
    model, params, xs = operands
    wrap = (lambda f: f) if pass_ == "forward" else forward_and_backward
    counts = {
        name: HLO.kernels(jax.jit(wrap(f)).lower(p, xs).compile().as_text())
        for name, f, p in (("generic", generic, model), ("hand-written", HANDWRITTEN.ref_forward, params))
    }
    g, h = counts["generic"], counts["hand-written"]
    message = f"{pass_}: generic {dict(g)}, hand-written {dict(h)}"
    for opcode in COUNTED:
        assert g[opcode] <= h[opcode], message
    assert sum(g.values()) <= sum(h.values()), message
    assert g["fusion"] + g["dot"] + g["custom-call"] > 0, message  # the counting found the kernels


def lowered_for_a_gpu(f: Callable[[Any, jax.Array], Any], params: Any, xs: jax.Array) -> str:
    """The StableHLO program that XLA:GPU would start from: JAX lowers for any platform on any machine
    (compiling it, and so the optimised HLO, needs the GPU)."""
    return str(jax.jit(f).trace(params, xs).lower(lowering_platforms=("cuda",)).as_text())


@pytest.mark.parametrize("pass_", ["forward", "forward+backward"])
def test_for_a_gpu_the_generic_encoder_lowers_to_the_same_products(
    operands: tuple[nn.Encoder[Any, Any, Any, Any], dict[str, Any], jax.Array], pass_: str
) -> None:
    # What a GPU is given, found without one: the same matrix products (each dot_general's result type,
    # forward and backward) and no more transposes; the generic program's other extra operations are
    # reductions of constants (a structure's measure), which XLA folds on every backend.
    model, params, xs = operands
    wrap = (lambda f: f) if pass_ == "forward" else forward_and_backward
    programs = {
        "generic": lowered_for_a_gpu(wrap(generic), model, xs),
        "hand-written": lowered_for_a_gpu(wrap(HANDWRITTEN.ref_forward), params, xs),
    }
    products = {
        name: Counter(re.findall(r"stablehlo\.dot_general .*-> (tensor<[^>]*>)", program))
        for name, program in programs.items()
    }
    assert products["generic"] == products["hand-written"], products
    assert sum(products["generic"].values()) >= (6 if pass_ == "forward" else 18)  # the products were found
    transposes = {name: program.count("stablehlo.transpose") for name, program in programs.items()}
    assert transposes["generic"] <= transposes["hand-written"], transposes
