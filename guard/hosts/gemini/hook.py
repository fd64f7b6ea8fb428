"""Gemini CLI: BeforeTool command hooks (format followed: Gemini CLI 0.61.0).

stdin: ``session_id, transcript_path, cwd, hook_event_name, timestamp,
tool_name, tool_input``. Answer: exit 0 with ``{"decision": "allow"|"deny",
"reason": "..."}``; exit 2 blocks; other exits only warn. Gemini's hook
protocol has no "ask", so guard answers **ask as deny** (the reason says so).

Where hooks load (0.61.0): user settings (``~/.gemini/settings.json``) always;
project settings (``.gemini/settings.json``) only in a trusted workspace. An
untrusted workspace run with ``--skip-trust`` has **no hooks at all**, so
``guard install gemini`` defaults to the user scope and ``guard doctor``
reports a project install in an untrusted workspace (:func:`workspace_trust`).
An allow_confined verdict is ``{"decision": "allow", "hookSpecificOutput":
{"hookEventName": "BeforeTool", "tool_input": {...}}}`` with the whole tool
input, ``command`` replaced: Gemini CLI runs that instead.
"""

# Lazy imports: guard.planning.host at install only: hook start-up speed.

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from guard.hooks.adapter import (
    HookAnswer,
    HookCall,
    NestedHooksAdapter,
    Scope,
    add_groups,
    add_nested,
    rewritten_input,
)
from guard.hosts.gemini import HOST

if TYPE_CHECKING:
    from guard.gate import Verdict

EVENT = "BeforeTool"
#: Every event guard wires: the policy hook, and the planning side (guard.planning.host):
#: SessionStart/BeforeAgent tell the model the mode and plan file, BeforeTool
#: exit_plan_mode keeps Gemini's plan and leaves the approval to the user.
PLANNING_EVENTS = (EVENT, "AfterTool", "SessionStart", "BeforeAgent")


class Gemini(NestedHooksAdapter, host=HOST):
    event = EVENT
    wired_events = PLANNING_EVENTS
    honours_ask = False
    can_rewrite = True
    post_event = "AfterTool"

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

    def post_answer(self, message: str | None) -> HookAnswer:
        if message is None:
            return HookAnswer.json({})
        return super().post_answer(message)

    def settings_path(self, scope: Scope, project: Path, home: Path) -> Path:
        # local is the user-wide file: Gemini has no per-user project file, and skips
        # project hooks in an untrusted workspace
        base = project if scope == "project" else gemini_home(home)
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
        # every result, so that a tool that ran without the BeforeTool decision is caught
        add_nested(
            settings,
            "AfterTool",
            {
                "matcher": ".*",
                "hooks": [
                    {
                        "name": "openoxide-guard-after",
                        "type": "command",
                        "command": command,
                        "timeout": 30000,
                    }
                ],
            },
        )
        from guard.planning.host import planning_command

        planning = planning_command(command, HOST.name)
        if planning is None:
            return
        handler = {"name": "openoxide-guard-planning", "type": "command", "command": planning,
                   "timeout": 30000}
        add_groups(settings, HOST.planning_hooks(), handler)

ADAPTER = Gemini()


def gemini_home(home: Path | None = None) -> Path:
    """The home Gemini CLI uses: ``$GEMINI_CLI_HOME``, else the user's home."""
    given = os.environ.get("GEMINI_CLI_HOME", "").strip()
    return Path(given) if given else (home or Path(os.path.expanduser("~")))


def _load_json(path: Path) -> Any:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError:
        return None
    lines = [line for line in text.splitlines() if not line.lstrip().startswith("//")]
    try:
        return json.loads("\n".join(lines))
    except ValueError:
        return None


def _is_sub(parent: str, child: str) -> bool:
    return child == parent or child.startswith(parent.rstrip("/") + "/")


def workspace_trust(project: Path) -> tuple[bool, str]:
    """Whether Gemini CLI 0.61 trusts ``project`` (so loads its project hooks), and why.

    Its rules, in order: ``GEMINI_CLI_TRUST_WORKSPACE=false`` (or
    ``GEMINI_RESTRICTED_MODE=true``) distrusts, ``=true`` trusts; folder trust
    turned off in user settings (``security.folderTrust.enabled: false``)
    trusts everything; else the longest matching rule of ``trustedFolders.json``
    (``$GEMINI_CLI_TRUSTED_FOLDERS_PATH``, default ``~/.gemini/trustedFolders.json``):
    ``TRUST_FOLDER`` trusts the folder, ``TRUST_PARENT`` its parent, ``DO_NOT_TRUST``
    distrusts; no rule: not trusted.
    """
    env = os.environ
    if env.get("GEMINI_RESTRICTED_MODE") == "true" or env.get("GEMINI_CLI_TRUST_WORKSPACE") == \
            "false":
        return False, "GEMINI_CLI_TRUST_WORKSPACE=false or GEMINI_RESTRICTED_MODE=true"
    if env.get("GEMINI_CLI_TRUST_WORKSPACE") == "true":
        return True, "GEMINI_CLI_TRUST_WORKSPACE=true"
    home = gemini_home()
    user = _load_json(home / ".gemini" / "settings.json")
    security = user.get("security") if isinstance(user, dict) else None
    folder_trust = security.get("folderTrust") if isinstance(security, dict) else None
    if isinstance(folder_trust, dict) and folder_trust.get("enabled") is False:
        return True, "folder trust is turned off in user settings"
    rules_path = Path(env.get("GEMINI_CLI_TRUSTED_FOLDERS_PATH") or
                      home / ".gemini" / "trustedFolders.json")
    rules = _load_json(rules_path)
    where = os.path.realpath(project)
    best, level = -1, None
    for rule, value in (rules.items() if isinstance(rules, dict) else ()):
        if not isinstance(rule, str):
            continue
        base = os.path.dirname(rule) if value == "TRUST_PARENT" else rule
        if _is_sub(os.path.realpath(base), where) and len(rule) > best:
            best, level = len(rule), value
    if level in ("TRUST_FOLDER", "TRUST_PARENT"):
        return True, f"{level} in {rules_path}"
    if level == "DO_NOT_TRUST":
        return False, (f"DO_NOT_TRUST in {rules_path}; trust it in Gemini, or install at"
                       " user scope: guard install gemini --user")
    return False, (f"no rule for it in {rules_path}; trust it once in Gemini (or set"
                   " GEMINI_CLI_TRUST_WORKSPACE=true), or install at user scope:"
                   " guard install gemini --user")
