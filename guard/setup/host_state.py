"""Will the host really run guard's hook? Each host's own reasons to skip it silently.

* each host's own, from its ``settings`` part (:mod:`guard.setup.host_settings`):
  Codex's hook and project trust (:mod:`guard.hosts.codex.trust`), Gemini's trusted
  workspace (:func:`guard.hosts.gemini.hook.workspace_trust`);
* every host: a settings file another tool rewrote after ``guard install``
  (guard remembers what it wrote in ``<data>/hosts.json`` and compares).

``install`` calls :func:`after_install` (write the trust the user asked for)
and :func:`skip_reasons` (check it); ``guard doctor`` calls :func:`skip_reasons`
and :func:`rewritten`.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from guard.hooks.adapter import Scope
from guard.hooks.front_door import adapter_for
from guard.paths import data_dir
from guard.setup import host_settings

REGISTRY = "hosts.json"


def _registry_path() -> Path:
    return data_dir() / REGISTRY


def _load() -> list[dict[str, Any]]:
    try:
        data = json.loads(_registry_path().read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    return [e for e in data if isinstance(e, dict)] if isinstance(data, list) else []


def _save(entries: list[dict[str, Any]]) -> None:
    path = _registry_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".hosts.", suffix=".tmp", dir=path.parent)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        json.dump(entries, fh, indent=2)
    os.replace(tmp, path)


def remember(host: str, scope: str, path: Path, command: str, *, created: bool = False,
             extra: Mapping[str, Any] | None = None) -> None:
    """Record what ``guard install`` wrote, so doctor can tell when someone rewrote it;
    ``created``: the file did not exist before guard's first install (kept on a re-install,
    so that ``guard uninstall`` removes the file rather than leave ``{}``); ``extra``: what
    else it wrote for uninstall to take out (``dirs`` it created, the ``excluded`` line
    that keeps a local file out of git, the ``trusted_project``, the host's ``state_files``
    it created with their new folders as ``[files, dirs]``); the first install's
    record of each wins, as for ``created``."""
    entries = _load()
    mine = [e for e in entries if (e.get("host"), e.get("path")) == (host, str(path))]
    extra = dict(extra or {})
    if mine:
        created = mine[-1].get("created") is True
        for key in ("dirs", "excluded", "trusted_project", "state_files"):
            if key in mine[-1]:
                extra[key] = mine[-1][key]
    entries = [e for e in entries if e not in mine]
    entries.append({**extra, "host": host, "scope": scope, "path": str(path),
                    "command": command, "created": created})
    _save(entries)


def entry(host: str, path: Path) -> dict[str, Any] | None:
    """What ``guard install`` recorded for ``host`` in ``path`` (see :func:`remember`)."""
    for e in _load():
        if (e.get("host"), e.get("path")) == (host, str(path)):
            return e
    return None


def installed_scope(host: str, project: Path, home: Path) -> Scope | None:
    """The scope of guard's last install for ``host`` that concerns this worktree."""
    adapter = adapter_for(host)
    paths: dict[str, Scope] = {
        str(adapter.settings_path(s, project, home)): s for s in ("user", "project", "local")
    }
    found: Scope | None = None
    for e in _load():
        if e.get("host") == host and e.get("path") in paths:
            found = paths[str(e["path"])]
    return found


def project_still_wired(host: str, project: str) -> bool:
    """Whether another install recorded here still relies on the project's trust."""
    return any(e.get("host") == host and e.get("trusted_project") == project for e in _load())


def installed_paths(host: str) -> list[str]:
    """The settings files where guard's install for ``host`` is still recorded."""
    return [str(e["path"]) for e in _load() if e.get("host") == host and "path" in e]


def hand_over(host: str, path: str, state: list[Any]) -> None:
    """Let the install recorded in ``path`` own the ``state_files`` another one created."""
    entries = _load()
    for e in entries:
        if (e.get("host"), e.get("path")) == (host, path) and "state_files" not in e:
            e["state_files"] = state
            _save(entries)
            return


def created(host: str, path: Path) -> bool:
    """Whether guard's install created ``path`` (see :func:`remember`)."""
    return any(
        (e.get("host"), e.get("path")) == (host, str(path)) and e.get("created") is True
        for e in _load()
    )


def forget(host: str, scope: str, path: Path) -> None:
    entries = _load()
    kept = [e for e in entries if (e.get("host"), e.get("path")) != (host, str(path))]
    if kept != entries:
        _save(kept)


def remembered(host: str, path: Path) -> str | None:
    """The hook command ``guard install`` last wrote into ``path`` for ``host``."""
    for e in _load():
        if (e.get("host"), e.get("path")) == (host, str(path)) and isinstance(e.get("command"),
                                                                               str):
            return str(e["command"])
    return None


def after_install(host: str, scope: Scope, path: Path, project: Path) -> list[str]:
    """Make the host run the hook just written (Codex: trust). What was done."""
    return host_settings.of(host).after_install(scope, path, project)


def before_uninstall(host: str, path: Path) -> list[str]:
    """Keys of the host state guard wrote for the entries about to be removed."""
    return host_settings.of(host).before_uninstall(path)


def after_uninstall(host: str, keys: list[str]) -> list[str]:
    return host_settings.of(host).after_uninstall(keys)


def skip_reasons(host: str, scope: Scope, path: Path, project: Path) -> list[str]:
    """Every reason the host would not run guard's hook wired in ``path``: [] when it will."""
    return host_settings.of(host).skip_reasons(scope, path, project)


def rewritten(host: str, path: Path, settings: Mapping[str, Any]) -> str | None:
    """Why the file no longer holds what ``guard install`` wrote, or None when it does."""
    command = remembered(host, path)
    if command is None or not host_settings.of(host).in_settings_file:
        return None
    expected: dict[str, Any] = {}
    adapter_for(host).add_entry(expected, command)
    hooks = settings.get("hooks")
    hooks = hooks if isinstance(hooks, Mapping) else {}
    for event, items in expected.get("hooks", {}).items():
        actual = hooks.get(event)
        actual = actual if isinstance(actual, list) else []
        for item in items:
            if item in actual:
                continue
            if command in json.dumps(actual):
                return (f"another tool rewrote {path}: guard's {event} entry was changed"
                        f" (now {_ours_in(actual, command)}); run guard install {host} again")
            return (f"another tool rewrote {path}: guard's {event} entry is gone;"
                    f" run guard install {host} again")
    return None


def _ours_in(items: list[Any], command: str) -> str:
    for item in items:
        if command in json.dumps(item):
            text = json.dumps(item, ensure_ascii=False)
            return text if len(text) < 200 else text[:197] + "..."
    return "?"
