"""Cursor: agent hooks in ``hooks.json`` version 1 (format followed: Cursor 1.7 hooks).

One command serves three events, told apart by ``hook_event_name``:

* ``beforeShellExecution`` ``{command, cwd}`` -> analysed like a shell command;
* ``beforeMCPExecution`` ``{tool_name, tool_input, ...}`` -> the MCP dialect;
* ``beforeReadFile`` ``{file_path, ...}`` -> a read of that file.

Every payload also carries ``conversation_id``, ``generation_id`` and
``workspace_roots``. Answer: ``{"permission": "allow"|"deny"|"ask",
"user_message", "agent_message"}``; beforeReadFile knows only allow/deny, so
ask is answered as deny there. Cursor's hooks cannot rewrite a command: in plan
mode a shell command runs directly only in guard's grammar, else the refusal hands
the model its confined form ``guard confine -- …`` (:mod:`guard.sandbox.direct`),
which is allowed as given.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from guard.effects import ToolCall
from guard.hooks.adapter import (
    HookAnswer,
    HookCall,
    HookInputError,
    HostAdapter,
    Scope,
    is_ours,
    optional_str,
    require_str,
)
from guard.hosts.cursor import HOST

if TYPE_CHECKING:
    from guard.gate import Verdict

SHELL, MCP, READ = "beforeShellExecution", "beforeMCPExecution", "beforeReadFile"
EVENTS = (SHELL, MCP, READ)


class Cursor(HostAdapter, host=HOST, follows="agent hooks (hooks.json version 1)"):
    """Its dialect: shell and reads; MCP calls use the mcp dialect (see :meth:`parse`)."""

    def parse(self, payload: Mapping[str, Any]) -> HookCall:
        event = require_str(payload, "hook_event_name")
        roots = payload.get("workspace_roots")
        root = roots[0] if isinstance(roots, list) and roots and isinstance(roots[0], str) else None
        session = optional_str(payload, "conversation_id")
        generation = optional_str(payload, "generation_id")
        if event == SHELL:
            # a shell command is analysed like Claude Code's Bash tool
            call = ToolCall(
                HOST.dialect,
                "Bash",
                {"command": require_str(payload, "command")},
                optional_str(payload, "cwd") or root,
                session,
            )
        elif event == MCP:
            raw = payload.get("tool_input", {})
            if isinstance(raw, str):
                try:
                    raw = json.loads(raw) if raw.strip() else {}
                except json.JSONDecodeError as exc:
                    raise HookInputError(f"field 'tool_input' is not valid JSON: {exc}") from None
            if not isinstance(raw, Mapping):
                raise HookInputError("field 'tool_input' must be a JSON object")
            call = ToolCall("mcp", require_str(payload, "tool_name"), raw, root, session)
        elif event == READ:
            # a file read is Claude Code's Read tool
            path = require_str(payload, "file_path")
            call = ToolCall(HOST.dialect, "Read", {"file_path": path}, root, session)
        else:
            raise HookInputError(
                f"hook_event_name {event!r} is not one guard answers ({', '.join(EVENTS)})"
            )
        return HookCall(host=self.name, event=event, call=call, tool_use_id=generation)

    def answered(self, verdict: Verdict, hook: HookCall | None = None) -> str:
        told = super().answered(verdict, hook)
        if told == "ask" and hook is not None and hook.event == READ:
            return "deny"
        return told

    def reason(self, verdict: Verdict, hook: HookCall | None = None) -> str:
        if verdict.action.value == "ask" and self.answered(verdict, hook) == "deny":
            return (
                f"guard: {verdict.reason} [{verdict.rule}] (guard's policy asks here;"
                " Cursor's beforeReadFile cannot ask)"
            )
        return super().reason(verdict, hook)

    def answer(self, verdict: Verdict, hook: HookCall) -> HookAnswer:
        action = self.answered(verdict, hook)
        out: dict[str, Any] = {"permission": action}
        if action != "allow":
            reason = self.reason(verdict, hook)
            out["user_message"] = reason
            out["agent_message"] = reason
        return HookAnswer.json(out)

    def settings_path(self, scope: Scope, project: Path, home: Path) -> Path:
        base = project if scope != "user" else home
        return base / ".cursor" / "hooks.json"

    def _events(self, settings: Mapping[str, Any]) -> Mapping[str, Any]:
        hooks = settings.get("hooks", {})
        if not isinstance(hooks, Mapping):
            raise ValueError(f"'hooks' must be an object, found {type(hooks).__name__}")
        return hooks

    def add_entry(self, settings: dict[str, Any], command: str) -> None:
        version = settings.setdefault("version", 1)
        if version != 1:
            raise ValueError(f"'version' is {version!r}; guard writes hooks.json version 1")
        hooks = settings.setdefault("hooks", {})
        if not isinstance(hooks, dict):
            raise ValueError(f"'hooks' must be an object, found {type(hooks).__name__}")
        for event in EVENTS:
            handlers = hooks.get(event, [])
            if not isinstance(handlers, list):
                raise ValueError(f"'hooks.{event}' must be a list")
            hooks[event] = [*handlers, {"command": command}]

    def find_entries(self, settings: Mapping[str, Any]) -> list[str]:
        hooks = self._events(settings)
        found: list[str] = []
        for event in EVENTS:
            handlers = hooks.get(event, [])
            if isinstance(handlers, list):
                found.extend(h["command"] for h in handlers if is_ours(h))
        return found

    def remove_entries(self, settings: dict[str, Any]) -> int:
        hooks = self._events(settings)
        removed = 0
        if not isinstance(hooks, dict):
            return 0
        for event in EVENTS:
            handlers = hooks.get(event)
            if not isinstance(handlers, list):
                continue
            kept = [h for h in handlers if not is_ours(h)]
            removed += len(handlers) - len(kept)
            if kept or not handlers:
                hooks[event] = kept
            else:
                del hooks[event]
        return removed


ADAPTER = Cursor()
