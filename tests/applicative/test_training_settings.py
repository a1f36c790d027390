"""``applicative.training.settings``: a record of settings as flags, as JSON and as the rule of ``--resume``,
each against the record written out by hand (its fields, defaults and types) and argparse's own parsing."""

from __future__ import annotations

import argparse
import dataclasses
import json
import re
from typing import Any, Literal

import pytest

from applicative.training.settings import add_flags, chosen, from_dict, given, setting, to_dict


@dataclasses.dataclass(frozen=True)
class Inner:
    width: int = 8
    sizes: tuple[int, ...] = ()
    mode: str = "a"

    def __post_init__(self) -> None:
        if self.width < 1:
            raise ValueError(f"width must be positive, got {self.width}")


@dataclasses.dataclass(frozen=True)
class Run:
    task: str = setting(help="the task")
    steps: int = setting(100, help="training steps, 50% more for luck")
    rate: float = setting(0.5, help="learning rate")
    fast: bool = setting(False, help="go fast")
    kind: Literal["x", "y"] = setting("x", help="the kind")
    inner: Inner = setting(Inner(), help="fields of Inner as JSON")


def _parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="prog")
    add_flags(parser, Run)
    return parser.parse_args(argv)


def test_the_flags_are_the_records_fields_typed_and_only_those_given_are_read() -> None:
    args = _parse("--task", "t", "--steps", "7", "--rate", "0.25", "--fast", "--kind", "y", "--inner", '{"width": 3}')
    assert given(args, Run) == {"task": "t", "steps": 7, "rate": 0.25, "fast": True, "kind": "y", "inner": {"width": 3}}
    assert given(_parse("--no-fast"), Run) == {"fast": False}
    assert given(_parse(), Run) == {}
    assert chosen(Run, args) == Run("t", 7, 0.25, True, "y", Inner(width=3))
    assert chosen(Run, _parse("--task", "t")) == Run("t")  # the record's defaults
    assert chosen(Run, _parse("--task", "t", "--inner", '{"sizes": [4, 7]}')).inner == Inner(sizes=(4, 7))


