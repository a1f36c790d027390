"""``fit`` on what the library's models train on: a batch of ``DenseTree``\\ s of several shapes, a dict of
arrays, and minibatches drawn afresh from (seed, step) in groups of shapes, each against SGD written out in
numpy (the epoch order, the draws), an interrupted and resumed run against the uninterrupted one, and one
compilation per shape group."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from applicative import DenseTree, counit, stacked
from applicative.instances import dyadic
from applicative.training import Arrays, Drawn, Learner, State, fit
from applicative.training.loop import _killed_after

Params = dict[str, jax.Array]
SHAPES = [(None, (None, None)), ((None, None), (None, (None, None))), (None, None)]
LR = 0.5


def settings(**changes: Any) -> dict[str, Any]:
    return {"description": json.dumps({"test": "sources"}), "progress": False, "log": False, "seed": 3, **changes}


def scalar_learner(reading: Any) -> Learner[Params]:
    """p pulled towards the mean over a minibatch of ``reading(inputs) + targets``: loss (p - mean)^2 / 2."""

    def loss(params: Params, inputs: Any, targets: jax.Array) -> jax.Array:
        return 0.5 * (params["p"] - jnp.mean(reading(inputs) + targets)) ** 2

    return Learner(lambda seed: {"p": jnp.zeros(())}, loss, lambda params, inputs: params["p"])


def sgd_over_epochs(values: np.ndarray, steps: int, batch: int, seed: int) -> float:
    """p after ``steps`` SGD steps of rate LR on the minibatches of epoch order default_rng((seed, e))."""
    p, per_epoch = 0.0, len(values) // batch
    for step in range(steps):
        epoch, i = divmod(step, per_epoch)
        rows = np.random.default_rng((seed, epoch)).permutation(len(values))[i * batch : (i + 1) * batch]
        p -= LR * (p - values[rows].mean())
    return p


def test_a_batch_of_trees_of_several_shapes_trains_as_sgd_in_numpy(tmp_path: Path) -> None:
    """Twelve trees of three shapes, placed on the device once and gathered by the step: p against numpy, where
    each tree's counit is the sum of its leaves' values times 2^-depth."""
    rng = np.random.default_rng(53)
    shapes = [SHAPES[i] for i in rng.integers(0, 3, 12)]
    values = [rng.normal(size=len(dyadic.depths_of(shape))) for shape in shapes]
    trees = stacked.stack([DenseTree.of(s, list(jnp.asarray(v)), 8) for s, v in zip(shapes, values, strict=True)])
    targets = rng.normal(size=12)
    integrals = np.array([v @ 0.5 ** np.array(dyadic.depths_of(s)) for s, v in zip(shapes, values, strict=True)])
    learner = scalar_learner(jax.vmap(counit))
    state = fit(learner, optax.sgd(LR), Arrays(trees, targets, 4), tmp_path / "trees", steps=9, **settings())
    expected = sgd_over_epochs(integrals + targets, 9, 4, 3)
    np.testing.assert_allclose(float(state.model["p"]), expected, rtol=1e-5)


def test_inputs_as_a_dict_train_and_their_counts_are_checked_leaf_by_leaf(tmp_path: Path) -> None:
    rng = np.random.default_rng(54)
    inputs = {"a": rng.normal(size=(10, 2)), "b": rng.normal(size=10)}
    targets = rng.normal(size=10)
    learner = scalar_learner(lambda x: x["a"].sum(axis=1) + x["b"])
    state = fit(learner, optax.sgd(LR), Arrays(inputs, targets, 3), tmp_path / "dict", steps=7, **settings())
    expected = sgd_over_epochs(inputs["a"].sum(axis=1) + inputs["b"] + targets, 7, 3, 3)
    np.testing.assert_allclose(float(state.model["p"]), expected, rtol=1e-5)
    with pytest.raises(ValueError, match=r"inputs\['a'\] has 10 samples but inputs\['b'\] has 9"):
        Arrays({"a": inputs["a"], "b": inputs["b"][:9]}, targets, 3)
    with pytest.raises(ValueError, match=r"fit: 10 inputs but 9 targets"):
        Arrays(inputs, targets[:9], 3)


def draw(seed: int, step: int) -> tuple[np.ndarray, np.ndarray]:
    """A minibatch of 2 or 3 rows (two shape groups), drawn from (seed, step) alone."""
    rows = np.random.default_rng((seed, step)).normal(size=(2 + step % 2, 4))
    return rows.astype(np.float32), np.zeros(len(rows), np.float32)


def test_drawn_minibatches_in_shape_groups_resume_bit_for_bit_with_one_compile_a_group(tmp_path: Path) -> None:
    traces = 0

    def reading(x: jax.Array) -> jax.Array:
        nonlocal traces
        traces += 1  # once a trace: a compilation
        return jnp.mean(x, axis=1)

    learner, opt = scalar_learner(reading), optax.sgd(LR)  # built once: the jitted step is cached on both
    data = Drawn(draw, per_epoch=4)
    epochs: list[int] = []

    def validate(params: Params) -> float:
        epochs.append(1)
        return float(params["p"])

    def run(directory: Path, **changes: Any) -> State[Params]:
        return fit(learner, opt, data, directory, steps=12, **settings(**changes))

    straight = run(tmp_path / "straight", log=True, validate=validate)
    p = 0.0
    for step in range(12):
        x, t = draw(3, step)
        p -= LR * (p - float(np.mean(x.astype(np.float64).mean(axis=1) + t)))
    np.testing.assert_allclose(float(straight.model["p"]), p, rtol=1e-5)
    assert [epoch for epoch, _ in straight.held_out] == [1, 2, 3]
    assert len(epochs) == 3
    with _killed_after(5):
        run(tmp_path / "resumed")
    resumed = run(tmp_path / "resumed", resume=True)
    assert resumed.losses == straight.losses
    assert float(resumed.model["p"]) == float(straight.model["p"])
    assert traces == 2  # batches of 2 and of 3 rows: one compilation each, for all three runs
    with pytest.raises(ValueError, match=r"block = 2 needs a training set held whole"):
        run(tmp_path / "blocked", block=2)


TWO_DEVICES = """
import json, sys
import jax, jax.numpy as jnp, numpy as np, optax
from applicative.training import Drawn, Learner, fit

