"""Codex CLI: its hooks run only once trusted (guard.hosts.codex.trust), so ``guard
install`` records that trust and ``guard doctor`` says when it is missing or stale."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from guard.hooks.adapter import Scope
from guard.hooks.settings_file import SettingsError, read_settings
from guard.hosts.codex import trust
from guard.setup.host_settings import HostSettings


class CodexSettings(HostSettings):
    def after_install(self, scope: Scope, path: Path, project: Path) -> list[str]:
        hooks = trust.our_hooks(path, read_settings(path))
        return trust.trust(hooks, project if scope != "user" else None)

    def before_uninstall(self, path: Path) -> list[str]:
        return [h.key for h in trust.our_hooks(path, read_settings(path))]

    def after_uninstall(self, keys: list[str]) -> list[str]:
        return trust.untrust(keys) if keys else []

    def skip_reasons(self, scope: Scope, path: Path, project: Path) -> list[str]:
        try:
            settings = read_settings(path)
        except SettingsError as exc:
            return [str(exc)]
        hooks = trust.our_hooks(path, settings)
        if not hooks:
            return [f"no guard entry in {path}"]
        return [f"wired, but Codex will skip it: {why}" for why in
                trust.skip_reasons(hooks, project if scope != "user" else None)]

    def project_trusted(self, scope: Scope, project: Path) -> bool:
        if scope == "user":
            return True  # nothing to undo
        return trust.project_trusted(project)

    def untrust_project(self, project: Path) -> list[str]:
        return trust.untrust_project(project)

    def trust_still_needed(self, project: str) -> str:
        return (f"left the trust of the project {project} in Codex's config: another"
                " guard install there still needs it")

    def kept_trust(self, entry: Mapping[str, Any]) -> list[str]:
        if entry.get("scope") == "user":
            return []
        return ["left the project's trust in Codex's config: it was there before"
                " guard's install"]

    def state_files(self) -> list[Path]:
        return [trust.config_path()]


SETTINGS = CodexSettings()
