"""What the prose names exists: every module, function and file a docstring, a comment or
a docs page names, and every ``guard`` command it shows in backquotes.

Read statically (nothing of guard is imported but the command tree), from every
``guard/**.py`` docstring and comment, README.md, SECURITY.md and ``docs/**.md``:

- a dotted name ``guard.a.b.c`` names a module of guard and then attributes along
  top-level and class-level definitions (functions, classes, assignments, imports)
  of that module; a name that is a string literal in guard's code (a rule id such
  as ``guard.plan`` or ``guard.hook_missed``) is an identifier, not a path;
- a path ``guard/…``, ``tests/…``, ``docs/…``, ``benchmarks/…``, ``scripts/…``,
  ``policies/…`` or ``examples/…`` exists (a ``<placeholder>`` or a glob stands for
  the folder before it), ``.../guard/…`` (an installed copy) included;
- in a docstring, a Sphinx role's target (``:func:`name```, ``:meth:`Class.name```,
  ``:mod:`.sibling```): a relative module resolves against the docstring's package, a
  bare name is defined in the docstring's module (at any level, imports included) or in
  a module beside it;
- ```guard COMMAND [SUBCOMMAND]``` in backquotes is a command of ``guard --help``
  (and a subcommand of that group).

:data:`EXAMPLES` lists names that stand for something made up on purpose, with why.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
GUARD = ROOT / "guard"
DOTTED = re.compile(r"(?<![\w.-])(guard(?:\.[A-Za-z_][\w-]*)+)")
PATHS = re.compile(
    r"(?:(?<=\.\.\./)|(?<=…/)|(?<![\w./-]))"
    r"((?:guard|tests|benchmarks|docs|scripts|policies|examples)/[\w./<>*-]*[\w*>/])"
)
ROLE = re.compile(r":(mod|func|class|meth|data|attr|exc):`~?([\w.]+)`")
COMMAND = re.compile(r"`guard ([a-z][\w-]*)(?: ([a-z][\w-]*))?")

#: (where, name): a name that stands for something made up on purpose, and why.
EXAMPLES = {
    ("docs/hosts.md", "guard/hosts/acme_agent"): "the made-up host docs/hosts.md adds",
    ("docs/hosts.md", "guard.hosts.acme_agent"): "the made-up host docs/hosts.md adds",
    ("docs/rules/GL104.md", "docs/api/*.md"): "a pattern in an example policy",
    ("README.md", "tests/e2e/test_"): "the prefix of the end-to-end tests' file names",
    ("docs/matching.md", "docs/keep.md"): "a path in an example of gitignore's rules",
    ("docs/mcp.md", "guard refused"): "the text of the MCP proxy's refusal, not a command",
    ("guard/hooks/adapter.py", "guard/integrations/"): (
        "the folder's name before the rename, which hook commands installed then still name"
    ),
}


def texts() -> Iterator[tuple[str, str]]:
    """(where, text) of every docstring, comment and docs page."""
    for path in sorted(GUARD.rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        source = path.read_text(encoding="utf-8")
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef,
                                 ast.AsyncFunctionDef)):
                doc = ast.get_docstring(node, clean=False)
                if doc:
                    yield f"{rel}:{getattr(node, 'lineno', 1)}", doc
        for n, line in enumerate(source.splitlines(), 1):
            if "#" in line and line.lstrip().startswith("#"):
                yield f"{rel}:{n}", line
    pages = [ROOT / "README.md", ROOT / "SECURITY.md", *sorted((ROOT / "docs").rglob("*.md"))]
    for page in pages:
        yield page.relative_to(ROOT).as_posix(), page.read_text(encoding="utf-8")


@cache
def literals() -> frozenset[str]:
    """Every string literal of guard's code that starts with ``guard.``."""
    found: set[str] = set()
    for path in GUARD.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                found.update(re.findall(r"guard\.[\w.-]+", node.value))
    return frozenset(found)


def _definitions(body: list[ast.stmt]) -> dict[str, ast.AST]:
    names: dict[str, ast.AST] = {}
    for stmt in body:
        for node in ast.walk(stmt) if isinstance(stmt, (ast.If, ast.Try)) else [stmt]:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names[node.name] = node
            elif isinstance(node, ast.Assign):
                names.update({t.id: node for t in node.targets if isinstance(t, ast.Name)})
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                names[node.target.id] = node
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                names.update({(a.asname or a.name).split(".")[0]: node for a in node.names})
    return names


def _module(parts: list[str]) -> Path | None:
    base = ROOT.joinpath(*parts)
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def dotted_exists(name: str) -> bool:
    parts = name.split(".")
    for i in range(len(parts), 0, -1):
        module = _module(parts[:i])
        if module is None:
            continue
        body = ast.parse(module.read_text(encoding="utf-8")).body
        for attribute in parts[i:]:
            node = _definitions(body).get(attribute)
            if node is None:
                return False
            if not isinstance(node, ast.ClassDef):
                return True  # an attribute of a value: not followed further
            body = node.body
        return True
    return False


