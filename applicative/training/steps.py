"""The pure functions of training: the minibatch order, the devices' shardings and the jitted step.

The minibatches depend only on (seed, step). From arrays (``data.Arrays``): each epoch is a permutation of
the training set drawn from (seed, epoch) (``epoch_order``), and step s takes the (s mod steps-per-epoch)-th
slice of its epoch's order; the step gathers its minibatch itself, from the training set and the epoch's
order on the device, so the loop sends nothing to the device but a new order once an epoch. Drawn
(``data.Drawn``): the host hands each step its minibatch, a function of (seed, step).

Data parallel: each minibatch is split over ``jax.devices()`` (a 1-D mesh, ``data_parallel``; in one
process these are its local devices), the model, the optimiser state and the training set are replicated,
so the same code runs on one CPU, several GPUs or a TPU slice. On one device this is the same computation
as an unsharded step (bitwise equal losses and weights, checked on the CPU). Inputs and targets are any
pytrees whose leaves share the leading (count or batch) axis: arrays, a dict of them, a ``Vec``, a batch of
``DenseTree``\\ s.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeAlias, TypeVar

import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax.sharding import Mesh, NamedSharding, PartitionSpec
from jax.typing import ArrayLike

from applicative.training.learner import Learner

__all__ = [
    "Step",
    "Update",
    "data_parallel",
    "epoch_order",
    "make_block",
    "make_step",
    "make_update",
    "place",
    "shardings",
]

P = TypeVar("P")
Step: TypeAlias = Callable[
    [P, optax.OptState, Any, Any, jax.Array, ArrayLike],
    tuple[P, optax.OptState, jax.Array],
]
"""(model, opt_state, inputs, targets, the epoch's order, step) -> (model, opt_state, loss): a step on the
training set placed on the devices (``data.Arrays``)."""
Update: TypeAlias = Callable[
    [P, optax.OptState, Any, Any, ArrayLike],
    tuple[P, optax.OptState, jax.Array],
]
"""(model, opt_state, the minibatch's inputs, its targets, step) -> (model, opt_state, loss): a step on a
minibatch the host hands it (``data.Drawn``)."""


def epoch_order(seed: int, epoch: int, count: int) -> np.ndarray:
    """The permutation of the ``count`` training samples that epoch ``epoch`` visits, drawn from (seed, epoch)."""
    return np.random.default_rng([seed, epoch]).permutation(count)


@functools.lru_cache(maxsize=4)
def data_parallel(batch: int) -> tuple[NamedSharding, NamedSharding]:
    """(split, replicated): shardings on a 1-D mesh of ``jax.devices()`` that split a minibatch's
    axis 0 into equal parts, one a device, and that replicate (the model, the optimiser state). In one
    process the devices are its local ones; after ``jax.distributed.initialize()``, every process's.
    A ``batch`` that the device count does not divide is refused. Built once per batch size and process."""
    devices = jax.devices()
    if batch % len(devices):
        raise ValueError(
            f"batch = {batch} does not split over the {len(devices)} {devices[0].platform} devices: "
            f"use a multiple of {len(devices)}, or fewer devices (e.g. CUDA_VISIBLE_DEVICES)"
        )
    return shardings()


@functools.lru_cache(maxsize=1)
def shardings() -> tuple[NamedSharding, NamedSharding]:
    """``data_parallel``'s shardings, whatever the batch: (split along axis 0, replicated); a minibatch split
    by the first must have a multiple of the device count."""
    mesh = Mesh(np.asarray(jax.devices()), ("batch",))
    split, replicated = PartitionSpec("batch"), PartitionSpec()  # type: ignore[no-untyped-call]
    return NamedSharding(mesh, split), NamedSharding(mesh, replicated)


def _update(learner: Learner[P, Any, Any, Any], opt: optax.GradientTransformation, seed: int) -> Update[P]:
    """One update of ``opt`` on ``learner.loss``'s gradient at a minibatch, after ``learner.augment`` (its key
    ``fold_in(key(seed), step)``) if the learner has one; not jitted. The one step of every model."""

    def update(
        model: P, opt_state: optax.OptState, inputs: Any, targets: Any, i: ArrayLike
    ) -> tuple[P, optax.OptState, jax.Array]:
        if learner.augment is not None:
            inputs, targets = learner.augment(jax.random.fold_in(jax.random.key(seed), i), inputs, targets)
        value, grads = jax.value_and_grad(learner.loss)(model, inputs, targets)
        updates, opt_state = opt.update(grads, opt_state, model)
        return optax.apply_updates(model, updates), opt_state, value

    return update


def _gathering(
    learner: Learner[P, Any, Any, Any], opt: optax.GradientTransformation, batch: int, per_epoch: int, seed: int
) -> Step[P]:
    """``_update`` on the minibatch it gathers from the placed training set: the i-th ``batch`` entries of the
    epoch's order, split over the devices (``data_parallel``)."""
    split, _ = data_parallel(batch)
    update = _update(learner, opt, seed)

    def step(
        model: P, opt_state: optax.OptState, x: Any, t: Any, order: jax.Array, i: ArrayLike
    ) -> tuple[P, optax.OptState, jax.Array]:
        rows = jax.lax.dynamic_slice_in_dim(order, (jnp.asarray(i) % per_epoch) * batch, batch)
        inputs, targets = jax.tree_util.tree_map(
            lambda a: jax.lax.with_sharding_constraint(a[rows], split),  # type: ignore[no-untyped-call]
            (x, t),
        )
        return update(model, opt_state, inputs, targets, i)

    return step


@functools.lru_cache(maxsize=8)
def make_step(
    learner: Learner[P, Any, Any, Any], opt: optax.GradientTransformation, batch: int, per_epoch: int, seed: int = 0
) -> Step[P]:
    """The jitted update (``Step``): it takes the training set, the epoch's order (``epoch_order``) and the
    step number, all replicated on the devices, gathers the step's minibatch (the i-th ``batch`` entries
    of the order, i the step's place in its epoch of ``per_epoch`` steps), splits it over the devices
    (``data_parallel``), moves it by ``learner.augment`` if the learner has one (its key
    ``fold_in(key(seed), step)``) and applies one update of ``opt`` to ``learner.loss``'s gradient. One compilation
    per learner, optimiser and process (a resumed run reuses it)."""
    _, replicated = data_parallel(batch)
    jitted: Step[P] = jax.jit(_gathering(learner, opt, batch, per_epoch, seed), in_shardings=replicated,
                              out_shardings=replicated)  # fmt: skip
    return jitted


@functools.lru_cache(maxsize=16)
def make_block(
    learner: Learner[P, Any, Any, Any],
    opt: optax.GradientTransformation,
    batch: int,
    per_epoch: int,
    seed: int,
    length: int,
) -> Step[P]:
    """``length`` consecutive updates of ``make_step`` in one jitted call (a ``jax.lax.scan``; ``length``
    1: the step itself), from the step number it is given, all in one epoch (one order): the same
    arguments, and the ``length`` losses. The host then dispatches one call, not ``length``: what a fast
    device waits for when each step is small. One compilation per length."""
    _, replicated = data_parallel(batch)
    update = _gathering(learner, opt, batch, per_epoch, seed)

    def block(
        model: P, opt_state: optax.OptState, x: Any, t: Any, order: jax.Array, first: ArrayLike
    ) -> tuple[P, optax.OptState, jax.Array]:
        if length == 1:
            model, opt_state, value = update(model, opt_state, x, t, order, first)
            return model, opt_state, value[None]

        def body(state: tuple[P, optax.OptState], i: jax.Array) -> tuple[tuple[P, optax.OptState], jax.Array]:
            model, opt_state, value = update(*state, x, t, order, i)
            return (model, opt_state), value

        steps = jnp.asarray(first) + jnp.arange(length, dtype=jnp.asarray(first).dtype)
        (model, opt_state), values = jax.lax.scan(body, (model, opt_state), steps)
        return model, opt_state, values

    jitted: Step[P] = jax.jit(block, in_shardings=replicated, out_shardings=replicated)
    return jitted


@functools.lru_cache(maxsize=8)
def make_update(learner: Learner[P, Any, Any, Any], opt: optax.GradientTransformation, seed: int = 0) -> Update[P]:
    """The jitted update (``Update``) of a minibatch the host hands it (``data.Drawn``), split over the devices
    (``data_parallel``), the model and the optimiser state replicated. One compilation per learner, optimiser
    and shape of minibatch: a source that groups its minibatches by shape (a band of lengths, a bucket)
    compiles once a group."""
    split, replicated = shardings()
    jitted: Update[P] = jax.jit(_update(learner, opt, seed), in_shardings=(replicated, replicated, split, split, None),
                                out_shardings=replicated)  # fmt: skip
    return jitted


def place(array: Any, sharding: NamedSharding) -> Any:
    """A host array (the same in every process), or a pytree of them, on the devices, placed by ``sharding``:
    each process copies only the parts of its own devices. A leaf already on the devices (a JAX array, such as a
    ``DenseTree``'s layout) is moved by ``jax.device_put``."""

    def one(leaf: Any) -> jax.Array:
        if isinstance(leaf, jax.Array):
            moved: jax.Array = jax.device_put(leaf, sharding)
            return moved
        host = np.asarray(leaf)
        return jax.make_array_from_callback(host.shape, sharding, lambda index: host[index])

    return jax.tree_util.tree_map(one, array)
