"""The file tree reads as the architecture: imports run down the layers, never up or sideways, and never
in a circle.

applicative knows nothing of funcformer; within it the structures (``instances``) know nothing of the
linear algebra (``linalg``, its dense formulas ``fast_paths`` and its operand checks ``operands``) nor
of ``nn``, and the linear algebra knows no structure (docs/design.md); the numpy collocation kit
(``instances/collocation.py``) imports no JAX. The learning layer (``applicative.training``: the loop, the
checkpoints, the store, several processes) knows no model, no example and no task, and nothing below it
(the structures, the linear algebra, ``nn``) knows it. funcformer's operator learning
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
    """Every module of ``package`` (a folder under the root, or one file) -> the modules it imports."""
    found = {}
    root = ROOT / package
    for path in [root] if root.is_file() else sorted(root.rglob("*.py")):
        names = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                names |= {alias.name for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                # each name too: ``from applicative import linalg`` imports applicative.linalg
                names |= {node.module} | {f"{node.module}.{alias.name}" for alias in node.names}
        found[str(path.relative_to(ROOT))] = names
    return found


def offending(package: str, forbidden: tuple[str, ...]) -> list[str]:
    return [
        f"{module} imports {name}"
        for module, names in imports(package).items()
        for name in sorted(names)
        if name == "importlib" or any(name == f or name.startswith(f + ".") for f in forbidden)
    ]


LINEAR_ALGEBRA = ("applicative.linalg", "applicative.fast_paths", "applicative.operands")
TRAINING = "applicative.training"
ABOVE_STRUCTURES = ("applicative.nn", "applicative.laws", "applicative.strategies", TRAINING)


@pytest.mark.parametrize(
    ("package", "forbidden"),
    [
        ("applicative", ("funcformer",)),
        ("applicative/protocols", ("applicative.instances", *LINEAR_ALGEBRA, "applicative.nn", TRAINING)),
        ("applicative/instances", (*LINEAR_ALGEBRA, *ABOVE_STRUCTURES)),
        ("applicative/linalg.py", ("applicative.instances", "applicative.nn", TRAINING)),
        ("applicative/nn", (TRAINING, "applicative.examples")),
        ("applicative/training", ("applicative.examples", "applicative.laws", "applicative.strategies")),
        ("applicative/fast_paths.py", ("applicative.instances", "applicative.nn", "applicative.linalg")),
        ("applicative/operands.py", ("applicative.instances", "applicative.nn", "applicative.linalg")),
        ("applicative/instances/collocation.py", ("jax",)),
        ("tests/applicative", ("funcformer", "tests.funcformer")),
        ("funcformer/learning", ("funcformer.poisson", "funcformer.darcy", "funcformer.fno_darcy")),
        ("funcformer/poisson", ("funcformer.darcy", "funcformer.fno_darcy")),
        ("funcformer/darcy", ("funcformer.poisson", "funcformer.fno_darcy")),
        ("funcformer/fno_darcy", ("funcformer.poisson", "funcformer.darcy")),
    ],
)
def test_imports_run_down_the_layers(package: str, forbidden: tuple[str, ...]) -> None:
    assert offending(package, forbidden) == []


def test_nn_sees_no_structure_but_vec_in_its_sequence_helpers() -> None:
    generic = [path for path in sorted((ROOT / "applicative/nn").glob("*.py")) if path.name != "_sequence.py"]
    assert len(generic) >= 8
    for path in generic:
        assert offending(str(path.relative_to(ROOT)), ("applicative.instances",)) == []
    assert offending("applicative/nn/_sequence.py", ("applicative.instances",))  # the check sees it


def test_the_check_sees_imports() -> None:
    """The scan finds what it forbids: each task imports the shared layer."""
    assert offending("funcformer/poisson", ("funcformer.learning",))
    assert offending("funcformer/darcy", ("funcformer.learning",))
    assert offending("funcformer/fno_darcy", ("funcformer.learning",))
    assert offending("funcformer/learning", ("applicative.training",))


def test_no_imports_run_in_a_circle() -> None:
    """No module of applicative or funcformer imports, through others, a module that imports it.
    ``from package import module`` imports that module; ``from package import name``, the package."""
    modules = {}
    for package in ("applicative", "funcformer"):
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = path.relative_to(ROOT).with_suffix("").parts
            modules[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        imported = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                imported |= {alias.name for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                submodules = {f"{node.module}.{alias.name}" for alias in node.names} & modules.keys()
                imported |= submodules or {node.module}
        graph[name] = (imported & modules.keys()) - {name}
    assert _circles(graph) == []


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The import circles of ``graph``: each strongly connected component of more than one module
    (Tarjan's algorithm), sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    circles = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = stack[stack.index(v) :]
            del stack[stack.index(v) :]
            if len(component) > 1:
                circles.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return circles


def test_the_circle_check_sees_circles() -> None:
    assert _circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _circles({"a": {"b"}, "b": set()}) == []


# One learning layer: the training step is written once, in applicative/training/steps.py


TRAINING_STEP = ("value_and_grad", "apply_updates")
"""What a hand-written training step calls: the gradient of a loss and the optimiser's update."""


def _calls(path: Path, names: tuple[str, ...]) -> list[str]:
    """The calls (``f(...)`` or ``module.f(...)``) of ``names`` in the module at ``path``, as "path:line name"."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Call):
            name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
            if name in names:
                found.append(f"{path.relative_to(ROOT)}:{node.lineno} {name}")
    return found


def test_no_training_step_is_written_outside_the_learning_layer() -> None:
    """Every model trains through ``applicative.training.fit``: no module of the library, the Funcformer or its
    examples computes a loss's gradient and applies an update itself. The benches' hand-written twins (the step
    a measured ratio compares against) are the exception, and live in bench/."""
    modules = [p for package in ("applicative", "funcformer") for p in sorted((ROOT / package).rglob("*.py"))]
    outside = [p for p in modules if "training" not in p.relative_to(ROOT).parts[:2]]
    assert [call for path in outside for call in _calls(path, TRAINING_STEP)] == []
    steps = _calls(ROOT / "applicative/training/steps.py", TRAINING_STEP)
    assert [call.split()[-1] for call in steps] == ["value_and_grad", "apply_updates"]  # the check sees the one step


def test_every_command_line_ends_its_process_through_end_process() -> None:
    """A command line's ``__main__`` ends with ``command.end_process`` (its objects left to the system, not swept
    at shutdown): a ``sys.exit`` there would cost a parser's run 10 s after its last line."""
    mains = sorted(p for package in ("applicative", "funcformer") for p in (ROOT / package).rglob("__main__.py"))
    calls = {str(p.relative_to(ROOT)): _calls(p, ("end_process", "exit", "SystemExit")) for p in mains}
    assert len(calls) >= 8  # the examples' five, the Funcformer's three (the package's own demo is not a command)
    wrong = {path: found for path, found in calls.items() if path != "applicative/__main__.py"
             and [call.split()[-1] for call in found] != ["end_process"]}  # fmt: skip
    assert wrong == {}


LIMIT = 450
"""Lines a module may have: one job, read in one sitting."""


def test_every_module_is_short_enough_to_read_in_one_sitting() -> None:
    modules = [p for folder in ("applicative", "funcformer", "bench", "tools") for p in (ROOT / folder).rglob("*.py")]
    assert len(modules) > 100
    long = {str(p.relative_to(ROOT)): n for p in modules if (n := len(p.read_text().splitlines())) > LIMIT}
    assert long == {}