def path_exists(name: str) -> bool:
    cut = min((name.index(c) for c in "<*" if c in name), default=None)
    if cut is not None:
        return (ROOT / name[:cut].rsplit("/", 1)[0]).is_dir()
    return (ROOT / name).exists()


@cache
def commands() -> dict[str, set[str] | None]:
    """``guard``'s commands: a group's subcommands, None for a plain command."""
    import typer

    from guard.cli._app import app

    root = typer.main.get_command(app)
    groups: dict[str, Any] = getattr(root, "commands", {})
    assert groups, root
    return {name: set(command.commands) if hasattr(command, "commands") else None
            for name, command in groups.items()}


@cache
def _defined_in(rel: str) -> frozenset[str]:
    """Every name a module defines, at any level (functions, classes, assignments,
    attributes set on ``self``, imports)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse((ROOT / rel).read_text(encoding="utf-8"))):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            names.add(node.attr)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
    return frozenset(names)


def _role_wrong(rel: str, role: str, target: str) -> bool:
    """Whether a role's target in a docstring of ``rel`` (guard/...py) names nothing."""
    if target.startswith("guard."):
        return False  # the dotted check has it
    if target.startswith("."):
        package = Path(rel).with_suffix("").parts[:-1]  # a module's, or __init__'s, folder
        level = len(target) - len(target.lstrip("."))
        base = list(package[: len(package) - level + 1])
        name = ".".join([*base, *target.lstrip(".").split(".")])
        return not dotted_exists(name)
    if role == "mod":
        return False  # another library's module (unicodedata, typer, ...)
    first = target.split(".")[0]
    if first in _defined_in(rel):
        return False
    folder = (ROOT / rel).parent  # a sibling module, or a name one of them defines
    sibling = folder / f"{first}.py"
    if sibling.is_file():
        package = sibling.relative_to(ROOT).with_suffix("").as_posix().replace("/", ".")
        return not dotted_exists(".".join([package, *target.split(".")[1:]]))
    return not any(first in _defined_in(p.relative_to(ROOT).as_posix())
                   for p in folder.glob("*.py"))


def wrong(where: str, text: str) -> list[str]:
    page = where.split(":")[0]
    bad: list[str] = []
    if page.endswith(".py"):
        for role, target in ROLE.findall(text):
            if _role_wrong(page, role, target):
                bad.append(f"{where}: :{role}:`{target}` (not defined there)")
    for name in {m.rstrip(".") for m in DOTTED.findall(text)}:
        if name not in literals() and not dotted_exists(name) and \
                not any(w == page and name.startswith(e) for w, e in EXAMPLES):
            bad.append(f"{where}: {name} (no such module or attribute)")
    for name in {m.rstrip(".") for m in PATHS.findall(text)}:
        if not path_exists(name) and not any(w == page and name.startswith(e)
                                             for w, e in EXAMPLES):
            bad.append(f"{where}: {name} (no such file)")
    for command, sub in COMMAND.findall(text):
        known = commands()
        if (page, f"guard {command}") in EXAMPLES:
            continue
        if command not in known:
            bad.append(f"{where}: guard {command} (no such command)")
        elif sub and known[command] is not None and sub not in (known[command] or set()):
            bad.append(f"{where}: guard {command} {sub} (no such subcommand)")
    return bad


def test_docstrings_comments_and_docs_name_what_exists() -> None:
    bad = sorted({b for where, text in texts() for b in wrong(where, text)})
    assert not bad, "prose names what does not exist:\n" + "\n".join(bad)


def test_the_check_sees_planted_wrong_names() -> None:
    """Not blind: a module, a function, a file and a command that do not exist."""
    text = ("See guard.hooks.front_door.decide and guard.hooks.front_door.no_such,"
            " guard/integrations/_client.py, guard/hooks/_client.py, `guard install"
            " codex`, `guard plan nosuch` and `guard nosuch`; rule guard.plan-dir.")
    assert sorted(wrong("x.md", text)) == [
        "x.md: guard nosuch (no such command)",
        "x.md: guard plan nosuch (no such subcommand)",
        "x.md: guard.hooks.front_door.no_such (no such module or attribute)",
        "x.md: guard/integrations/_client.py (no such file)",
    ]


def test_each_example_is_still_named() -> None:
    every: dict[str, str] = {}
    for where, text in texts():
        page = where.split(":")[0]
        every[page] = every.get(page, "") + "\n" + text
    for page, name in EXAMPLES:
        assert name in every.get(page, ""), (page, name)
