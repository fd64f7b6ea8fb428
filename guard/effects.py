"""The vocabulary shared by every layer: actions, effects, tool calls, decisions.

The data flow is one way (see DESIGN.md):

    tool call (agent dialect) --adapter--> ToolCall
    ToolCall --effects()--> [Effect]
    Effect --canonicalize--> Effect with a real, absolute path
    (agent, effects) --decide--> Decision
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


class Action(enum.StrEnum):
    """What a policy answers. Ordered by severity: deny > ask > allow."""

    ALLOW = "allow"
    ASK = "ask"
    DENY = "deny"

    @property
    def severity(self) -> int:
        return _SEVERITY[self]

    @staticmethod
    def strictest(actions: list[Action]) -> Action:
        return max(actions, key=lambda a: _SEVERITY[a]) if actions else Action.ALLOW


_SEVERITY = {Action.ALLOW: 0, Action.ASK: 1, Action.DENY: 2}


class EffectKind(enum.StrEnum):
    """What a tool call does. Path kinds carry a path; ``tool`` carries a tool name."""

    READ = "read"
    WRITE = "write"
    DELETE = "delete"
    EXEC = "exec"
    NETWORK = "network"
    TOOL = "tool"


PATH_KINDS = (EffectKind.READ, EffectKind.WRITE, EffectKind.DELETE, EffectKind.EXEC)
RULE_KINDS = (
    EffectKind.READ,
    EffectKind.WRITE,
    EffectKind.DELETE,
    EffectKind.EXEC,
    EffectKind.NETWORK,
)


@dataclass(frozen=True, slots=True)
class Effect:
    """One thing a tool call would do.

    ``target`` is a filesystem path for read/write/delete/exec (absolute or
    relative to ``cwd``), a host name for network, a canonical tool name for
    tool. ``None`` means "unknown target" (e.g. a shell redirection into
    ``$VAR``): it is decided by the kind's default, never by a pattern.
    ``detail`` says where the effect came from, for humans.
    """

    kind: EffectKind
    target: str | None = None
    detail: str = ""

    @classmethod
    def read(cls, path: str | None, detail: str = "") -> Effect:
        return cls(EffectKind.READ, path, detail)

    @classmethod
    def write(cls, path: str | None, detail: str = "") -> Effect:
        return cls(EffectKind.WRITE, path, detail)

    @classmethod
    def delete(cls, path: str | None, detail: str = "") -> Effect:
        return cls(EffectKind.DELETE, path, detail)

    @classmethod
    def exec(cls, program: str | None, detail: str = "") -> Effect:
        return cls(EffectKind.EXEC, program, detail)

    @classmethod
    def network(cls, host: str | None, detail: str = "") -> Effect:
        return cls(EffectKind.NETWORK, host, detail)

    @classmethod
    def tool(cls, name: str, detail: str = "") -> Effect:
        return cls(EffectKind.TOOL, name, detail)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"kind": self.kind.value, "target": self.target}
        if self.detail:
            out["detail"] = self.detail
        return out

    def __str__(self) -> str:
        target = self.target if self.target is not None else "<unknown>"
        return f"{self.kind.value} {target}"


@dataclass(frozen=True, slots=True)
class ToolCall:
    """A tool call in an agent's own dialect, before any interpretation."""

    name: str
    args: Mapping[str, Any] = field(default_factory=dict)
    cwd: str | None = None


@dataclass(frozen=True, slots=True)
class Decision:
    """The evaluator's answer.

    ``rule`` names what decided, e.g.
    ``policies/default.toml:12: agents.plan.write.allow[0] '{plans}/*.md'``,
    or ``agents.plan.default`` when no pattern matched. ``effect`` is the
    effect that decided (the strictest one of a call).
    """

    action: Action
    reason: str
    rule: str
    effect: Effect | None = None

    @property
    def allowed(self) -> bool:
        return self.action is Action.ALLOW

    def to_json(self) -> dict[str, Any]:
        return {"decision": self.action.value, "reason": self.reason, "rule": self.rule}


class GuardError(Exception):
    """An error with a message meant for the user (no traceback is shown)."""
