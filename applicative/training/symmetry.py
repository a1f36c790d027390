"""The eight symmetries of the square, as a training set's augmentation and as an average.

    dihedral(key, inputs, targets)   each sample of a minibatch moved by one of the eight, drawn from ``key``:
                                     the same one for its input and its target (``Learner.augment``)
    symmetrised(field)               the mean of a field's eight images (a statistic of a symmetric dataset)

A symmetry acts on the last two axes of a (..., n, n) array, the grid's x and y: the transpose when bit 2 of
its index k = 0, ..., 7 is set, then the reversal of axis -2 (bit 0) and of axis -1 (bit 1). These are
exact symmetries of a task when its domain, its grid and its data's law are invariant under them and its
operator commutes with them: on the unit square, -div(a grad u) = 1 with u = 0 on the boundary and a drawn
from a law invariant under them (funcformer.fno_darcy.data: its grid points are symmetric about 1/2 and its
field's law is invariant) gives u(S a) = S u(a) for each of the eight S.
"""

from __future__ import annotations

import functools
from typing import TypeVar

import jax
import numpy as np

__all__ = ["dihedral", "moved", "symmetrised"]


Field = TypeVar("Field", np.ndarray, jax.Array)


def moved(x: Field, k: int) -> Field:
    """``x`` (..., n, n), a numpy or a JAX array, moved by symmetry ``k`` (0, ..., 7): transposed if k & 4, then
    reversed along axis -2 if k & 1 and along axis -1 if k & 2."""
    if k & 4:
        x = x.swapaxes(-1, -2)
    if k & 1:
        x = x[..., ::-1, :]
    if k & 2:
        x = x[..., ::-1]
    return x


def dihedral(key: jax.Array, inputs: jax.Array, targets: jax.Array) -> tuple[jax.Array, jax.Array]:
    """Each sample i of (B, ..., n, n) ``inputs`` and ``targets`` moved by the symmetry k_i, the k_i drawn
    uniformly and independently from ``key``. ValueError for arrays whose last two axes are not one square."""
    for name, x in (("inputs", inputs), ("targets", targets)):
        if x.ndim < 3 or x.shape[-1] != x.shape[-2]:
            raise ValueError(f"dihedral: {name} must be (B, ..., n, n), a square grid per sample, got {x.shape}")
    if inputs.shape[-1] != targets.shape[-1] or len(inputs) != len(targets):
        raise ValueError(f"dihedral: inputs {inputs.shape} and targets {targets.shape} differ in B or n")
    branches = [functools.partial(_both, k=k) for k in range(8)]

    def one(k: jax.Array, x: jax.Array, t: jax.Array) -> tuple[jax.Array, jax.Array]:
        both: tuple[jax.Array, jax.Array] = jax.lax.switch(k, branches, x, t)
        return both

    moved_inputs, moved_targets = jax.vmap(one)(jax.random.randint(key, (len(inputs),), 0, 8), inputs, targets)
    return moved_inputs, moved_targets


def _both(x: jax.Array, t: jax.Array, k: int) -> tuple[jax.Array, jax.Array]:
    return moved(x, k), moved(t, k)


def symmetrised(field: np.ndarray) -> np.ndarray:
    """The mean of the eight images of ``field`` (..., n, n) under the square's symmetries (float64 numpy)."""
    field = np.asarray(field, dtype=np.float64)
    mean: np.ndarray = np.mean([moved(field, k) for k in range(8)], axis=0)
    return mean
