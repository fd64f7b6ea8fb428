"""Each host's own checklist tool reaches the session's events through guard's post-tool hook,
and the cockpit's checklist lane shows it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from textual.pilot import Pilot

from guard.hooks.front_door import decide
from guard.planning import Mode, Session
from guard.planning.event_bus import PlanUpdate, read_events
from guard.ui.app import CockpitApp
from tests.ui.conftest import cockpit, drive, shows

STEPS = [("Read the loader", "completed"), ("Write the plan", "in_progress"), ("Ask", "pending")]

#: host -> (post-tool event, tool name, tool input) in the shape each host sends
CALLS: dict[str, tuple[str, str, dict[str, Any]]] = {
    "claude-code": ("PostToolUse", "TodoWrite", {"todos": [
        {"content": s, "status": st, "activeForm": s + "..."} for s, st in STEPS]}),
    "codex": ("PostToolUse", "update_plan", {"explanation": "first the loader", "plan": [
        {"step": s, "status": st} for s, st in STEPS]}),
    "gemini": ("AfterTool", "write_todos", {"todos": [
        {"description": s, "status": st} for s, st in STEPS]}),
    "opencode": ("tool.execute.after", "todowrite", {"todos": [
        {"content": s, "status": st, "priority": "high", "id": str(n)}
        for n, (s, st) in enumerate(STEPS)]}),
}  # fmt: skip


def payload(repo: Path, event: str, tool: str, tool_input: dict[str, Any]) -> str:
    return json.dumps({
        "session_id": "host-session-1", "transcript_path": str(repo / "none.jsonl"),
        "cwd": str(repo), "permission_mode": "default", "hook_event_name": event,
        "tool_name": tool, "tool_input": tool_input, "tool_use_id": "toolu_01TODO",
        "tool_response": {},
    })  # fmt: skip


def updates(session: Session) -> list[PlanUpdate]:
    return [e for e in read_events(session) if isinstance(e, PlanUpdate)]


@pytest.mark.parametrize("host", sorted(CALLS))
def test_the_hosts_checklist_tool_is_captured_after_it_ran(host: str, repo: Path) -> None:
    session = Session.start(repo, Mode.PLAN, title="Add caching")
    event, tool, tool_input = CALLS[host]
    pre = {"claude-code": "PreToolUse", "codex": "PreToolUse", "gemini": "BeforeTool",
           "opencode": "tool.execute.before"}[host]  # fmt: skip
    decide(host, payload(repo, pre, tool, tool_input), env={}, cwd=str(repo))
    assert updates(session) == []  # asked is not done: the tool may not run
    answer = decide(host, payload(repo, event, tool, tool_input), env={}, cwd=str(repo))
    assert answer.exit_code == 0, answer.stderr
    (update,) = updates(session)
    assert update.source == f"{host} {tool}"
    assert [(i.step, i.status.value) for i in update.plan] == STEPS

    async def steps(pilot: Pilot[None], app: CockpitApp) -> None:
        screen = await shows(pilot, app, "[>] Write the plan")
        assert "[x] Read the loader" in screen and "[ ] Ask" in screen
        assert f"{host} {tool}"[:14] in screen

    drive(cockpit(repo), steps, size=(100, 40))


def test_an_unreadable_list_is_left_out_and_changes_no_answer(repo: Path) -> None:
    session = Session.start(repo, Mode.PLAN, title="Add caching")
    bad = payload(repo, "PostToolUse", "TodoWrite", {"todos": "not a list"})
    good = payload(repo, "PostToolUse", "Read", {"file_path": str(repo / "src/app.py")})
    a = decide("claude-code", bad, env={}, cwd=str(repo))
    b = decide("claude-code", good, env={}, cwd=str(repo))
    assert (a.exit_code, a.stdout) == (b.exit_code, b.stdout)
    assert updates(session) == []


def test_gemini_cancelled_steps_are_marked(repo: Path) -> None:
    session = Session.start(repo, Mode.BUILD)
    todos = {"todos": [{"description": "Drop the cache", "status": "cancelled"}]}
    decide("gemini", payload(repo, "AfterTool", "write_todos", todos), env={}, cwd=str(repo))
    (update,) = updates(session)
    assert [(i.step, i.status.value) for i in update.plan] == [
        ("Drop the cache (cancelled)", "pending")
    ]
