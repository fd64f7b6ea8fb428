"""Claude Code: PreToolUse command hooks (format followed: Claude Code 2.1.332).

stdin: ``session_id, transcript_path, cwd, permission_mode, hook_event_name,
tool_name, tool_input, tool_use_id`` (others ignored). Answer: exit 0 with
``{"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision":
"allow"|"deny"|"ask", "permissionDecisionReason": "..."}}``. Exit 2 blocks;
any other failure lets the call run, hence the fail-closed runner. An
allow_confined verdict is ``permissionDecision: "allow"`` with ``updatedInput``
(the whole tool input, ``command`` replaced): Claude Code runs that instead.
"""

# Lazy imports: guard.planning.host at install only: hook start-up speed.

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from guard.hooks.adapter import (
    HookAnswer,
    HookCall,
    NestedHooksAdapter,
    Scope,
    add_groups,
    add_nested,
    is_ours,
    nested_groups,
    rewritten_input,
)
from guard.hosts.claude_code import HOST

if TYPE_CHECKING:
    from guard.gate import Verdict

EVENT = "PreToolUse"
#: Every event guard wires: the policy hook, and the planning side (guard.planning.host).
PLANNING_EVENTS = (EVENT, "SessionStart", "UserPromptSubmit", "PostToolUse")
#: The events whose hook decides (a tool call, a prompt): each handler is installed with
#: ``"onFailure": "block"``, so that a hook that timed out, could not start or crashed
#: blocks what it guards (Claude Code's default, "continue", lets the tool run).
DECIDING_EVENTS = (EVENT, "UserPromptSubmit", "PostToolUse")
ON_FAILURE = {"onFailure": "block"}


class ClaudeCode(NestedHooksAdapter, host=HOST):
    event = EVENT
    wired_events = PLANNING_EVENTS
    extra_fields = ("agent_id", "agent_type")
    can_rewrite = True
    reads_permission_mode = True
    post_event = "PostToolUse"

    def answer(self, verdict: Verdict, hook: HookCall) -> HookAnswer:
        out: dict[str, Any] = {
            "hookEventName": EVENT,
            "permissionDecision": self.answered(verdict, hook),
            "permissionDecisionReason": self.reason(verdict, hook),
        }
        if verdict.action.value == "allow_confined":
            out["permissionDecision"] = "allow"
            out["updatedInput"] = rewritten_input(hook, verdict)
        return HookAnswer.json({"hookSpecificOutput": out})

    def post_answer(self, message: str | None) -> HookAnswer:
        if message is None:
            return HookAnswer(0)
        # "block" in a PostToolUse answer hands the reason to the model (the tool already ran)
        return HookAnswer.json({
            "decision": "block",
            "reason": message,
            "systemMessage": message,
            "hookSpecificOutput": {"hookEventName": "PostToolUse", "additionalContext": message},
        })

    local_file = True

    def settings_path(self, scope: Scope, project: Path, home: Path) -> Path:
        if scope == "local":  # Claude Code's own per-user file in the project
            return project / ".claude" / "settings.local.json"
        base = project if scope == "project" else home
        return base / ".claude" / "settings.json"

    def add_entry(self, settings: dict[str, Any], command: str) -> None:
        from guard.planning.host import planning_command

        add_nested(
            settings,
            EVENT,
            {"matcher": "*", "hooks": [{"type": "command", "command": command, "timeout": 30,
                                        **ON_FAILURE}]},
        )
        # every result, so that a tool that ran without the PreToolUse decision is caught
        add_nested(
            settings,
            "PostToolUse",
            {"matcher": "*", "hooks": [{"type": "command", "command": command, "timeout": 30,
                                        **ON_FAILURE}]},
        )
        # the planning side: the mode and plan file told at each turn, ExitPlanMode handled
        planning = planning_command(command, HOST.name)
        if planning is None:
            return
        handler = {"type": "command", "command": planning, "timeout": 30}
        for event in dict.fromkeys(e for e, _ in HOST.planning_hooks()):
            events = tuple(p for p in HOST.planning_hooks() if p[0] == event)
            add_groups(settings, events,
                       {**handler, **ON_FAILURE} if event in DECIDING_EVENTS else handler)

    def failing_open(self, settings: Mapping[str, Any]) -> list[str]:
        return [
            event
            for event in DECIDING_EVENTS
            for group in nested_groups(settings, event, "settings")
            if isinstance(group, Mapping) and isinstance(group.get("hooks"), list)
            for h in group["hooks"]
            if is_ours(h) and h.get("onFailure") != "block"
        ]


ADAPTER = ClaudeCode()
