"""A run's settings as one typed record: its command line's flags, its ``--help``, its config.json and the rule
of ``--resume``, derived from the record in one place.

A record is a frozen dataclass whose fields are ``setting``\\ s (a default, or none: required, and a help text)::

    @dataclasses.dataclass(frozen=True)
    class Run:
        algorithm: str = setting(help="one of the benchmark's algorithms")   # required
        steps: int = setting(1500, help="training steps")
        config: Config = setting(Config(), help="fields of Config as JSON")  # a record of records

    add_flags(parser, Run)                  # --algorithm, --steps, --config JSON, each default in --help
    run = chosen(Run, args)                  # a new run: the flags given, over the record's defaults
    run = chosen(Run, args, saved, "runs/x")  # a resumed one: the run's own settings; any flag given must agree
    text = json.dumps(to_dict(run)); run = from_dict(Run, json.loads(text))   # config.json and back

A field's flag is its name with dashes (``per_epoch``: ``--per-epoch``), of its type: ``int``, ``float``, ``str``,
``bool`` (``--x``/``--no-x``), ``X | None`` (an ``X``; None, a default the help says), a ``Literal`` (its
choices), a record (a JSON object of some of its fields, over its default: ``--config '{"processor": "max"}'``;
or, its setting marked ``flat``, a flag for each of its fields and of the records within it:
``--learning-rate``), a ``dict`` (a JSON object) or any other (a JSON value, which the record's ``__post_init__``
checks); a setting's ``parse`` reads its text in place of its type. In a record's JSON (a flag's, a
config.json's) a field of a ``Literal``, ``int``, ``float``, ``str`` or ``bool`` holds a value of its type (an int
is a float), or a ValueError names the setting. The defaults are the record's, or an instance's given to
``add_flags`` and ``chosen`` (a task's own). The rule of ``--resume``, one for every command
line: the run's own settings are read back from the run, and a flag given beside ``--resume`` must agree with
them: ``chosen`` refuses a disagreement with a ValueError naming each setting, its value in the run and the
value given. (Why not tyro or simple-parsing, which build command lines from dataclasses too: this rule needs
the flags given apart from the defaults, which argparse keeps with ``SUPPRESS`` and neither exposes; the command
lines keep argparse's sub-commands and ``command.add_flags``; and it is one module over the standard library's
argparse, where either is a dependency of its own.)
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import functools
import json
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal, TypeVar

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

__all__ = ["add_flags", "chosen", "from_dict", "given", "setting", "to_dict"]

T = TypeVar("T")
R = TypeVar("R", bound="DataclassInstance")


def setting(
    default: Any = dataclasses.MISSING, *, help: str, flat: bool = False, parse: Callable[[str], Any] | None = None
) -> Any:
    """A field of a record of settings: ``default`` (none: required on a new run) and its flag's ``help``; a
    record's with ``flat``, a flag for each of its fields (and of the records within it) in place of a JSON one;
    ``parse``, the flag's own reading of its text in place of its type's (argparse's ``type``: a
    ``argparse.ArgumentTypeError`` it raises is a usage error naming the flag)."""
    metadata = {"help": help, "flat": flat, "parse": parse}
    if dataclasses.is_dataclass(default):
        return dataclasses.field(default_factory=lambda: default, metadata=metadata)  # (a record is immutable)
    if isinstance(default, dict | list):
        return dataclasses.field(default_factory=lambda: copy.deepcopy(default), metadata=metadata)
    return dataclasses.field(default=default, metadata=metadata)


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def _json_object(text: str) -> dict[str, object]:
    try:
        value = json.loads(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(f"not JSON ({error}): {text}") from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError(f"must be a JSON object of fields, got {text}")
    return value


def _json(text: str) -> object:
    try:
        return json.loads(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(f"not JSON ({error}): {text}") from None


@dataclasses.dataclass(frozen=True)
class _Flag:
    """A setting's flag: the field's ``path`` from the record (``("config", "batch")``), its ``name``
    (``--batch``), type, default (``MISSING``: required) and help."""

    path: tuple[str, ...]
    name: str
    kind: Any
    default: Any
    help: str
    parse: Callable[[str], Any] | None = None

    @property
    def dest(self) -> str:
        """Its attribute of argparse's namespace: the path joined by dots."""
        return ".".join(self.path)


