"""Claude Code (tool names and inputs as of 2.1.x; file paths arrive absolute)."""

from __future__ import annotations

from guard.analysis._common import edits_tool, fetch_tool, path_tool, plain, search_tool, shell_tool
from guard.analysis.dialect import Handler, task_tool
from guard.hosts.claude_code import HOST

NAME = HOST.dialect

_TASK = task_tool(NAME)


TOOLS: dict[str, Handler] = {
    "Read": path_tool("read", "read", "file_path"),
    "Write": path_tool("write", "write", "file_path"),
    "Edit": path_tool("edit", "write", "file_path"),
    "MultiEdit": edits_tool("multiedit", ("file_path",), "edits"),
    "NotebookEdit": path_tool("notebook_edit", "write", "notebook_path"),
    "NotebookRead": path_tool("read", "read", "notebook_path"),
    "Glob": search_tool("glob", ("path",), "pattern"),
    "Grep": search_tool("grep", ("path",), "pattern"),
    "LS": search_tool("list", ("path",), None),
    "Bash": shell_tool("bash", ("command",)),
    "WebFetch": fetch_tool("webfetch", "url"),
    "WebSearch": plain("websearch"),
    "Task": _TASK,
    "Agent": _TASK,
    "TodoWrite": plain("todowrite"),
    "TodoRead": plain("todoread"),
    "ExitPlanMode": plain("plan_exit"),
    "EnterPlanMode": plain("plan_enter"),
    "AskUserQuestion": plain("request_user_input"),
}
