"""The planning side of a host's hooks: what the model is told, and the host's plan gesture.

``guard install claude-code`` wires this module next to the policy hook::

    SessionStart, UserPromptSubmit   -> additionalContext: the mode, the plan file, how
                                        the plan is approved (at the start of each turn)
    PreToolUse  ExitPlanMode {plan}  -> the plan text becomes the plan file when the model
                                        wrote none; the exit is recorded as pending and the
                                        answer is "ask": the user approves in Claude Code's
                                        prompt, or with `guard plan exit --approve`
    PostToolUse ExitPlanMode         -> the tool ran, so the user said yes to that prompt:
                                        the pending exit is approved and the hooks switch to
                                        the build agent for the session, without a restart

``guard install gemini`` (Gemini CLI 0.61) wires::

    SessionStart, BeforeAgent        -> hookSpecificOutput.additionalContext, as above
    BeforeTool  exit_plan_mode       -> Gemini's own exit (``{plan_filename}``, a file in
                                        ``$GEMINI_PLANS_DIR``): its text becomes the plan
                                        file when the model wrote none, the exit is recorded
                                        as pending, and the call is refused: Gemini's hooks
                                        cannot ask, and headless Gemini approves its own exit
                                        with nobody asked, so the user approves with
                                        `guard plan exit --approve`

``guard install codex`` (Codex CLI 0.171) wires::

    SessionStart, UserPromptSubmit   -> hookSpecificOutput.additionalContext, as above
    Stop                             -> Codex's plan gesture is text: a final answer holding
                                        ``<proposed_plan>...</proposed_plan>``. Its text
                                        becomes the plan file when the model wrote none, the
                                        exit is recorded as pending, and the user is told
                                        (systemMessage) to approve with `guard plan exit
                                        --approve`; Codex hooks cannot ask. (``update_plan``
                                        is Codex's checklist, not an exit: guard refuses it
                                        in plan mode.)

Run as ``python -I -m guard.planning.host HOST [--agent A] [--policy P]`` with the
host's payload on stdin. Context events never block the user's prompt (exit 0, and a
failure is reported as context); the exit gates fail closed (exit 2).
"""

from __future__ import annotations

# Lazy imports: binding, sessions, missed calls load only for hook calls needing them.
import hashlib
import json
import os
import re
import shlex
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from guard import hosts
from guard.hosts import claude_code, codex, gemini
from guard.planning._vocabulary import Mode, utc_now
from guard.planning.artifact import read_plan, write_plan
from guard.planning.current import describe_current_agent
from guard.planning.event_bus import PlanExit
from guard.planning.handshake import UserDecision, plan_exit
from guard.planning.notes import notes_text, take_notes_at, with_notes
from guard.planning.runtime import plan_file_instruction
from guard.planning.session import PendingRequest, Session

HOSTS = hosts.PLANNED
MODULE = "guard.planning.host"
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
GEMINI_EXIT_TOOL = "exit_plan_mode"
CODEX_PLAN_TAG = re.compile(r"<proposed_plan>\s*(.*?)\s*</proposed_plan>", re.DOTALL)
CODEX_EXIT_HINT = (
    "end your turn with the plan inside <proposed_plan>...</proposed_plan> (guard keeps it"
    " as the plan file when you wrote none)"
)
#: Claude Code permission modes in which an "ask" answer reaches the user as a prompt.
PROMPTING_MODES = frozenset({"default", "plan", "acceptEdits"})
#: Per host: the events whose answer is context for the model.
CONTEXT_EVENTS: dict[str, tuple[str, ...]] = {
    h.name: h.planning.context_events for h in hosts.HOSTS if h.planning
}
#: Per host: how the model hands its plan over, in the words the context uses.
EXIT_HINTS: dict[str, str] = {
    claude_code.HOST.name: EXIT_HINT, gemini.HOST.name: "", codex.HOST.name: CODEX_EXIT_HINT,
}


def _hook_events(host: hosts.Host) -> tuple[tuple[str, str | None], ...]:
    assert host.planning is not None, host.name
    return host.planning.hook_events


#: (event, matcher) pairs ``guard install`` wires to this module for Claude Code.
CLAUDE_CODE_EVENTS = _hook_events(claude_code.HOST)
#: (event, matcher) pairs ``guard install`` wires to this module for Gemini CLI.
GEMINI_EVENTS = _hook_events(gemini.HOST)
#: (event, matcher) pairs ``guard install`` wires to this module for Codex CLI.
CODEX_EVENTS = _hook_events(codex.HOST)


@dataclass(frozen=True, slots=True)
class Answer:
    exit_code: int
    stdout: str = ""
    stderr: str = ""