def _flags(record: type[Any], within: tuple[str, ...] = (), defaults: Any = None) -> list[_Flag]:
    """The flags of ``record``'s fields; a record's marked ``flat``, and every record within it, gives a flag
    to each of its fields, named by the field alone, its default the enclosing default's."""
    kinds, flags = typing.get_type_hints(record), []
    for field in dataclasses.fields(record):
        default = _default(field) if defaults is None else getattr(defaults, field.name)
        path, kind = (*within, field.name), kinds[field.name]
        if dataclasses.is_dataclass(kind) and (field.metadata.get("flat") or within):
            flags += _flags(kind, path, default)  # type: ignore[arg-type]  # (a dataclass type)
        else:
            metadata = field.metadata
            flags.append(_Flag(path, _flag(field.name), kind, default, metadata.get("help", ""), metadata.get("parse")))
    return flags


def add_flags(parser: argparse.ArgumentParser, record: type[R], defaults: R | None = None) -> None:
    """A flag for each field of ``record`` on ``parser`` (the module's docstring), each ``help`` saying its default
    (``defaults``' where given: a task's own) or that a new run needs it. A flag not given leaves no attribute
    (``given`` reads those given)."""
    for flag in _flags(record, (), defaults):
        structured = isinstance(flag.default, dict) or dataclasses.is_dataclass(flag.default)
        shown = json.dumps(to_dict(flag.default)) if structured else str(flag.default)
        said = "required for a new run" if flag.default is dataclasses.MISSING else f"default: {shown}"
        text = flag.help if flag.default is None else f"{flag.help} ({said})" if flag.help else f"({said})"
        options: dict[str, Any] = {"default": argparse.SUPPRESS, "help": text.replace("%", "%%")}
        kind = _given_as(flag.kind)
        if kind is bool:
            options["action"] = argparse.BooleanOptionalAction
        elif typing.get_origin(kind) is Literal:
            options |= {"choices": typing.get_args(kind), "type": type(typing.get_args(kind)[0])}
        elif kind in (int, float, str):
            options |= {"type": kind, "metavar": flag.path[-1].upper()}
        elif dataclasses.is_dataclass(kind) or typing.get_origin(kind) is dict:
            options |= {"type": _json_object, "metavar": "JSON"}
        else:
            options |= {"type": _json, "metavar": "JSON"}
        if flag.parse is not None:
            options["type"] = flag.parse
        parser.add_argument(flag.name, dest=flag.dest, **options)


def _given_as(kind: Any) -> Any:
    """The type a flag reads for a field of type ``kind``: ``X`` for ``X | None`` (None: a default of its own,
    which the help says), else ``kind``."""
    parts = typing.get_args(kind)
    if typing.get_origin(kind) in (types.UnionType, typing.Union) and len(parts) == 2 and type(None) in parts:
        return next(part for part in parts if part is not type(None))
    return kind


def _default(field: dataclasses.Field[Any]) -> Any:
    if field.default_factory is not dataclasses.MISSING:
        return field.default_factory()
    return field.default


def given(args: argparse.Namespace, record: type[Any]) -> dict[str, object]:
    """The settings of ``record`` whose flags the command line gave (``add_flags``), by their paths
    (``"config.batch"`` for a field of a flattened record), with their values."""
    return _given(args, _flags(record))


def _given(args: argparse.Namespace, flags: Sequence[_Flag]) -> dict[str, object]:
    return {flag.dest: getattr(args, flag.dest) for flag in flags if hasattr(args, flag.dest)}


def chosen(
    record: type[R], args: argparse.Namespace, saved: R | None = None, where: str = "the run", defaults: R | None = None
) -> R:
    """The settings of a run: with ``saved`` None (a new run), the flags given over ``record``'s defaults (or
    ``defaults``, as ``add_flags`` was given them); else ``saved`` (the run's own, read back from ``where``), each
    flag given agreeing with it. ValueError naming a required setting not given, a record's field that does not
    exist, or every setting given otherwise than the run holds it ("--steps: 1500 in the run, 3000 given")."""
    every = _flags(record, (), defaults)
    values = _given(args, every)
    flags = [(flag, values[flag.dest]) for flag in every if flag.dest in values]
    if saved is None:
        if absent := [f.name for f in every if f.default is dataclasses.MISSING and f.dest not in values]:
            raise ValueError(f"a new run needs {', '.join(absent)}")
        fields = {f.name: _default(f) for f in dataclasses.fields(record)}
        if defaults is not None:
            fields = {name: getattr(defaults, name) for name in fields}
        for flag, value in flags:
            top, *rest = flag.path
            fields[top] = _put(fields[top], rest, value, flag)
        return record(**fields)
    differ = []
    for flag, value in flags:
        ours = functools.reduce(getattr, flag.path, saved)
        if dataclasses.is_dataclass(ours) and isinstance(value, dict):
            theirs = _over(ours, value, flag)
            differ += [_differ(f"{flag.name} {key}", getattr(ours, key), getattr(theirs, key)) for key in value]
        elif isinstance(ours, dict) and isinstance(value, dict):  # (a key given, not every key)
            differ += [_differ(f"{flag.name} {key}", ours.get(key), v) for key, v in value.items()]
        else:
            differ.append(_differ(flag.name, ours, _typed(flag.kind, value, flag.name)))
    if differing := [line for line in differ if line]:
        raise ValueError(f"--resume continues {where} with its own settings; given otherwise: {'; '.join(differing)}")
    return saved


