"""Wire guard into a host's settings file, and take it out again.

* Idempotent: installing twice leaves one entry; an entry of ours with an
  old command (a moved venv) is replaced, not duplicated.
* Keeps every other key and every other hook, in order.
* Atomic with a backup: the old file is copied to ``<file>.guard-backup``
  first, the new one is written to a temporary file in the same directory,
  flushed, and renamed over the old one. A file guard cannot parse is never
  touched; the error names it, the place, and the fix.
* Uninstall puts back what install found: a file guard created goes (no ``{}``
  left, no backup), a file guard found gets its very bytes back from the backup
  when nothing else changed since; otherwise only guard's entries are removed.
"""

from __future__ import annotations

import json
import os
import shlex
import sys
from pathlib import Path
from typing import Any

from guard import hooks, hosts
from guard.hooks.adapter import HostAdapter, Scope
from guard.hooks.front_door import adapter_for
from guard.hooks.settings_file import (
    BACKUP_SUFFIX,
    Change,
    SettingsError,
    read_settings,
    replace_file,
    write_settings,
)
from guard.paths import find_worktree
from guard.setup import host_settings, host_state
from guard.setup import scope as scopes


def hook_command(
    host: str,
    *,
    python: str | None = None,
    agent: str | None = None,
    policy: str | None = None,
) -> str:
    """The command line a host runs: absolute interpreter, isolated mode, fail closed.

    It runs guard's stdlib-only hook client, which asks the warm hook daemon
    and falls back to deciding in-process. ``-I`` keeps the project directory
    (the hook's cwd) and ``PYTHON*`` variables off ``sys.path``, so a
    repository cannot shadow guard with a ``guard/`` package of its own.
    What follows ``||`` turns a crash before our own handler runs (missing
    interpreter, broken install) into a block, and says why when guard is not there at
    all (:func:`absent_tail`).
    """
    exe = os.path.abspath(python or sys.executable)
    # the client lives with the hooks (guard's hook package), not with the installer
    client = os.path.join(os.path.dirname(os.path.abspath(hooks.__file__)), "_client.py")
    parts = [exe, "-I", client, host]
    if agent:
        parts += ["--agent", agent]
    if policy:
        parts += ["--policy", policy if policy.startswith("builtin:") else os.path.abspath(policy)]
    return " ".join(shlex.quote(p) for p in parts) + absent_tail(host, exe, client)


def absent_tail(host: str, exe: str, client: str) -> str:
    """`` || …``: any failure blocks (exit 2); when the interpreter or guard's hook client
    is missing (a teammate's machine without guard, a removed virtualenv) it also prints
    one line naming guard and how to install it or take the hook out, instead of the
    shell's bare "not found"."""
    title = hosts.by_name(host).title
    message = (
        f"guard: this {title} hook runs OpenOxide Guard ({exe}), which is not installed on"
        f" this machine, so the call is blocked; install guard (pip install openoxide-guard,"
        f" then: guard install {host} --local) or remove guard's hook entries from the"
        f" project's {title} settings"
    )
    q = shlex.quote
    return f" || {{ [ -x {q(exe)} ] && [ -f {q(client)} ] || echo {q(message)} >&2; exit 2; }}"


def interpreter_of(command: str) -> str | None:
    """The interpreter path in one of our hook commands, if it has one."""
    try:
        words = shlex.split(command.split("||", 1)[0])
    except ValueError:
        return None
    return words[0] if words and os.path.isabs(words[0]) else None


def project_dir(cwd: str | os.PathLike[str] | None = None) -> Path:
    start = Path(os.path.realpath(cwd if cwd is not None else os.getcwd()))
    return find_worktree(start) or start


def settings_file(
    adapter: HostAdapter, scope: Scope, cwd: str | os.PathLike[str] | None = None
) -> Path:
    home = Path(os.path.expanduser("~"))
    return adapter.settings_path(scope, project_dir(cwd), home)


