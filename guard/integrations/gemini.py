"""Gemini CLI: BeforeTool command hooks (format followed: Gemini CLI hooks reference, 0.26).

stdin: ``session_id, transcript_path, cwd, hook_event_name, timestamp,
tool_name, tool_input``. Answer: exit 0 with ``{"decision": "allow"|"deny",
"reason": "..."}``; exit 2 blocks; other exits only warn. Gemini's hook
protocol has no "ask", so guard answers **ask as deny** (the reason says so).
An allow_confined verdict is ``{"decision": "allow", "hookSpecificOutput":
{"hookEventName": "BeforeTool", "tool_input": {...}}}`` with the whole tool
input, ``command`` replaced: Gemini CLI runs that instead.
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
    rewritten_input,
)

if TYPE_CHECKING:
    from guard.gate import Verdict

EVENT = "BeforeTool"


class Gemini(HostAdapter):
    name = "gemini"
    title = "Gemini CLI"
    dialect = "gemini"
    follows = "Gemini CLI hooks reference (npm @google/gemini-cli 0.26)"
    honours_ask = False
    can_rewrite = True

    def parse(self, payload: Mapping[str, Any]) -> HookCall:
        return self.tool_event(payload, EVENT)

    def answer(self, verdict: Verdict, hook: HookCall) -> HookAnswer:
        told = self.answered(verdict, hook)
        out: dict[str, Any] = {
            "decision": "allow" if told in ("allow", "allow_confined") else "deny",
            "reason": self.reason(verdict, hook),
        }
        if told == "allow_confined":
            out["hookSpecificOutput"] = {
                "hookEventName": EVENT,
                "tool_input": rewritten_input(hook, verdict),
            }
        return HookAnswer.json(out)

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
