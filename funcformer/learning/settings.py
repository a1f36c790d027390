"""``RunConfig``: everything that defines a training run, saved as its directory's config.json.

A run's settings come in three records, each named for what it holds, and a task:

- ``ModelConfig`` (``funcformer.model``): the architecture, the shape of the weights;
- ``DataConfig`` (each task's, e.g. ``funcformer.poisson.DataConfig``): what defines the datasets
  (resolution, source degree, the exact solver's grid);
- ``RunConfig``: the two above, the optimisation settings and the seed: the whole run;
- ``Problem`` (``problem``) is not settings but the task itself: the functions that make, normalise
  and solve its data, with its defaults. It is code, saved in config.json by name only.

``RunConfig.from_json`` and ``read_run`` read a config back against the ``Problem`` the caller hands
them: a run of another task is refused by name, and so is a config that names no task (an older
format, saved before runs named their task).
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from applicative.training.files import CONFIG
from funcformer._fields import check_fields
from funcformer.learning.problem import Problem, check_problem
from funcformer.model import ModelConfig

__all__ = ["MAX_SEED", "MAX_STEPS", "RunConfig", "read_run"]

MAX_SEED = 2**63 - 1
MAX_STEPS = 2**31 - 1
"""The step counter is a 32-bit integer on the device."""


@dataclass(frozen=True)
class RunConfig:
    """Everything that defines a training run (saved as config.json): the task, its model and data
    settings, and the optimisation settings. ``RunConfig.of(problem, ...)`` fills in the problem's
    defaults."""

    problem: Problem[Any]
    model: ModelConfig
    data_config: Any
    """The problem's data configuration (its ``DataConfig``: what defines the datasets)."""
    steps: int = 3000
    batch: int = 32
    learning_rate: float = 1e-2
    warmup: int = 100
    clip: float = 1.0
    train_size: int = 8192
    seed: int = 0
    """Seeds the training set, the initialisation and the minibatch order."""
    checkpoint_every: int = 200

    def __post_init__(self) -> None:
        check_fields(self)  # ints are ints, learning_rate and clip finite numbers
        for name in ("steps", "batch", "train_size", "checkpoint_every"):
            if getattr(self, name) < 1:
                raise ValueError(f"RunConfig.{name} must be positive, got {getattr(self, name)}")
        for name in ("learning_rate", "clip"):
            if not getattr(self, name) > 0:
                raise ValueError(f"RunConfig.{name} must be positive, got {getattr(self, name)}")
        for name in ("warmup", "seed"):
            if getattr(self, name) < 0:
                raise ValueError(f"RunConfig.{name} must be >= 0, got {getattr(self, name)}")
        if self.seed > MAX_SEED:
            raise ValueError(f"RunConfig.seed must be at most 2**63 - 1 (a 64-bit seed), got {self.seed}")
        if self.steps > MAX_STEPS:
            raise ValueError(f"RunConfig.steps must be at most 2**31 - 1 (a 32-bit step counter), got {self.steps}")
        if self.batch > self.train_size:
            raise ValueError(f"RunConfig.batch = {self.batch} exceeds RunConfig.train_size = {self.train_size}")
        if self.model.n != self.data_config.n:
            raise ValueError(
                f"the model's n = {self.model.n} differs from the data configuration's n = {self.data_config.n}"
            )
        self.problem.check_train_seed(self.seed)

    @staticmethod
    def of(problem: Problem[Any], **changes: Any) -> RunConfig:
        """The problem's default run (its model, data configuration and ``Problem.defaults``), with ``changes``."""
        defaults = {"problem": problem, "model": problem.model, "data_config": problem.data_config()}
        return RunConfig(**{**defaults, **problem.defaults, **changes})

    def fields(self) -> dict[str, Any]:
        """The settings as plain data: the problem by name, the model and data configuration as dicts."""
        shallow = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        model, data = dataclasses.asdict(self.model), dataclasses.asdict(self.data_config)
        return {**shallow, "problem": self.problem.name, "model": model, "data_config": data}

    def to_json(self) -> str:
        return json.dumps(self.fields(), indent=2, sort_keys=True)

    @staticmethod
    def from_json(text: str, problem: Problem[Any], source: str = "config") -> RunConfig:
        """The run of ``problem`` that a config.json holds; a ValueError naming ``source`` if it holds
        no valid run, a run of another task, or names no task (an older format)."""
        try:
            raw = json.loads(text)
            name = raw.pop("problem", None)
        except (ValueError, TypeError, AttributeError) as error:
            raise ValueError(f"{source}: not a valid run configuration ({error})") from error
        if name is None or "task" in raw:
            again = problem.invocation("train --out DIR", "funcformer.learning.train(run, DIR)")
            raise ValueError(
                f"{source} is a run configuration of an older format (saved before runs named their task, or "
                f"their data configuration), which this version does not read; train the run again ({again}, "
                "with these settings)"
            )
        if name is not None and name != problem.name:
            raise ValueError(
                f"{source} holds a run of the task {name!r}, not a {problem.title} one: load it with that task's "
                f"Problem (funcformer's own tasks: python -m funcformer.{name} or funcformer.{name}.PROBLEM)"
            )
        try:
            model, data = ModelConfig(**raw["model"]), problem.data_config(**raw["data_config"])
            return RunConfig(**{**raw, "problem": problem, "model": model, "data_config": data})
        except (ValueError, TypeError, KeyError, AttributeError) as error:
            raise ValueError(f"{source}: not a valid run configuration ({error})") from error


def read_run(directory: Path, problem: Problem[Any]) -> RunConfig:
    """The ``problem`` run saved in ``directory`` (``RunConfig.from_json`` of its config.json)."""
    check_problem(problem, f"read_run({directory})")
    path = directory / CONFIG
    if not path.exists():
        raise FileNotFoundError(f"no trained run at {directory}: {CONFIG} is missing")
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as error:
        raise ValueError(f"{path} is not a run configuration: not UTF-8 text ({error})") from None
    return RunConfig.from_json(text, problem, str(path))
