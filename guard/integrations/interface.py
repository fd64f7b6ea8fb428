"""The one interface every host adapter implements.

A host adapter knows two things about its host and nothing else:

* the hook protocol: how a pending tool call arrives on stdin
  (:meth:`HostAdapter.parse`) and how an answer must look for the host to
  honour it (:meth:`HostAdapter.answer`);
* the hook configuration: which settings file holds hooks and what our entry
  in it looks like (:meth:`HostAdapter.settings_path`, :meth:`HostAdapter.add_entry`,
  :meth:`HostAdapter.remove_entries`, :meth:`HostAdapter.find_entries`).

Everything between (choosing the agent, computing effects, deciding, the audit
record) is shared and lives in :mod:`guard.integrations.runner`.

This module must stay cheap to import: the hook runs on every tool call.
"""

from __future__ import annotations

import json
import re
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from guard.effects import Decision, Effect

Scope = Literal["project", "user"]

#: How an entry written by ``guard install`` is recognised again: the hook
#: command runs guard's hook client, ``-m guard.integrations`` or ``guard hook``.
OUR_COMMAND = re.compile(
    r"(?:guard/integrations/_client\.py|-m\s+guard\.integrations(?:\.__main__)?\b"
    r"|\bguard\s+hook\b|-m\s+guard\.planning\.host\b)"
)

#: Exit status every host treats as "block this call".
BLOCK_EXIT = 2


class HookInputError(Exception):
    """The payload on stdin is not what the host's documented format says."""


@dataclass(frozen=True, slots=True)
class HookCall:
    """A pending tool call as a host announced it, in the host's own vocabulary."""

    host: str
    event: str
    tool_name: str
    tool_input: Mapping[str, Any]
    cwd: str | None
    session_id: str | None = None
    tool_use_id: str | None = None
    permission_mode: str | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "host": self.host,
            "event": self.event,
            "tool_name": self.tool_name,
            "cwd": self.cwd,
        }
        for key in ("session_id", "tool_use_id", "permission_mode"):
            value = getattr(self, key)
            if value is not None:
                out[key] = value
        return out


@dataclass(frozen=True, slots=True)
class HookAnswer:
    """What the hook process prints and how it exits."""

    exit_code: int
    stdout: str = ""
    stderr: str = ""

    @classmethod
    def block(cls, reason: str) -> HookAnswer:
        """Exit 2 with the reason on stderr: every supported host treats it as a block."""
        return cls(BLOCK_EXIT, "", reason.rstrip("\n") + "\n")

    @classmethod
    def json(cls, payload: Mapping[str, Any]) -> HookAnswer:
        return cls(0, json.dumps(payload, ensure_ascii=False) + "\n", "")


def _str_or_none(payload: Mapping[str, Any], key: str) -> str | None:
    value = payload.get(key)
    if value is None:
        return None
    if not isinstance(value, str):
        raise HookInputError(f"field {key!r} must be a string, got {type(value).__name__}")
    return value


def require_str(payload: Mapping[str, Any], key: str) -> str:
    value = _str_or_none(payload, key)
    if value is None or value == "":
        raise HookInputError(f"field {key!r} is missing")
    return value


def optional_str(payload: Mapping[str, Any], key: str) -> str | None:
    return _str_or_none(payload, key)


