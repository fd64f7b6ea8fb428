"""Claude Code's planning gestures: ``ExitPlanMode`` (guard.planning.host)::

    PreToolUse  ExitPlanMode {plan}  -> the plan text becomes the plan file when the model
                                        wrote none; the exit is recorded as pending and the
                                        answer is "ask": the user approves in Claude Code's
                                        prompt, or with `guard plan exit --approve`
    PostToolUse ExitPlanMode         -> the tool ran, so the user said yes to that prompt:
                                        the pending exit is approved and the hooks switch to
                                        the build agent for the session, without a restart
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from guard.hosts.claude_code import HOST
from guard.planning._vocabulary import utc_now
from guard.planning.artifact import read_plan, write_plan
from guard.planning.event_bus import PlanExit
from guard.planning.handover import (
    Answer,
    Gesture,
    Gestures,
    digest,
    json_answer,
    plan_session,
)
from guard.planning.handshake import UserDecision, plan_exit
from guard.planning.notes import notes_text
from guard.planning.runtime import plan_file_instruction
from guard.planning.session import PendingRequest

EXIT_TOOL = "ExitPlanMode"
EXIT_HINT = (
    "call ExitPlanMode with the plan (guard keeps it as the plan file and asks the user)"
)
#: Claude Code's entry point in print mode (``claude -p``), as its hooks see it in
#: ``$CLAUDE_CODE_ENTRYPOINT``: no ExitPlanMode tool there, so the user approves outside.
HEADLESS_ENTRYPOINT = "sdk-cli"
HEADLESS_EXIT_HINT = (
    "stop and tell the user it is ready (Claude Code runs headless here, with -p: it has"
    " no ExitPlanMode tool)"
)
#: Claude Code permission modes in which an "ask" answer reaches the user as a prompt.
PROMPTING_MODES = frozenset({"default", "plan", "acceptEdits"})


class ClaudeCodeGestures(Gestures):
    def exit_hint(self, env: Mapping[str, str]) -> str:
        if env.get("CLAUDE_CODE_ENTRYPOINT") == HEADLESS_ENTRYPOINT:
            return HEADLESS_EXIT_HINT
        return EXIT_HINT

    def gesture(self, call: Gesture) -> Answer:
        if call.tool != EXIT_TOOL:
            return Answer(0)
        use_id = call.text("tool_use_id")
        if call.event == "PreToolUse":
            return exit_requested(call.cwd, call.tool_input, use_id)
        if call.event == "PostToolUse":
            return exit_ran(call.cwd, use_id, call.text("permission_mode"))
        return Answer(0)


def exit_requested(cwd: str, tool_input: Mapping[str, Any], tool_use_id: str | None) -> Answer:
    """PreToolUse ExitPlanMode: keep the plan, record the request, ask the user."""
    session = plan_session(cwd)
    if session is None:
        return Answer(0)  # no guard plan session here: the policy hook decides alone
    notes = notes_text(session.take_inbox())
    if notes:  # the user answered an earlier exit: the model reads that before asking again
        again = f"Update the plan in {session.plan_path}, then call {EXIT_TOOL} again."
        return json_answer(_pre_answer("deny", f"guard: plan mode holds. {notes}\n{again}"))
    session.adopt_written_plan()
    plan = read_plan(session)
    given = tool_input.get("plan")
    if (plan is None or not plan.strip()) and isinstance(given, str) and given.strip():
        write_plan(session, given)
        plan = read_plan(session)
    if plan is None or not plan.strip():
        reason = (
            f"guard: there is no plan to approve yet. {plan_file_instruction(cwd, session)}"
        )
        return json_answer(_pre_answer("deny", reason))
    with session.transaction() as s:
        s.pending = [p for p in s.pending if p.kind != "plan_exit"]
        s.pending.append(
            PendingRequest(
                kind="plan_exit",
                at=utc_now(),
                detail={
                    "via": f"{HOST.name} {EXIT_TOOL}",
                    "tool_use_id": tool_use_id,
                    "plan_sha256": digest(plan),
                },
            )
        )
    session.publish(
        PlanExit(outcome="requested", text="ExitPlanMode", plan_path=session.plan_path)
    )
    reason = (
        f"guard: the plan is saved in {session.plan_path}. The user approves it here, or with"
        f" `guard plan exit --approve` (session {session.id}); until then plan mode holds."
    )
    return json_answer(_pre_answer("ask", reason))


def _pre_answer(decision: str, reason: str) -> dict[str, Any]:
    return {
        "hookSpecificOutput": {
            "hookEventName": "PreToolUse",
            "permissionDecision": decision,
            "permissionDecisionReason": reason,
        }
    }


def exit_ran(cwd: str, tool_use_id: str | None, permission_mode: str | None) -> Answer:
    """PostToolUse ExitPlanMode: the user let the exit run; approve the plan they saw."""
    session = plan_session(cwd)
    if session is None:
        return Answer(0)
    pending = [
        p
        for p in session.pending
        if p.kind == "plan_exit" and tool_use_id and p.detail.get("tool_use_id") == tool_use_id
    ]
    if not pending or permission_mode not in PROMPTING_MODES:
        why = (
            "guard did not ask the user about this exit"
            if not pending
            else f"in permission mode {permission_mode!r} Claude Code does not ask the user"
        )
        return _post_context(
            f"guard: plan mode continues ({why}); the user approves the plan with"
            f" `guard plan exit --approve --session {session.id}`."
        )
    plan = read_plan(session)
    if plan is None or digest(plan) != pending[-1].detail.get("plan_sha256"):
        return _post_context(
            "guard: the plan file changed after the user was asked; plan mode continues."
            " Call ExitPlanMode again."
        )
    outcome = plan_exit(session, UserDecision.approve("approved in Claude Code's prompt"))
    return _post_context("guard: " + outcome.text)


def _post_context(text: str) -> Answer:
    output = {"hookEventName": "PostToolUse", "additionalContext": text}
    return json_answer({"hookSpecificOutput": output})


GESTURES = ClaudeCodeGestures()
