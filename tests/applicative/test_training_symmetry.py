"""``applicative.training.symmetry``: the square's eight symmetries against numpy's flips and transpose, the
augmentation's draws, and a run that augments through ``fit`` against the same SGD written out in numpy."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from applicative.training import Arrays, Learner, State, fit
from applicative.training.loop import _killed_after
from applicative.training.symmetry import dihedral, moved, symmetrised

FIELD = np.random.default_rng(3).normal(size=(2, 5, 5))


def reference(x: np.ndarray, k: int) -> np.ndarray:
    """Symmetry k in numpy: the transpose if k & 4, then the reversals of axis -2 (k & 1) and -1 (k & 2)."""
    if k & 4:
        x = np.swapaxes(x, -1, -2)
    if k & 1:
        x = x[..., ::-1, :]
    if k & 2:
        x = x[..., :, ::-1]
    return x


def test_the_eight_symmetries_are_numpys_flips_and_transpose_and_a_group() -> None:
    images = [moved(FIELD, k) for k in range(8)]
    for k, image in enumerate(images):
        np.testing.assert_array_equal(image, reference(FIELD, k))
        np.testing.assert_array_equal(np.asarray(moved(jnp.asarray(FIELD), k)), image)
    assert len({image.tobytes() for image in images}) == 8  # eight distinct images of a generic field
    for j in range(8):  # closed under composition: S_j S_k is one of the eight
        for k in range(8):
            assert any(np.array_equal(reference(reference(FIELD, k), j), image) for image in images)


def test_dihedral_moves_each_input_and_its_target_alike_and_draws_all_eight() -> None:
    inputs = np.broadcast_to(FIELD[0], (800, 5, 5)).copy()
    targets = np.stack([inputs, 2.0 * inputs], axis=1)  # (B, 2, n, n): a target's channels move together
    moved_inputs, moved_targets = map(
        np.asarray, dihedral(jax.random.key(0), jnp.asarray(inputs), jnp.asarray(targets))
    )
    counts = np.zeros(8, int)
    for x, t in zip(moved_inputs, moved_targets, strict=True):
        (k,) = [k for k in range(8) if np.array_equal(x, reference(FIELD[0], k))]
        np.testing.assert_array_equal(t, np.stack([reference(FIELD[0], k), 2.0 * reference(FIELD[0], k)]))
        counts[k] += 1
    assert counts.min() > 60  # each of the eight about 100 times in 800 draws (binomial sd 9.4)
    again = dihedral(jax.random.key(0), jnp.asarray(inputs), jnp.asarray(targets))[0]
    np.testing.assert_array_equal(np.asarray(again), moved_inputs)
    with pytest.raises(ValueError, match=r"targets must be \(B, \.\.\., n, n\).*\(4, 5, 6\)"):
        dihedral(jax.random.key(0), jnp.zeros((4, 5, 5)), jnp.zeros((4, 5, 6)))
    with pytest.raises(ValueError, match="differ in B or n"):
        dihedral(jax.random.key(0), jnp.zeros((4, 5, 5)), jnp.zeros((3, 5, 5)))


def test_symmetrised_is_the_mean_of_the_eight_images_and_invariant() -> None:
    mean = symmetrised(FIELD)
    np.testing.assert_allclose(mean, np.mean([reference(FIELD, k) for k in range(8)], axis=0), rtol=1e-15)
    for k in range(8):
        np.testing.assert_allclose(reference(mean, k), mean, rtol=1e-14, atol=1e-15)


def test_fit_augments_each_step_from_seed_and_step_also_after_a_resume(tmp_path: Path) -> None:
    """p pulled halfway towards the mean of each minibatch's first row, which a symmetry changes: the run
    through ``fit`` against the SGD written out in numpy with the symmetries drawn from fold_in(key(seed), step);
    an interrupted and resumed run repeats the uninterrupted one bit for bit."""
    inputs = np.random.default_rng(9).normal(size=(10, 3, 3))

    def loss(params: dict[str, jax.Array], a: jax.Array, u: jax.Array) -> jax.Array:
        return 0.5 * (params["p"] - jnp.mean(a[:, 0, :]) - jnp.mean(u[:, 0, :])) ** 2

    learner = Learner(lambda seed: {"p": jnp.zeros(())}, loss, lambda params, a: a, dihedral)
    description = json.dumps({"model": "rows"})

    def run(directory: Path, **changes: Any) -> State[dict[str, jax.Array]]:
        return fit(learner, optax.sgd(0.5), Arrays(inputs, inputs, 3), directory, description=description, steps=9,
                   seed=5, progress=False, log=False, **changes)  # fmt: skip

    expected = 0.0
    for step in range(9):
        epoch, i = divmod(step, 3)
        rows = np.random.default_rng((5, epoch)).permutation(10)[3 * i : 3 * i + 3]
        ks = np.asarray(jax.random.randint(jax.random.fold_in(jax.random.key(5), step), (3,), 0, 8))
        target = sum(2.0 * reference(inputs[r], int(k))[0].mean() for r, k in zip(rows, ks, strict=True)) / 3
        expected -= 0.5 * (expected - target)
    straight = run(tmp_path / "straight")
    np.testing.assert_allclose(float(straight.model["p"]), expected, rtol=1e-5)
    with _killed_after(4):
        run(tmp_path / "resumed")
    resumed = run(tmp_path / "resumed", resume=True)
    assert resumed.losses == straight.losses
    assert float(resumed.model["p"]) == float(straight.model["p"])