def draw(seed, step):
    rows = np.random.default_rng((seed, step)).normal(size=(2 + 2 * (step % 2), 4)).astype(np.float32)
    return {"x": rows}, np.zeros(len(rows), np.float32)

def loss(params, inputs, targets):
    return 0.5 * (params["p"] - jnp.mean(jnp.mean(inputs["x"], axis=1) + targets)) ** 2

learner = Learner(lambda seed: {"p": jnp.zeros(())}, loss, lambda params, inputs: params["p"])
state = fit(learner, optax.sgd(0.5), Drawn(draw, 4), sys.argv[1], description="{}", steps=8, seed=3,
            progress=False, log=False)
json.dump({"devices": jax.device_count(), "losses": state.losses, "p": float(state.model["p"])}, sys.stdout)
"""


@pytest.mark.slow  # two processes, about 10 s
def test_drawn_minibatches_split_over_two_devices_as_on_one(tmp_path: Path) -> None:
    """Minibatches of 2 and 4 rows drawn on the host are split over 2 CPU devices (a row each, or two) and train
    as on one device, to float32 rounding."""
    results = []
    for devices in (1, 2):
        flags = f"--xla_force_host_platform_device_count={devices}"  # XLA's defaults (tests/compiling.py)
        env = {**os.environ, "JAX_PLATFORMS": "cpu", "XLA_FLAGS": flags}
        out = subprocess.run([sys.executable, "-c", TWO_DEVICES, str(tmp_path / str(devices))], env=env,
                             capture_output=True, text=True, timeout=300, check=True).stdout  # fmt: skip
        results.append(json.loads(out))
    one, two = results
    assert (one["devices"], two["devices"]) == (1, 2)
    np.testing.assert_allclose(two["losses"], one["losses"], rtol=1e-6)
    np.testing.assert_allclose(two["p"], one["p"], rtol=0, atol=1e-6)  # measured 1.5e-8 (p is 6e-3)
