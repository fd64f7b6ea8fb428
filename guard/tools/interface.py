"""The one interface every agent dialect implements, and helpers they share.

A dialect module turns a host agent's tool call (``tool_name`` plus its JSON
``tool_input``) into :class:`~guard.effects.Effect` values. The first effect
is always ``Effect.tool(<canonical tool name>)``; path, exec and network
effects follow. Dialects never decide anything: the evaluator does.
"""

from __future__ import annotations

import os
import posixpath
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from guard.effects import Effect, EffectKind, GuardError

#: Signature of a handler for one tool of one dialect.
Handler = Callable[["Call"], list[Effect]]


class ToolInputError(GuardError):
    """A tool call that cannot be understood: unknown dialect or malformed input."""


@dataclass(frozen=True, slots=True)
class Call:
    """One tool call as a handler sees it: the dialect, the name as sent, its input."""

    dialect: str
    tool: str
    input: Mapping[str, Any]
    cwd: str | None

    def where(self, field: str) -> str:
        return f"{self.dialect} tool {self.tool!r}: field {field!r}"

    def str_field(self, *names: str, required: bool = True, what: str = "a path") -> str | None:
        """The first of ``names`` present in the input; it must be a non-empty string."""
        for name in names:
            if name in self.input and self.input[name] is not None:
                value = self.input[name]
                if not isinstance(value, str):
                    raise ToolInputError(
                        f"{self.where(name)} must be a string ({what}),"
                        f" got {type(value).__name__}: {_short(value)}"
                    )
                if value == "" and what.endswith("path"):
                    raise ToolInputError(f"{self.where(name)} is empty; expected {what}")
                return value
        if required:
            alts = " or ".join(repr(n) for n in names)
            raise ToolInputError(
                f"{self.dialect} tool {self.tool!r}: missing field {alts} ({what});"
                f" input has {sorted(self.input)}"
            )
        return None

    def str_list_field(self, name: str, what: str = "a list of paths") -> list[str]:
        value = self.input.get(name)
        if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
            raise ToolInputError(
                f"{self.where(name)} must be {what} (non-empty strings), got {_short(value)}"
            )
        return list(value)


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


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


def task_effects(dialect: str, call: Call, canonical: str = "task") -> list[Effect]:
    """A subagent spawn: ``task`` plus ``task:<type>`` when a type is named."""
    kind = call.input.get("subagent_type")
    if kind is None:
        kind = call.input.get("subagentType")
    effects = [tool(canonical, f"{dialect} {call.tool}")]
    if kind is not None:
        if not isinstance(kind, str) or not kind.strip():
            raise ToolInputError(
                f"{call.where('subagent_type')} must be a non-empty string naming the"
                f" subagent, got {_short(kind)}"
            )
        effects.append(tool(f"task:{kind.strip()}", f"{dialect} {call.tool} spawns {kind!r}"))
    return effects
