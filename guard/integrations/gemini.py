"""Gemini CLI: BeforeTool command hooks (format followed: Gemini CLI hooks reference, 0.26).

stdin: ``session_id, transcript_path, cwd, hook_event_name, timestamp,
tool_name, tool_input``. Answer: exit 0 with ``{"decision": "allow"|"deny",
"reason": "..."}``; exit 2 blocks; other exits only warn. Gemini's hook
protocol has no "ask", so guard answers **ask as deny** (the reason says so).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from guard.integrations.interface import (
    HookAnswer,
    HookCall,
    HostAdapter,
    Scope,
    add_nested,
    find_nested,
    remove_nested,
)

if TYPE_CHECKING:
    from guard.effects import Decision

EVENT = "BeforeTool"


class Gemini(HostAdapter):
    name = "gemini"
    title = "Gemini CLI"
    dialect = "gemini"
    follows = "Gemini CLI hooks reference (npm @google/gemini-cli 0.26)"
    honours_ask = False

    def parse(self, payload: Mapping[str, Any]) -> HookCall:
        return self.tool_event(payload, EVENT)

    def answer(self, decision: Decision, call: HookCall) -> HookAnswer:
        action = decision.action.value
        reason = f"guard: {decision.reason} [{decision.rule}]"
        if action == "ask":
            reason += " (guard's policy asks here; Gemini hooks cannot ask, so guard denies)"
        return HookAnswer.json(
            {"decision": "allow" if action == "allow" else "deny", "reason": reason}
        )

    def settings_path(self, scope: Scope, project: Path, home: Path) -> Path:
        base = project if scope == "project" else home
        return base / ".gemini" / "settings.json"

    def add_entry(self, settings: dict[str, Any], command: str) -> None:
        add_nested(
            settings,
            EVENT,
            {
                "matcher": ".*",
                "hooks": [
                    {
                        "name": "openoxide-guard",
                        "type": "command",
                        "command": command,
                        "timeout": 30000,
                    }
                ],
            },
        )

    def find_entries(self, settings: Mapping[str, Any]) -> list[str]:
        return find_nested(settings, (EVENT,))

    def remove_entries(self, settings: dict[str, Any]) -> int:
        return remove_nested(settings, (EVENT,))


ADAPTER = Gemini()
