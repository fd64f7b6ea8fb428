"""The agent guard's hooks use for a worktree right now, and why (``guard mode``,
``guard doctor``, ``guard ui`` and the context a host injects at each turn print it).

It holds :func:`describe_current_agent` and its answer :class:`CurrentAgent`. It does
not choose anything itself: the order (--agent, ``$GUARD_AGENT``, the deciding
session's mode, the host's hint) and the policy are :func:`guard.gate.resolve`'s;
this module finds the session for a worktree without a call and words the answer.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from guard.effects import Effect, GuardError, ToolCall
from guard.gate import FROM_ENV, resolve
from guard.planning._vocabulary import Mode
from guard.planning.binding import plan_session_around
from guard.planning.deciding import deciding_session
from guard.planning.found import ModeFound

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


def describe_current_agent(
    cwd: str | os.PathLike[str],
    env: Mapping[str, str] | None = None,
    policy: str | None = None,
) -> CurrentAgent:
    """The agent guard's hooks will use for a call in ``cwd``, and the reason.

    The order is the hooks' own (:func:`guard.gate.resolve`): ``$GUARD_AGENT`` (from
    ``env``, default this process's environment), then the mode of the session that
    decides for the worktree, then the host's permission mode (only known inside a
    hook call). Errors (a corrupt session file, a policy that does not load, an agent
    the policy does not define) are reported as the reason with no agent: the hooks
    deny every call then.
    """
    env = os.environ if env is None else env
    here = os.fspath(cwd)
    seen: list[tuple[Session, str]] = []

    def session_mode(call: ToolCall, effects: Sequence[Effect]) -> ModeFound | None:
        found = deciding_session(here)
        worktree = None
        if found is None or found[0].mode is not Mode.PLAN:
            # a plan session of a worktree this directory lies in (submodule, nested repo...)
            around = plan_session_around(call, effects)
            if around is not None:
                found, worktree = around, around[0].worktree
        if found is None:
            return None
        seen.append(found)
        return ModeFound(found[0].mode.value, found[1], worktree)

    try:
        chosen = resolve(ToolCall("host", "-", {}, here), env, policy=policy, mode=session_mode)
    except GuardError as exc:
        return CurrentAgent(None, f"the hooks deny every call: {exc}")
    if chosen.why == FROM_ENV:
        return CurrentAgent(chosen.agent, f"$GUARD_AGENT={chosen.agent} (set in this environment)")
    g = chosen.guard
    if seen:
        session, why = seen[-1]
        mode = session.mode
        extra = f"; plan file {session.plan_path}" if mode is Mode.PLAN else ""
        return CurrentAgent(chosen.agent, f"{mode.value} mode of {why}{extra}", session, mode)
    return CurrentAgent(
        g.build_agent_name,
        "no open guard session here: the host's permission mode decides"
        f" ({g.plan_agent_name} in the host's plan mode, {g.build_agent_name} otherwise)",
    )
