"""Tool-call interception: a host agent's tool call -> the effects the policy decides on.

One table ``TOOLS: {tool name: handler}`` per dialect: each host's own in its
``tool_table`` part (``guard/hosts/<host>/tool_table.py``, loaded when a call of that
dialect comes), MCP's in :mod:`guard.analysis.mcp`; shell commands are analysed by
:mod:`guard.analysis.shell`.
The table of canonical names lives in docs/tools.md.

>>> from guard.analysis import effects_for
>>> [str(e) for e in effects_for("claude-code", "Bash", {"command": "echo hi > x"}, None)]
['tool bash', 'write x']
"""

# Lazy imports: the shell parser only for a call that may hold a command (guess_effects),
# as in the dialects' shell and patch tools (guard.analysis._common): hook start-up speed.

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from guard import hosts
from guard.analysis import egress, mcp
from guard.analysis.dialect import Handler, tool
from guard.effects import CANONICAL_TOOLS, Effect, ToolCall, ToolInputError

__all__ = [
    "CANONICAL_TOOLS",
    "DIALECTS",
    "GUESSED",
    "ToolCall",
    "ToolInputError",
    "effects_for",
    "effects_of",
    "guess_effects",
    "is_guessed",
    "tables",
]

#: The dialects of host agents and MCP clients guard understands, by name.
DIALECTS: tuple[str, ...] = (*(h.dialect for h in hosts.HOSTS if h.owns_dialect), mcp.NAME)
#: guard's own tables: MCP tool calls, and its egress proxy's connections
#: (:mod:`guard.analysis.egress`, not tool calls). A host's own table is its
#: ``tool_table`` part, imported when its dialect is first asked for.
_OWN: dict[str, Mapping[str, Handler]] = {mcp.NAME: mcp.TOOLS, egress.NAME: egress.TOOLS}


def _table(dialect: str) -> Mapping[str, Handler] | None:
    own = _OWN.get(dialect)
    if own is not None:
        return own
    host = hosts.by_dialect(dialect)
    return host.tools() if host is not None else None

_MCP_PREFIXES = ("mcp__filesystem__", "filesystem.", "filesystem__", "filesystem:")


def tables() -> dict[str, Mapping[str, Handler]]:
    """Every dialect's table, guard's own included (each host's imported now)."""
    found: dict[str, Mapping[str, Handler]] = {}
    for dialect in (*DIALECTS, egress.NAME):
        table = _table(dialect)
        assert table is not None, dialect
        found[dialect] = table
    return found


def effects_for(
    dialect: str, tool_name: str, tool_input: Mapping[str, Any], cwd: str | None
) -> list[Effect]:
    """:func:`effects_of` for a call given field by field."""
    return effects_of(ToolCall(dialect, tool_name, tool_input, cwd))


def effects_of(call: ToolCall) -> list[Effect]:
    """The effects of one tool call: ``Effect.tool(<canonical name>)`` first, then the rest.

    Raises :class:`ToolInputError` for an unknown dialect or malformed input. A tool the
    dialect does not know yields ``Effect.tool(<name lowercased>)`` so that the
    policy's tool table and default decide it, followed by what its input says it
    may do (:func:`guess_effects`), so a renamed or new tool never bypasses path
    rules; when the lowercased name would be a
    canonical name of a known tool (``write`` sent as an unknown tool), it becomes
    ``unknown:<name as given>`` instead, so a look-alike never borrows a known tool's rule.
    """
    dialect, tool_name, tool_input = call.dialect, call.name, call.input
    table = _table(dialect)
    if table is None:
        raise ToolInputError(
            f"unknown dialect {dialect!r}; expected one of: {', '.join(DIALECTS)}"
        )
    if not isinstance(tool_name, str) or not tool_name:
        raise ToolInputError(f"{dialect}: tool name must be a non-empty string, got {tool_name!r}")
    if type(tool_input) is not dict and not isinstance(tool_input, Mapping):
        raise ToolInputError(
            f"{dialect} tool {tool_name!r}: input must be a JSON object, got"
            f" {type(tool_input).__name__}"
        )
    name = tool_name
    if dialect == mcp.NAME:
        for prefix in _MCP_PREFIXES:
            if name.startswith(prefix) and name[len(prefix):] in table:
                name = name[len(prefix):]
                break
    handler = table.get(name)
    if handler is None and dialect == egress.NAME:
        raise ToolInputError(f"egress: unknown call {tool_name!r}; expected one of:"
                             f" {', '.join(egress.TOOLS)}")
    if handler is None:
        return [tool(unknown_tool_name(tool_name), f"{dialect} tool {tool_name!r} is not known"
                     f" to guard ({GUESSED}); the policy's tool table and default decide"),
                *guess_effects(call)]
    effects = handler(call)
    for e in effects:
        if not isinstance(e, Effect):
            raise TypeError(f"the {dialect} handler of {tool_name!r} returned non-effects")
    return list(effects)


