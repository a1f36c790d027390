"""Training on the benchmark's arrays, for any model: a pure step built once, the loop thin, resumable.

    fit(params, loss, optimiser, inputs, targets, epochs=..., batch=..., seed=..., checkpoint=PATH)

``params`` is any pytree (the ``ImageToFunction``, the FNO's dict), ``loss(params, a, u)`` a scalar on
a minibatch, ``optimiser`` an optax transformation whose schedule counts steps. Epoch e visits the
training set in the order ``default_rng((seed, e)).permutation``, ``batch`` samples a step (the last
partial batch of an epoch is dropped). After every epoch the state (parameters, optimiser state, epoch,
losses, seconds) is written atomically to ``checkpoint`` if one is given, and a run that finds its
checkpoint resumes after the last finished epoch: a kill loses at most one epoch. The checkpoint is
checked against the run (its description, every array's shape and dtype) and refused by name otherwise.
"""

from __future__ import annotations

import io
import json
import time
import zipfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Generic, TypeVar

import jax
import jax.numpy as jnp
import numpy as np
import optax
from tqdm.auto import tqdm

from funcformer.learning._files import atomic_file

__all__ = ["Fitted", "fit", "relative_l2", "relative_l2_loss"]

T = TypeVar("T")


@dataclass
class Fitted(Generic[T]):
    """What ``fit`` returns: the parameters, the mean training loss of each epoch, the training seconds
    (all sessions of a resumed run)."""

    params: T
    losses: list[float] = field(default_factory=list)
    seconds: float = 0.0


def relative_l2(predicted: jax.Array, target: jax.Array) -> jax.Array:
    """(B,): each sample's ||p - u|| / ||u|| over its grid values ((B, s, s) arrays; the benchmark's metric)."""
    difference = jnp.sqrt(jnp.sum((predicted - target) ** 2, axis=(-2, -1)))
    return difference / jnp.sqrt(jnp.sum(target**2, axis=(-2, -1)))


def relative_l2_loss(predicted: jax.Array, target: jax.Array) -> jax.Array:
    """The mean over the batch of ``relative_l2``."""
    return jnp.mean(relative_l2(predicted, target))


def fit(
    params: T,
    loss: Callable[[T, jax.Array, jax.Array], jax.Array],
    optimiser: optax.GradientTransformation,
    inputs: np.ndarray,
    targets: np.ndarray,
    *,
    epochs: int,
    batch: int,
    seed: int = 0,
    checkpoint: Path | str | None = None,
    description: str = "",
    progress: bool = False,
) -> Fitted[T]:
    """Minimise ``loss`` over ``epochs`` epochs of minibatches of (inputs, targets) (see the module).
    ``description`` names the run in its checkpoint (a checkpoint of another description is refused).
    A ValueError names a batch larger than the training set or inputs and targets of other counts."""
    count = len(inputs)
    if len(targets) != count:
        raise ValueError(f"fit: {count} inputs but {len(targets)} targets")
    if not 1 <= batch <= count:
        raise ValueError(f"fit: batch = {batch} must be between 1 and the {count} training samples")
    opt_state = optimiser.init(params)

    @jax.jit
    def step(params: T, opt_state: optax.OptState, a: jax.Array, u: jax.Array) -> tuple[T, optax.OptState, jax.Array]:
        value, grads = jax.value_and_grad(loss)(params, a, u)
        updates, opt_state = optimiser.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, value

    path = None if checkpoint is None else Path(checkpoint)
    fitted: Fitted[T] = Fitted(params)
    if path is not None and path.exists():
        params, opt_state, fitted = _read(path, description, (params, opt_state))
    dtype = jax.tree_util.tree_leaves(params)[0].dtype
    x, t = jnp.asarray(inputs, dtype), jnp.asarray(targets, dtype)
    per_epoch = count // batch
    bar = tqdm(total=epochs, initial=len(fitted.losses), disable=not progress, desc="epochs")
    for epoch in range(len(fitted.losses), epochs):
        start = time.perf_counter()
        order = np.random.default_rng((seed, epoch)).permutation(count)
        total = jnp.zeros((), dtype)
        for i in range(per_epoch):
            rows = jnp.asarray(order[i * batch : (i + 1) * batch])
            params, opt_state, value = step(params, opt_state, x[rows], t[rows])
            total = total + value
        mean = float(total) / per_epoch
        if not np.isfinite(mean):
            raise FloatingPointError(f"fit: the training loss is {mean} in epoch {epoch}")
        fitted = Fitted(params, [*fitted.losses, mean], fitted.seconds + time.perf_counter() - start)
        if path is not None:
            _write(path, description, (params, opt_state), fitted)
        bar.update(1)
        bar.set_postfix(loss=f"{mean:.4g}")
    bar.close()
    return Fitted(params, fitted.losses, fitted.seconds)


def _write(path: Path, description: str, state: object, fitted: Fitted[T]) -> None:
    leaves = jax.tree_util.tree_leaves(state)
    arrays = {f"leaf_{i}": np.asarray(leaf) for i, leaf in enumerate(leaves)}
    meta = {"description": description, "losses": fitted.losses, "seconds": fitted.seconds}
    buffer = io.BytesIO()
    arrays["meta"] = np.asarray(json.dumps(meta))
    save: Callable[..., None] = np.savez
    save(buffer, **arrays)
    with atomic_file(path) as f:
        f.write(buffer.getvalue())


def _read(path: Path, description: str, template: tuple[T, optax.OptState]) -> tuple[T, optax.OptState, Fitted[T]]:
    """The checkpoint at ``path`` in the structure of ``template``, checked."""
    leaves, structure = jax.tree_util.tree_flatten(template)
    try:
        with np.load(path) as f:
            meta = json.loads(str(f["meta"]))
            stored = [f[f"leaf_{i}"] for i in range(len(leaves))]
            extra = len(f.files) - 1 - len(leaves)
    except (OSError, KeyError, ValueError, zipfile.BadZipFile) as e:
        raise ValueError(f"{path}: not a checkpoint of this run ({e}); delete it to start afresh") from e
    if meta["description"] != description or extra:
        raise ValueError(f"{path}: a checkpoint of another run ({meta['description']!r}, not {description!r})")
    for i, (leaf, array) in enumerate(zip(leaves, stored, strict=True)):
        if array.shape != jnp.shape(leaf) or array.dtype != jnp.asarray(leaf).dtype:
            raise ValueError(f"{path}: array {i} is {array.shape} {array.dtype}, the run's is {jnp.shape(leaf)}")
    params, opt_state = jax.tree_util.tree_unflatten(structure, [jnp.asarray(a) for a in stored])
    return params, opt_state, Fitted(params, list(meta["losses"]), float(meta["seconds"]))
