"""The registry of hosts (guard/hosts/): every host list derives from it, and a host is
named in its own package only.

A host is a package ``guard/hosts/<module>/`` (its record in ``__init__.py``, its parts
beside it) listed in ``guard/hosts/__init__.py``'s ``PACKAGES``. Two checks read every
module under ``guard/``:

- :func:`test_host_names_are_spelled_in_the_registry_only`: a string literal equal to a
  host's name (``"claude-code"``, ``"codex"``, ``"gemini"``, ``"cursor"``,
  ``"opencode"``, ``"aider"``). Inside ``guard/hosts/`` the registry may spell any host
  and a host's own package its own name, not another's.
- :func:`test_no_module_outside_the_hosts_names_one_by_its_package`: outside
  ``guard/hosts/``, naming a host by anything but a literal: importing a host's package
  or one of its parts (``from guard.hosts import codex``, ``guard.hosts.codex.trust``),
  or a host's constant (``hosts.CODEX.name``, ``x.CLAUDE_CODE``). Such code compares
  against one host and belongs in that host's package, as a method or attribute of
  its record or a part (guard/hosts/interface.py).

What the literal check does not count, and why:

- docstrings: they are prose and doctests for a reader, not keys a list selects by;
- a longer string that mentions a host: a path such as ``"/.codex/"`` (a fact of
  the host's file layout), or an example command line in a ``--help`` text
  (``guard install codex --user``, ``guard run -- aider``). Those examples are what
  the user types, written out so they can be copied; tests/docs runs every one of
  them against the CLI, so a renamed host fails there and not silently. A help
  text that *lists* the hosts builds the list from the registry (``guard install
  --help``, ``guard replay --help``, ``guard check --help``, ``guard effects --help``);
- :data:`NOT_HOST_NAMES` below: a literal that happens to equal a host name but is
  a value of another kind, with the reason for each.
"""

from __future__ import annotations

import ast
import importlib
import re
import subprocess
from pathlib import Path

import pytest

from guard import hosts

ROOT = Path(__file__).resolve().parent.parent
GUARD = ROOT / "guard"

#: (file under guard/, literal): why that literal is not a host name.
NOT_HOST_NAMES = {
    ("hosts/cursor/__init__.py", "claude-code"): (
        "Cursor's shell and read calls are in Claude Code's tool-call dialect: the name of"
        " that dialect, a value of the record's dialect field, not the host it belongs to"
    ),
}


def _owner(path: Path) -> hosts.Host | None:
    """The host whose package ``path`` is in, if any (see the module docstring)."""
    parts = path.parts
    for i in range(len(parts) - 2):
        if parts[i:i + 2] == ("guard", "hosts"):
            return next((h for h in hosts.HOSTS if h.module == parts[i + 2]), None)
    return None


def _docstrings(tree: ast.AST) -> set[int]:
    found: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            first = node.body[0] if node.body else None
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and \
                    isinstance(first.value.value, str):
                found.add(id(first.value))
    return found


def _host_literals(path: Path) -> list[tuple[int, str]]:
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    docs = _docstrings(tree)
    names = set(hosts.NAMES)
    return sorted(
        (node.lineno, node.value) for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str)
        and node.value in names and id(node) not in docs
    )


def test_host_names_are_spelled_in_the_registry_only() -> None:
    found: list[str] = []
    for path in sorted(GUARD.rglob("*.py")):
        rel = path.relative_to(GUARD).as_posix()
        if rel == "hosts/__init__.py":  # the registry
            continue
        owner = _owner(path)
        for line, literal in _host_literals(path):
            if owner is not None and literal == owner.name:
                continue
            if (rel, literal) in NOT_HOST_NAMES:
                continue
            found.append(f"guard/{rel}:{line}: {literal!r}")
    assert not found, (
        "host names spelled outside the registry and the host's own package; make it a"
        " method or attribute of the Host record (guard/hosts/interface.py):\n"
        + "\n".join(found)
    )


