"""Codex CLI: shell tools (argv list or string), apply_patch, update_plan, request_user_input.

Codex 0.171 hands PreToolUse hooks its shell tool as ``Bash`` with
``{"command": "<text>"}`` (whatever the model called: ``exec_command``,
``shell``...) and apply_patch as ``apply_patch`` with the patch body in
``command``. The older names stay mapped for older releases and for
transcripts.
"""

from __future__ import annotations

from guard.analysis._common import fetch_tool, patch_tool, path_tool, plain, shell_tool
from guard.analysis.dialect import Handler
from guard.hosts.codex import HOST

NAME = HOST.dialect

_SHELL = shell_tool("bash", ("command", "cmd"), ("workdir", "cwd"))

TOOLS: dict[str, Handler] = {
    "Bash": _SHELL,  # 0.171: every shell call reaches hooks under this name
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
