"""The MCP filesystem server (``@modelcontextprotocol/server-filesystem``)."""

from __future__ import annotations

from guard.analysis._common import path_tool, plain, search_tool
from guard.analysis.dialect import Handler, ToolCall, ToolInputError, tool
from guard.effects import Effect

NAME = "mcp"


def _read_multiple(call: ToolCall) -> list[Effect]:
    paths = call.str_list_field("paths")
    return [tool("read", f"{NAME} {call.name}"),
            *(Effect.read(p, f"{call.name} reads it") for p in paths)]


def _edit(call: ToolCall) -> list[Effect]:
    path = call.str_field("path")
    assert path is not None
    if not isinstance(call.input.get("edits"), list):
        raise ToolInputError(f"{call.where('edits')} must be a list of"
                             " {oldText, newText} edits")
    if call.input.get("dryRun") is True:
        return [tool("read", f"{NAME} {call.name} (dryRun: shows a diff only)"),
                Effect.read(path, "edit_file dryRun reads it")]
    return [tool("edit", f"{NAME} {call.name}"), Effect.write(path, "edit_file changes it")]


def _move(call: ToolCall) -> list[Effect]:
    src = call.str_field("source", what="the file to move, a path")
    dst = call.str_field("destination", what="where to move it, a path")
    assert src is not None and dst is not None
    return [tool("move", f"{NAME} {call.name}"),
            Effect.read(src, "move_file reads it"),
            Effect.delete(src, "move_file removes it from here"),
            Effect.write(dst, "move_file puts it here")]


def _search(call: ToolCall) -> list[Effect]:
    path = call.str_field("path", what="the directory to search, a path")
    call.str_field("pattern", what="a search pattern")
    assert path is not None
    return [tool("glob", f"{NAME} {call.name}"), Effect.read(path, "search_files reads below it")]


TOOLS: dict[str, Handler] = {
    "read_file": path_tool("read", "read", "path"),
    "read_text_file": path_tool("read", "read", "path"),
    "read_media_file": path_tool("read", "read", "path"),
    "read_multiple_files": _read_multiple,
    "write_file": path_tool("write", "write", "path"),
    "edit_file": _edit,
    "create_directory": path_tool("create_directory", "write", "path"),
    "list_directory": search_tool("list", ("path",), None, default_path=None),
    "list_directory_with_sizes": search_tool("list", ("path",), None, default_path=None),
    "directory_tree": search_tool("list", ("path",), None, default_path=None),
    "move_file": _move,
    "search_files": _search,
    "get_file_info": path_tool("list", "read", "path"),
    "list_allowed_directories": plain("list"),
}
