"""guard's import map has no cycle, and an import inside a function says why it is there.

The map is read with :mod:`ast` from every ``guard/**.py`` file, without importing
anything, so it sees what a run would import, in any order:

- Every ``import`` statement counts, the ones inside functions too: a cycle that only
  closes at call time is still a cycle (two modules that cannot be understood or moved
  apart), it is just hidden from the interpreter until the call.
- Imports under ``if TYPE_CHECKING:`` count too. They never run, but a module that
  names another's class in its annotations depends on it all the same (the type
  checker, a reader and a tool such as import-linter or pydeps follow that edge): two
  modules that annotate with each other's types are one unit, whatever the interpreter
  sees. A helper that needs a few members of a higher object describes them as a
  ``Protocol`` of its own layer instead (e.g. :class:`guard.monitor.view.MonitorView`).
- ``from pkg import name`` is an edge to ``pkg.name`` when that is a module of guard,
  otherwise to ``pkg``; relative imports are resolved against the importing module.
- The implicit import of parent packages is not counted: importing ``guard.a.b`` runs
  ``guard/a/__init__.py`` first, but Python always runs a parent before its children, so
  that order cannot fail on its own; a module that needs a *name* from its parent
  package imports it explicitly (``from guard.a import x``), and that explicit edge is
  counted. Counting the implicit one too would join every package whose ``__init__``
  gathers its submodules' names with all of those submodules, which says nothing about
  how the modules depend on each other.

An import inside a function is allowed only where it buys start-up speed on the hook
and ``guard run`` paths, and such a module says so in one line near its top, before
its first function or class: a comment beginning ``# Lazy imports:``.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LAZY_MARK = "# Lazy imports:"
#: The ``if`` tests whose body never runs: not counted as lazy imports (they are not
#: run inside a function), but counted in the import map like any other import.
TYPE_CHECKING_TESTS = ("TYPE_CHECKING", "typing.TYPE_CHECKING")


@dataclass(frozen=True)
class Edge:
    source: str
    target: str
    where: str  # path:line of the import statement
    in_function: bool


def _module_names(root: Path) -> dict[str, Path]:
    names: dict[str, Path] = {}
    for path in sorted((root / "guard").rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        names[".".join(parts)] = path
    return names


def _type_checking_nodes(tree: ast.AST) -> set[int]:
    skipped: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and ast.unparse(node.test) in TYPE_CHECKING_TESTS:
            for stmt in node.body:
                skipped.update(id(n) for n in ast.walk(stmt))
    return skipped


def _function_nodes(tree: ast.AST) -> set[int]:
    inside: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            for child in ast.iter_child_nodes(node):
                inside.update(id(n) for n in ast.walk(child))
    return inside


def _imports(module: str, path: Path, names: dict[str, Path]) -> Iterator[Edge]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    inside = _function_nodes(tree)
    where = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path
    for node in ast.walk(tree):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base_parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(base_parts + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            targets = [
                f"{base}.{alias.name}" if f"{base}.{alias.name}" in names else base
                for alias in node.names
            ]
        for target in targets:
            if target in names and target != module:
                yield Edge(module, target, f"{where}:{node.lineno}", id(node) in inside)


def import_map(root: Path) -> tuple[dict[str, Path], dict[str, list[Edge]]]:
    """guard's modules and, for each, its import edges to other guard modules."""
    names = _module_names(root)
    return names, {m: list(_imports(m, p, names)) for m, p in names.items()}


def cycles(edges: dict[str, list[Edge]]) -> list[list[str]]:
    """The strongly connected sets of more than one module (Tarjan, without recursion)."""
    graph = {m: sorted({e.target for e in out}) for m, out in edges.items()}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for start in graph:
        if start in index:
            continue
        work: list[tuple[str, int]] = [(start, 0)]
        while work:
            node, i = work.pop()
            if i == 0:
                index[node] = low[node] = counter
                counter += 1
                stack.append(node)
                on_stack.add(node)
            if i < len(graph[node]):
                work.append((node, i + 1))
                nxt = graph[node][i]
                if nxt not in index:
                    work.append((nxt, 0))
                elif nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
                continue
            if low[node] == index[node]:
                group: list[str] = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    group.append(member)
                    if member == node:
                        break
                if len(group) > 1:
                    found.append(sorted(group))
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
    return sorted(found)