#: Marks the effects of a tool guard does not know (its detail), for the audit log and doctor.
GUESSED = "guessed from its input"
_COMMAND_FIELDS = ("command", "cmd")
_WORKDIR_FIELDS = ("workdir", "cwd", "directory", "dir_path")
_PATH_FIELDS = ("file_path", "path", "filePath", "notebook_path")
_PATCH_START = "*** Begin Patch"


def guess_effects(call: ToolCall) -> list[Effect]:
    """What an unknown tool may do, read from its input, so a renamed tool fails safe.

    A ``command``/``cmd`` field is analysed as a shell command; a ``file_path``,
    ``path``, ``filePath`` or ``notebook_path`` field is a write of that path; a
    string holding an apply_patch body is a patch. A field of the right name
    whose value guard cannot read (a number, an object) is a write of an unknown
    target: denied wherever a write is not allowed everywhere.
    """
    from guard.analysis import shell
    from guard.analysis._common import shell_tool

    found: list[Effect] = []
    mark = f"{GUESSED}: {call.dialect} tool {call.name!r}"
    for field in _COMMAND_FIELDS:
        value = call.input.get(field)
        if value is None:
            continue
        if isinstance(value, str) and value.lstrip().startswith(_PATCH_START):
            found += shell.parse_patch(value)
            continue
        try:
            shelled = shell_tool("bash", (field,), _WORKDIR_FIELDS)(call)[1:]
        except ToolInputError:
            shelled = [Effect.write(None, f"field {field!r} is not a command guard can read")]
        found += [Effect(e.kind, e.target, f"{mark}: field {field!r} as a shell command;"
                         f" {e.detail}") for e in shelled]
    for field in _PATH_FIELDS:
        value = call.input.get(field)
        if value is None:
            continue
        paths = [value] if isinstance(value, str) else value if isinstance(value, list) else None
        if not paths or not all(isinstance(p, str) and p for p in paths):
            found.append(Effect.write(None, f"{mark}: field {field!r} is not a path"))
            continue
        found += [Effect.write(p, f"{mark}: field {field!r} taken as a write") for p in paths]
    for field, value in call.input.items():
        if field not in _COMMAND_FIELDS and isinstance(value, str) and \
                value.lstrip().startswith(_PATCH_START):
            found += [Effect(e.kind, e.target, f"{mark}: field {field!r} as a patch")
                      for e in shell.parse_patch(value)]
    return found


def is_guessed(effects: list[Effect]) -> bool:
    """Whether these effects come from a tool guard had to guess (see :func:`guess_effects`)."""
    return bool(effects) and GUESSED in effects[0].detail


def unknown_tool_name(tool_name: str) -> str:
    """The canonical form of a tool guard does not know (see :func:`effects_for`)."""
    lowered = tool_name.lower()
    if lowered in CANONICAL_TOOLS or lowered.startswith("task:"):
        return f"unknown:{tool_name}"
    return lowered
