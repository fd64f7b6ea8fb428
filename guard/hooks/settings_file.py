"""A host's settings file, read and written safely; and what one edit of it changed.

Reading names the spot of a problem (:class:`SettingsError`, the file untouched);
writing is atomic and keeps a backup of the previous file (``<file>.guard-backup``).
:class:`Change` is what ``guard install``/``uninstall`` report about one file. What
goes into a settings file (the host's hook entries) is not here: the adapters and
:mod:`guard.setup.install` decide that.
"""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from guard.effects import GuardError

BACKUP_SUFFIX = ".guard-backup"


class SettingsError(GuardError):
    """A host settings file guard cannot safely edit."""


@dataclass(frozen=True, slots=True)
class Change:
    path: Path
    changed: bool
    added: bool
    removed: int
    backup: Path | None
    command: str | None
    #: What else was done (trust written, scope chosen...), one sentence each.
    notes: list[str] = field(default_factory=list)
    #: Why the host will NOT run the hook as installed; empty when it will.
    problems: list[str] = field(default_factory=list)
    #: One line said before the report (a hook written into a file teams commit).
    warning: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "path": str(self.path),
            "changed": self.changed,
            "added": self.added,
            "removed": self.removed,
            "backup": str(self.backup) if self.backup else None,
            "command": self.command,
            "notes": self.notes,
            "problems": self.problems,
            "warning": self.warning,
        }


def read_settings(path: Path) -> dict[str, Any]:
    """Parsed settings, {} for a missing or empty file. Raises SettingsError naming the spot."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    except (OSError, UnicodeDecodeError) as exc:
        raise SettingsError(f"{path}: cannot read: {exc}") from None
    if not text.strip():
        return {}
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise SettingsError(
            f"{path}:{exc.lineno}:{exc.colno}: not valid JSON ({exc.msg}); fix the file"
            " (or move it away) and run the command again; guard left it untouched"
        ) from None
    if not isinstance(data, dict):
        raise SettingsError(
            f"{path}: the top level must be a JSON object, found {type(data).__name__};"
            " guard left it untouched"
        )
    return data


def replace_file(path: Path, data: bytes, mode: int) -> None:
    """Put ``data`` at ``path`` whole or not at all: a synced temporary file renamed over it."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def write_settings(path: Path, data: dict[str, Any]) -> Path | None:
    """Write atomically; back up the previous file first (atomically too). Returns the backup.

    A crash or a full disk at any point leaves the settings file and its backup
    each either as before or wholly new, and no temporary file behind.
    """
    backup: Path | None = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        mode = 0o644
        if path.exists():
            backup = path.with_name(path.name + BACKUP_SUFFIX)
            mode = path.stat().st_mode & 0o7777
            replace_file(backup, path.read_bytes(), mode)
        replace_file(path, (json.dumps(data, indent=2, ensure_ascii=False) + "\n").encode(), mode)
    except OSError as exc:
        raise SettingsError(
            f"{path}: cannot write: {exc.strerror or exc}; guard left it as it was"
        ) from None
    return backup
