"""A host's planning gestures: the interface of a host's ``gestures`` part
(``guard/hosts/<host>/gestures.py``, :meth:`guard.hosts.Host.gestures`), and what the
parts share.

guard's planning hook (:mod:`guard.planning.host`) answers the context events itself
(the mode, the plan file, the user's notes) and hands every other event to the host's
:class:`Gestures`: how that host's model hands its plan over (Claude Code's
``ExitPlanMode``, Gemini CLI's ``exit_plan_mode``, Codex CLI's ``<proposed_plan>``).
"""

from __future__ import annotations

# Lazy imports: binding, sessions load only for hook calls needing them.
import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from guard.planning._vocabulary import utc_now
from guard.planning.artifact import read_plan, write_plan
from guard.planning.event_bus import PlanExit
from guard.planning.session import PendingRequest, Session


@dataclass(frozen=True, slots=True)
class Answer:
    exit_code: int
    stdout: str = ""
    stderr: str = ""


@dataclass(frozen=True, slots=True)
class Gesture:
    """One hook call of the planning side that is not a context event."""

    #: the hook event
    event: str
    #: the host's payload
    payload: Mapping[str, Any]
    #: where the call runs (the payload's cwd, else the hook's)
    cwd: str
    #: the hook's environment
    env: Mapping[str, str]

    @property
    def tool(self) -> object:
        return self.payload.get("tool_name")

    @property
    def tool_input(self) -> Mapping[str, Any]:
        given = self.payload.get("tool_input")
        return given if isinstance(given, dict) else {}

    def text(self, key: str) -> str | None:
        """The payload's ``key`` when it is a string."""
        value = self.payload.get(key)
        return value if isinstance(value, str) else None


class Gestures:
    """The defaults: no exit hint, an empty context says nothing, other events pass."""

    def exit_hint(self, env: Mapping[str, str]) -> str:
        """How the model hands its plan over, in the words the context uses."""
        return ""

    def context(self, event: str, text: str) -> Answer:
        """The answer of a context event telling the model ``text`` ('' for nothing)."""
        return context_answer(event, text)

    def gesture(self, call: Gesture) -> Answer:
        """The answer of any other event (in plan mode): the host's plan gesture."""
        return Answer(0)


def json_answer(payload: Mapping[str, Any]) -> Answer:
    return Answer(0, json.dumps(payload, ensure_ascii=False) + "\n")


def context_answer(event: str, text: str) -> Answer:
    if not text:
        return Answer(0)
    return json_answer({"hookSpecificOutput": {"hookEventName": event, "additionalContext": text}})


def plan_session(cwd: str) -> Session | None:
    """The plan session deciding for ``cwd``: its worktree's, or that of a worktree it lies
    in (a submodule, a nested repository, another checkout: guard.planning.binding)."""
    from guard.effects import ToolCall
    from guard.planning.binding import plan_session_around

    found = plan_session_around(ToolCall("host", "-", {}, cwd))
    return found[0] if found is not None else None


def digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def request_exit(cwd: str, given: str | None, via: str) -> tuple[Session | None, str | None]:
    """Keep the plan (the model's file, else ``given``) and record a pending exit.

    (None, None) without a guard plan session; (session, None) when there is no
    plan to approve; else (session, the plan path).
    """
    session = plan_session(cwd)
    if session is None:
        return None, None
    session.adopt_written_plan()
    plan = read_plan(session)
    if (plan is None or not plan.strip()) and given and given.strip():
        write_plan(session, given)
        plan = read_plan(session)
    if plan is None or not plan.strip():
        return session, None
    with session.transaction() as s:
        s.pending = [p for p in s.pending if p.kind != "plan_exit"]
        s.pending.append(
            PendingRequest(
                kind="plan_exit", at=utc_now(), detail={"via": via, "plan_sha256": digest(plan)}
            )
        )
    session.publish(PlanExit(outcome="requested", text=via, plan_path=session.plan_path))
    return session, session.plan_path


def waits(session: Session, plan_path: str) -> str:
    return (
        f"guard: the plan is saved in {plan_path} and waits for the user, who approves it with"
        f" `guard plan exit --approve` (session {session.id}); plan mode holds until then."
    )


#: The gestures of a host without a ``gestures`` part.
PLAIN = Gestures()