def test_the_check_sees_a_planted_host_name(tmp_path: Path) -> None:
    """The check is not blind: a module comparing with a literal host name is caught,
    and the same name in a docstring is not."""
    planted = tmp_path / "planted.py"
    planted.write_text('"""Reads gemini\'s settings."""\n'
                       'def f(host: str) -> bool:\n'
                       '    """For "gemini"."""\n'
                       '    return host == "gemini"\n', encoding="utf-8")
    assert _host_literals(planted) == [(4, "gemini")]
    assert _owner(planted) is None
    assert _owner(GUARD / "hosts/codex/trust.py") is hosts.by_name("codex")
    assert _owner(GUARD / "setup/codex_trust.py") is None


def _host_references(path: Path) -> list[tuple[int, str]]:
    """Where ``path`` names a host by its package or a constant (see the docstring)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    modules = {h.module for h in hosts.HOSTS}
    constants = {m.upper() for m in modules}
    packages = {h.package for h in hosts.HOSTS}
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr in constants:
            found.append((node.lineno, f".{node.attr}"))
        elif isinstance(node, ast.Import):
            found += [(node.lineno, f"import {a.name}") for a in node.names
                      if any(a.name == p or a.name.startswith(p + ".") for p in packages)]
        elif isinstance(node, ast.ImportFrom) and node.module:
            if any(node.module == p or node.module.startswith(p + ".") for p in packages):
                found.append((node.lineno, f"from {node.module}"))
            elif node.module == "guard.hosts":
                found += [(node.lineno, f"from guard.hosts import {a.name}")
                          for a in node.names if a.name in modules | constants]
    return sorted(found)


def test_no_module_outside_the_hosts_names_one_by_its_package() -> None:
    found: list[str] = []
    for path in sorted(GUARD.rglob("*.py")):
        rel = path.relative_to(GUARD).as_posix()
        if rel.startswith("hosts/"):
            continue
        found += [f"guard/{rel}:{line}: {what}" for line, what in _host_references(path)]
    assert not found, (
        "modules outside guard/hosts/ that name one host; make it a method or attribute of"
        " the Host record (guard/hosts/interface.py) or a part in the host's package:\n"
        + "\n".join(found)
    )


def test_the_reference_check_sees_planted_comparisons(tmp_path: Path) -> None:
    """Not blind: the ways a module could single out one host without a literal."""
    planted = tmp_path / "planted.py"
    planted.write_text("from guard import hosts\n"
                       "from guard.hosts import codex\n"
                       "from guard.hosts.gemini.hook import workspace_trust\n"
                       "import guard.hosts.cursor\n"
                       "def f(host: str) -> bool:\n"
                       "    return host == hosts.CLAUDE_CODE.name or host == codex.HOST.name\n",
                       encoding="utf-8")
    assert _host_references(planted) == [
        (2, "from guard.hosts import codex"), (3, "from guard.hosts.gemini.hook"),
        (4, "import guard.hosts.cursor"), (6, ".CLAUDE_CODE"),
    ]


def test_each_exception_is_still_needed() -> None:
    for rel, literal in NOT_HOST_NAMES:
        assert literal in [v for _, v in _host_literals(GUARD / rel)], (rel, literal)


def test_names_are_unique_and_lookups_agree() -> None:
    assert len(set(hosts.NAMES)) == len(hosts.HOSTS)
    for host in hosts.HOSTS:
        assert hosts.by_name(host.name) is host
        assert hosts.get(host.name) is host
    assert hosts.get("no-such-host") is None
    with pytest.raises(KeyError):
        hosts.by_name("no-such-host")


def test_every_host_list_derives_from_the_registry() -> None:
    from guard import analysis, hooks
    from guard.fleet import hostinfo
    from guard.planning import host as planning
    from guard.replay import readers

    assert tuple(h.name for h in hosts.HOSTS if h.hooked) == hooks.HOSTS
    assert tuple(h.name for h in hosts.HOSTS if h.planning) == planning.HOSTS
    assert tuple(planning.CONTEXT_EVENTS) == planning.HOSTS
    assert tuple(h.name for h in hosts.HOSTS if h.importable) == hosts.IMPORTABLE
    assert all(callable(hosts.by_name(n).importer()) for n in hosts.IMPORTABLE)
    assert tuple(readers.READERS)[:-1] == tuple(h.name for h in hosts.HOSTS if h.replayable)
    assert tuple(readers.READERS)[-1] == readers.GuardAudit.host
    own = tuple(dict.fromkeys(h.dialect for h in hosts.HOSTS if h.owns_dialect))
    assert analysis.DIALECTS[:-1] == own and analysis.DIALECTS[-1] == "mcp"
    assert set(hostinfo.PACKAGES) == {h.name for h in hosts.HOSTS if h.packages}
    from guard.hooks import missed
    from guard.planning import todos

    assert {h.name: h.changing_tools for h in hosts.HOSTS if h.changing_tools} == missed.CHANGING
    for host in hosts.HOSTS:
        if host.checklist:
            assert todos.is_checklist_tool(host.name, host.checklist.tool)
    assert len(todos.CHECKLIST_TOOLS) == sum(1 for h in hosts.HOSTS if h.checklist)


def test_each_reference_names_what_the_registry_says() -> None:
    """Every part a record lists loads, and says back the host it belongs to; a part it
    does not list is not there."""
    from guard import analysis, hooks
    from guard.hosts.interface import PARTS
    from guard.replay import readers

    for host in hosts.HOSTS:
        folder = GUARD / "hosts" / host.module
        for part in PARTS:
            assert (folder / f"{part}.py").is_file() == (part in host.parts), (host.name, part)
        if host.hooked:
            adapter = hooks.adapter_for(host.name)
            assert (adapter.name, adapter.dialect, adapter.title) == \
                (host.name, host.dialect, host.title)
            assert host.version in adapter.follows
        if host.dialect:
            assert host.dialect in analysis.DIALECTS
        if host.owns_dialect:
            assert host.dialect == host.part("tool_table").NAME == host.name
            assert hosts.by_dialect(host.dialect) is host
        if host.importable:
            assert callable(host.importer())
        if host.replayable:
            reader = readers.READERS[host.name]
            assert reader is host.reader() and reader.host == host.name
        if host.planning:
            module = importlib.import_module("guard.planning.host")
            assert host.name in module.HOSTS


def test_protected_paths_are_in_the_builtin_protected_list() -> None:
    """decide.py's built-in protected list holds every host's hook settings."""
    from guard.decide import PROTECTED_PATTERNS

    for host in hosts.HOSTS:
        for pattern in host.protected:
            assert pattern in PROTECTED_PATTERNS, (host.name, pattern)
    hooked = [h for h in hosts.HOSTS if h.hooked]
    assert all(h.protected for h in hooked)


def _concrete(pattern: str) -> str:
    """A path the protected ``pattern`` names: ``{home}/.codex/`` -> ``~/.codex/hooks.json``."""
    path = pattern.replace("{home}", "~").lstrip("/").replace("*", ".local")
    return path + "hooks.json" if path.endswith("/") else path


@pytest.mark.parametrize("host", [h for h in hosts.HOSTS if h.protected], ids=lambda h: h.name)
def test_every_hosts_hook_settings_are_denied_to_a_build_agent(
    host: hosts.Host, tmp_path: Path
) -> None:
    """Attack: an agent in build mode (default allow) rewrites a host's hook settings to
    take guard out of the host's hooks. The evaluator denies each path the registry names,
    so a host added to the registry is protected without an edit to the evaluator."""
    from guard import Action, Effect, Guard

    repo = tmp_path / "repo"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    g = Guard.load(worktree=repo)
    for pattern in host.protected:
        path = _concrete(pattern)
        for effect in (Effect.write(path), Effect.delete(path)):
            d = g.decide("build", [effect])
            assert d.action is Action.DENY, (host.name, pattern, path, d)
            assert "protected" in d.reason, d


def test_scripts_test_sh_installs_the_pinned_versions() -> None:
    """scripts/test.sh is shell and keeps its own copy of the pins: they must agree."""
    text = (ROOT / "scripts" / "test.sh").read_text(encoding="utf-8")
    pins = dict(re.findall(r"^npm_host \S+ (\S+) (\S+) ", text, re.M))
    pins = {package: version for version, package in pins.items()}
    for host in hosts.HOSTS:
        if host.packages and host is not hosts.by_name("claude-code"):
            assert pins.get(host.packages[0]) == host.version, host.name
    assert f"CLAUDE_CODE_VERSION={hosts.by_name('claude-code').version}\n" in text
    assert f"AIDER_VERSION={hosts.by_name('aider').version}\n" in text
