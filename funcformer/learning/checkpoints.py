"""The Funcformer's checkpoints: a task's run (``RunConfig``) read back from its directory, in the one format
of every model (``applicative.training.checkpoints``)."""

from __future__ import annotations

from pathlib import Path

from applicative.training.checkpoints import State, read, stored, template
from applicative.training.files import CHECKPOINT
from funcformer.learning.settings import RunConfig
from funcformer.learning.steps import funcformer_learner, optimiser
from funcformer.model import Funcformer

__all__ = ["from_bytes", "load"]


def load(directory: Path, run: RunConfig) -> State[Funcformer]:
    """The checkpoint of the Funcformer run ``run`` in ``directory`` (``read``).

    An unreadable file (truncated, not a zip, a missing or damaged array) raises a ValueError naming
    it, and so does a checkpoint of an older format (one without its output scale), saying to train
    the run again.
    """
    return from_bytes(stored(directory), run, directory)


def from_bytes(data: bytes, run: RunConfig, directory: Path) -> State[Funcformer]:
    """``load`` of the checkpoint ``data`` read from ``directory`` (named in its errors): what the owner of
    a run on several processes reads and hands to the others (``processes.from_owner``)."""
    again = run.problem.invocation("train --out DIR", "funcformer.learning.train(run, DIR)")

    def described(text: str) -> None:  # a run of another task, or of an older format, refused by name
        RunConfig.from_json(text, run.problem, str(directory / CHECKPOINT))

    shapes = template(funcformer_learner(run.model), run.seed, optimiser(run))
    return read(data, run.to_json(), shapes, directory, again=again, check=described)