@pytest.mark.parametrize(
    ("argv", "error"),
    [
        (["--steps", "x"], "argument --steps: invalid int value: 'x'"),
        (["--kind", "z"], "argument --kind: invalid choice: 'z'"),
        (["--inner", "[1]"], "argument --inner: must be a JSON object of fields, got [1]"),
        (["--inner", "{"], "argument --inner: not JSON"),
    ],
)
def test_a_malformed_flag_is_argparses_usage_error_naming_it(
    argv: list[str], error: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as usage:
        _parse(*argv)
    assert usage.value.code == 2
    assert error in capsys.readouterr().err


def test_a_new_run_names_a_required_setting_missing_an_unknown_field_and_the_records_own_check() -> None:
    with pytest.raises(ValueError, match=r"^a new run needs --task$"):
        chosen(Run, _parse("--steps", "3"))
    unknown = r"^--inner: Inner has no field depth, wdth \(its fields: mode, sizes, width\)$"
    with pytest.raises(ValueError, match=unknown):
        chosen(Run, _parse("--task", "t", "--inner", '{"wdth": 3, "depth": 1}'))
    with pytest.raises(ValueError, match="width must be positive, got 0"):
        chosen(Run, _parse("--task", "t", "--inner", '{"width": 0}'))


def test_help_says_each_default_or_that_a_new_run_needs_it() -> None:
    parser = argparse.ArgumentParser(prog="prog")
    add_flags(parser, Run)
    text = " ".join(parser.format_help().split())
    assert "--task TASK the task (required for a new run)" in text
    assert "--steps STEPS training steps, 50% more for luck (default: 100)" in text
    assert "--fast, --no-fast go fast (default: False)" in text
    assert "--kind {x,y} the kind (default: x)" in text
    assert '--inner JSON fields of Inner as JSON (default: {"width": 8, "sizes": [], "mode": "a"})' in text


def test_resume_keeps_the_runs_settings_and_names_every_flag_given_otherwise() -> None:
    saved = Run("t", 7, 0.25, False, "y", Inner(width=3, sizes=(4, 7)))
    assert chosen(Run, _parse(), saved, "runs/x") is saved  # nothing given: the run's own, not the defaults
    agreeing = _parse("--task", "t", "--steps", "7", "--inner", '{"width": 3, "sizes": [4, 7]}')
    assert chosen(Run, agreeing, saved, "runs/x") is saved
    differing = _parse("--steps", "8", "--fast", "--kind", "y", "--inner", '{"width": 3, "sizes": [4], "mode": "a"}')
    with pytest.raises(ValueError, match=r"^--resume continues runs/x") as refused:
        chosen(Run, differing, saved, "runs/x")
    assert str(refused.value) == (
        "--resume continues runs/x with its own settings; given otherwise: --steps: 7 in the run, 8 given; "
        "--fast: false in the run, true given; --inner sizes: [4, 7] in the run, [4] given"
    )
    with pytest.raises(ValueError, match="Inner has no field depth"):
        chosen(Run, _parse("--inner", '{"depth": 1}'), saved, "runs/x")


def test_a_record_goes_to_json_and_back_whole() -> None:
    run = Run("t", 7, 0.25, True, "y", Inner(width=3, sizes=(4, 7), mode="b"))
    data = json.loads(json.dumps({"example": "e", **to_dict(run)}))
    assert data == {"example": "e", "task": "t", "steps": 7, "rate": 0.25, "fast": True, "kind": "y",
                    "inner": {"width": 3, "sizes": [4, 7], "mode": "b"}}  # fmt: skip
    assert from_dict(Run, data, besides=("example",)) == run  # the list read back as the tuple, the object as Inner
    with pytest.raises(ValueError, match=r"^Run has no field example \(its fields: task, steps, rate, fast, kind"):
        from_dict(Run, data)
    with pytest.raises(ValueError, match="not the settings of a run"):
        from_dict(Run, {"steps": 3})


@dataclasses.dataclass(frozen=True)
class Optimiser:
    rate: float = 0.1
    clip: float = 1.0


@dataclasses.dataclass(frozen=True)
class Model:
    width: int = 8
    optimiser: Optimiser = Optimiser(rate=0.01)  # a default other than Optimiser's own


@dataclasses.dataclass(frozen=True)
class Flat:
    steps: int = setting(5, help="training steps")
    model: Model = setting(Model(), help="the model", flat=True)


def test_a_flat_records_fields_and_those_of_the_records_within_it_are_flags_of_their_own() -> None:
    parser = argparse.ArgumentParser(prog="prog")
    add_flags(parser, Flat)
    text = " ".join(parser.format_help().split())
    assert "--width WIDTH (default: 8) --rate RATE (default: 0.01) --clip CLIP (default: 1.0)" in text
    args = parser.parse_args(["--rate", "0.5", "--width", "3"])
    assert given(args, Flat) == {"model.width": 3, "model.optimiser.rate": 0.5}
    assert chosen(Flat, args) == Flat(5, Model(3, Optimiser(rate=0.5)))  # the clip Model's default gives
    assert chosen(Flat, parser.parse_args([])) == Flat()
    saved = Flat(5, Model(3, Optimiser(rate=0.5)))
    assert chosen(Flat, args, saved) is saved
    with pytest.raises(ValueError, match=r"given otherwise: --rate: 0.5 in the run, 0.25 given$"):
        chosen(Flat, parser.parse_args(["--rate", "0.25", "--width", "3"]), saved)


@dataclasses.dataclass(frozen=True)
class Loose:
    epochs: int | None = setting(None, help="epochs (default: the recipe's)")
    augment: bool | None = setting(None, help="augment (default: the recipe's)")
    extra: dict[str, object] = setting({}, help="the model's fields as JSON")


def test_a_setting_none_by_default_reads_its_type_and_a_mapping_is_compared_key_by_key() -> None:
    parser = argparse.ArgumentParser(prog="prog")
    add_flags(parser, Loose)
    text = " ".join(parser.format_help().split())
    assert "--epochs EPOCHS epochs (default: the recipe's) --augment, --no-augment augment" in text
    assert '--extra JSON the model\'s fields as JSON (default: {})' in text
    assert chosen(Loose, parser.parse_args([])) == Loose()
    assert Loose().extra is not Loose().extra  # each its own mapping
    args = parser.parse_args(["--epochs", "3", "--no-augment", "--extra", '{"depth": 2}'])
    assert chosen(Loose, args) == Loose(3, False, {"depth": 2})
    saved = Loose(3, False, {"depth": 2, "width": 8})
    assert chosen(Loose, args, saved) is saved  # the keys given agree; the others are the run's
    with pytest.raises(ValueError, match=r"given otherwise: --extra depth: 2 in the run, 4 given$"):
        chosen(Loose, parser.parse_args(["--extra", '{"depth": 4, "width": 8}']), saved)


@dataclasses.dataclass(frozen=True)
class Typed:
    shape: Literal["round", "square"] = "round"
    count: int = 1
    rate: float = 0.5
    on: bool = False
    sizes: tuple[int, ...] = ()


@dataclasses.dataclass(frozen=True)
class Holds:
    typed: Typed = setting(Typed(), help="fields of Typed as JSON")


@pytest.mark.parametrize(
    ("fields", "error"),
    [
        ({"shape": "oval"}, 'shape: "oval" is not one of "round", "square"'),
        ({"count": "3"}, 'count: "3" is not an int'),
        ({"count": 2.5}, "count: 2.5 is not an int"),
        ({"count": True}, "count: true is not an int"),
        ({"rate": "fast"}, 'rate: "fast" is not a float'),
        ({"on": 1}, "on: 1 is not a bool"),
        ({"sizes": [4, "7"]}, 'sizes: "7" is not an int'),
    ],
)
def test_a_value_its_field_cannot_hold_is_refused_naming_the_setting(fields: dict[str, Any], error: str) -> None:
    """A JSON object of a record's fields (a flag's, a config.json's) holds each field's type: a ``Literal``'s
    choices, an int (not a bool), a float (an int too), a string, a bool; else a ValueError names the setting."""
    parser = argparse.ArgumentParser(prog="prog")
    add_flags(parser, Holds)
    args = parser.parse_args(["--typed", json.dumps(fields)])
    with pytest.raises(ValueError, match=f"^--typed {re.escape(error)}$"):
        chosen(Holds, args)  # a new run
    with pytest.raises(ValueError, match=f"^--typed {re.escape(error)}$"):
        chosen(Holds, args, Holds(), "runs/x")  # a resumed one
    with pytest.raises(ValueError, match=f"^Typed\\.{re.escape(error)}$"):
        from_dict(Holds, {"typed": fields})  # config.json
    good = {"shape": "square", "count": 3, "rate": 1, "on": True, "sizes": [4, 7]}
    held = Typed("square", 3, 1.0, True, (4, 7))
    assert chosen(Holds, parser.parse_args(["--typed", json.dumps(good)])).typed == held
    assert from_dict(Holds, {"typed": good}) == Holds(held)