def planning_command(hook_command: str, host: str = claude_code.HOST.name) -> str | None:
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


def _parse_args(argv: list[str]) -> tuple[str, str | None, str | None]:
    host: str | None = None
    agent: str | None = None
    policy: str | None = None
    it = iter(argv)
    for arg in it:
        if arg in ("--agent", "--policy"):
            value = next(it, "")
            if not value:
                raise ValueError(f"{arg} needs a value")
            agent, policy = (value, policy) if arg == "--agent" else (agent, value)
        elif arg.startswith("--agent="):
            agent = arg.split("=", 1)[1]
        elif arg.startswith("--policy="):
            policy = arg.split("=", 1)[1]
        elif arg in HOSTS and host is None:
            host = arg
        else:
            raise ValueError(f"unexpected argument {arg!r} (hosts: {', '.join(HOSTS)})")
    if host is None:
        raise ValueError(f"which host? ({', '.join(HOSTS)})")
    return host, agent, policy


def context_text(
    cwd: str,
    env: Mapping[str, str],
    *,
    agent: str | None = None,
    policy: str | None = None,
    permission_mode: str | None = None,
    host: str = claude_code.HOST.name,
) -> str:
    """What the model is told at the start of a session and of each turn ('' for nothing)."""
    exit_hint = EXIT_HINTS.get(host, "")
    if host == claude_code.HOST.name and env.get("CLAUDE_CODE_ENTRYPOINT") == HEADLESS_ENTRYPOINT:
        exit_hint = HEADLESS_EXIT_HINT
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
        planning = _plan_session(cwd)
        return "guard: " + plan_file_instruction(cwd, planning, exit_hint=exit_hint)
    return ""


def _json(payload: Mapping[str, Any]) -> Answer:
    return Answer(0, json.dumps(payload, ensure_ascii=False) + "\n")


def _context_answer(event: str, text: str) -> Answer:
    if not text:
        return Answer(0)
    return _json({"hookSpecificOutput": {"hookEventName": event, "additionalContext": text}})


