"""Cursor: agent hooks in ``hooks.json`` version 1 (format followed: Cursor 1.7 hooks).

One command serves three events, told apart by ``hook_event_name``:

* ``beforeShellExecution`` ``{command, cwd}`` -> analysed like a shell command;
* ``beforeMCPExecution`` ``{tool_name, tool_input, ...}`` -> the MCP dialect;
* ``beforeReadFile`` ``{file_path, ...}`` -> a read of that file.

Every payload also carries ``conversation_id``, ``generation_id`` and
``workspace_roots``. Answer: ``{"permission": "allow"|"deny"|"ask",
"user_message", "agent_message"}``; beforeReadFile knows only allow/deny, so
ask is answered as deny there.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from guard.integrations.interface import (
    HookAnswer,
    HookCall,
    HookInputError,
    HostAdapter,
    Scope,
    effects_for,
    is_ours,
    optional_str,
    require_str,
)

if TYPE_CHECKING:
    from guard.effects import Decision, Effect

SHELL, MCP, READ = "beforeShellExecution", "beforeMCPExecution", "beforeReadFile"
EVENTS = (SHELL, MCP, READ)


class Cursor(HostAdapter):
    name = "cursor"
    title = "Cursor"
    dialect = "cursor"
    follows = "Cursor 1.7 agent hooks (hooks.json version 1)"

    def parse(self, payload: Mapping[str, Any]) -> HookCall:
        event = require_str(payload, "hook_event_name")
        roots = payload.get("workspace_roots")
        root = roots[0] if isinstance(roots, list) and roots and isinstance(roots[0], str) else None
        session = optional_str(payload, "conversation_id")
        generation = optional_str(payload, "generation_id")
        if event == SHELL:
            return HookCall(
                tool_name="shell",
                tool_input={"command": require_str(payload, "command")},
                cwd=optional_str(payload, "cwd") or root,
                host=self.name,
                event=event,
                session_id=session,
                tool_use_id=generation,
            )
        if event == MCP:
            raw = payload.get("tool_input", {})
            if isinstance(raw, str):
                try:
                    raw = json.loads(raw) if raw.strip() else {}
                except json.JSONDecodeError as exc:
                    raise HookInputError(f"field 'tool_input' is not valid JSON: {exc}") from None
            if not isinstance(raw, Mapping):
                raise HookInputError("field 'tool_input' must be a JSON object")
            return HookCall(
                tool_name=require_str(payload, "tool_name"),
                tool_input=raw,
                cwd=root,
                host=self.name,
                event=event,
                session_id=session,
                tool_use_id=generation,
            )
        if event == READ:
            return HookCall(
                tool_name="read",
                tool_input={"file_path": require_str(payload, "file_path")},
                cwd=root,
                host=self.name,
                event=event,
                session_id=session,
                tool_use_id=generation,
            )
        raise HookInputError(
            f"hook_event_name {event!r} is not one guard answers ({', '.join(EVENTS)})"
        )

    def effects(self, call: HookCall) -> list[Effect]:
        from guard.effects import Effect

        args = dict(call.tool_input)
        if call.event == SHELL:
            return list(effects_for("claude-code", "Bash", args, call.cwd))
        if call.event == MCP:
            return list(effects_for("mcp", call.tool_name, args, call.cwd))
        return [Effect.tool("read"), Effect.read(str(args["file_path"]), "cursor beforeReadFile")]

    def answer(self, decision: Decision, call: HookCall) -> HookAnswer:
        action = decision.action.value
        reason = f"guard: {decision.reason} [{decision.rule}]"
        if call.event == READ and action == "ask":
            action = "deny"
            reason += " (guard's policy asks here; Cursor's beforeReadFile cannot ask)"
        out: dict[str, Any] = {"permission": action}
        if action != "allow":
            out["user_message"] = reason
            out["agent_message"] = reason
        return HookAnswer.json(out)

    def settings_path(self, scope: Scope, project: Path, home: Path) -> Path:
        base = project if scope == "project" else home
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
