"""Gemini CLI: project hooks run only in a trusted workspace, and ``guard install``
wires the user's settings unless asked otherwise."""

from __future__ import annotations

from pathlib import Path

from guard.hooks.adapter import Scope
from guard.hosts.gemini.hook import workspace_trust
from guard.setup.host_settings import HostSettings


class GeminiSettings(HostSettings):
    default_scope: Scope | None = "user"

    def skip_reasons(self, scope: Scope, path: Path, project: Path) -> list[str]:
        if scope != "project":
            return []
        trusted, why = workspace_trust(project)
        if trusted:
            return []
        return [f"wired, but Gemini will skip it: workspace not trusted ({why})"]


SETTINGS = GeminiSettings()
