"""OpenCode (camelCase arguments, e.g. ``filePath``)."""

from __future__ import annotations

from guard.analysis._common import (
    edits_tool,
    fetch_tool,
    patch_tool,
    path_tool,
    plain,
    search_tool,
    shell_tool,
)
from guard.analysis.dialect import Handler, task_tool
from guard.hosts.opencode import HOST

NAME = HOST.dialect

_TASK = task_tool(NAME)


TOOLS: dict[str, Handler] = {
    "read": path_tool("read", "read", "filePath"),
    "write": path_tool("write", "write", "filePath"),
    "edit": path_tool("edit", "write", "filePath"),
    "multiedit": edits_tool("multiedit", ("filePath",), "edits"),
    "patch": patch_tool("patch", "patchText"),
    "apply_patch": patch_tool("apply_patch", "patchText"),
    "bash": shell_tool("bash", ("command",), ("workdir",)),
    "glob": search_tool("glob", ("path",), "pattern"),
    "grep": search_tool("grep", ("path",), "pattern"),
    "list": search_tool("list", ("path",), None),
    "webfetch": fetch_tool("webfetch", "url"),
    "websearch": plain("websearch"),
    "todowrite": plain("todowrite"),
    "todoread": plain("todoread"),
    "plan_enter": plain("plan_enter"),
    "plan_exit": plain("plan_exit"),
    "question": plain("question"),
    "task": _TASK,
}
