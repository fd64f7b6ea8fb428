"""Codex CLI: PreToolUse command hooks (format followed: Codex CLI 0.124 hooks.json).

stdin: ``session_id, turn_id, transcript_path, cwd, hook_event_name, model,
permission_mode, tool_name, tool_input, tool_use_id``. Shell and apply_patch
carry their text in ``tool_input.command``; MCP tools are ``mcp__server__tool``.

Codex honours only a deny (``hookSpecificOutput.permissionDecision: "deny"``
or exit 2); an allow or an ask answer is ignored and the call runs. So guard
answers **ask as deny** here (the reason says so), and allow as silence.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from guard.integrations.interface import (
    HookAnswer,
    HookCall,
    HookInputError,
    HostAdapter,
    Scope,
    add_nested,
    find_nested,
    optional_str,
    remove_nested,
    require_object,
    require_str,
)

if TYPE_CHECKING:
    from guard.effects import Decision

EVENT = "PreToolUse"


class Codex(HostAdapter):
    name = "codex"
    title = "Codex CLI"
    dialect = "codex"
    follows = "Codex CLI 0.124 hooks (npm @openai/codex)"
    honours_ask = False

    def parse(self, payload: Mapping[str, Any]) -> HookCall:
        event = optional_str(payload, "hook_event_name") or EVENT
        if event != EVENT:
            raise HookInputError(f"hook_event_name is {event!r}; guard answers only {EVENT}")
        return HookCall(
            host=self.name,
            event=event,
            tool_name=require_str(payload, "tool_name"),
            tool_input=require_object(payload, "tool_input"),
            cwd=optional_str(payload, "cwd"),
            session_id=optional_str(payload, "session_id"),
            tool_use_id=optional_str(payload, "tool_use_id"),
            permission_mode=optional_str(payload, "permission_mode"),
            extra={k: payload[k] for k in ("turn_id", "model") if k in payload},
        )

    def mode_hint(self, call: HookCall) -> str | None:
        if call.permission_mode is None:
            return None
        return "plan" if call.permission_mode == "plan" else "build"

    def answer(self, decision: Decision, call: HookCall) -> HookAnswer:
        action = decision.action.value
        if action == "allow":
            return HookAnswer(0, "", "")
        reason = f"guard: {decision.reason} [{decision.rule}]"
        if action == "ask":
            reason += " (guard's policy asks here; Codex hooks cannot ask, so guard denies)"
        return HookAnswer.json(
            {
                "hookSpecificOutput": {
                    "hookEventName": EVENT,
                    "permissionDecision": "deny",
                    "permissionDecisionReason": reason,
                }
            }
        )

    def settings_path(self, scope: Scope, project: Path, home: Path) -> Path:
        base = project if scope == "project" else home
        return base / ".codex" / "hooks.json"

    def add_entry(self, settings: dict[str, Any], command: str) -> None:
        add_nested(
            settings, EVENT, {"hooks": [{"type": "command", "command": command, "timeout": 30}]}
        )

    def find_entries(self, settings: Mapping[str, Any]) -> list[str]:
        return find_nested(settings, (EVENT,))

    def remove_entries(self, settings: dict[str, Any]) -> int:
        return remove_nested(settings, (EVENT,))


ADAPTER = Codex()
