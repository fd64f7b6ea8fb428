"""OpenCode: guard's hook is a plugin file of its own (guard.hosts.opencode.hook), not an
entry in a settings file."""

from __future__ import annotations

from pathlib import Path

from guard.hooks.adapter import Scope
from guard.hooks.settings_file import Change
from guard.hosts.opencode import hook
from guard.setup.host_settings import HostSettings


class OpenCodeSettings(HostSettings):
    in_settings_file = False

    def install_own(self, scope: Scope, project: Path, command: str) -> Change:
        return hook.install_plugin(scope, project, command)

    def uninstall_own(self, scope: Scope, project: Path) -> Change:
        return hook.uninstall_plugin(scope, project)

    def installed_command(self, path: Path) -> tuple[str | None, str | None]:
        return hook.installed_command(path)


SETTINGS = OpenCodeSettings()