def _edit(
    path: Path, adapter: HostAdapter, command: str | None, *, created: bool = False
) -> Change:
    before = read_settings(path)
    after = json.loads(json.dumps(before))
    try:
        removed = adapter.remove_entries(after)
        if command is not None:
            adapter.add_entry(after, command)
    except ValueError as exc:
        raise SettingsError(f"{path}: {exc}; guard left it untouched") from None
    if after == before:
        return Change(path, False, False, 0, None, command)
    if command is None and not after and not path.exists():
        return Change(path, False, False, removed, None, None)
    if command is None:
        put_back = _put_back(path, adapter, after, removed, created)
        if put_back is not None:
            return put_back
    backup = write_settings(path, after)
    return Change(path, True, command is not None, removed, backup, command)


def _put_back(
    path: Path, adapter: HostAdapter, after: dict[str, Any], removed: int, created: bool
) -> Change | None:
    """Uninstall: the file as guard found it, when what is left is exactly that.

    A file guard created that holds nothing but what an install into an empty file leaves
    after an uninstall (``{}``, or Cursor's ``version``) is removed with guard's backup; a file
    whose backup (the bytes before guard's install) says what is left gets those very
    bytes back, and the backup goes. None: something else changed since, write ``after``.
    """
    backup = path.with_name(path.name + BACKUP_SUFFIX)
    skeleton: dict[str, Any] = {}
    adapter.add_entry(skeleton, hook_command(adapter.name))
    adapter.remove_entries(skeleton)
    try:
        if created and after in ({}, skeleton):
            path.unlink()
            backup.unlink(missing_ok=True)
            return Change(path, True, False, removed, None, None,
                          [f"removed {path}: guard had created it and nothing else is in it"])
        saved = backup.read_bytes()
        found = json.loads(saved)
        if not isinstance(found, dict) or adapter.find_entries(found):
            return None  # not what guard found: a backup of a file already wired
        # what an install and an uninstall make of it (an emptied table dropped...)
        adapter.add_entry(found, hook_command(adapter.name))
        adapter.remove_entries(found)
        if found != after:
            return None
        replace_file(path, saved, path.stat().st_mode & 0o7777)
        backup.unlink()
    except FileNotFoundError:
        return None
    except ValueError:  # a backup that is not JSON (or not UTF-8) says nothing
        return None
    except OSError as exc:
        raise SettingsError(
            f"{path}: cannot write: {exc.strerror or exc}; guard left it as it was"
        ) from None
    return Change(path, True, False, removed, None, None,
                  ["restored the file as guard found it (its backup is removed)"])


def install(
    host: str,
    scope: Scope | None = "project",
    *,
    cwd: str | os.PathLike[str] | None = None,
    python: str | None = None,
    agent: str | None = None,
    policy: str | None = None,
) -> Change:
    """Wire the hook, then make sure the host will run it (trust) and check that it will.

    ``scope`` None chooses as :func:`guard.setup.scope.choose` says (local where the
    shared settings file is tracked by git). The returned change lists in ``problems``
    every reason the host would still skip the hook; callers must not report success
    when it is not empty.
    """
    adapter = adapter_for(host)
    project = project_dir(cwd)
    choice = scopes.choose(adapter, scope, project, Path(os.path.expanduser("~")))
    scope = choice.scope
    command = hook_command(host, python=python, agent=agent, policy=policy)
    made = scopes.missing_dirs(choice.path)
    own = host_settings.of(host)
    trusted_before = own.project_trusted(scope, project)
    existed = True
    if not own.in_settings_file:
        change = own.install_own(scope, project, command)
    else:
        path = choice.path
        existed = path.exists()
        change = _edit(path, adapter, command)
    notes = [*choice.notes, *change.notes]
    extra: dict[str, Any] = {"dirs": made}
    if scope == "local":
        excluded = scopes.keep_out_of_git(change.path, project)
        if excluded is not None:
            extra["excluded"] = [str(excluded[0]), excluded[1]]
            notes.append(f"kept it out of git: added {excluded[1]} to {excluded[0]}")
    new_state = [p for p in own.state_files() if not p.exists()]
    state_dirs = [d for p in new_state for d in scopes.missing_dirs(p)]
    notes += host_state.after_install(host, scope, change.path, project)
    made_state = [str(p) for p in new_state if p.exists()]
    if made_state:
        extra["state_files"] = [made_state, [d for d in state_dirs if os.path.isdir(d)]]
    if not trusted_before and own.project_trusted(scope, project):
        extra["trusted_project"] = str(project)
    host_state.remember(host, scope, change.path, command,
                        created=not existed, extra=extra)
    problems = host_state.skip_reasons(host, scope, change.path, project)
    return Change(change.path, change.changed or bool(notes), change.added, change.removed,
                  change.backup, change.command, notes, problems, choice.warning)


