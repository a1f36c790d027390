"""The Funcformer's initialisation: each weight group of ``funcformer.init`` draws its documented scale
(sample standard deviations against the formulas written here as literals, as in
tests/applicative/test_init.py), and its initial weights are, draw for draw, the ``jax.random`` draws
its docstring and ``applicative.nn``'s rule give, in ``funcformer.weights``' layout."""

import itertools
import math
from typing import Any

import jax
import numpy as np
import pytest

import funcformer
from tests.applicative.test_init import drawn, requested


def test_funcformer_draws_its_documented_scales() -> None:
    """N(0, 1 / fan-in), fan-in = coefficients x channels in; the maps into the residual stream (each
    head's output, the MLP's output) times 1 / sqrt(2 layers), a head's output also 1 / sqrt(heads);
    positions N(0, 1 / N^2); zero biases; layer norms the identity. Three attention layers (pooled)."""
    n, c, heads, ck, ch, layers = 16, 8, 4, 4, 16, 3
    config = funcformer.ModelConfig(n=n, channels=c, heads=heads, head_channels=ck, hidden_channels=ch,
                                    layers=layers, layer_norm=True)  # fmt: skip
    w = funcformer.weights(funcformer.init(0, config, np.float64))
    residual = 1 / math.sqrt(2 * layers)

    def pooled(*path: str) -> np.ndarray:
        def get(layer: Any) -> np.ndarray:
            for key in path:
                layer = layer[key]
            return np.asarray(layer)

        return np.concatenate([get(layer).ravel() for layer in w["layers"]])

    for name in ("query", "key", "value"):
        drawn(pooled("attention", name, "weight"), 1 / math.sqrt(n * c))
    drawn(pooled("attention", "output"), residual / math.sqrt(heads * n * ck))
    drawn(pooled("mlp", "hidden", "weight"), 1 / math.sqrt(n * c))
    drawn(pooled("mlp", "output", "weight"), residual / math.sqrt(n * ch))
    drawn(w["positions"], 1 / n)
    drawn(w["embed"]["weight"], 1 / math.sqrt(n))  # 2,048 draws each: a 9% tolerance
    drawn(w["unembed"]["weight"], 1 / math.sqrt(n * c))
    biases = [pooled("attention", "bias"), pooled("mlp", "hidden", "bias"), pooled("mlp", "output", "bias")]
    for bias in [*biases, w["embed"]["bias"], w["unembed"]["bias"]]:
        np.testing.assert_array_equal(bias, 0.0)
    constant_one = np.zeros((n, c))
    constant_one[0] = 1.0  # gamma: the function 1 in every channel (coefficient T_0)
    for norm in [*(nm for layer in w["layers"] for nm in layer["norms"]), w["norm"]]:
        np.testing.assert_array_equal(norm["gamma"], constant_one)
        np.testing.assert_array_equal(norm["beta"], 0.0)


# The Funcformer's initial weights, draw for draw: part i of the model (in the order funcformer.init
# documents) drawn from fold_in(key, i), each of its weights from one request of that key (in the order
# its initialiser documents, tests/applicative/test_init.py's ``requested``), in funcformer.weights' layout.
FUNCFORMER_CONFIGS = [
    funcformer.ModelConfig(n=5, channels=3, heads=2, head_channels=2, hidden_channels=4, layers=4, axes="xy",
                           mixers="akma", layer_norm=True),
    funcformer.ModelConfig(n=4, channels=2, heads=3, head_channels=1, hidden_channels=3, layers=2, axes="x",
                           normalise="coefficients", points=9),
    funcformer.ModelConfig(n=6, channels=2, heads=1, head_channels=3, hidden_channels=2, layers=3, axes="xxyy",
                           mixers="mk"),
]  # fmt: skip


