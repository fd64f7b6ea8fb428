"""Payloads in each host's documented shape, and answer helpers."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any


def claude_payload(
    tool_name: str, tool_input: dict[str, Any], cwd: Path, permission_mode: str = "acceptEdits"
) -> dict[str, Any]:
    """A PreToolUse payload in the shape Claude Code 2.1.332 sends."""
    return {
        "session_id": "0b7c6f2e-0000-4000-8000-000000000001",
        "transcript_path": str(cwd / "transcript.jsonl"),
        "cwd": str(cwd),
        "prompt_id": "p-1",
        "permission_mode": permission_mode,
        "effort": "medium",
        "hook_event_name": "PreToolUse",
        "tool_name": tool_name,
        "tool_input": tool_input,
        "tool_use_id": "toolu_01ABC",
    }


def answer_of(proc: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    assert proc.returncode == 0, proc.stderr
    out: dict[str, Any] = json.loads(proc.stdout)
    return out


def codex_payload(tool_name: str, tool_input: dict[str, Any], cwd: Path) -> dict[str, Any]:
    """A PreToolUse payload in the shape Codex CLI 0.171.0 sends (seen under `codex exec`)."""
    return {
        "session_id": "019a0000-0000-7000-8000-000000000001",
        "turn_id": "019a0000-0000-7000-8000-000000000002",
        "transcript_path": str(cwd / ".codex-home/sessions/2026/12/03/rollout-x.jsonl"),
        "cwd": str(cwd),
        "hook_event_name": "PreToolUse",
        "model": "gpt-5.5",
        "permission_mode": "bypassPermissions",
        "tool_name": tool_name,
        "tool_input": tool_input,
        "tool_use_id": "call_1",
    }


def opencode_payload(tool_name: str, tool_input: dict[str, Any], cwd: Path) -> dict[str, Any]:
    """What guard's OpenCode plugin sends for one tool.execute.before (OpenCode 1.18.33)."""
    return {
        "hook_event_name": "tool.execute.before",
        "tool_name": tool_name,
        "tool_input": tool_input,
        "cwd": str(cwd),
        "session_id": "ses_1",
        "tool_use_id": "call_0",
    }


def gemini_payload(tool_name: str, tool_input: dict[str, Any], cwd: Path) -> dict[str, Any]:
    """A BeforeTool payload in the shape Gemini CLI's hooks reference documents."""
    return {
        "session_id": "s-gemini",
        "transcript_path": str(cwd / "t.json"),
        "cwd": str(cwd),
        "hook_event_name": "BeforeTool",
        "timestamp": "2026-12-02T15:00:00.000Z",
        "tool_name": tool_name,
        "tool_input": tool_input,
    }


def cursor_payload(event: str, root: Path, **fields: Any) -> dict[str, Any]:
    """A Cursor hook payload: the common fields plus the event's own."""
    return {
        "conversation_id": "c-1",
        "generation_id": "g-1",
        "hook_event_name": event,
        "workspace_roots": [str(root)],
        **fields,
    }
