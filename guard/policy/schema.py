"""The policy file format, as pydantic models (``guard schema`` prints it)."""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from guard.effects import Action

Mode = Literal["plan", "build"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class KindRules(_Strict):
    """Rules for one effect kind. Each list is a gitignore file."""

    deny: list[str] = Field(default_factory=list, description="Patterns denied (gitignore syntax).")
    ask: list[str] = Field(default_factory=list, description="Patterns that need the user's yes.")
    allow: list[str] = Field(default_factory=list, description="Patterns allowed.")
    default: Action | None = Field(
        default=None,
        description="Action when no list matches, or the target is unknown. Default: the agent's.",
    )


class NetworkRules(KindRules):
    """Rules for network connections: each pattern is HOST or HOST:PORT (globs allowed)."""

    model_api: list[str] = Field(
        default_factory=list,
        description="The host agent's own model API (HOST:PORT patterns): allowed, after deny"
        " and ask, to connections made through guard's egress proxy under `guard run` (any"
        " method, in plan mode too); not to confined shell commands or MCP servers.",
    )


class EgressConfig(_Strict):
    """Guard's egress proxy (the only way out of a confined command's network namespace)."""

    resolve: dict[str, str] = Field(
        default_factory=dict,
        description="HOST or HOST:PORT -> ADDRESS or ADDRESS:PORT (an IP address, not a name):"
        " where the proxy connects instead of resolving the name (tests, local mirrors)."
        " Decisions are still made on the name; the address is trusted as written.",
    )


Wall = Literal["network", "ipc", "processes", "metadata"]


class SandboxRules(_Strict):
    """Kernel confinement: extra writable directories for `guard run`, and confined shell."""

    writable: list[str] = Field(
        default_factory=list,
        description="Extra writable directories for `guard run` (state, cache, temp the agent"
        " needs).",
    )
    confine: bool = Field(
        default=False,
        description="Plan mode: run shell commands under kernel confinement (Landlock, no"
        " capabilities, seccomp) where the host can rewrite a call and the kernel can confine:"
        " commands the analysis allows, and commands whose only objection is a program it"
        " cannot prove read-only (an exec the policy asks about), become allow_confined."
        " Writes the analysis can see outside the policy stay denied.",
    )
    require: list[Wall] = Field(
        default_factory=list,
        description="Walls a confined command must have, else guard refuses rather than run"
        " it weaker: 'network' (a network namespace: loopback and guard's egress proxy only),"
        " 'ipc' (an IPC namespace; the host's abstract sockets out of reach), 'processes' (a PID"
        " namespace), 'metadata' (a read-only view: no chmod, utime or xattrs). All four need"
        " namespaces; without them (no unprivileged user namespaces) commands fall back to"
        " Landlock, capabilities and seccomp alone unless a wall is required here.",
    )
    sockets: list[str] = Field(
        default_factory=list,
        description="Pathname Unix sockets a confined command may connect to (none by default:"
        " creating a Unix socket is refused). Listing one lets commands create Unix sockets;"
        " every other socket bound on the host is covered in the command's view.",
    )


class AgentPolicy(_Strict):
    mode: Mode = Field(description="plan: may change nothing but its plan file. build: works.")
    default: Action = Field(description="Action for anything no rule decides.")
    description: str | None = None
    tools: dict[str, Action] = Field(
        default_factory=dict,
        description="Canonical tool name -> action; '*' matches any tool not listed.",
    )
    subagents: list[str] | None = Field(
        default=None,
        description="Subagent types this agent may start ('*' for any). Unset: the tool table's"
        " 'task' entry decides.",
    )
    protected: bool = Field(
        default=True,
        description="Deny writes and deletes of protected paths (guard's own files, git hooks and"
        " config, agent hook settings, shell rc files). Turn off only deliberately.",
    )
    read: KindRules = Field(default_factory=KindRules)
    write: KindRules = Field(default_factory=KindRules)
    delete: KindRules = Field(default_factory=KindRules)
    exec: KindRules = Field(default_factory=KindRules)
    network: NetworkRules = Field(default_factory=NetworkRules)
    sandbox: SandboxRules = Field(default_factory=SandboxRules)


Facility = Literal[
    "kern", "user", "mail", "daemon", "auth", "syslog", "lpr", "news", "uucp", "cron",
    "authpriv", "ftp", "local0", "local1", "local2", "local3", "local4", "local5", "local6",
    "local7",
]  # fmt: skip

#: where ``[audit] syslog`` may point (docs/fleet.md)
SYSLOG_URL = re.compile(
    r"unix:/[^\x00-\x1f]*|(?:tcp|udp)://(?:\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9.-]+):[0-9]{1,5}"
)


class AuditSettings(_Strict):
    """Where every audit record goes besides the local audit log (docs/fleet.md)."""

    syslog: str | None = Field(
        default=None,
        description='Also ship every record as RFC 5424 syslog: "unix:/dev/log",'
        ' "tcp://HOST:PORT" (octet-counting framing) or "udp://HOST:PORT". A decision never'
        " waits for it: records go through a bounded spool in guard's data directory.",
    )
    facility: Facility = Field(default="auth", description="The syslog facility.")
    spool_max_bytes: int = Field(
        default=64 << 20,
        ge=0,
        description="Most bytes of records waiting to be shipped; past it a record is kept in"
        " the local audit log only, and a notice says how many were not shipped.",
    )

    @field_validator("syslog")
    @classmethod
    def _url(cls, value: str | None) -> str | None:
        if value is None:
            return value
        m = SYSLOG_URL.fullmatch(value)
        port = value.rsplit(":", 1)[-1] if not value.startswith("unix:") else "1"
        if m is None or not 0 < int(port) < 65536:
            raise ValueError(
                f"syslog must be unix:/PATH, tcp://HOST:PORT or udp://HOST:PORT, got {value!r};"
                ' e.g. "unix:/dev/log" or "tcp://127.0.0.1:514"'
            )
        return value


class PolicyFile(_Strict):
    """A guard policy file (TOML or JSON)."""

    version: Literal[1] = Field(description="Policy format version; always 1.")
    extends: list[str] = Field(
        default_factory=list,
        description="Files this one builds on: paths relative to this file, or builtin:NAME."
        " Later files win per key.",
    )
    description: str | None = None
    agents: dict[str, AgentPolicy] = Field(default_factory=dict)
    egress: EgressConfig = Field(default_factory=EgressConfig)
    lint: dict[str, object] = Field(
        default_factory=dict, description="Configuration for `guard lint`."
    )
    audit: AuditSettings = Field(
        default_factory=AuditSettings, description="Shipping audit records (docs/fleet.md)."
    )


ManagedAction = Literal["ask", "deny"]
Pin = Literal["protected", "confine", "audit"]


class ManagedKind(_Strict):
    """One effect kind in the managed layer: it can only deny or ask."""

    deny: list[str] = Field(
        default_factory=list, description="Denied whatever any other policy says."
    )
    ask: list[str] = Field(
        default_factory=list, description="Asked about unless another list denies."
    )
    default: ManagedAction | None = Field(
        default=None,
        description="At least this for every effect of the kind no managed list decides (an"
        " allow of the user's policy becomes this).",
    )


class ManagedScope(_Strict):
    """The managed rules for a group of agents."""

    tools: dict[str, ManagedAction] = Field(
        default_factory=dict, description="Canonical tool name ('*' for any) -> ask or deny."
    )
    read: ManagedKind = Field(default_factory=ManagedKind)
    write: ManagedKind = Field(default_factory=ManagedKind)
    delete: ManagedKind = Field(default_factory=ManagedKind)
    exec: ManagedKind = Field(default_factory=ManagedKind)
    network: ManagedKind = Field(default_factory=ManagedKind)


class ManagedTable(_Strict):
    pin: list[Pin] = Field(
        default_factory=list,
        description="Settings no other policy can switch off: protected (every agent keeps"
        " protected paths), confine (plan agents run shell confined; guard run cannot go"
        " unconfined), audit (the [audit] table is the managed layer's alone).",
    )
    all: ManagedScope = Field(default_factory=ManagedScope, description="Every agent.")
    plan: ManagedScope = Field(
        default_factory=ManagedScope, description="Every agent whose mode is plan."
    )
    build: ManagedScope = Field(
        default_factory=ManagedScope, description="Every agent whose mode is build."
    )


class ManagedFile(_Strict):
    """A managed policy file (/etc/openoxide/managed.d/*.toml): rules no user, project or
    --policy layer can weaken."""

    version: Literal[1] = Field(description="Policy format version; always 1.")
    extends: list[str] = Field(
        default_factory=list,
        description="Other managed files (root-owned, like this one) this one builds on.",
    )
    description: str | None = None
    managed: ManagedTable = Field(default_factory=ManagedTable)
    audit: AuditSettings = Field(default_factory=AuditSettings)


def json_schema() -> dict[str, object]:
    schema = PolicyFile.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "OpenOxide Guard policy"
    return schema
