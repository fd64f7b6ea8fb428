"""The planning runtime as the rest of guard sees it.

* publishing an event to the session deciding for a worktree (:func:`publish_current`;
  which session decides is :func:`guard.planning.deciding.deciding_session`, and which
  agent the hooks therefore use is :mod:`guard.planning.current`'s);
* what the model is told in plan mode: :func:`plan_file_instruction` is the
  sentence every plan-mode refusal carries and the context a host injects at
  the start of each turn, naming the plan file the model may write;
* the plan files of a worktree with their owning sessions (:func:`list_plans`).
"""

from __future__ import annotations

# Lazy imports: sessions and events (pydantic) load only where a session may exist.
import contextlib
import os
from pathlib import Path
from typing import TYPE_CHECKING

from guard.paths import plan_dir
from guard.planning._vocabulary import Mode, any_session
from guard.planning.artifact import Artifact
from guard.planning.artifact import list_plans as _list_plans

if TYPE_CHECKING:  # sessions (pydantic models) are loaded only where one may exist
    from guard.planning.event_bus import Event
    from guard.planning.session import Session

APPROVE_HINT = "the user approves it with `guard plan exit --approve`"


def list_plans(cwd: str | os.PathLike[str]) -> list[Artifact]:
    """Plan files in the plan directory of ``cwd``, oldest first, with their sessions."""
    from guard.planning.session import Session

    owners = {s.plan_path: s.id for s in Session.list_all(cwd) if s.plan_path}
    return _list_plans(cwd, owners)


def publish_current(cwd: str | os.PathLike[str], event: Event) -> Path | None:
    """Publish ``event`` to the session deciding for ``cwd``'s worktree.

    Returns the event log written, or None when no session is live there (then
    only this process's subscribers see the event).
    """
    from guard.planning.deciding import deciding_session
    from guard.planning.event_bus import deliver

    found = deciding_session(cwd)
    if found is None:
        deliver(event)
        return None
    return found[0].publish(event)


def plan_file_instruction(
    cwd: str | os.PathLike[str], session: Session | None = None, *, exit_hint: str = ""
) -> str:
    """The words a model in plan mode acts on: where to write the plan, what else holds.

    With a session, its plan file (fixed when it entered plan mode); without
    one, the plan directory of ``cwd``. ``exit_hint`` names the host's own way
    to hand the plan over (e.g. Claude Code's ExitPlanMode).
    """
    if session is not None and session.plan_path:
        where = (
            f"write your plan to {session.plan_path} (a markdown file; any other *.md file"
            f" directly in {session.plans_dir} also counts)"
        )
        whose = f" (guard session {session.id})"
    else:
        directory = plan_dir(cwd).path
        where = (
            f"write your plan to a markdown file directly in {directory}"
            f" (for example {directory / 'plan.md'})"
        )
        whose = ""
    then = f" When the plan is written, {exit_hint}; " if exit_hint else " When it is written, "
    return (
        f"You are in plan mode{whose}: {where}; other files cannot be changed until the plan"
        f" is approved.{then}{APPROVE_HINT}."
    )


def plan_refusal(
    cwd: str | os.PathLike[str] | None,
    session_id: str | None = None,
    *,
    no_session: bool = False,
) -> str:
    """The sentence a plan-mode refusal carries (the gate appends it); never raises.

    Names the plan file of session ``session_id`` (a front door that runs its
    own session, like ``guard mcp``), else of the session deciding for
    ``cwd``, when that session is in plan mode; otherwise the plan directory.
    ``no_session``: name the plan directory without looking at sessions (a replay
    of a past transcript, where today's sessions say nothing).
    """
    from guard.effects import GuardError

    here = os.fspath(cwd) if cwd is not None else os.getcwd()
    session: Session | None = None
    try:
        if no_session or (session_id is None and not any_session(here)):
            return plan_file_instruction(here, None)
        from guard.planning.deciding import deciding_session
        from guard.planning.session import Session

        if session_id is not None:
            with contextlib.suppress(GuardError):
                session = Session.load(session_id, here)
        if session is None:
            found = deciding_session(here)
            session = found[0] if found is not None else None
        if session is not None and session.mode is not Mode.PLAN:
            session = None
        return plan_file_instruction(here, session)
    except (GuardError, OSError):
        return (
            "You are in plan mode: write your plan to a markdown file in the plan directory"
            " (`guard plan-dir` prints it); other files cannot be changed until the plan is"
            f" approved. When it is written, {APPROVE_HINT}."
        )