def require_object(payload: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    value = payload.get(key)
    if not isinstance(value, Mapping):
        raise HookInputError(
            f"field {key!r} must be a JSON object, got"
            f" {'nothing' if value is None else type(value).__name__}"
        )
    return value


class HostAdapter(ABC):
    """One host agent's hook protocol and hook configuration."""

    #: The name used on the command line: ``guard hook NAME``, ``guard install NAME``.
    name: str
    #: Human name, for messages.
    title: str
    #: The tool dialect passed to ``guard.tools.effects_for``.
    dialect: str
    #: The host version whose documented format this adapter follows.
    follows: str
    #: Whether the host honours an ``ask`` answer; if not, ask is answered as deny.
    honours_ask: bool = True

    # -- the hook protocol -------------------------------------------------

    @abstractmethod
    def parse(self, payload: Mapping[str, Any]) -> HookCall:
        """Read the host's stdin payload. Raises HookInputError."""

    def tool_event(
        self, payload: Mapping[str, Any], event: str, extra: tuple[str, ...] = ()
    ) -> HookCall:
        """The common pre-tool payload shape (Claude Code, Codex, Gemini CLI).

        ``hook_event_name`` must be ``event`` when present; ``extra`` names
        host-specific fields kept for the audit record.
        """
        given = optional_str(payload, "hook_event_name") or event
        if given != event:
            raise HookInputError(f"hook_event_name is {given!r}; guard answers only {event} hooks")
        return HookCall(
            host=self.name,
            event=event,
            tool_name=require_str(payload, "tool_name"),
            tool_input=require_object(payload, "tool_input"),
            cwd=optional_str(payload, "cwd"),
            session_id=optional_str(payload, "session_id"),
            tool_use_id=optional_str(payload, "tool_use_id"),
            permission_mode=optional_str(payload, "permission_mode"),
            extra={k: payload[k] for k in extra if k in payload},
        )

    @staticmethod
    def permission_mode_hint(call: HookCall) -> str | None:
        """Hosts with a ``permission_mode``: its ``plan`` means guard's plan agent."""
        if call.permission_mode is None:
            return None
        return "plan" if call.permission_mode == "plan" else "build"

    def effects(self, call: HookCall) -> list[Effect]:
        """The effects of the call, from the shared tool analysis."""
        return effects_for(self.dialect, call.tool_name, call.tool_input, call.cwd)

    def mode_hint(self, call: HookCall) -> str | None:
        """The guard mode ("plan" or "build") the host's own state suggests, if any."""
        return None

    @abstractmethod
    def answer(self, decision: Decision, call: HookCall) -> HookAnswer:
        """The host's answer for a decision."""

    # -- the hook configuration --------------------------------------------

    @abstractmethod
    def settings_path(self, scope: Scope, project: Path, home: Path) -> Path:
        """The settings file that holds hooks for this scope."""

    @abstractmethod
    def add_entry(self, settings: dict[str, Any], command: str) -> None:
        """Add our hook entry to parsed settings (our old entries already removed)."""

    @abstractmethod
    def find_entries(self, settings: Mapping[str, Any]) -> list[str]:
        """The commands of our entries present in parsed settings."""

    @abstractmethod
    def remove_entries(self, settings: dict[str, Any]) -> int:
        """Remove our entries (and only ours) from parsed settings; how many were removed."""


def effects_for(
    dialect: str, tool_name: str, tool_input: Mapping[str, Any], cwd: str | None
) -> list[Effect]:
    """``guard.tools.effects_for``, checked: a missing module or a bad answer raises."""
    import importlib

    from guard.effects import Effect

    tools = importlib.import_module("guard.tools")
    found = tools.effects_for(dialect, tool_name, dict(tool_input), cwd)
    effects = list(found)
    if not all(isinstance(e, Effect) for e in effects):
        raise TypeError(f"guard.tools.effects_for returned non-effects for {tool_name!r}")
    return effects


# -- helpers shared by the hosts whose files nest event -> groups -> handlers --------


def nested_groups(settings: Mapping[str, Any], event: str, where: str) -> list[Any]:
    """``settings["hooks"][event]`` as a list, or [] if absent. Raises ValueError if malformed."""
    hooks = settings.get("hooks")
    if hooks is None:
        return []
    if not isinstance(hooks, Mapping):
        raise ValueError(f"{where}: 'hooks' must be an object, found {type(hooks).__name__}")
    groups = hooks.get(event)
    if groups is None:
        return []
    if not isinstance(groups, list):
        raise ValueError(f"{where}: 'hooks.{event}' must be a list, found {type(groups).__name__}")
    return groups


def is_ours(handler: Any) -> bool:
    return (
        isinstance(handler, Mapping)
        and isinstance(handler.get("command"), str)
        and OUR_COMMAND.search(handler["command"]) is not None
    )


def find_nested(settings: Mapping[str, Any], events: tuple[str, ...]) -> list[str]:
    found: list[str] = []
    for event in events:
        for group in nested_groups(settings, event, "settings"):
            if isinstance(group, Mapping) and isinstance(group.get("hooks"), list):
                found.extend(h["command"] for h in group["hooks"] if is_ours(h))
    return found


def remove_nested(settings: dict[str, Any], events: tuple[str, ...]) -> int:
    """Drop our handlers; drop a group or an event only if we emptied it."""
    removed = 0
    hooks = settings.get("hooks")
    for event in events:
        groups = nested_groups(settings, event, "settings")
        if not groups:
            continue
        kept_groups: list[Any] = []
        for group in groups:
            if isinstance(group, dict) and isinstance(group.get("hooks"), list):
                handlers = group["hooks"]
                kept = [h for h in handlers if not is_ours(h)]
                removed += len(handlers) - len(kept)
                if kept or not handlers:  # drop a group only if we emptied it
                    group["hooks"] = kept
                    kept_groups.append(group)
            else:
                kept_groups.append(group)
        assert isinstance(hooks, dict)
        if kept_groups:
            hooks[event] = kept_groups
        else:
            del hooks[event]
    if isinstance(hooks, dict) and not hooks and removed:
        del settings["hooks"]
    return removed


def add_nested(settings: dict[str, Any], event: str, group: dict[str, Any]) -> None:
    hooks = settings.setdefault("hooks", {})
    if not isinstance(hooks, dict):
        raise ValueError(f"'hooks' must be an object, found {type(hooks).__name__}")
    groups = nested_groups(settings, event, "settings")
    hooks[event] = [*groups, group]
