"""One check of a settings dataclass's field values against their declared types, for every settings
record read from a user (``ModelConfig``, ``RunConfig``, a task's ``DataConfig``): a config file's
``"channels": 8.0`` or ``"steps": true`` is refused by name, not found later as an obscure shape error."""

from __future__ import annotations

import dataclasses
import math
import typing
from typing import Any, Literal

import numpy as np

__all__ = ["check_data_config", "check_fields"]


def _is_int(value: object) -> bool:
    return isinstance(value, int | np.integer) and not isinstance(value, bool)


def _describe_and_check(kind: object, value: object) -> tuple[str, bool] | None:
    """What a field of type ``kind`` must be, and whether ``value`` is; None for a type not checked here."""
    if kind is bool:
        return "a bool", isinstance(value, bool)
    if kind is int:
        return "an int", _is_int(value)
    if kind is float:
        number = _is_int(value) or isinstance(value, float | np.floating)
        return "a finite number", number and math.isfinite(typing.cast(float, value))
    if kind is str:
        return "a string", isinstance(value, str)
    if typing.get_origin(kind) is Literal:
        choices = typing.get_args(kind)
        return f"one of {', '.join(map(repr, choices))}", isinstance(value, str | int) and value in choices
    return None


def check_fields(settings: Any) -> None:
    """A ValueError naming the first field of the dataclass ``settings`` whose value is not of its
    declared type: an int (a bool is not one), a finite number, a bool, a string, a Literal's value.
    Fields of other types (nested settings, a Problem) are left to their own checks."""
    hints = typing.get_type_hints(type(settings))
    for field in dataclasses.fields(settings):
        value = getattr(settings, field.name)
        checked = _describe_and_check(hints[field.name], value)
        if checked is not None and not checked[1]:
            raise ValueError(f"{type(settings).__name__}.{field.name} must be {checked[0]}, got {value!r}")


def check_data_config(config: Any, least_k: int, why: str, inputs: str, solver: str) -> None:
    """The checks every task's ``DataConfig`` makes, a ValueError naming the field: its fields' types
    (``check_fields``), the inputs' degree k >= ``least_k`` (``why`` says why), the resolution n >= k
    (to hold the ``inputs``), and the exact solver's resolution, the field named ``solver``, at least
    max(2 n, 16)."""
    check_fields(config)
    if config.k < least_k:
        raise ValueError(f"DataConfig.k = {config.k}: need k >= {least_k}{why}")
    if config.n < config.k:
        raise ValueError(f"DataConfig.n = {config.n}: need n >= k = {config.k} to hold the {inputs}")
    value, least = getattr(config, solver), max(2 * config.n, 16)
    if value < least:
        raise ValueError(f"DataConfig.{solver} = {value}: need {solver} >= max(2 n, 16) = {least}")
