"""The pure functions of training: the loss, the optimiser, the minibatch order and the jitted step.

The loss is the mean relative L2 error, in the exact L2 norm on [-1, 1]^2 of the Chebyshev series
(the library's ``dot`` on the 2-D series), of the model's n x n prediction against its target
(``data.training_arrays``).

The minibatches depend only on (seed, step): each epoch is a permutation of the training set drawn
from (seed, epoch) (``epoch_order``), and step s takes the (s mod steps-per-epoch)-th slice of its
epoch's order (``batch_indices``). The step gathers its minibatch itself, from the training set and
the epoch's order on the device, so the loop sends nothing to the device but a new order once an
epoch.

Data parallel: each minibatch is split over ``jax.devices()`` (a 1-D mesh, ``data_parallel``; in
one process these are its local devices), the model, the optimiser state and the training set are
replicated, so the same code runs on one CPU, several GPUs or a TPU slice. On one device this is the
same computation as an unsharded step (bitwise equal losses and weights, checked on the CPU).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TypeAlias, TypeVar

import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax.sharding import Mesh, NamedSharding, PartitionSpec
from jax.typing import ArrayLike

from applicative import Cheb, Compose, dot
from applicative.nn import warmup_cosine
from funcformer.learning.learner import Learner
from funcformer.learning.settings import RunConfig
from funcformer.model import Funcformer, ModelConfig, X, Y, init

__all__ = [
    "Step",
    "batch_indices",
    "data_parallel",
    "epoch_order",
    "funcformer_learner",
    "l2_norm",
    "loss",
    "make_block",
    "make_step",
    "optimiser",
    "place",
    "series_relative_l2",
    "values_relative_l2",
]

P = TypeVar("P")
Step: TypeAlias = Callable[
    [P, optax.OptState, jax.Array, jax.Array, jax.Array, ArrayLike],
    tuple[P, optax.OptState, jax.Array],
]
"""(model, opt_state, inputs, targets, the epoch's order, step) -> (model, opt_state, loss)."""


def l2_norm(c: jax.Array) -> jax.Array:
    """Per-sample L2 norm on [-1, 1]^2 of (B, n, n) coefficient arrays: sqrt(dot(f, f)) for the 2-D
    series f as one structure (``Compose``), exact through the Gram matrices."""

    def norm(a: jax.Array) -> jax.Array:
        f = Compose(Cheb.from_array(a, X, Y))
        return jnp.sqrt(dot(f, f))

    return jax.vmap(norm)(c)


def series_relative_l2(predicted: jax.Array, target: jax.Array) -> jax.Array:
    """Per-sample ||p - u|| / ||u|| in the exact L2 norm on [-1, 1]^2 of the series (the training loss;
    ``metric.relative_l2``, the metric, takes it on the uniform grid against the fine solution)."""
    return l2_norm(predicted - target) / l2_norm(target)


def values_relative_l2(predicted: jax.Array, target: jax.Array) -> jax.Array:
    """(B,): each sample's ||p - u||_2 / ||u||_2 over its values (``metric.values_relative_l2`` in JAX, a loss)."""
    axes = tuple(range(1, jnp.ndim(target)))
    difference = jnp.sqrt(jnp.sum((predicted - target) ** 2, axis=axes))
    return difference / jnp.sqrt(jnp.sum(target**2, axis=axes))


def loss(model: Funcformer, x: jax.Array, t: jax.Array) -> jax.Array:
    """The mean of ``series_relative_l2`` of the model's predictions for inputs x against targets t."""
    return jnp.mean(series_relative_l2(jax.vmap(model)(x), t))


@functools.lru_cache(maxsize=4)
def optimiser(run: RunConfig) -> optax.GradientTransformation:
    """``applicative.nn.warmup_cosine`` of the run's settings: Adam on a linear warm-up and a cosine decay to
    1% of the peak, after clipping the global norm (built once per run configuration: ``train`` and
    ``make_step`` share it)."""
    return warmup_cosine(run.steps, run.learning_rate, warmup=run.warmup, clip=run.clip)


def epoch_order(seed: int, epoch: int, count: int) -> np.ndarray:
    """The permutation of the ``count`` training samples that epoch ``epoch`` visits, drawn from (seed, epoch)."""
    return np.random.default_rng([seed, epoch]).permutation(count)


def batch_indices(run: RunConfig, step: int) -> np.ndarray:
    """The training samples of ``step``: the i-th ``run.batch`` entries of its epoch's order."""
    epoch, i = divmod(step, run.train_size // run.batch)
    return epoch_order(run.seed, epoch, run.train_size)[i * run.batch : (i + 1) * run.batch]


@functools.lru_cache(maxsize=4)
def data_parallel(batch: int) -> tuple[NamedSharding, NamedSharding]:
    """(split, replicated): shardings on a 1-D mesh of ``jax.devices()`` that split a minibatch's
    axis 0 into equal parts, one a device, and that replicate (the model, the optimiser state). In one
    process the devices are its local ones; after ``jax.distributed.initialize()``, every process's.
    A ``batch`` that the device count does not divide is refused. Built once per batch size and process."""
    devices = jax.devices()
    if batch % len(devices):
        raise ValueError(
            f"RunConfig.batch = {batch} does not split over the {len(devices)} {devices[0].platform} devices: "
            f"use a multiple of {len(devices)}, or fewer devices (e.g. CUDA_VISIBLE_DEVICES)"
        )
    mesh = Mesh(np.asarray(devices), ("batch",))
    split, replicated = PartitionSpec("batch"), PartitionSpec()  # type: ignore[no-untyped-call]
    return NamedSharding(mesh, split), NamedSharding(mesh, replicated)


@functools.lru_cache(maxsize=4)
def funcformer_learner(config: ModelConfig) -> Learner[Funcformer]:
    """The Funcformer of ``config`` as the loop trains it: ``init``, ``loss``, the batched model (one value
    per configuration, so that the jitted step is built once)."""
    return Learner(functools.partial(init, config=config), loss, jax.vmap(Funcformer.__call__))


def _update(learner: Learner[P], opt: optax.GradientTransformation, batch: int, per_epoch: int, seed: int) -> Step[P]:
    """``make_step``'s update, not jitted."""
    split, _ = data_parallel(batch)

    def step(
        model: P, opt_state: optax.OptState, x: jax.Array, t: jax.Array, order: jax.Array, i: ArrayLike
    ) -> tuple[P, optax.OptState, jax.Array]:
        rows = jax.lax.dynamic_slice_in_dim(order, (jnp.asarray(i) % per_epoch) * batch, batch)
        inputs, targets = (jax.lax.with_sharding_constraint(a[rows], split) for a in (x, t))  # type: ignore[no-untyped-call]
        if learner.augment is not None:
            inputs, targets = learner.augment(jax.random.fold_in(jax.random.key(seed), i), inputs, targets)
        value, grads = jax.value_and_grad(learner.loss)(model, inputs, targets)
        updates, opt_state = opt.update(grads, opt_state, model)
        return optax.apply_updates(model, updates), opt_state, value

    return step


@functools.lru_cache(maxsize=8)
def make_step(
    learner: Learner[P], opt: optax.GradientTransformation, batch: int, per_epoch: int, seed: int = 0
) -> Step[P]:
    """The jitted update (``Step``): it takes the training set, the epoch's order (``epoch_order``) and the
    step number, all replicated on the devices, gathers the step's minibatch (the i-th ``batch`` entries
    of the order, i the step's place in its epoch of ``per_epoch`` steps), splits it over the devices
    (``data_parallel``), moves it by ``learner.augment`` if the learner has one (its key
    ``fold_in(key(seed), step)``) and applies one update of ``opt`` to ``learner.loss``'s gradient. One compilation
    per learner, optimiser and process (a resumed run reuses it)."""
    _, replicated = data_parallel(batch)
    jitted: Step[P] = jax.jit(_update(learner, opt, batch, per_epoch, seed), in_shardings=replicated,
                              out_shardings=replicated)  # fmt: skip
    return jitted


@functools.lru_cache(maxsize=16)
def make_block(
    learner: Learner[P], opt: optax.GradientTransformation, batch: int, per_epoch: int, seed: int, length: int
) -> Step[P]:
    """``length`` consecutive updates of ``make_step`` in one jitted call (a ``jax.lax.scan``; ``length``
    1: the step itself), from the step number it is given, all in one epoch (one order): the same
    arguments, and the ``length`` losses. The host then dispatches one call, not ``length``: what a fast
    device waits for when each step is small. One compilation per length."""
    _, replicated = data_parallel(batch)
    update = _update(learner, opt, batch, per_epoch, seed)

    def block(
        model: P, opt_state: optax.OptState, x: jax.Array, t: jax.Array, order: jax.Array, first: ArrayLike
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


def place(array: np.ndarray, sharding: NamedSharding) -> jax.Array:
    """A host array (the same in every process) on the devices, placed by ``sharding``: each process
    copies only the parts of its own devices."""
    return jax.make_array_from_callback(array.shape, sharding, lambda index: array[index])
