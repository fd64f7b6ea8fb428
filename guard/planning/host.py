"""The planning side of a host's hooks: what the model is told, and the host's plan gesture.

``guard install HOST`` wires this module next to the policy hook, for each host whose
record has planning events (:attr:`guard.hosts.Host.planning`)::

    SessionStart, UserPromptSubmit   -> additionalContext: the mode, the plan file, how
    (Gemini CLI: BeforeAgent)           the plan is approved (at the start of each turn)
    any other event                  -> the host's plan gesture: its ``gestures`` part
                                        (guard/hosts/<host>/gestures.py): Claude Code's
                                        ExitPlanMode, Gemini CLI's exit_plan_mode, Codex
                                        CLI's <proposed_plan>

Run as ``python -I -m guard.planning.host HOST [--agent A] [--policy P]`` with the
host's payload on stdin. Context events never block the user's prompt (exit 0, and a
failure is reported as context); the exit gates fail closed (exit 2).
"""

from __future__ import annotations

# Lazy imports: binding, missed calls load only for hook calls needing them.
import json
import os
import shlex
import sys
from collections.abc import Mapping

from guard import hosts
from guard.hooks.arguments import hook_arguments
from guard.planning._vocabulary import Mode
from guard.planning.current import describe_current_agent
from guard.planning.handover import (
    PLAIN,
    Answer,
    Gesture,
    Gestures,
    context_answer,
    plan_session,
)
from guard.planning.notes import take_notes_at, with_notes
from guard.planning.runtime import plan_file_instruction

HOSTS = hosts.PLANNED
MODULE = "guard.planning.host"
#: Per host: the events whose answer is context for the model.
CONTEXT_EVENTS: dict[str, tuple[str, ...]] = {
    h.name: h.planning.context_events for h in hosts.HOSTS if h.planning
}


def planning_command(hook_command: str, host: str) -> str | None:
    """The command for this module, built from guard's policy hook command.

    Same interpreter and ``--agent``/``--policy`` options; None when the hook
    command has no absolute interpreter to reuse.
    """
    try:
        words = shlex.split(hook_command.split("||", 1)[0])
    except ValueError:
        return None
    if not words or not os.path.isabs(words[0]):
        return None
    options: list[str] = []
    it = iter(words[1:])
    for word in it:
        if word in ("--agent", "--policy"):
            options += [word, next(it, "")]
        elif word.startswith(("--agent=", "--policy=")):
            options.append(word)
    parts = [words[0], "-I", "-m", MODULE, host, *options]
    # the hook command's own failure tail (a block, said plainly when guard is absent)
    tail = hook_command.split("||", 1)[1].strip() if "||" in hook_command else "exit 2"
    return " ".join(shlex.quote(p) for p in parts) + " || " + tail


def context_text(
    cwd: str,
    env: Mapping[str, str],
    *,
    agent: str | None = None,
    policy: str | None = None,
    permission_mode: str | None = None,
    host: str,
) -> str:
    """What the model is told at the start of a session and of each turn ('' for nothing)."""
    exit_hint = _gestures(host).exit_hint(env)
    if agent:
        env = {**env, "GUARD_AGENT": agent}
    current = describe_current_agent(cwd, env=env, policy=policy)
    session = current.session
    if current.agent is None:
        return f"guard: {current.reason}. Tell the user; every tool call is refused until then."
    if session is not None and current.mode is Mode.PLAN:
        return "guard: " + plan_file_instruction(cwd, session, exit_hint=exit_hint)
    if session is not None:
        approved = [d for d in session.decisions if d.decision == "approve"]
        if approved and approved[-1].plan_path:
            return (
                f"guard: build mode (session {session.id}): the user approved the plan in"
                f" {approved[-1].plan_path}; carry it out."
            )
        return ""
    plan_agent = permission_mode == "plan" or current.agent == "plan"
    if plan_agent:
        planning = plan_session(cwd)
        return "guard: " + plan_file_instruction(cwd, planning, exit_hint=exit_hint)
    return ""


def _gestures(host: str) -> Gestures:
    known = hosts.get(host)
    found = known.gestures() if known is not None else None
    return found if found is not None else PLAIN


def held_text(host: str, session_id: str | None, cwd: str) -> str:
    """What the model is told at each turn while guard holds its host session after
    ``hook_missed`` (guard.hooks.missed), else ''."""
    from guard.hooks import missed, reconcile

    data = missed.read_hold(missed.hold_path(host, session_id, cwd))
    if data is None:
        return ""
    return "guard: " + missed.held_reason(data, reconcile.describe(data.get("landed"))) + "."


def _bound_worktree(cwd: str, host_session: object) -> str | None:
    """The worktree of the plan session the agent run is bound to when its cwd lies outside
    it (guard.planning.binding): each turn then names that plan, as its refusals do."""
    if not isinstance(host_session, str) or not host_session:
        return None
    from guard.effects import GuardError, ToolCall
    from guard.planning.binding import ruling

    try:
        found = ruling(ToolCall("host", "-", {}, cwd, host_session))
    except (GuardError, OSError):  # the context of cwd says what is broken (the hooks deny)
        return None
    if found is None or found.mode != "plan" or not found.worktree:
        return None
    return found.worktree


def answer(
    payload_text: bytes | str,
    argv: list[str],
    env: Mapping[str, str] | None = None,
    cwd: str | None = None,
) -> Answer:
    """Answer one hook call of the planning side."""
    env = os.environ if env is None else env
    event = "?"
    host = "?"
    try:
        host, agent, policy = hook_arguments(argv, HOSTS, only_known=True)
        payload = json.loads(payload_text)
        if not isinstance(payload, dict):
            raise ValueError("stdin must be a JSON object")
        event = str(payload.get("hook_event_name") or "?")
        where = payload.get("cwd") if isinstance(payload.get("cwd"), str) else None
        here = where or cwd or os.getcwd()
        mode = payload.get("permission_mode")
        mode = mode if isinstance(mode, str) else None
        if event in CONTEXT_EVENTS[host]:
            session_id = payload.get("session_id")
            bound = session_id if isinstance(session_id, str) else None
            told = _bound_worktree(here, session_id) if not agent else None
            text = context_text(
                told or here, env, agent=agent, policy=policy, permission_mode=mode, host=host
            )
            held = held_text(host, bound, here)
            text = f"{held} {text}".strip() if held else text
            text = with_notes(text, take_notes_at(told or here, bound)) or ""
            return _gestures(host).context(event, text)
        if agent and agent != "plan":
            return Answer(0)
        return _gestures(host).gesture(Gesture(event, payload, here, env))
    except Exception as exc:
        reason = f"guard (planning hook): {type(exc).__name__}: {exc}"
        if event in CONTEXT_EVENTS.get(host, ()):  # never block the user's prompt; say what broke
            return context_answer(event, reason)
        return Answer(2, "", reason + "\n")


def main(argv: list[str] | None = None) -> int:
    result = answer(sys.stdin.buffer.read(), sys.argv[1:] if argv is None else argv)
    if result.stdout:
        sys.stdout.write(result.stdout)
        sys.stdout.flush()
    if result.stderr:
        sys.stderr.write(result.stderr)
    return result.exit_code


if __name__ == "__main__":
    raise SystemExit(main())
