"""The runtime dependencies' bounds: each lower bound in pyproject.toml is the release .ci/lowest.txt
pins (so .ci/run's first environment tests exactly the lowest releases the project admits), no
runtime dependency is pinned, the JAX releases excluded for miscompiling are excluded for jax and
jaxlib alike and named in docs/install.md, and the environment under test is one the project admits.
"""

from __future__ import annotations

import importlib.metadata
import shlex
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parent.parent
LOWEST = ROOT / ".ci" / "lowest.txt"


def runtime() -> dict[str, Requirement]:
    """pyproject.toml's runtime dependencies, by canonical name."""
    with (ROOT / "pyproject.toml").open("rb") as file:
        project = tomllib.load(file)["project"]
    requirements = [Requirement(line) for line in project["dependencies"]]
    return {canonicalize_name(r.name): r for r in requirements}


def lowest() -> dict[str, Version]:
    """.ci/lowest.txt's pins, by canonical name."""
    pins: dict[str, Version] = {}
    for line in LOWEST.read_text(encoding="utf-8").splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        requirement = Requirement(line)
        (specifier,) = requirement.specifier
        assert specifier.operator == "==", f"{LOWEST.name}: {line!r} is not an exact pin"
        name = canonicalize_name(requirement.name)
        assert name not in pins, f"{LOWEST.name}: {name} pinned twice"
        pins[name] = Version(specifier.version)
    return pins


def lower_bound(requirement: Requirement) -> Version:
    bounds = [Version(s.version) for s in requirement.specifier if s.operator == ">="]
    assert len(bounds) == 1, f"pyproject.toml: {requirement} needs exactly one lower bound (>=)"
    return bounds[0]


def test_lowest_pins_exactly_each_runtime_dependency() -> None:
    assert sorted(lowest()) == sorted(runtime())


@pytest.mark.parametrize("name", sorted(runtime()))
def test_each_lower_bound_is_the_release_ci_tests(name: str) -> None:
    requirement = runtime()[name]
    assert lowest()[name] == lower_bound(requirement), f"{requirement} but {LOWEST.name} pins {lowest()[name]}"
    # admitted: not one of the excluded releases, and no upper bound or pin below it
    assert requirement.specifier.contains(lowest()[name], prereleases=True)


@pytest.mark.parametrize("name", sorted(runtime()))
def test_no_runtime_dependency_is_pinned_or_capped(name: str) -> None:
    # Every release from the lower bound on is admitted, but for releases excluded one by one.
    operators = {s.operator for s in runtime()[name].specifier}
    assert operators <= {">=", "!="}, f"{runtime()[name]}: only >= and != belong in the runtime set"


def test_jax_and_jaxlib_exclude_the_same_releases_and_the_docs_name_them() -> None:
    jax, jaxlib = runtime()["jax"].specifier, runtime()["jaxlib"].specifier
    assert jax == jaxlib
    excluded = sorted(Version(s.version) for s in jax if s.operator == "!=")
    assert excluded, "the releases that miscompile (jax-ml/jax#39103) are excluded"
    install = (ROOT / "docs" / "install.md").read_text(encoding="utf-8")
    assert all(f"`{version}`" in install for version in excluded), "docs/install.md lists the releases to avoid"


@pytest.mark.parametrize("name", sorted(runtime()))
def test_the_environment_under_test_is_admitted(name: str) -> None:
    # A suite run on an excluded JAX (or below a lower bound) says so here, beside the
    # regression tests in tests/applicative/test_linalg.py.
    installed = Version(importlib.metadata.version(name))
    assert runtime()[name].specifier.contains(installed, prereleases=True), f"{name} {installed}: {runtime()[name]}"


@pytest.mark.end_to_end
def test_the_docs_check_command_runs_both_checks() -> None:
    """docs/install.md's command for checking an install selects the jit regression tests and every test of
    this file that the README's run holds (a ``-k`` naming only the first deselected all of these): the tests
    pytest collects from this file alone, with the same options."""
    install = (ROOT / "docs" / "install.md").read_text(encoding="utf-8")
    (command,) = [
        line for line in install.splitlines() if line.startswith("python -m pytest") and "jit_regression" in line
    ]

    def collect(*arguments: str) -> list[str]:
        return subprocess.run(
            [sys.executable, "-m", "pytest", "--collect-only", "-q", *arguments],
            cwd=ROOT, capture_output=True, text=True, check=True,
        ).stdout.splitlines()  # fmt: skip

    collected = collect(*shlex.split(command)[3:])
    this_file = "tests/test_dependencies.py::"
    ours = {line for line in collected if line.startswith(this_file)}
    assert ours == {line for line in collect("tests/test_dependencies.py") if line.startswith(this_file)}
    assert any("::test_jit_regression_" in line for line in collected)
