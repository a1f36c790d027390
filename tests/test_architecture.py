"""The file tree reads as the architecture: imports run down the layers, never up or sideways.

applicative knows nothing of funcformer; funcformer's shared operator-learning layer
(``funcformer.learning``) knows no task, and is handed each one as a value; the tasks
(``funcformer.poisson``, ``funcformer.darcy``) never import each other. The tests mirror the packages,
and ``tests/applicative`` likewise knows nothing of funcformer. Read from the source with
``ast``, so an import inside a function counts too, and no module is imported by name.
"""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).parent.parent


def imports(package: str) -> dict[str, set[str]]:
    """Every module of ``package`` (a folder under the root) -> the modules it imports."""
    found = {}
    for path in sorted((ROOT / package).rglob("*.py")):
        names = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                names |= {alias.name for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                names.add(node.module)
        found[str(path.relative_to(ROOT))] = names
    return found


def offending(package: str, forbidden: tuple[str, ...]) -> list[str]:
    return [
        f"{module} imports {name}"
        for module, names in imports(package).items()
        for name in sorted(names)
        if name == "importlib" or any(name == f or name.startswith(f + ".") for f in forbidden)
    ]


@pytest.mark.parametrize(
    ("package", "forbidden"),
    [
        ("applicative", ("funcformer",)),
        ("tests/applicative", ("funcformer", "tests.funcformer")),
        ("funcformer/learning", ("funcformer.poisson", "funcformer.darcy")),
        ("funcformer/poisson", ("funcformer.darcy",)),
        ("funcformer/darcy", ("funcformer.poisson",)),
    ],
)
def test_imports_run_down_the_layers(package: str, forbidden: tuple[str, ...]) -> None:
    assert offending(package, forbidden) == []


def test_the_check_sees_imports() -> None:
    """The scan finds what it forbids: each task imports the shared layer."""
    assert offending("funcformer/poisson", ("funcformer.learning",))
    assert offending("funcformer/darcy", ("funcformer.learning",))