def describe(group: list[str], edges: dict[str, list[Edge]]) -> str:
    members = set(group)
    lines = [f"cycle of {len(group)} modules: {', '.join(group)}"]
    for module in group:
        for e in edges[module]:
            if e.target in members:
                how = " (inside a function)" if e.in_function else ""
                lines.append(f"    {e.source} -> {e.target}  at {e.where}{how}")
    return "\n".join(lines)


def lazy_offenders(root: Path) -> list[str]:
    """Modules with an import inside a function and no ``# Lazy imports:`` line at the top."""
    names = _module_names(root)
    bad: list[str] = []
    for path in names.values():
        text = path.read_text(encoding="utf-8")
        tree = ast.parse(text)
        skipped = _type_checking_nodes(tree)
        inside = _function_nodes(tree)
        lazy = [
            n.lineno
            for n in ast.walk(tree)
            if isinstance(n, (ast.Import, ast.ImportFrom)) and id(n) in inside
            and id(n) not in skipped
        ]
        if not lazy:
            continue
        first_def = min(
            (n.lineno for n in tree.body
             if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))),
            default=len(text.splitlines()) + 1,
        )
        marked = any(
            line.startswith(LAZY_MARK) for line in text.splitlines()[: first_def - 1]
        )
        if not marked:
            where = path.relative_to(root)
            bad.append(f"{where}: imports inside functions at lines "
                       f"{', '.join(map(str, sorted(lazy)))}")
    return bad


def test_guard_s_import_map_has_no_cycle_counting_every_import_statement() -> None:
    _, edges = import_map(ROOT)
    found = cycles(edges)
    assert not found, "import cycles in guard:\n" + "\n".join(describe(g, edges) for g in found)


def test_an_import_inside_a_function_is_declared_at_the_module_s_top() -> None:
    bad = lazy_offenders(ROOT)
    assert not bad, (
        "an import inside a function is allowed only for start-up speed on the hook and"
        f" `guard run` paths, said in one line `{LAZY_MARK} ...` before the first function"
        " or class; move these to the top instead, or say why:\n  " + "\n  ".join(bad)
    )


def _tree(tmp_path: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return tmp_path


def test_the_scan_finds_cycles_closed_inside_a_function_or_under_type_checking(
    tmp_path: Path,
) -> None:
    """The scanner itself: a cycle hidden in a function is found (the hidden-cycle case
    this test exists for), and so are one closed in an ``if TYPE_CHECKING or __package__:``
    branch, which runs on a package import, and one that only ``if TYPE_CHECKING:``
    closes (an annotation is a dependency too)."""
    root = _tree(tmp_path, {
        "guard/__init__.py": "",
        "guard/a.py": "from guard import b\n",
        "guard/b.py": "def f():\n    from . import a\n    return a\n",
        "guard/c.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                      "    from guard.d import X\n",
        "guard/d.py": "import guard.c\n",
        "guard/e.py": "TYPE_CHECKING = False\nif TYPE_CHECKING or __package__:\n"
                      "    from guard.f import Z\n",
        "guard/f.py": "import guard.e\n",
        "guard/p/__init__.py": "from guard.p.q import Y\n",
        "guard/p/q.py": "Y = 1\n",
    })  # fmt: skip
    _, edges = import_map(root)
    assert cycles(edges) == [
        ["guard.a", "guard.b"], ["guard.c", "guard.d"], ["guard.e", "guard.f"],
    ]
    hinted = [e for e in edges["guard.c"] if e.target == "guard.d"]
    assert hinted and not hinted[0].in_function
    hidden = [e for e in edges["guard.b"] if e.target == "guard.a"]
    assert hidden and hidden[0].in_function
    # guard.p.q's implicit import of guard.p (its parent) is not an edge
    assert [e.target for e in edges["guard.p.q"]] == []
    assert lazy_offenders(root) == ["guard/b.py: imports inside functions at lines 2"]
    (root / "guard/b.py").write_text(
        "# Lazy imports: guard.a on first call (start-up speed).\n"
        "def f():\n    from . import a\n    return a\n"
    )
    assert lazy_offenders(root) == []
