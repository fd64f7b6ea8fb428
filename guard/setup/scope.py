"""Which settings file ``guard install`` writes: shared, local or user-wide.

A team commits its project settings (``.claude/settings.json``, ``.codex/hooks.json``…);
guard's hook command names this machine's interpreter, which a teammate may not have.
So:

* ``local`` writes a file only this user has: the host's own per-user file in the
  project (Claude Code's ``settings.local.json``), else the project file kept out of
  git (a line in the repository's ``info/exclude``, which uninstall removes again), or,
  when the team tracks that project file, the user-wide file. Gemini CLI has no
  per-user project file: its ``local`` is the user-wide file.
* With no scope given, ``local`` is chosen where the shared settings file is tracked by
  git, else the shared file with a one-line warning (the default for Gemini CLI stays
  the user-wide file: it skips project hooks in an untrusted workspace).
"""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from guard.hooks.adapter import HostAdapter, Scope
from guard.hooks.settings_file import SettingsError
from guard.setup import host_settings

GIT_TIMEOUT = 30


@dataclass(frozen=True, slots=True)
class Choice:
    scope: Scope
    path: Path
    #: One line to print before the install's report (a shared file in a repository).
    warning: str | None = None
    #: What the choice did besides (a file kept out of git), one sentence each.
    notes: list[str] = field(default_factory=list)


def _git(project: Path, *args: str) -> subprocess.CompletedProcess[str] | None:
    try:
        return subprocess.run(
            ["git", "-C", str(project), *args], capture_output=True, text=True,
            timeout=GIT_TIMEOUT, check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None


def in_git(project: Path) -> bool:
    proc = _git(project, "rev-parse", "--is-inside-work-tree")
    return proc is not None and proc.returncode == 0 and proc.stdout.strip() == "true"


def tracked(path: Path, project: Path) -> bool:
    """Whether git tracks ``path`` in the repository at ``project``."""
    proc = _git(project, "ls-files", "--error-unmatch", "--", str(path))
    return proc is not None and proc.returncode == 0


def ignored(path: Path, project: Path) -> bool:
    proc = _git(project, "check-ignore", "-q", "--", str(path))
    return proc is not None and proc.returncode == 0


def exclude_file(project: Path) -> Path | None:
    """The repository's ``info/exclude`` (per clone, never committed)."""
    proc = _git(project, "rev-parse", "--git-path", "info/exclude")
    if proc is None or proc.returncode != 0 or not proc.stdout.strip():
        return None
    out = Path(proc.stdout.strip())
    return out if out.is_absolute() else project / out


def _rel(path: Path, project: Path) -> str:
    try:
        return path.relative_to(project).as_posix()
    except ValueError:
        return str(path)


def choose(adapter: HostAdapter, requested: Scope | None, project: Path, home: Path) -> Choice:
    """The scope and file an install writes; raises SettingsError for a local file git tracks."""
    shared = adapter.settings_path("project", project, home)
    user = adapter.settings_path("user", project, home)
    git = in_git(project)
    if requested is None:
        if host_settings.of(adapter.name).default_scope == "user":
            return Choice("user", user)
        requested = "local" if git and tracked(shared, project) else "project"
        if requested == "project" and git:
            return Choice("project", shared, _shared_warning(adapter, shared, project))
    if requested == "user":
        return Choice("user", user)
    if requested == "project":
        warning = _shared_warning(adapter, shared, project) if git else None
        return Choice("project", shared, warning)
    local = adapter.settings_path("local", project, home)
    if local == user:
        return Choice("user", user, notes=[
            f"{adapter.title} has no per-user file in a project: --local writes {user}"])
    if git and tracked(local, project):
        if adapter.local_file:
            raise SettingsError(
                f"{local} is tracked by git, so it is not local to you; untrack it"
                f" (git rm --cached {_rel(local, project)}) or install with --user;"
                " guard left it untouched")
        return Choice("user", user, notes=[
            f"{_rel(local, project)} is tracked by git (your team's file), so --local"
            f" writes your user-wide file {user}"])
    return Choice("local", local)


def _shared_warning(adapter: HostAdapter, shared: Path, project: Path) -> str:
    return (
        f"warning: {_rel(shared, project)} is the file teams commit; its hook names this"
        f" machine's guard (a teammate without it is refused every call, with a message"
        f" naming guard); `guard install {adapter.name} --local` keeps it to you"
    )


def keep_out_of_git(path: Path, project: Path) -> tuple[Path, str] | None:
    """Make git ignore a local settings file: (exclude file, the line added), or None when
    git already ignores it (or this is no git repository)."""
    if not in_git(project) or ignored(path, project):
        return None
    exclude = exclude_file(project)
    if exclude is None:
        return None
    line = "/" + _rel(path, project)
    try:
        text = exclude.read_text(encoding="utf-8")
    except FileNotFoundError:
        text = ""
    except (OSError, UnicodeDecodeError) as exc:
        raise SettingsError(f"{exclude}: cannot read: {exc}; guard left it untouched") from None
    if line in text.splitlines():
        return None
    exclude.parent.mkdir(parents=True, exist_ok=True)
    prefix = "" if not text or text.endswith("\n") else "\n"
    with open(exclude, "a", encoding="utf-8") as fh:
        fh.write(f"{prefix}{line}\n")
    return exclude, line


def drop_exclude(exclude: str, line: str) -> str | None:
    """Remove the line ``keep_out_of_git`` added; what was done, or None."""
    try:
        text = Path(exclude).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    lines = text.splitlines(keepends=True)
    kept = [x for x in lines if x.rstrip("\n") != line]
    if kept == lines:
        return None
    Path(exclude).write_text("".join(kept), encoding="utf-8")
    return f"removed {line} from {exclude} (guard had added it to keep the file out of git)"


def missing_dirs(path: Path) -> list[str]:
    """The folders above ``path`` that do not exist yet (deepest first): what an install
    creates, and what uninstall removes again when they are empty."""
    out: list[str] = []
    parent = path.parent
    while not parent.exists() and parent != parent.parent:
        out.append(str(parent))
        parent = parent.parent
    return out


def remove_dirs(dirs: list[str]) -> list[str]:
    """Remove the folders guard created, deepest first, when empty; say what was left."""
    notes: list[str] = []
    left: list[str] = []
    for d in sorted(dirs, key=lambda x: -x.count(os.sep)):
        try:
            os.rmdir(d)
            notes.append(f"removed {d}/: guard had created it and it is empty")
        except FileNotFoundError:
            continue
        except OSError:
            if any(x.startswith(d + os.sep) for x in left):
                continue  # said for the folder inside it
            left.append(d)
            try:
                left = sorted(os.listdir(d))
            except OSError:
                continue
            shown = ", ".join(left[:3]) + (", ..." if len(left) > 3 else "")
            notes.append(f"left {d}/: guard created it, but it now holds {shown}")
    return notes