def _put(value: Any, path: list[str], given: object, flag: _Flag) -> Any:
    """``value`` with the setting at ``path`` within it given (``_over``)."""
    if not path:
        return _over(value, given, flag)
    inner = _put(getattr(value, path[0]), path[1:], given, flag)
    return dataclasses.replace(value, **{path[0]: inner})


def _differ(name: str, ours: object, theirs: object) -> str:
    """"NAME: OURS in the run, THEIRS given" where they differ, else ""."""
    if ours == theirs:
        return ""
    return f"{name}: {json.dumps(to_dict(ours))} in the run, {json.dumps(to_dict(theirs))} given"


def _over(default: Any, value: Any, flag: _Flag) -> Any:
    """``value`` given for ``flag``'s setting: a record's fields given as a dict, over its ``default`` (a field it
    does not have named); any other value as its type holds it (``_typed``)."""
    if not (dataclasses.is_dataclass(default) and isinstance(value, dict)):
        return _typed(flag.kind, value, flag.name)
    kinds = typing.get_type_hints(type(default))
    if unknown := sorted(set(value) - set(kinds)):
        raise ValueError(f"{flag.name}: {type(default).__name__} has no field {', '.join(unknown)} "
                         f"(its fields: {', '.join(sorted(kinds))})")  # fmt: skip
    record = typing.cast("DataclassInstance", default)
    return dataclasses.replace(record, **{key: _typed(kinds[key], v, f"{flag.name} {key}") for key, v in value.items()})


def _typed(kind: Any, value: object, name: str) -> object:
    """``value`` read from JSON as a field of type ``kind`` holds it: a record from its object, a tuple from a list.
    ValueError naming the setting (``name``) where a ``Literal``'s value is not one of its choices, or where an
    ``int``, ``float``, ``str`` or ``bool`` is given a value of another type (an int is a float)."""
    if dataclasses.is_dataclass(kind) and isinstance(value, dict):
        return from_dict(kind, value)  # type: ignore[arg-type]  # (a dataclass type)
    if typing.get_origin(kind) is tuple and isinstance(value, list):
        parts = typing.get_args(kind)
        each = [parts[0]] * len(value) if parts[-1:] == (Ellipsis,) else list(parts)
        return tuple(_typed(part, v, name) for part, v in zip(each, value, strict=False))
    if typing.get_origin(kind) is Literal and value not in (choices := typing.get_args(kind)):
        raise ValueError(f"{name}: {json.dumps(value)} is not one of {', '.join(json.dumps(c) for c in choices)}")
    scalar = {int: (int,), float: (int, float), str: (str,), bool: (bool,)}.get(kind)
    if scalar is not None and (not isinstance(value, scalar) or (kind is not bool and isinstance(value, bool))):
        raise ValueError(f"{name}: {json.dumps(value)} is not a{'n' if kind is int else ''} {kind.__name__}")
    return value


def to_dict(value: T) -> Any:
    """``value`` as JSON's data: a record (a dataclass) as an object of its fields, tuples as lists."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: to_dict(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, tuple | list):
        return [to_dict(v) for v in value]
    return value


def from_dict(record: type[R], data: Mapping[str, object], *, besides: tuple[str, ...] = ()) -> R:
    """The record of ``data`` (``to_dict``'s): its records made from their objects, tuples from lists.
    ValueError naming a key that is not a field (but those ``besides``: a description's own, ``"example"``), a
    field missing or malformed."""
    kinds = typing.get_type_hints(record)
    if unknown := sorted(set(data) - set(kinds) - set(besides)):
        raise ValueError(f"{record.__name__} has no field {', '.join(unknown)} (its fields: {', '.join(kinds)})")
    try:
        present = {name: data[name] for name in kinds if name in data}
        return record(**{name: _typed(kinds[name], v, f"{record.__name__}.{name}") for name, v in present.items()})
    except TypeError as error:
        raise ValueError(f"not the settings of a run ({error})") from None
