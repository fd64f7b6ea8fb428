"""The planning runtime's vocabulary that every other planning module shares.

This module imports nothing from ``guard.planning``: it is the bottom of the
package's import graph (``_base`` <- ``_store``/``checklist`` <- ``events`` <-
``artifact`` <- ``session`` <- ``handshake`` <- ``tools``/``stream``/``render``
<- ``runtime`` <- ``host``).
"""

from __future__ import annotations

import enum
import os
from datetime import UTC, datetime
from pathlib import Path

from guard.paths import data_dir, find_worktree, project_key

SESSIONS_SUBDIR = Path(".openoxide") / "sessions"


class Mode(enum.StrEnum):
    BUILD = "build"
    PLAN = "plan"


def utc_now() -> str:
    """Now, as an ISO 8601 UTC timestamp with microseconds and a ``Z``."""
    return datetime.now(UTC).isoformat(timespec="microseconds").replace("+00:00", "Z")


def sessions_dir(cwd: str | os.PathLike[str]) -> Path:
    """Where sessions for ``cwd`` live (worktree, or the data-dir fallback)."""
    start = Path(os.path.realpath(cwd))
    wt = find_worktree(start)
    if wt is not None:
        return wt / SESSIONS_SUBDIR
    return data_dir() / "sessions" / project_key(start)


def any_session(cwd: str | os.PathLike[str]) -> bool:
    """Whether a session file may exist for ``cwd`` (a cheap look, before loading any):
    False only when the sessions directory holds no ``*.json`` at all."""
    try:
        with os.scandir(sessions_dir(cwd)) as entries:
            return any(e.name.endswith(".json") for e in entries)
    except FileNotFoundError:
        return False
    except OSError:  # unreadable: let the loader say what is wrong
        return True
