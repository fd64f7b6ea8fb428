"""Module names say what they hold: no two modules under guard/ share a file name unless
they implement the same interface.

A file name may repeat only for:

- a host's parts, one host's code for one mechanism, each implementing the part's
  interface: its hook adapter (``guard/hosts/<host>/hook.py``), its tool table
  (``tool_table.py``), its importer, transcript reader, install specifics. Which files
  these are comes from the registry (each record's ``parts``, guard/hosts/), not from a
  list here;
- :data:`SAME_INTERFACE`: any other group, with the interface its modules implement.

``__init__.py`` and ``__main__.py`` are Python's names and do not count.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

from guard import hosts

ROOT = Path(__file__).resolve().parent.parent

#: file name -> (the interface every one of its modules implements, those modules).
SAME_INTERFACE: dict[str, tuple[str, tuple[str, ...]]] = {}


def _file_of(host: hosts.Host, part: str) -> str:
    """(codex, ``"trust"``) -> ``"guard/hosts/codex/trust.py"``."""
    return f"guard/hosts/{host.module}/{part}.py"


def per_host_modules() -> dict[str, set[str]]:
    """file name -> the files the registry names for it (each host's parts)."""
    found: dict[str, set[str]] = defaultdict(set)
    for host in hosts.HOSTS:
        for part in host.parts:
            found[f"{part}.py"].add(_file_of(host, part))
    return found


def repeated(root: Path) -> dict[str, list[str]]:
    """file name -> its modules under ``root/guard``, for the names found more than once."""
    seen: dict[str, list[str]] = defaultdict(list)
    for path in sorted((root / "guard").rglob("*.py")):
        if path.name not in ("__init__.py", "__main__.py"):
            seen[path.name].append(path.relative_to(root).as_posix())
    return {name: paths for name, paths in seen.items() if len(paths) > 1}


def unexplained(root: Path) -> list[str]:
    allowed = per_host_modules()
    for name, (_, files) in SAME_INTERFACE.items():
        allowed[name] |= set(files)
    return [
        f"{name}: {', '.join(paths)}"
        for name, paths in sorted(repeated(root).items())
        if any(p not in allowed.get(name, set()) for p in paths)
    ]


def test_no_two_modules_share_a_name_unless_they_implement_one_interface() -> None:
    bad = unexplained(ROOT)
    assert not bad, (
        "module names repeat under guard/; rename one so that its name says what it holds,"
        " or, if they implement one interface, list them in SAME_INTERFACE with it:\n"
        + "\n".join(bad)
    )


def test_per_host_modules_are_in_their_host_s_package() -> None:
    """The registry's parts exist in the host's package, named after the host, which is
    also what tests/test_hosts.py's "own module" rule goes by."""
    for host in hosts.HOSTS:
        assert (ROOT / "guard/hosts" / host.module / "__init__.py").is_file(), host.name
        assert host.module == host.name.replace("-", "_")
        for part in host.parts:
            assert (ROOT / _file_of(host, part)).is_file(), (host.name, part)


def test_the_check_sees_a_planted_repeat(tmp_path: Path) -> None:
    """Not blind: two ``runner.py`` in two folders are caught, and so is a host's part
    name in a folder the registry does not name; the registry's own files are not."""
    dialect = _file_of(hosts.by_name("codex"), "tool_table")
    for rel in ("guard/a/runner.py", "guard/b/runner.py", "guard/b/tool_table.py", dialect,
                "guard/a/__init__.py", "guard/b/__init__.py"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("")
    assert unexplained(tmp_path) == [
        "runner.py: guard/a/runner.py, guard/b/runner.py",
        f"tool_table.py: {', '.join(sorted(['guard/b/tool_table.py', dialect]))}",
    ]


def test_each_listed_group_still_repeats() -> None:
    for name, (interface, files) in SAME_INTERFACE.items():
        assert interface and len(files) > 1, name
        for rel in files:
            assert (ROOT / rel).is_file() and Path(rel).name == name, (name, rel)