def _plan_session(cwd: str) -> Session | None:
    """The plan session deciding for ``cwd``: its worktree's, or that of a worktree it lies
    in (a submodule, a nested repository, another checkout: guard.planning.binding)."""
    from guard.effects import ToolCall
    from guard.planning.binding import plan_session_around

    found = plan_session_around(ToolCall("host", "-", {}, cwd))
    return found[0] if found is not None else None


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def exit_requested(cwd: str, tool_input: Mapping[str, Any], tool_use_id: str | None) -> Answer:
    """PreToolUse ExitPlanMode: keep the plan, record the request, ask the user."""
    session = _plan_session(cwd)
    if session is None:
        return Answer(0)  # no guard plan session here: the policy hook decides alone
    notes = notes_text(session.take_inbox())
    if notes:  # the user answered an earlier exit: the model reads that before asking again
        again = f"Update the plan in {session.plan_path}, then call {EXIT_TOOL} again."
        return _json(_pre_answer("deny", f"guard: plan mode holds. {notes}\n{again}"))
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
        return _json(_pre_answer("deny", reason))
    with session.transaction() as s:
        s.pending = [p for p in s.pending if p.kind != "plan_exit"]
        s.pending.append(
            PendingRequest(
                kind="plan_exit",
                at=utc_now(),
                detail={
                    "via": f"{claude_code.HOST.name} {EXIT_TOOL}",
                    "tool_use_id": tool_use_id,
                    "plan_sha256": _digest(plan),
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
    return _json(_pre_answer("ask", reason))


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
    session = _plan_session(cwd)
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
    if plan is None or _digest(plan) != pending[-1].detail.get("plan_sha256"):
        return _post_context(
            "guard: the plan file changed after the user was asked; plan mode continues."
            " Call ExitPlanMode again."
        )
    outcome = plan_exit(session, UserDecision.approve("approved in Claude Code's prompt"))
    return _post_context("guard: " + outcome.text)


def _post_context(text: str) -> Answer:
    output = {"hookEventName": "PostToolUse", "additionalContext": text}
    return _json({"hookSpecificOutput": output})


def _request_exit(cwd: str, given: str | None, via: str) -> tuple[Session | None, str | None]:
    """Keep the plan (the model's file, else ``given``) and record a pending exit.

    (None, None) without a guard plan session; (session, None) when there is no
    plan to approve; else (session, the plan path).
    """
    session = _plan_session(cwd)
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
                kind="plan_exit", at=utc_now(), detail={"via": via, "plan_sha256": _digest(plan)}
            )
        )
    session.publish(PlanExit(outcome="requested", text=via, plan_path=session.plan_path))
    return session, session.plan_path


def _waits(session: Session, plan_path: str) -> str:
    return (
        f"guard: the plan is saved in {plan_path} and waits for the user, who approves it with"
        f" `guard plan exit --approve` (session {session.id}); plan mode holds until then."
    )


#: Gemini's plan files are small markdown; more than this is not a plan.
MAX_PLAN_BYTES = 1 << 20


def gemini_plan_text(filename: object, plans_dir: str | None) -> str | None:
    """The text of Gemini's plan ``filename`` in ``$GEMINI_PLANS_DIR``; None if unsafe or absent.

    Only a regular ``*.md`` file directly inside that directory, never through a link.
    """
    if not isinstance(filename, str) or not plans_dir or not filename.endswith(".md"):
        return None
    if "/" in filename or filename.startswith(".") or "\x00" in filename:
        return None
    try:  # O_NONBLOCK: opening a FIFO planted under that name must not wait for a writer
        fd = os.open(os.path.join(plans_dir, filename),
                     os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        import stat

        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        data = os.read(fd, MAX_PLAN_BYTES + 1)
    finally:
        os.close(fd)
    if len(data) > MAX_PLAN_BYTES:
        return None
    return data.decode("utf-8", errors="replace")


def gemini_exit(cwd: str, tool_input: Mapping[str, Any], env: Mapping[str, str]) -> Answer:
    """BeforeTool exit_plan_mode: keep the plan, record the request, refuse the exit.

    Gemini's hooks cannot ask, and headless Gemini approves its own exit with
    nobody asked, so the exit never counts as the user's approval here.
    """
    given = gemini_plan_text(tool_input.get("plan_filename"), env.get("GEMINI_PLANS_DIR"))
    session, plan_path = _request_exit(cwd, given, f"{gemini.HOST.name} {GEMINI_EXIT_TOOL}")
    if session is None:
        return _json({})  # no guard plan session here: the policy hook decides alone
    if plan_path is None:
        reason = f"guard: there is no plan to approve yet. {plan_file_instruction(cwd, session)}"
    else:
        reason = _waits(session, plan_path) + " End your turn."
    reason = with_notes(reason, notes_text(session.take_inbox())) or reason
    return _json({"decision": "deny", "reason": reason})


def codex_stop(cwd: str, message: object, host_session: str | None = None) -> Answer:
    """Stop: a final answer with ``<proposed_plan>`` is Codex's plan hand-over. The user's
    words waiting for the model (a refine note, a reject reason) keep the turn going, as
    its next prompt."""
    notes = take_notes_at(cwd, host_session)
    if notes:
        return _json({"decision": "block", "reason": notes})
    found = CODEX_PLAN_TAG.findall(message) if isinstance(message, str) else []
    if not found:
        return Answer(0)
    session, plan_path = _request_exit(cwd, str(found[-1]), f"{codex.HOST.name} <proposed_plan>")
    if session is None:
        return Answer(0)
    if plan_path is None:
        return _json({"systemMessage": "guard: the proposed plan is empty; plan mode holds."})
    return _json({"systemMessage": _waits(session, plan_path)})


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


def _context_answer_for(host: str, event: str, text: str) -> Answer:
    if host == gemini.HOST.name and not text:
        return _json({})
    return _context_answer(event, text)


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
        host, agent, policy = _parse_args(argv)
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
            return _context_answer_for(host, event, text)
        if agent and agent != "plan":
            return Answer(0)
        tool = payload.get("tool_name")
        tool_input = payload.get("tool_input")
        tool_input = tool_input if isinstance(tool_input, dict) else {}
        if host == gemini.HOST.name:
            if event == "BeforeTool" and tool == GEMINI_EXIT_TOOL:
                return gemini_exit(here, tool_input, env)
            return _json({})
        if host == codex.HOST.name:
            if event == "Stop":
                sid = payload.get("session_id")
                return codex_stop(here, payload.get("last_assistant_message"),
                                  sid if isinstance(sid, str) else None)  # fmt: skip
            return Answer(0)
        use_id = payload.get("tool_use_id") if isinstance(payload.get("tool_use_id"), str) else None
        if tool != EXIT_TOOL:
            return Answer(0)
        if event == "PreToolUse":
            return exit_requested(here, tool_input, use_id)
        if event == "PostToolUse":
            return exit_ran(here, use_id, mode)
        return Answer(0)
    except Exception as exc:
        reason = f"guard (planning hook): {type(exc).__name__}: {exc}"
        if event in CONTEXT_EVENTS.get(host, ()):  # never block the user's prompt; say what broke
            return _context_answer(event, reason)
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
