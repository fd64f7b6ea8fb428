"""Codex CLI: PreToolUse command hooks (format followed: Codex CLI 0.171.0 hooks.json).

stdin: ``session_id, turn_id, transcript_path, cwd, hook_event_name, model,
permission_mode, tool_name, tool_input, tool_use_id``. The shell tool arrives as
``Bash`` and apply_patch as ``apply_patch``, both with their text in
``tool_input.command``; MCP tools are ``mcp__server__tool``. ``permission_mode``
is ``bypassPermissions`` under ``codex exec`` whatever the sandbox: only a
``plan`` value picks guard's plan agent; otherwise use ``guard mode plan``,
``$GUARD_AGENT`` or ``--agent`` to hold Codex to the plan.

Codex runs a hook only once the user trusted it; ``guard install codex``
writes that trust (see :mod:`guard.hosts.codex.trust`).

Codex honours only a deny (``hookSpecificOutput.permissionDecision: "deny"``
or exit 2); an allow or an ask answer is ignored and the call runs. So guard
answers **ask as deny** here (the reason says so), and allow as silence. Codex
hooks cannot rewrite a call either: in plan mode a shell command runs directly only
in guard's grammar, else the refusal hands the model its confined form
``guard confine -- …`` (:mod:`guard.sandbox.direct`), which is allowed as given.
"""

# Lazy imports: planning.host, codex.trust (tomlkit) at install only: hook start-up speed.

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from guard.hooks.adapter import (
    HookAnswer,
    HookCall,
    NestedHooksAdapter,
    Scope,
    add_groups,
    add_nested,
)
from guard.hosts.codex import HOST

if TYPE_CHECKING:
    from guard.gate import Verdict

EVENT = "PreToolUse"
#: Every event guard wires: the policy hook, and the planning side (guard.planning.host):
#: SessionStart/UserPromptSubmit tell the model the mode and plan file, Stop keeps a
#: ``<proposed_plan>`` and leaves the approval to the user.
PLANNING_EVENTS = (EVENT, "PostToolUse", "SessionStart", "UserPromptSubmit", "Stop")


class Codex(NestedHooksAdapter, host=HOST, follows="hooks"):
    event = EVENT
    wired_events = PLANNING_EVENTS
    extra_fields = ("turn_id", "model")
    honours_ask = False
    reads_permission_mode = True
    post_event = "PostToolUse"

    def answer(self, verdict: Verdict, hook: HookCall) -> HookAnswer:
        if self.answered(verdict, hook) == "allow":
            return HookAnswer(0, "", "")
        return HookAnswer.json(
            {
                "hookSpecificOutput": {
                    "hookEventName": EVENT,
                    "permissionDecision": "deny",
                    "permissionDecisionReason": self.reason(verdict, hook),
                }
            }
        )

    def settings_path(self, scope: Scope, project: Path, home: Path) -> Path:
        if scope != "user":
            return project / ".codex" / "hooks.json"
        from guard.hosts.codex.trust import codex_home

        return codex_home() / "hooks.json"

    def add_entry(self, settings: dict[str, Any], command: str) -> None:
        add_nested(
            settings, EVENT, {"hooks": [{"type": "command", "command": command, "timeout": 30}]}
        )
        # every result, so that a tool that ran without the PreToolUse decision is caught
        add_nested(
            settings,
            "PostToolUse",
            {"hooks": [{"type": "command", "command": command, "timeout": 30}]},
        )
        from guard.planning.host import planning_command

        planning = planning_command(command, HOST.name)
        if planning is None:
            return
        add_groups(settings, HOST.planning_hooks(),
                   {"type": "command", "command": planning, "timeout": 30})

ADAPTER = Codex()
