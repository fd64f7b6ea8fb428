"""Which session decides for a worktree, and the mode it decides with.

Holds :func:`deciding_session` (the pinned session, else the newest plan one,
else the newest one, among those that may decide) and :func:`current_mode`
(what the gate consults). It does not hold the sessions, their pin file or
their lifecycle: those are in :mod:`guard.planning.session`.
"""

from __future__ import annotations

# Lazy imports: the session model (pydantic) only where a session file exists (CLI start-up).
import os
from typing import TYPE_CHECKING

from guard.planning._vocabulary import Mode, any_session, pinned_id

if TYPE_CHECKING:
    from guard.planning.session import Session


def deciding_session(worktree_or_cwd: str | os.PathLike[str]) -> tuple[Session, str] | None:
    """The session whose mode decides for that worktree, and why; None when none decides.

    Among the sessions that may decide (:attr:`Session.decides`): the pinned one
    (``guard mode ... --session ID``), else the newest one in plan mode (a worktree
    with an open plan session is in plan mode), else the newest one. An ended
    session never decides. A corrupt session or pin file raises SessionError
    (callers deciding on it fail closed).
    """
    if not any_session(worktree_or_cwd):  # no session file: nothing to load
        return None
    from guard.planning.session import Session

    sessions = Session.list_all(worktree_or_cwd)
    if not sessions:
        return None
    pinned = pinned_id(sessions[0].directory)
    live = [s for s in sessions if s.decides]
    for s in live:
        if s.id == pinned:
            return s, f"session {s.id} (pinned with `guard mode --session`){_orphaned(s)}"
    if not live:
        return None
    planning = [s for s in live if s.mode is Mode.PLAN]
    newest = max(planning or live, key=lambda s: (s.created_at, s.active_ns))
    others = len(live) - 1
    kind = "open plan session" if planning else "open session"
    why = f"session {newest.id} (the newest {kind}"
    why += f"; {others} other{'s' if others > 1 else ''} open)" if others else ")"
    return newest, why + _orphaned(newest)


def _orphaned(session: Session) -> str:
    if session.owner_alive or session.owner is None:
        return ""
    return f", orphaned: its owner {session.owner.describe()} is gone"


def current_mode(worktree_or_cwd: str | os.PathLike[str]) -> tuple[str, Session] | None:
    """The mode of the session that decides for that worktree (see :func:`deciding_session`).

    None when no session is live there. A corrupt session file raises
    SessionError (callers deciding on it fail closed).
    """
    found = deciding_session(worktree_or_cwd)
    if found is None:
        return None
    return found[0].mode.value, found[0]
