"""Codex CLI: shell tools (argv list or string), apply_patch, update_plan, request_user_input."""

from __future__ import annotations

from guard.tools._common import fetch_tool, patch_tool, path_tool, plain, shell_tool
from guard.tools.interface import Handler

NAME = "codex"

_SHELL = shell_tool("bash", ("command", "cmd"), ("workdir", "cwd"))

TOOLS: dict[str, Handler] = {
    "shell": _SHELL,
    "shell_command": _SHELL,
    "exec_command": _SHELL,
    "local_shell": _SHELL,
    "container.exec": _SHELL,
    "unified_exec": _SHELL,
    "apply_patch": patch_tool("apply_patch", "command", "input", "patch"),
    "update_plan": plain("update_plan"),
    "request_user_input": plain("request_user_input"),
    "view_image": path_tool("read", "read", "path"),
    "web_search": plain("websearch"),
    "web_fetch": fetch_tool("webfetch", "url"),
}
