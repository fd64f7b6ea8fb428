"""The one interface every agent dialect implements, and helpers they share.

A dialect module turns a host agent's tool call (``tool_name`` plus its JSON
``tool_input``, as a :class:`~guard.effects.ToolCall`) into
:class:`~guard.effects.Effect` values. The first effect
is always ``Effect.tool(<canonical tool name>)``; path, exec and network
effects follow. Dialects never decide anything: the evaluator does.
"""

from __future__ import annotations

import os
import posixpath
import re
from collections.abc import Callable
from urllib.parse import urlsplit

from guard.effects import Effect, EffectKind, ToolCall, ToolInputError, short_repr

__all__ = [
    "Handler",
    "ToolCall",
    "ToolInputError",
    "glob_base",
    "task_effects",
    "tool",
    "under",
    "url_host",
]

#: Signature of a handler for one tool of one dialect.
Handler = Callable[[ToolCall], list[Effect]]


def tool(name: str, detail: str = "") -> Effect:
    return Effect(EffectKind.TOOL, name, detail)


def under(workdir: str | None, path: str) -> str:
    """``path`` as seen from a tool's own working directory, still relative if it was."""
    if not workdir or workdir == "." or os.path.isabs(path) or path.startswith("~"):
        return path
    return posixpath.join(workdir, path)


_GLOB_CHARS = re.compile(r"[*?\[{]")


def glob_base(pattern: str) -> str:
    """The directory a glob pattern can only reach into: its literal leading components.

    ``src/**/*.py`` -> ``src``; ``../../etc/*`` -> ``../../etc``; ``*.md`` -> ``.``.
    """
    parts = pattern.split("/")
    base: list[str] = []
    for i, part in enumerate(parts):
        if _GLOB_CHARS.search(part) or i == len(parts) - 1:
            break
        base.append(part)
    if not base:
        return "/" if pattern.startswith("/") else "."
    joined = "/".join(base)
    return joined or "/"


def url_host(url: str) -> str | None:
    """The host of a URL, or None when there is none to name."""
    try:
        parts = urlsplit(url if "://" in url else f"//{url}")
        return parts.hostname or None
    except ValueError:
        return None


def task_effects(dialect: str, call: ToolCall, canonical: str = "task") -> list[Effect]:
    """A subagent spawn: ``task`` plus ``task:<type>`` when a type is named."""
    kind = call.input.get("subagent_type")
    if kind is None:
        kind = call.input.get("subagentType")
    effects = [tool(canonical, f"{dialect} {call.name}")]
    if kind is not None:
        if not isinstance(kind, str) or not kind.strip():
            raise ToolInputError(
                f"{call.where('subagent_type')} must be a non-empty string naming the"
                f" subagent, got {short_repr(kind)}"
            )
        effects.append(tool(f"task:{kind.strip()}", f"{dialect} {call.name} spawns {kind!r}"))
    return effects


def task_tool(dialect: str) -> Handler:
    """A subagent spawn tool, told as ``dialect``'s (:func:`task_effects`)."""

    def handler(call: ToolCall) -> list[Effect]:
        return task_effects(dialect, call)

    return handler
