"""Which session decides for a worktree, and the mode it decides with.

Holds :func:`deciding_session` (the pinned session, else the newest plan one,
else the newest one, among those that may decide), its twin :func:`deciding_facts`
that reads the session files without their model (:func:`read_facts`,
:func:`list_facts`: what ``guard mode`` prints) and :func:`current_mode`
(what the gate consults). It does not hold the sessions, their pin file or
their lifecycle: those are in :mod:`guard.planning.session`.
"""

from __future__ import annotations

# Lazy imports: the session model (pydantic) only where a session file exists (CLI start-up),
# and for the facts only to read a file the plain check leaves to the model.
import os
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from guard.planning._vocabulary import Mode, any_session, pinned_id, sessions_dir
from guard.planning.session_file import OwnerFacts, SessionFacts, plain_facts

if TYPE_CHECKING:
    from guard.planning.session import Session

S = TypeVar("S", "Session", SessionFacts)


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

    return _choose(Session.list_all(worktree_or_cwd))


def deciding_facts(worktree_or_cwd: str | os.PathLike[str]) -> tuple[SessionFacts, str] | None:
    """:func:`deciding_session`'s choice, read without the session model (what ``guard
    mode`` prints): the same session and reason, or the same SessionError."""
    if not any_session(worktree_or_cwd):
        return None
    return _choose(list_facts(worktree_or_cwd))


def _choose(sessions: list[S]) -> tuple[S, str] | None:
    """The deciding one of a worktree's sessions (most recently active first), and why."""
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


def _orphaned(session: Session | SessionFacts) -> str:
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


def facts_of(session: Session) -> SessionFacts:
    """The facts of a session the model loaded."""
    o = session.owner
    return SessionFacts(
        id=session.id, mode=session.mode, state=session.state,
        owner=OwnerFacts(o.pid, o.started, o.boot, o.host, o.command) if o else None,
        set_aside=session.set_aside, worktree=session.worktree, project=session.project,
        plan_path=session.plan_path,
        created_at=session.created_at, updated_at=session.updated_at,
        active_ns=session.active_ns, directory=session.directory,
    )  # fmt: skip


def read_facts(path: Path) -> SessionFacts:
    """The facts of the session stored in ``path``, read by hand
    (:func:`guard.planning.session_file.plain_facts`) or, for a file the hand check leaves
    to it, by the model: a file that is no valid session raises the model's SessionError."""
    facts = plain_facts(path)
    if facts is not None:
        return facts
    from guard.planning.session import Session

    return facts_of(Session.load_file(path))


def list_facts(cwd: str | os.PathLike[str]) -> list[SessionFacts]:
    """All sessions of the worktree around ``cwd``, most recently active first (as
    :meth:`guard.planning.session.Session.list_all`), read without the model."""
    directory = sessions_dir(cwd)
    if not directory.is_dir():
        return []
    found = [read_facts(p) for p in directory.glob("*.json")]
    found.sort(key=lambda s: (s.active_ns, s.updated_at), reverse=True)
    return found
