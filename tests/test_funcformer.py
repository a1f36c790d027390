"""The fast Funcformer equals the generic transformer on Cheb∘Cheb with the same weights (float64).

``funcformer.generic`` rebuilds a one-channel model from ``applicative.nn``'s
``Embedding``, ``EncoderLayer``, ``LayerNorm`` and ``Linear`` over ``Cheb``
series; channels are checked against the numpy reference in
tests/test_funcformer_numpy.py.
"""

import jax
import numpy as np
import pytest

from funcformer import Config, Funcformer, generic, init, parameter_count

ONE_CHANNEL = {"channels": 1, "head_channels": 1, "hidden_channels": 1, "heads": 2, "layers": 2}


def _perturbed(model: Funcformer, seed: int) -> Funcformer:
    """Every weight moved off its initial value (biases, norms and positions included)."""
    leaves, treedef = jax.tree_util.tree_flatten(model)
    rng = np.random.default_rng(seed)
    return jax.tree_util.tree_unflatten(treedef, [x + 0.1 * rng.standard_normal(x.shape) for x in leaves])  # type: ignore[no-any-return]


@pytest.mark.parametrize(
    "options",
    [
        {"axes": "x", "normalise": "values", "layer_norm": True},
        {"axes": "xy", "normalise": "coefficients", "layer_norm": True},
        {"axes": "xy", "normalise": "values", "layer_norm": False, "n": 12},
    ],
    ids=["x-values-norm", "xy-coefficients-norm", "xy-values-n12"],
)
def test_the_fast_backend_equals_the_generic_transformer_on_cheb_cheb(options: dict[str, object]) -> None:
    config = Config(**{**ONE_CHANNEL, **options})  # type: ignore[arg-type]
    model = _perturbed(init(1, config, np.float64), seed=2)
    spec = generic(model)
    f = 0.1 * np.random.default_rng(3).standard_normal((2, config.n, config.n))  # a source of unit size
    fast = jax.jit(jax.vmap(lambda x: model(x)))(f)
    slow = jax.jit(jax.vmap(spec))(f)
    scale = np.abs(np.asarray(slow)).max()
    assert scale > 0.1
    np.testing.assert_allclose(np.asarray(fast), np.asarray(slow), atol=1e-11 * scale)


def test_the_generic_bridge_needs_one_channel() -> None:
    with pytest.raises(ValueError, match="channels"):
        generic(init(0, Config(channels=2, head_channels=1, hidden_channels=1, heads=1, layers=1), np.float64))


def test_parameters_and_input_are_checked() -> None:
    config = Config(channels=3, heads=2, head_channels=2, hidden_channels=4, layers=1, layer_norm=True)
    model = init(0, config)
    n, c, k, h = 16, 3, 2, 4
    attention = 2 * 3 * (n * k * n * c + n * k) + 2 * n * c * n * k + n * c
    mlp = (n * h * n * c + n * h) + (n * c * n * h + n * c)
    expected = (n * c * n + n * c) + n * n * c + attention + mlp  # embedding, positions, one layer
    expected += 2 * 2 * n * c + 2 * n * c + (n * n * c + n)  # two layer norms, the final one, the unembedding
    assert parameter_count(model) == expected
    with pytest.raises(ValueError, match=r"shape \(16, 16\), got \(12, 12\)"):
        model(np.zeros((12, 12), np.float32))
    for bad, field in [
        ({"axes": "xz"}, "Config.axes"),
        ({"normalise": "max"}, "Config.normalise"),
        ({"heads": 0}, "Config.heads"),
        ({"points": 8}, "Config.points"),
    ]:
        with pytest.raises(ValueError, match=field):
            Config(**bad)  # type: ignore[arg-type]
