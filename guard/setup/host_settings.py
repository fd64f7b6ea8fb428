"""What ``guard install``, ``uninstall`` and ``doctor`` do for a host beyond the common
settings file: the interface of a host's ``settings`` part
(``guard/hosts/<host>/settings.py``, :meth:`guard.hosts.Host.settings`).

A host without that part has only the common settings file its hook adapter edits
(:class:`guard.hooks.adapter.HostAdapter`); each method here is a host's chance to do
more (record trust, write a plugin of its own, say why it would skip the hook), and
the defaults do nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from guard import hosts
from guard.hooks.adapter import Scope
from guard.hooks.settings_file import Change


class HostSettings:
    """The defaults: the hook lives in the host's settings file and nothing more is done."""

    #: False when its hook is a file of its own (a plugin) rather than an entry in a
    #: settings file: then :meth:`install_own`, :meth:`uninstall_own` and
    #: :meth:`installed_command` replace the settings-file edit
    in_settings_file: bool = True
    #: the scope ``guard install`` picks when none is asked for, None: the project's
    default_scope: Scope | None = None

    def install_own(self, scope: Scope, project: Path, command: str) -> Change:
        raise NotImplementedError

    def uninstall_own(self, scope: Scope, project: Path) -> Change:
        raise NotImplementedError

    def installed_command(self, path: Path) -> tuple[str | None, str | None]:
        """(guard's hook command in its own file at ``path``, a problem with it)."""
        raise NotImplementedError

    def after_install(self, scope: Scope, path: Path, project: Path) -> list[str]:
        """Make the host run the hook just written in ``path``. What was done."""
        return []

    def before_uninstall(self, path: Path) -> list[str]:
        """Keys of the host state guard wrote for the entries about to be removed."""
        return []

    def after_uninstall(self, keys: list[str]) -> list[str]:
        """Take back the host state of ``keys``. What was done."""
        return []

    def skip_reasons(self, scope: Scope, path: Path, project: Path) -> list[str]:
        """Every reason the host would not run guard's hook wired in ``path``: [] when it will."""
        return []

    def project_trusted(self, scope: Scope, project: Path) -> bool:
        """Whether the host records ``project`` as trusted (True: nothing to undo)."""
        return True

    def untrust_project(self, project: Path) -> list[str]:
        """Take back the project trust an install recorded. What was done."""
        return []

    def trust_still_needed(self, project: str) -> str:
        """The note on the trust of ``project`` an uninstall leaves for another install."""
        return (f"left the trust of the project {project}: another guard install there still"
                " needs it")

    def kept_trust(self, entry: Mapping[str, Any]) -> list[str]:
        """Notes on trust an uninstall leaves because it was there before the install."""
        return []

    def state_files(self) -> list[Path]:
        """Files besides the settings file that :meth:`after_install` may write (Codex: its
        user config.toml): an install that creates one records it, and uninstall removes
        it again when nothing but what guard wrote was in it."""
        return []


#: The settings of a host without a ``settings`` part.
PLAIN = HostSettings()


def of(host: str) -> HostSettings:
    """The settings of the host called ``host`` (KeyError for a host guard does not know)."""
    known = hosts.by_name(host)
    if "settings" not in known.parts:
        return PLAIN
    found: HostSettings = known.part("settings").SETTINGS
    return found
