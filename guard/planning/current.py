"""The agent guard's hooks use for a worktree right now, and why (``guard mode``,
``guard doctor``, ``guard ui`` and the context a host injects at each turn print it).

It holds :func:`describe_current_agent` and its answer :class:`CurrentAgent`. It does
not choose anything itself: the order (--agent, ``$GUARD_AGENT``, the deciding
session's mode, the host's hint) and the policy are :func:`guard.gate.resolve`'s;
this module finds the session for a worktree without a call (:func:`session_deciding`)
and words the answer.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from guard.effects import GuardError, ToolCall
from guard.gate import FROM_ENV, resolve, sessions_decide
from guard.planning._vocabulary import Mode
from guard.planning.binding import plan_facts_around, plan_session_around
from guard.planning.deciding import deciding_facts, deciding_session
from guard.planning.found import ModeFound
from guard.planning.session_file import SessionFacts

if TYPE_CHECKING:
    from guard.planning.session import Session

__all__ = ["CurrentAgent", "describe_current_agent"]


@dataclass(frozen=True, slots=True)
class CurrentAgent:
    """The agent the hooks use for a worktree right now, and why."""

    agent: str | None
    reason: str
    session: Session | None = None
    mode: Mode | None = None

    def line(self) -> str:
        return f"{self.agent or '(host decides)'}: {self.reason}"


def session_deciding(
    call: ToolCall, *, plain: bool = False
) -> tuple[tuple[Session | SessionFacts, str] | None, ModeFound | None]:
    """The session deciding for ``call``'s cwd (and why), and its guard mode as
    :func:`guard.gate.resolve` takes it: the worktree's deciding session, unless that is
    not in plan mode and a plan session of a worktree the directory lies in (a submodule,
    a nested repository) is; (None, None) when there is none. ``plain``: read the
    session files without their model (:mod:`guard.planning.session_file`)."""
    here = call.cwd or "."
    found: tuple[Session | SessionFacts, str] | None
    found = deciding_facts(here) if plain else deciding_session(here)
    worktree = None
    if found is None or found[0].mode is not Mode.PLAN:
        around: tuple[Session | SessionFacts, str] | None
        around = plan_facts_around(call, ()) if plain else plan_session_around(call, ())
        if around is not None:
            found, worktree = around, around[0].worktree
    if found is None:
        return None, None
    return found, ModeFound(found[0].mode.value, found[1], worktree)


def describe_current_agent(
    cwd: str | os.PathLike[str],
    env: Mapping[str, str] | None = None,
    policy: str | None = None,
    *,
    plain: bool = False,
) -> CurrentAgent:
    """The agent guard's hooks will use for a call in ``cwd``, and the reason.

    The order is the hooks' own (:func:`guard.gate.resolve`): ``$GUARD_AGENT`` (from
    ``env``, default this process's environment), then the mode of the session that
    decides for the worktree, then the host's permission mode (only known inside a
    hook call). Errors (a corrupt session file, a policy that does not load, an agent
    the policy does not define) are reported as the reason with no agent: the hooks
    deny every call then. ``plain`` reads the sessions without their model
    (:mod:`guard.planning.session_file`: what ``guard mode`` prints): the same answer,
    with no session object in it.
    """
    env = os.environ if env is None else env
    call = ToolCall("host", "-", {}, os.fspath(cwd))
    deciding: tuple[Session | SessionFacts, str] | None = None
    try:
        found: ModeFound | None = None
        if sessions_decide(None, env):  # the sessions are read only when they can decide
            deciding, found = session_deciding(call, plain=plain)
        chosen = resolve(call, env, policy=policy, found=found)
    except GuardError as exc:
        return CurrentAgent(None, f"the hooks deny every call: {exc}")
    if chosen.why == FROM_ENV:
        return CurrentAgent(chosen.agent, f"$GUARD_AGENT={chosen.agent} (set in this environment)")
    g = chosen.guard
    if deciding is not None:
        session, why = deciding
        mode = session.mode
        extra = f"; plan file {session.plan_path}" if mode is Mode.PLAN else ""
        kept = None if isinstance(session, SessionFacts) else session
        return CurrentAgent(chosen.agent, f"{mode.value} mode of {why}{extra}", kept, mode)
    return CurrentAgent(
        g.build_agent_name,
        "no open guard session here: the host's permission mode decides"
        f" ({g.plan_agent_name} in the host's plan mode, {g.build_agent_name} otherwise)",
    )
