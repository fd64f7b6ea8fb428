"""The effects of an MCP ``tools/call``: what the policy decides on.

The tool-call interception layer (:mod:`guard.tools`) owns the dialects.
When it offers ``effects_for("mcp", name, arguments, cwd)`` the proxy uses
it. Until then (or if it is missing in an installation) the proxy uses the
table below, which covers the tool vocabulary of the reference filesystem
server (``@modelcontextprotocol/server-filesystem`` 2026.8.31). A tool not
in the table yields only ``Effect.tool(name)``: the agent's tool table
decides it (the shipped plan agent denies unknown tools).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any

from guard.effects import Effect, GuardError

#: (tool name, arguments, cwd) -> effects; the first effect is the tool itself.
EffectsFn = Callable[[str, Mapping[str, Any], str], list[Effect]]


class McpArgumentError(GuardError):
    """A tools/call whose arguments cannot be understood (the call is refused)."""


def _path(name: str, args: Mapping[str, Any], field: str) -> str:
    value = args.get(field)
    if not isinstance(value, str) or not value:
        raise McpArgumentError(
            f"MCP tool {name!r}: argument {field!r} must be a non-empty string (a path),"
            f" got {value!r:.60}"
        )
    return value


def _paths(name: str, args: Mapping[str, Any], field: str) -> list[str]:
    value = args.get(field)
    if not isinstance(value, list) or not value or not all(isinstance(v, str) and v for v in value):
        raise McpArgumentError(
            f"MCP tool {name!r}: argument {field!r} must be a non-empty list of paths,"
            f" got {value!r:.60}"
        )
    return list(value)


def _reads(canonical: str, field: str) -> Callable[[str, Mapping[str, Any]], list[Effect]]:
    def effects(name: str, args: Mapping[str, Any]) -> list[Effect]:
        return [Effect.tool(canonical, f"mcp {name}"), Effect.read(_path(name, args, field))]

    return effects


def _writes(canonical: str) -> Callable[[str, Mapping[str, Any]], list[Effect]]:
    def effects(name: str, args: Mapping[str, Any]) -> list[Effect]:
        return [Effect.tool(canonical, f"mcp {name}"), Effect.write(_path(name, args, "path"))]

    return effects


def _read_many(name: str, args: Mapping[str, Any]) -> list[Effect]:
    return [Effect.tool("read", f"mcp {name}")] + [
        Effect.read(p) for p in _paths(name, args, "paths")
    ]


def _move(name: str, args: Mapping[str, Any]) -> list[Effect]:
    source = _path(name, args, "source")
    destination = _path(name, args, "destination")
    return [
        Effect.tool("move", f"mcp {name}"),
        Effect.read(source, "moved from"),
        Effect.delete(source, "moved from"),
        Effect.write(destination, "moved to"),
    ]


def _no_paths(canonical: str) -> Callable[[str, Mapping[str, Any]], list[Effect]]:
    def effects(name: str, args: Mapping[str, Any]) -> list[Effect]:
        return [Effect.tool(canonical, f"mcp {name}")]

    return effects


FILESYSTEM_TOOLS: dict[str, Callable[[str, Mapping[str, Any]], list[Effect]]] = {
    "read_file": _reads("read", "path"),
    "read_text_file": _reads("read", "path"),
    "read_media_file": _reads("read", "path"),
    "read_multiple_files": _read_many,
    "get_file_info": _reads("read", "path"),
    "list_directory": _reads("list", "path"),
    "list_directory_with_sizes": _reads("list", "path"),
    "directory_tree": _reads("list", "path"),
    "search_files": _reads("glob", "path"),
    "list_allowed_directories": _no_paths("list"),
    "write_file": _writes("write"),
    "edit_file": _writes("edit"),
    "create_directory": _writes("create_directory"),
    "move_file": _move,
}


def builtin_effects(name: str, arguments: Mapping[str, Any], cwd: str) -> list[Effect]:
    """Effects from the built-in table; unknown tools are decided by the tool table alone."""
    handler = FILESYSTEM_TOOLS.get(name)
    if handler is None:
        return [Effect.tool(name, "mcp tool without known effects")]
    return handler(name, arguments)


def default_effects_fn() -> tuple[EffectsFn, str]:
    """The interception layer's MCP dialect when installed, else the built-in table."""
    try:
        effects_for: Any = getattr(importlib.import_module("guard.tools"), "effects_for")  # noqa: B009
    except (ImportError, AttributeError):
        return builtin_effects, "built-in table (server-filesystem vocabulary)"

    def via_tools(name: str, arguments: Mapping[str, Any], cwd: str) -> list[Effect]:
        result: list[Effect] = effects_for("mcp", name, dict(arguments), cwd)
        return result

    return via_tools, "guard.tools MCP dialect"
