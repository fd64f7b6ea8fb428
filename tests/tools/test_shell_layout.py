"""The shape of the shell analyser package: one registration per program, no import circle."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import guard.analysis.shell
from guard.analysis.shell.context import Ctx
from guard.analysis.shell.registry import PROGRAMS, DuplicateProgram, program, register
from guard.analysis.shell.words import Arg

PACKAGE = Path(guard.analysis.shell.__file__).parent


def _noop(ctx: Ctx, name: str, args: list[Arg], heredoc: str | None) -> None:
    return None


def test_registry_refuses_a_duplicate_program_name() -> None:
    """A second handler for a taken name raises instead of silently replacing the first."""
    assert "cat" in PROGRAMS
    before = PROGRAMS["cat"]
    with pytest.raises(DuplicateProgram, match="'cat' registered twice"):
        program("cat")(_noop)
    assert PROGRAMS["cat"] is before


def test_registry_refuses_a_name_twice_in_one_call_table() -> None:
    table: dict[str, object] = {}
    register(_noop, "x", table=table)  # type: ignore[arg-type]
    with pytest.raises(DuplicateProgram):
        register(_noop, "y", "x", table=table)  # type: ignore[arg-type]
    assert "y" not in table  # nothing registered when any name is taken


def test_the_once_overridden_names_have_one_deliberate_handler() -> None:
    """file, printf, which, type and command used to be registered twice."""
    assert PROGRAMS["file"].__name__ == "_file"
    assert PROGRAMS["printf"].__name__ == "_printf"
    assert PROGRAMS["command"].__name__ == "_command_builtin"
    for name in ("which", "type"):
        assert PROGRAMS[name].__name__ == "_command_builtin", name


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            if node.module == "guard.analysis.shell":
                out.update(f"guard.analysis.shell.{a.name}" for a in node.names)
            elif node.module.startswith("guard.analysis.shell."):
                out.add(node.module)
        elif isinstance(node, ast.Import):
            out.update(a.name for a in node.names if a.name.startswith("guard.analysis.shell."))
    return out


def test_no_import_circle_and_handlers_never_import_the_walker() -> None:
    graph = {f"guard.analysis.shell.{p.stem}": _imports(p)
             for p in PACKAGE.rglob("*.py") if p.stem != "__init__"}
    for module, deps in graph.items():
        if module != "guard.analysis.shell.walker":
            assert "guard.analysis.shell.walker" not in deps, f"{module} imports the walker"

    def visit(node: str, stack: tuple[str, ...]) -> None:
        assert node not in stack, f"import circle: {' -> '.join((*stack, node))}"
        for dep in graph.get(node, ()):
            visit(dep, (*stack, node))

    for module in graph:
        visit(module, ())


def test_no_module_over_800_lines() -> None:
    for p in PACKAGE.rglob("*.py"):
        assert len(p.read_text(encoding="utf-8").splitlines()) <= 800, p
