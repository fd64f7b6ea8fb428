"""Codex CLI hook trust: the state Codex 0.171 checks before it runs a hook at all.

Codex runs a user or project hook only when the user's ``config.toml``
(``$CODEX_HOME/config.toml``, default ``~/.codex/config.toml``) holds, for that
hook, a table ``[hooks.state."<hooks.json path>:pre_tool_use:<group>:<handler>"]``
whose ``trusted_hash`` equals the hook's current hash and whose ``enabled`` is
not false. A hook without that entry is skipped **silently**; so is one whose
definition changed since it was trusted (the hash differs). A project's
``.codex/`` is read only when ``[projects."<root>"] trust_level = "trusted"``.
Only the user layer's state counts: a project cannot trust its own hooks.

The hash (facts from Codex's source, checked against ``codex app-server``'s
``hooks/list``): SHA-256 over the compact JSON, keys sorted, of
``{"event_name": "pre_tool_use", "matcher": M (only when set), "hooks":
[{"type": "command", "command": C, "timeout": T, "async": A,
"statusMessage": S (only when set)}]}``, where ``T`` is the handler's timeout
in seconds (600 when absent, at least 1). Written ``sha256:<hex>``.

``guard install codex`` writes this trust for its own entries only (the user
asked for exactly this hook), and trusts the project for a project install;
``guard uninstall codex`` removes the trust it wrote; ``guard doctor`` reports
every way Codex would skip the hook.
"""

from __future__ import annotations

import hashlib
import json
import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import tomlkit

from guard.effects import GuardError
from guard.hooks.adapter import is_ours
from guard.hooks.settings_file import BACKUP_SUFFIX, replace_file

EVENT_LABEL = "pre_tool_use"
#: The events guard wires in a hooks.json, with the label Codex keys and hashes them by.
EVENT_LABELS = {
    "PreToolUse": "pre_tool_use",
    "PostToolUse": "post_tool_use",
    "SessionStart": "session_start",
    "UserPromptSubmit": "user_prompt_submit",
    "Stop": "stop",
}
DEFAULT_TIMEOUT = 600


class CodexConfigError(GuardError):
    """Codex's config.toml cannot be read or safely edited."""


def codex_home() -> Path:
    """As Codex resolves it: ``$CODEX_HOME`` canonicalized, else ``$HOME/.codex`` as is.

    The path matters: it is part of every hook's trust key.
    """
    given = os.environ.get("CODEX_HOME", "")
    if given:
        return Path(os.path.realpath(given))
    return Path(os.path.normpath(os.path.join(os.path.expanduser("~"), ".codex")))


def config_path() -> Path:
    return codex_home() / "config.toml"


