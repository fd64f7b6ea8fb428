"""The planning runtime's vocabulary that every other planning module shares.

This module imports nothing from ``guard.planning``: it is the bottom of the
package's import graph (``_base`` <- ``_store``/``checklist`` <- ``events`` <-
``artifact`` <- ``session`` <- ``handshake`` <- ``tools``/``stream``/``render``
<- ``runtime`` <- ``host``).
"""

from __future__ import annotations

import enum
import os
import re
from datetime import UTC, datetime
from pathlib import Path

from guard.effects import GuardError
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


SESSION_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,127}$")


class SessionError(GuardError):
    """A session that cannot be found, read or changed as asked."""


PIN_FILE = "pinned"


class SessionNotFound(SessionError):
    """No session with that id."""


def check_session_id(session_id: str) -> str:
    if not isinstance(session_id, str) or not SESSION_ID_RE.match(session_id):
        raise SessionError(
            f"invalid session id {session_id!r}: use 1-128 characters from A-Z a-z 0-9 _ -,"
            " starting with a letter or digit (see `guard session list`)"
        )
    return session_id


def pinned_id(directory: Path) -> str | None:
    """The pinned session id, or None. A pin file that is not an id is an error."""
    try:
        text = (directory / PIN_FILE).read_text(encoding="utf-8").strip()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise SessionError(f"cannot read {directory / PIN_FILE}: {exc.strerror}") from None
    try:
        return check_session_id(text)
    except SessionError:
        raise SessionError(
            f"{directory / PIN_FILE}: not a session id ({text[:40]!r}); remove the file"
            " or pin a session again with `guard mode MODE --session ID`"
        ) from None