def uninstall(
    host: str, scope: Scope | None = "project", *, cwd: str | os.PathLike[str] | None = None
) -> Change:
    """Take out what install wrote: guard's entries (or the file it created), the trust it
    recorded, the line that kept a local file out of git, the folders it created when
    they are empty; the notes say what was left and why. ``scope`` None: where guard
    installed for this worktree, else where install would."""
    adapter = adapter_for(host)
    project = project_dir(cwd)
    home = Path(os.path.expanduser("~"))
    if scope is None:
        scope = host_state.installed_scope(host, project, home) or scopes.choose(
            adapter, None, project, home).scope
    path = settings_file(adapter, scope, cwd)
    entry = host_state.entry(host, path)
    own = host_settings.of(host)
    if not own.in_settings_file:
        change = own.uninstall_own(scope, project)
        notes = list(change.notes)
    elif not path.exists():
        change, notes = Change(path, False, False, 0, None, None), []
    else:
        before = host_state.before_uninstall(host, path)
        change = _edit(path, adapter, None, created=host_state.created(host, path))
        notes = [*change.notes, *host_state.after_uninstall(host, before)]
    host_state.forget(host, scope, path)
    if entry is not None:
        notes += _undo_extras(host, entry, path)
    return Change(change.path, change.changed or bool(notes), False, change.removed,
                  change.backup, None, notes)


def _undo_extras(host: str, entry: dict[str, Any], path: Path) -> list[str]:
    notes: list[str] = []
    trusted = entry.get("trusted_project")
    own = host_settings.of(host)
    if isinstance(trusted, str):
        if host_state.project_still_wired(host, trusted):
            notes.append(own.trust_still_needed(trusted))
        else:
            notes += own.untrust_project(Path(trusted))
    else:
        notes += own.kept_trust(entry)
    excluded = entry.get("excluded")
    if isinstance(excluded, list) and len(excluded) == 2:
        said = scopes.drop_exclude(str(excluded[0]), str(excluded[1]))
        if said:
            notes.append(said)
    state = entry.get("state_files")
    made: list[str] = []
    if isinstance(state, list) and len(state) == 2 and all(isinstance(x, list) for x in state):
        still = host_state.installed_paths(host)
        if still:  # another install of this host relies on the file: its uninstall removes it
            host_state.hand_over(host, still[0], state)
            notes += [f"left {f}: guard's install in {still[0]} still needs it"
                      for f in state[0] if os.path.exists(str(f))]
        else:
            notes += _remove_created([str(f) for f in state[0]])
            made = [str(d) for d in state[1]]
    for kept in own.state_files():
        backup = kept.with_name(kept.name + BACKUP_SUFFIX)
        if kept.exists() and backup.exists():
            notes.append(f"left {backup}: {kept.name} as it was before guard's last edit of"
                         " it (delete it once you no longer need it)")
    dirs = entry.get("dirs")
    if isinstance(dirs, list):
        if path.exists():
            notes.append(f"left {path}: it holds settings that are not guard's")
        made += [str(d) for d in dirs]
    notes += scopes.remove_dirs(made)
    return notes


def _remove_created(files: list[str]) -> list[str]:
    """Remove the host files guard's install created (and their backups) when nothing but
    blank lines is left in them; say what was left and why."""
    notes: list[str] = []
    for name in files:
        path = Path(name)
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            continue
        except (OSError, UnicodeDecodeError) as exc:
            notes.append(f"left {path}: guard created it but cannot read it now ({exc})")
            continue
        if text.strip():
            notes.append(f"left {path}: guard created it, but it now holds settings that"
                         " are not guard's")
            continue
        path.unlink()
        path.with_name(path.name + BACKUP_SUFFIX).unlink(missing_ok=True)
        notes.append(f"removed {path}: guard had created it and nothing else is in it")
    return notes
