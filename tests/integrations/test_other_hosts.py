"""Codex, Gemini and Cursor hooks: each host's documented payloads and the answers it honours.

Decided through the hook pipeline in-process (`decide_hook`); the process boundary,
exit codes and fail-closed paths are exercised by test_claude_code.py and test_hookd.py.
"""

from __future__ import annotations

import json
from pathlib import Path

from .conftest import HookRunner
from .payloads import answer_of, codex_payload, cursor_payload, gemini_payload

# -- Codex: only a deny blocks, so ask is answered as deny and allow as silence --------


def test_codex_plan_agent_shell_redirection_is_denied(repo: Path, decide_hook: HookRunner) -> None:
    """Attack: the plan agent writes source through Codex's shell tool."""
    p = codex_payload("shell", {"command": "echo x > src/y"}, repo)
    out = answer_of(decide_hook("codex", p, "--agent", "plan"))["hookSpecificOutput"]
    assert out["permissionDecision"] == "deny"
    assert out["hookEventName"] == "PreToolUse"


def test_codex_allow_is_silent(repo: Path, decide_hook: HookRunner) -> None:
    p = codex_payload("shell", {"command": "echo x > src/y"}, repo)
    proc = decide_hook("codex", p, "--agent", "build")
    assert proc.returncode == 0 and proc.stdout == "", proc.stderr


def test_codex_ask_becomes_deny(repo: Path, decide_hook: HookRunner) -> None:
    """Codex ignores ask; answering it would let the secret read through."""
    (repo / ".env").write_text("TOKEN=1\n")
    p = codex_payload("shell", {"command": "cat .env"}, repo)
    p2 = codex_payload("read_file", {"file_path": str(repo / ".env")}, repo)
    for payload in (p, p2):
        proc = decide_hook("codex", payload, "--agent", "plan")
        if proc.returncode == 2:
            continue  # the dialect does not know the tool: blocked all the same
        out = answer_of(proc)["hookSpecificOutput"]
        assert out["permissionDecision"] == "deny"


def test_codex_permission_mode_plan_selects_plan_agent(repo: Path, decide_hook: HookRunner) -> None:
    p = codex_payload("shell", {"command": "echo x > src/y"}, repo)
    p["permission_mode"] = "plan"
    out = answer_of(decide_hook("codex", p))["hookSpecificOutput"]
    assert out["permissionDecision"] == "deny"


def test_codex_bad_payload_blocks(decide_hook: HookRunner) -> None:
    proc = decide_hook("codex", {"hook_event_name": "PreToolUse", "tool_name": "shell"})
    assert proc.returncode == 2 and "tool_input" in proc.stderr


# -- Gemini: {"decision", "reason"}; no ask -----------------------------------------


def test_gemini_plan_agent_write_file_is_denied(repo: Path, decide_hook: HookRunner) -> None:
    p = gemini_payload("write_file", {"file_path": str(repo / "src/n.py"), "content": "x"}, repo)
    out = answer_of(decide_hook("gemini", p, "--agent", "plan"))
    assert out["decision"] == "deny" and out["reason"].startswith("guard: ")


def test_gemini_plan_file_is_allowed(repo: Path, decide_hook: HookRunner) -> None:
    p = gemini_payload(
        "write_file", {"file_path": str(repo / ".openoxide/plans/p.md"), "content": "x"}, repo
    )
    assert answer_of(decide_hook("gemini", p, "--agent", "plan"))["decision"] == "allow"


def test_gemini_ask_becomes_deny(repo: Path, decide_hook: HookRunner) -> None:
    (repo / ".env").write_text("TOKEN=1\n")
    p = gemini_payload("read_file", {"file_path": str(repo / ".env")}, repo)
    out = answer_of(decide_hook("gemini", p, "--agent", "plan"))
    assert out["decision"] == "deny" and "cannot ask" in out["reason"]


def test_gemini_without_mode_is_build(repo: Path, decide_hook: HookRunner) -> None:
    p = gemini_payload("write_file", {"file_path": str(repo / "src/n.py"), "content": "x"}, repo)
    assert answer_of(decide_hook("gemini", p))["decision"] == "allow"


# -- Cursor: {"permission", "user_message", "agent_message"} ----------------------------


def test_cursor_shell_redirection_is_denied(repo: Path, decide_hook: HookRunner) -> None:
    p = cursor_payload("beforeShellExecution", repo, command="echo x > src/y", cwd=str(repo))
    out = answer_of(decide_hook("cursor", p, "--agent", "plan"))
    assert out["permission"] == "deny"
    assert out["user_message"] == out["agent_message"] and "guard:" in out["agent_message"]


def test_cursor_shell_allowed_for_build(repo: Path, decide_hook: HookRunner) -> None:
    p = cursor_payload("beforeShellExecution", repo, command="echo x > src/y", cwd=str(repo))
    assert answer_of(decide_hook("cursor", p, "--agent", "build")) == {"permission": "allow"}


def test_cursor_read_of_secret_is_denied_not_asked(repo: Path, decide_hook: HookRunner) -> None:
    """beforeReadFile knows only allow/deny: guard's ask must not become an allow."""
    (repo / ".env").write_text("TOKEN=1\n")
    p = cursor_payload("beforeReadFile", repo, file_path=str(repo / ".env"), content="TOKEN=1")
    out = answer_of(decide_hook("cursor", p, "--agent", "plan"))
    assert out["permission"] == "deny"


def test_cursor_read_of_source_is_allowed(repo: Path, decide_hook: HookRunner) -> None:
    p = cursor_payload("beforeReadFile", repo, file_path=str(repo / "src/app.py"), content="")
    assert answer_of(decide_hook("cursor", p, "--agent", "plan"))["permission"] == "allow"


def test_cursor_mcp_tool_input_as_json_string(repo: Path, decide_hook: HookRunner) -> None:
    """Cursor sends tool_input as a JSON string; a write to src/ must still be seen."""
    args = json.dumps({"path": str(repo / "src/n.py"), "content": "x"})
    p = cursor_payload(
        "beforeMCPExecution",
        repo,
        tool_name="write_file",
        tool_input=args,
        command="mcp-server-filesystem",
    )
    proc = decide_hook("cursor", p, "--agent", "plan")
    assert proc.returncode == 2 or answer_of(proc)["permission"] == "deny", proc.stdout


def test_cursor_unknown_event_blocks(repo: Path, decide_hook: HookRunner) -> None:
    proc = decide_hook("cursor", cursor_payload("afterFileEdit", repo, file_path="x"))
    assert proc.returncode == 2 and "afterFileEdit" in proc.stderr