def funcformer_draws(seed: int, config: funcformer.ModelConfig, dtype: type) -> dict[str, Any]:
    """funcformer.init's documented weights, drawn here with jax.random."""
    parts = (jax.random.fold_in(jax.random.key(seed), i) for i in itertools.count())
    n, c, heads, k, h = config.n, config.channels, config.heads, config.head_channels, config.hidden_channels
    residual = 1 / np.sqrt(2.0 * config.layers)

    def normal(part: jax.Array, request: int, shape: tuple[int, ...], fan: int, gain: float = 1.0) -> np.ndarray:
        return requested(part, request, shape, gain / np.sqrt(float(fan)), dtype)

    def norm() -> dict[str, np.ndarray]:
        gamma = np.zeros((n, c))
        gamma[0] = 1.0  # the constant function 1 in every channel
        return {"gamma": gamma, "beta": np.zeros((n, c))}

    def norms(count: int) -> list[dict[str, np.ndarray]] | None:
        return [norm() for _ in range(count)] if config.layer_norm else None

    def mlp() -> dict[str, Any]:  # a FeedForward: its hidden, then its output weight
        part = next(parts)
        return {
            "hidden": {"weight": normal(part, 0, (n, h, n, c), n * c), "bias": np.zeros((n, h))},
            "output": {"weight": normal(part, 1, (n, c, n, h), n * h, residual), "bias": np.zeros((n, c))},
        }

    def head_map(part: jax.Array, request: int) -> dict[str, np.ndarray]:  # every head's at once
        return {"weight": normal(part, request, (heads, n, k, n, c), n * c), "bias": np.zeros((heads, n, k))}

    embed_part = next(parts)
    embed = {"weight": normal(embed_part, 0, (n, c, n), n)[..., None], "bias": np.zeros((n, c))}
    positions = requested(next(parts), None, (n, n, c), 1 / n, dtype)  # nn.normal_like: no request
    layers: list[dict[str, Any]] = []
    for i in range(config.layers):
        axis, mixer = config.axes[i % len(config.axes)], config.mixers[i % len(config.mixers)]
        if mixer == "k":  # a KernelIntegral: kernels, values, output projections
            part = next(parts)
            kernel = normal(part, 0, (heads, n, n), n * n)
            value = head_map(part, 1)
            output = normal(part, 2, (heads, n, c, n, k), n * k * heads, residual)
            layers.append({"axis": axis, "kernel": {"kernel": kernel, "value": value, "output": output,
                                                    "bias": np.zeros((n, c))}})  # fmt: skip
        elif mixer == "m":
            layers.append({"axis": axis, "mlp": mlp(), "norms": norms(1)})
        else:  # a SelfAttentionBlock (queries, keys, values, output projections), then a FeedForward
            part = next(parts)
            maps = {name: head_map(part, request) for request, name in enumerate(("query", "key", "value"))}
            output = normal(part, 3, (heads, n, c, n, k), n * k * heads, residual)
            attention = {**maps, "output": output, "bias": np.zeros((n, c))}
            layers.append({"axis": axis, "attention": attention, "mlp": mlp(), "norms": norms(2)})
    unembed = {"weight": normal(next(parts), 0, (n, n, c), n * c)[:, None], "bias": np.zeros((n, 1))}
    norm_ = norm() if config.layer_norm else None
    return {"embed": embed, "positions": positions, "layers": layers, "norm": norm_, "unembed": unembed}


def same(got: Any, want: Any, dtype: type, where: str = "weights") -> None:
    """``got`` is ``want`` with every array rounded to ``dtype``, exactly, key for key."""
    if isinstance(want, dict):
        assert isinstance(got, dict), where
        assert list(got) == list(want), f"{where}: {list(got)} != {list(want)}"
        for name in want:
            same(got[name], want[name], dtype, f"{where}[{name!r}]")
    elif isinstance(want, list):
        assert isinstance(got, list), where
        assert len(got) == len(want), where
        for i, (g, w) in enumerate(zip(got, want, strict=True)):
            same(g, w, dtype, f"{where}[{i}]")
    elif isinstance(want, np.ndarray):
        assert got.shape == want.shape, f"{where}: shape {got.shape} != {want.shape}"
        np.testing.assert_array_equal(got, want.astype(dtype), err_msg=where)
    else:
        assert got == want, f"{where}: {got!r} != {want!r}"


@pytest.mark.parametrize("config", FUNCFORMER_CONFIGS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_funcformer_init_is_its_documented_draws(config: funcformer.ModelConfig, dtype: type) -> None:
    for seed in (0, 7):
        same(funcformer.weights(funcformer.init(seed, config, dtype)), funcformer_draws(seed, config, dtype), dtype)