def hook_hash(handler: Mapping[str, Any], matcher: str | None, event: str = EVENT_LABEL) -> str:
    """The hash Codex computes for one command handler of a matcher group."""
    timeout = handler.get("timeout")
    seconds = max(int(timeout), 1) if isinstance(timeout, int) and timeout is not True \
        else DEFAULT_TIMEOUT
    hook: dict[str, Any] = {
        "type": "command",
        "command": handler.get("command"),
        "timeout": seconds,
        "async": bool(handler.get("async", False)),
    }
    if isinstance(handler.get("statusMessage"), str):
        hook["statusMessage"] = handler["statusMessage"]
    identity: dict[str, Any] = {"event_name": event, "hooks": [hook]}
    if matcher is not None:
        identity["matcher"] = matcher
    text = json.dumps(identity, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()


@dataclass(frozen=True, slots=True)
class OurHook:
    """One of guard's handlers in a hooks.json, as Codex keys and hashes it."""

    key: str
    hash: str
    command: str


def our_hooks(hooks_path: Path, settings: Mapping[str, Any]) -> list[OurHook]:
    """guard's handlers in a parsed hooks.json (every event of :data:`EVENT_LABELS`),
    with Codex's key and hash."""
    found: list[OurHook] = []
    hooks = settings.get("hooks")
    for event, label in EVENT_LABELS.items():
        groups = hooks.get(event) if isinstance(hooks, Mapping) else None
        if not isinstance(groups, list):
            continue
        for gi, group in enumerate(groups):
            if not isinstance(group, Mapping) or not isinstance(group.get("hooks"), list):
                continue
            matcher = group.get("matcher") if isinstance(group.get("matcher"), str) else None
            for hi, handler in enumerate(group["hooks"]):
                if is_ours(handler):
                    found.append(OurHook(f"{hooks_path}:{label}:{gi}:{hi}",
                                         hook_hash(handler, matcher, label), handler["command"]))
    return found


def read_config(path: Path | None = None) -> dict[str, Any]:
    path = path or config_path()
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    except (OSError, UnicodeDecodeError) as exc:
        raise CodexConfigError(f"{path}: cannot read: {exc}") from None
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise CodexConfigError(
            f"{path}: not valid TOML ({exc}); fix the file and run the command again;"
            " guard left it untouched"
        ) from None


def _table(parent: Any, key: str, path: Path) -> Any:
    if key not in parent:
        parent[key] = tomlkit.table()
    value = parent[key]
    if not isinstance(value, dict):
        raise CodexConfigError(
            f"{path}: '{key}' is not a table; fix the file and run the command again;"
            " guard left it untouched"
        )
    return value


def _edit_config(change: Any, path: Path | None = None) -> bool:
    """Apply ``change(doc) -> bool`` to config.toml, keeping its layout; atomic, backed up."""
    path = path or config_path()
    read_config(path)  # a clear error for a broken file before anything else
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        text = ""
    doc = tomlkit.parse(text)
    if not change(doc, path):
        return False
    out = tomlkit.dumps(doc)
    out = out.rstrip("\n") + "\n" if out.strip() else ""  # no blank lines left at the end
    tomllib.loads(out)  # never write a file Codex could not read
    path.parent.mkdir(parents=True, exist_ok=True)
    mode = 0o600
    if path.exists():
        mode = path.stat().st_mode & 0o7777
        replace_file(path.with_name(path.name + BACKUP_SUFFIX), path.read_bytes(), mode)
    replace_file(path, out.encode("utf-8"), mode)
    return True


def trust(hooks: list[OurHook], project: Path | None) -> list[str]:
    """Record ``hooks`` as trusted and enabled (and ``project`` as trusted). What was done."""
    notes: list[str] = []

    def change(doc: Any, path: Path) -> bool:
        changed = False
        if hooks:
            state = _table(_table(doc, "hooks", path), "state", path)
            for h in hooks:
                entry = _table(state, h.key, path)
                if entry.get("trusted_hash") != h.hash or entry.get("enabled") is not True:
                    entry["enabled"] = True
                    entry["trusted_hash"] = h.hash
                    notes.append(f"trusted the hook {h.key} in {path}")
                    changed = True
        if project is not None:
            entry = _table(_table(doc, "projects", path), str(project), path)
            if entry.get("trust_level") != "trusted":
                entry["trust_level"] = "trusted"
                notes.append(f"trusted the project {project} in {path} (Codex reads a"
                             " project's .codex/ only then)")
                changed = True
        return changed

    _edit_config(change)
    return notes


def untrust(keys: list[str]) -> list[str]:
    """Remove the hook state guard wrote for these keys. What was done."""
    notes: list[str] = []

    def change(doc: Any, path: Path) -> bool:
        hooks = doc.get("hooks")
        state = hooks.get("state") if isinstance(hooks, dict) else None
        if not isinstance(state, dict):
            return False
        for key in keys:
            if key in state:
                del state[key]
                notes.append(f"removed the trust of {key} from {path}")
        if notes and not state:  # no empty [hooks.state] table left behind
            del hooks["state"]
            if not hooks:
                del doc["hooks"]
        return bool(notes)

    if keys and config_path().exists():
        _edit_config(change)
    return notes


def project_trusted(project: Path) -> bool:
    try:
        config = read_config()
    except CodexConfigError:
        return False
    projects = config.get("projects")
    entry = projects.get(str(project)) if isinstance(projects, Mapping) else None
    return isinstance(entry, Mapping) and entry.get("trust_level") == "trusted"


def untrust_project(project: Path) -> list[str]:
    """Remove the project trust guard's install wrote (the whole table when nothing else is
    in it). What was done."""
    notes: list[str] = []

    def change(doc: Any, path: Path) -> bool:
        projects = doc.get("projects")
        entry = projects.get(str(project)) if isinstance(projects, dict) else None
        if not isinstance(entry, dict) or entry.get("trust_level") != "trusted":
            return False
        del entry["trust_level"]
        if not entry:
            del projects[str(project)]
        if not projects:
            del doc["projects"]
        notes.append(f"removed the trust of the project {project} from {path} (guard's"
                     " install had written it)")
        return True

    if config_path().exists():
        _edit_config(change)
    return notes


def skip_reasons(hooks: list[OurHook], project: Path | None,
                 config: Mapping[str, Any] | None = None) -> list[str]:
    """Why Codex would not run these hooks: [] when it will."""
    path = config_path()
    try:
        config = read_config(path) if config is None else config
    except CodexConfigError as exc:
        return [str(exc)]
    why: list[str] = []
    features = config.get("features")
    if isinstance(features, Mapping):
        for name in ("hooks", "codex_hooks"):
            if features.get(name) is False:
                why.append(f"hooks are turned off ([features] {name} = false in {path})")
    if project is not None:
        projects = config.get("projects")
        entry = projects.get(str(project)) if isinstance(projects, Mapping) else None
        level = entry.get("trust_level") if isinstance(entry, Mapping) else None
        if level != "trusted":
            why.append(f"project not trusted: Codex ignores {project}/.codex/ until"
                       f" [projects.\"{project}\"] trust_level = \"trusted\" is in {path}")
    hooks_cfg = config.get("hooks")
    states = hooks_cfg.get("state") if isinstance(hooks_cfg, Mapping) else None
    states = states if isinstance(states, Mapping) else {}
    for h in hooks:
        state = states.get(h.key)
        state = state if isinstance(state, Mapping) else {}
        if state.get("enabled") is False:
            why.append(f"hook disabled: enabled = false for {h.key} in {path}")
        trusted = state.get("trusted_hash")
        if trusted is None:
            why.append(f"hook trust missing: no trusted_hash for {h.key} in {path}")
        elif trusted != h.hash:
            why.append(f"hook trust stale: the hook changed since it was trusted"
                       f" ({h.key}: trusted {trusted}, now {h.hash})")
    return why


def fix_command(scope: str) -> str:
    return f"guard install codex --{scope}"
