"""Reject and refine reach the model on every host: the user's words (stored by `guard plan
exit --reject/--refine` or the cockpit) are in what the host's hooks tell the model next,
once: the refusal of a tool call, a tool's result, the next prompt, the host's own exit
gesture, Codex's Stop, and the MCP planning tools."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from guard.hooks.front_door import decide
from guard.planning import Mode, Session
from guard.planning.answer import answer_exit
from guard.planning.host import answer as planning_answer
from guard.planning.tools import handle_tool_call
from tests.integrations.payloads import (
    claude_payload,
    codex_payload,
    cursor_payload,
    gemini_payload,
    opencode_payload,
)

NOTE = "also cover the migration of old configs"
REASON = "the plan never says how stale entries are dropped"


def _session(repo: Path) -> Session:
    session = Session.start(repo, Mode.PLAN, title="Add caching")
    assert session.plan_path
    Path(session.plan_path).write_text("# Plan\n\n1. cache\n")
    return session


def _write_call(host: str, repo: Path) -> dict[str, Any]:
    """A call plan mode refuses, in the host's shape."""
    target = str(repo / "src" / "app.py")
    if host == "claude-code":
        return claude_payload("Write", {"file_path": target, "content": "x\n"}, repo)
    if host == "codex":
        return codex_payload("Bash", {"command": "echo hi > src/app.py"}, repo)
    if host == "gemini":
        return gemini_payload("write_file", {"file_path": "src/app.py", "content": "x"}, repo)
    if host == "opencode":
        return opencode_payload("write", {"filePath": target, "content": "x"}, repo)
    return cursor_payload("beforeShellExecution", repo, command="echo hi > src/app.py",
                          cwd=str(repo))  # fmt: skip


def _hook(host: str, payload: dict[str, Any], repo: Path) -> str:
    """Everything the hook said (stdout and stderr): what the host hands the model."""
    got = decide(host, json.dumps(payload), env={}, cwd=str(repo))
    return got.stdout + got.stderr


@pytest.mark.parametrize("host", ["claude-code", "codex", "gemini", "opencode", "cursor"])
@pytest.mark.parametrize(("choice", "words"), [("refine", NOTE), ("reject", REASON)])
def test_the_next_refusal_carries_the_users_words_once(
    repo: Path, host: str, choice: str, words: str
) -> None:
    session = _session(repo)
    answer_exit(session, choice, words)  # type: ignore[arg-type]
    told = _hook(host, _write_call(host, repo), repo)
    assert "deny" in told or "block" in told or '"permission": "deny"' in told, told
    assert words in told and "Messages from the user" in told
    again = _hook(host, _write_call(host, repo), repo)
    assert words not in again  # taken once


def _read_then_post(host: str, repo: Path) -> str:
    """An allowed read, then its post-tool event: the text added to the tool's result."""
    (repo / "README.md").write_text("hi\n")
    readme = str(repo / "README.md")
    if host == "claude-code":
        pre = claude_payload("Read", {"file_path": readme}, repo)
        post = {**pre, "hook_event_name": "PostToolUse", "tool_response": {"ok": True}}
    elif host == "codex":
        pre = codex_payload("Bash", {"command": "cat README.md"}, repo)
        post = {**pre, "hook_event_name": "PostToolUse", "tool_response": "hi"}
    elif host == "gemini":
        pre = gemini_payload("read_file", {"file_path": "README.md"}, repo)
        post = {**pre, "hook_event_name": "AfterTool", "tool_response": {"llmContent": "hi"}}
    else:
        pre = opencode_payload("read", {"filePath": readme}, repo)
        post = {**pre, "hook_event_name": "tool.execute.after"}
    first = _hook(host, pre, repo)
    assert NOTE not in first  # an allowed call's answer has no room for it
    return _hook(host, post, repo)


@pytest.mark.parametrize("host", ["claude-code", "codex", "gemini", "opencode"])
def test_a_tools_result_carries_the_note(repo: Path, host: str) -> None:
    session = _session(repo)
    answer_exit(session, "refine", NOTE)
    told = _read_then_post(host, repo)
    assert NOTE in told, told
    assert not session.refresh().inbox


@pytest.mark.parametrize(("host", "event"), [
    ("claude-code", "UserPromptSubmit"), ("claude-code", "SessionStart"),
    ("codex", "UserPromptSubmit"), ("codex", "SessionStart"),
    ("gemini", "BeforeAgent"), ("gemini", "SessionStart"),
])  # fmt: skip
def test_the_next_prompt_carries_the_note(repo: Path, host: str, event: str) -> None:
    session = _session(repo)
    answer_exit(session, "reject", REASON)
    payload = {"session_id": "s", "cwd": str(repo), "hook_event_name": event, "prompt": "go"}
    got = planning_answer(json.dumps(payload), [host], env={})
    context = json.loads(got.stdout)["hookSpecificOutput"]["additionalContext"]
    assert REASON in context and "rejected the plan" in context
    assert f"write your plan to {session.plan_path}" in context  # the usual context stays


def test_claude_codes_exit_plan_mode_answer_carries_the_note(repo: Path) -> None:
    session = _session(repo)
    answer_exit(session, "refine", NOTE)
    payload = claude_payload("ExitPlanMode", {"plan": "# Plan\n"}, repo, "plan")
    out = json.loads(planning_answer(json.dumps(payload), ["claude-code"], env={}).stdout)
    said = out["hookSpecificOutput"]
    assert said["permissionDecision"] == "deny" and NOTE in said["permissionDecisionReason"]
    assert session.refresh().mode is Mode.PLAN


def test_gemini_exit_plan_mode_answer_carries_the_note(repo: Path) -> None:
    _session(repo)
    payload = {"session_id": "s", "cwd": str(repo), "hook_event_name": "BeforeTool",
               "tool_name": "exit_plan_mode", "tool_input": {"plan_filename": "x.md"}}  # fmt: skip
    session = Session.list_all(repo)[0]
    answer_exit(session, "reject", REASON)
    out = json.loads(planning_answer(json.dumps(payload), ["gemini"], env={}).stdout)
    assert out["decision"] == "deny" and REASON in out["reason"]


def test_codex_stop_goes_on_with_the_note_as_its_prompt(repo: Path) -> None:
    session = _session(repo)
    answer_exit(session, "refine", NOTE)
    payload = {"session_id": "s", "cwd": str(repo), "hook_event_name": "Stop",
               "last_assistant_message": "done"}  # fmt: skip
    out = json.loads(planning_answer(json.dumps(payload), ["codex"], env={}).stdout)
    assert out["decision"] == "block" and NOTE in out["reason"]
    again = planning_answer(json.dumps(payload), ["codex"], env={})
    assert again.stdout == ""  # taken once: the turn may end now


def test_mcp_planning_tools_carry_the_note(repo: Path) -> None:
    session = _session(repo)
    answer_exit(session, "refine", NOTE)
    result = handle_tool_call(session, "plan_exit", {})
    assert NOTE in result.text
