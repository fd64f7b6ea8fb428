"""The planning package is layered: no module imports one that imports it back."""

from __future__ import annotations

import ast
from pathlib import Path

import guard.planning

PACKAGE = Path(guard.planning.__file__).parent


def _edges() -> dict[str, set[str]]:
    """module -> planning modules it imports anywhere (top level, functions, TYPE_CHECKING)."""
    modules = {p.stem for p in PACKAGE.glob("*.py") if p.stem != "__init__"}
    edges: dict[str, set[str]] = {}
    for name in modules:
        tree = ast.parse((PACKAGE / f"{name}.py").read_text(encoding="utf-8"))
        found: set[str] = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name.startswith("guard.planning."):
                        found.add(alias.name.split(".")[2])
                    elif alias.name == "guard.planning":
                        found.add("__init__")
            elif isinstance(node, ast.ImportFrom) and node.module:
                if node.module.startswith("guard.planning."):
                    found.add(node.module.split(".")[2])
                elif node.module == "guard.planning":
                    for alias in node.names:
                        found.add(alias.name if alias.name in modules else "__init__")
        edges[name] = found - {name}
    return edges


def test_no_planning_module_imports_the_package_init() -> None:
    """`from guard.planning import X` inside the package would run the whole package first."""
    offenders = {m for m, deps in _edges().items() if "__init__" in deps}
    assert not offenders


def test_planning_modules_form_no_import_cycle() -> None:
    edges = _edges()
    state: dict[str, int] = {}
    path: list[str] = []

    def visit(node: str) -> None:
        state[node] = 1
        path.append(node)
        for dep in sorted(edges.get(node, ())):
            if state.get(dep) == 1:
                cycle = [*path[path.index(dep) :], dep]
                raise AssertionError("import cycle: " + " -> ".join(cycle))
            if dep not in state:
                visit(dep)
        path.pop()
        state[node] = 2

    for module in sorted(edges):
        if module not in state:
            visit(module)


def test_vocabulary_is_the_bottom() -> None:
    assert _edges()["_vocabulary"] == set()
