"""Gemini CLI (built-in tool names; older releases used ``absolute_path``/``dir_path``)."""

from __future__ import annotations

import re

from guard.analysis._common import path_tool, plain, search_tool, shell_tool
from guard.analysis.dialect import Handler, ToolCall, ToolInputError, glob_base, tool, url_host
from guard.effects import Effect
from guard.hosts.gemini import HOST

NAME = HOST.dialect


def _read_many(call: ToolCall) -> list[Effect]:
    effects = [tool("read", f"{NAME} {call.name}")]
    paths = call.input.get("paths", call.input.get("include"))
    if not isinstance(paths, list) or not all(isinstance(p, str) and p for p in paths):
        raise ToolInputError(f"{call.where('paths')} must be a list of paths or globs,"
                             f" got {type(paths).__name__}")

    for p in paths:
        effects.append(Effect.read(glob_base(p) if re.search(r"[*?\[{]", p) else p,
                                   f"{call.name} reads {p!r}"))
    return effects


def _web_fetch(call: ToolCall) -> list[Effect]:
    prompt = call.str_field("prompt", "url", what="a prompt naming URLs")
    assert prompt is not None
    effects = [tool("webfetch", f"{NAME} {call.name}")]
    urls = re.findall(r"https?://[^\s)\"'>]+", prompt)
    for u in urls:
        effects.append(Effect.network(url_host(u), f"{call.name} fetches {u}"))
    if not urls:
        effects.append(Effect.network(None, f"{call.name}: no URL found in the prompt"))
    return effects


def _save_memory(call: ToolCall) -> list[Effect]:
    return [tool("save_memory", f"{NAME} {call.name}"),
            Effect.write("~/.gemini/GEMINI.md", "save_memory appends to the global memory file")]


TOOLS: dict[str, Handler] = {
    "read_file": path_tool("read", "read", "file_path", "absolute_path", "path"),
    "write_file": path_tool("write", "write", "file_path", "path"),
    "replace": path_tool("edit", "write", "file_path", "path"),
    "run_shell_command": shell_tool("bash", ("command",), ("directory", "dir_path")),
    "glob": search_tool("glob", ("path", "dir_path"), "pattern"),
    "search_file_content": search_tool("grep", ("path", "dir_path"), "pattern"),
    "grep_search": search_tool("grep", ("path", "dir_path"), "pattern"),
    "list_directory": search_tool("list", ("path", "dir_path"), None, default_path=None),
    "read_many_files": _read_many,
    "web_fetch": _web_fetch,
    "google_web_search": plain("websearch"),
    "save_memory": _save_memory,
    "write_todos": plain("todowrite"),
    "exit_plan_mode": plain("plan_exit"),
    "enter_plan_mode": plain("plan_enter"),
    "ask_user": plain("request_user_input"),
}
