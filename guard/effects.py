"""The vocabulary shared by every layer: actions, effects, tool calls, decisions.

The data flow is one way (see DESIGN.md):

    tool call (host payload, MCP message, CLI) --adapter--> ToolCall
    ToolCall --guard.analysis.effects_of--> [Effect]
    Effect --canonicalize--> Effect with a real, absolute path
    (agent, effects) --Guard.decide--> Decision
    Decision --guard.gate--> Verdict (allow, ask, deny, allow_confined)
"""

# Lazy imports: difflib only to suggest a name: effects is on the hook path (start-up speed).

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (guard run's start)
if TYPE_CHECKING:
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


#: Every canonical tool name a dialect maps a known tool to: the keys a policy's tool
#: table may use (besides ``*``, ``task:<type>`` and ``mcp__server__tool``). The
#: dialect tables in :mod:`guard.analysis` produce only these; docs/tools.md lists them.
CANONICAL_TOOLS: frozenset[str] = frozenset({
    "read", "write", "edit", "multiedit", "notebook_edit", "glob", "grep", "list", "ls",
    "bash", "webfetch", "websearch", "task", "todowrite", "todoread", "plan_exit",
    "plan_enter", "request_user_input", "question", "apply_patch", "patch", "update_plan",
    "save_memory", "create_directory", "move",
})  # fmt: skip

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
    relative to ``cwd``), a host or ``host:port`` for network (:mod:`guard.network`),
    a canonical tool name for tool. ``None`` means "unknown target" (e.g. a shell redirection into
    ``$VAR``): it is decided by the kind's default, never by a pattern.
    ``detail`` says where the effect came from, for humans.
    """

    kind: EffectKind
    target: str | None = None
    detail: str = ""
    #: A write that only creates the directory ``target`` (``mkdir``), nothing in it.
    creates_dir: bool = False
    #: A write that creates something other than a regular file at ``target`` ("a symlink",
    #: "a FIFO", "a device node", "a socket"): never a plan file, whatever its name.
    creates: str = ""
    #: A network effect that may change something on the remote: an HTTP method other than
    #: GET, HEAD and OPTIONS, a push, a publish, an apply. Refused in plan mode (the
    #: ``detail`` says what it is); in other modes the network rules alone decide.
    changes_remote: bool = False
    #: Where a network connection was made, when its rules depend on it: ``"run"`` for a
    #: connection through guard's egress proxy under ``guard run``, where the agent's
    #: ``network.model_api`` list (the host agent's own model API) applies too.
    via: str = ""
    #: A write of a cache the program updates only when it can, answering the same when the
    #: write is refused (git's stat cache in ``.git/index``, refreshed by ``git status`` and
    #: ``git diff``). A write like any other to the policy; under kernel confinement, which
    #: refuses it, no objection (:mod:`guard.sandbox.confiner`).
    cache: bool = False

    @classmethod
    def read(cls, path: str | None, detail: str = "") -> Effect:
        return cls(EffectKind.READ, path, detail)

    @classmethod
    def write(cls, path: str | None, detail: str = "") -> Effect:
        return cls(EffectKind.WRITE, path, detail)

    @classmethod
    def mkdir(cls, path: str | None, detail: str = "") -> Effect:
        """A write that creates the directory ``path`` and nothing else."""
        return cls(EffectKind.WRITE, path, detail, creates_dir=True)

    @classmethod
    def delete(cls, path: str | None, detail: str = "") -> Effect:
        return cls(EffectKind.DELETE, path, detail)

    @classmethod
    def exec(cls, program: str | None, detail: str = "") -> Effect:
        return cls(EffectKind.EXEC, program, detail)

    @classmethod
    def network(
        cls, host: str | None, detail: str = "", *, changes_remote: bool = False, via: str = ""
    ) -> Effect:
        """A connection to ``host`` or ``host:port`` (see :mod:`guard.network`)."""
        return cls(EffectKind.NETWORK, host, detail, changes_remote=changes_remote, via=via)

    @classmethod
    def tool(cls, name: str, detail: str = "") -> Effect:
        return cls(EffectKind.TOOL, name, detail)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"kind": self.kind.value, "target": self.target}
        if self.detail:
            out["detail"] = self.detail
        if self.creates_dir:
            out["creates_dir"] = True
        if self.creates:
            out["creates"] = self.creates
        if self.changes_remote:
            out["changes_remote"] = True
        if self.via:
            out["via"] = self.via
        if self.cache:
            out["cache"] = True
        return out

    def __str__(self) -> str:
        target = self.target if self.target is not None else "<unknown>"
        return f"{self.kind.value} {target}"


@dataclass(frozen=True, slots=True)
class ToolCall:
    """One pending tool call, whoever announced it: the one type every layer passes around.

    ``dialect`` names the tool vocabulary (``claude-code``, ``codex``, ``opencode``,
    ``gemini``, ``mcp``; see :data:`guard.analysis.DIALECTS`), ``name`` the tool as the
    agent sent it, ``input`` its JSON arguments, ``cwd`` the directory relative paths
    are resolved from (None: the caller's), ``session`` the host's session id if any.
    Host adapters build it from a hook payload, the MCP proxy from a ``tools/call``,
    ``guard check --dialect`` from its options; :mod:`guard.gate` decides it and the
    dialect handlers in :mod:`guard.analysis` read it with the helpers below.
    """

    dialect: str
    name: str
    input: Mapping[str, Any] = field(default_factory=dict)
    cwd: str | None = None
    session: str | None = None

    def where(self, key: str) -> str:
        return f"{self.dialect} tool {self.name!r}: field {key!r}"

    def str_field(self, *names: str, required: bool = True, what: str = "a path") -> str | None:
        """The first of ``names`` present in the input; it must be a non-empty string."""
        for name in names:
            if name in self.input and self.input[name] is not None:
                value = self.input[name]
                if not isinstance(value, str):
                    raise ToolInputError(
                        f"{self.where(name)} must be a string ({what}),"
                        f" got {type(value).__name__}: {short_repr(value)}"
                    )
                if value == "" and what.endswith("path"):
                    raise ToolInputError(f"{self.where(name)} is empty; expected {what}")
                return value
        if required:
            alts = " or ".join(repr(n) for n in names)
            raise ToolInputError(
                f"{self.dialect} tool {self.name!r}: missing field {alts} ({what});"
                f" input has {sorted(self.input)}"
            )
        return None

    def str_list_field(self, name: str, what: str = "a list of paths") -> list[str]:
        value = self.input.get(name)
        if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
            raise ToolInputError(
                f"{self.where(name)} must be {what} (non-empty strings), got {short_repr(value)}"
            )
        return list(value)

    def to_json(self) -> dict[str, Any]:
        """The call as an audit record names it (the input is left out: it may hold secrets)."""
        out: dict[str, Any] = {"dialect": self.dialect, "tool_name": self.name, "cwd": self.cwd}
        if self.session is not None:
            out["session_id"] = self.session
        return out


def short_repr(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


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


def did_you_mean(word: str, choices: Iterable[str]) -> str:
    """``"did you mean 'X'? "`` for the choice closest to a misspelt ``word``, else ``""``."""
    import difflib

    close = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return f"did you mean {close[0]!r}? " if close else ""


class ToolInputError(GuardError):
    """A tool call that cannot be understood: unknown dialect or malformed input."""
