"""Policy files: schema, loading with located errors, built-ins."""

# Lazy imports: schema (pydantic) on first use: hooks read the validated cache without it.

from __future__ import annotations

from guard.policy.loader import (
    BUILTIN_PREFIX,
    LoadedPolicy,
    PolicyError,
    builtin_names,
    format_loc,
    load_policy,
    locate_line,
    patterns_of,
)
from guard.policy.valid import Agent, Policy, Rules, Sandbox

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (guard run's start)
if TYPE_CHECKING:
    from typing import Any

    from guard.policy.schema import AgentPolicy, KindRules, PolicyFile, SandboxRules, json_schema

#: pydantic's models, imported when asked for: loading a policy seen before needs none
_SCHEMA = {"AgentPolicy", "KindRules", "PolicyFile", "SandboxRules", "json_schema"}


def __getattr__(name: str) -> Any:
    if name in _SCHEMA:
        from guard.policy import schema

        return getattr(schema, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "BUILTIN_PREFIX",
    "Agent",
    "AgentPolicy",
    "KindRules",
    "LoadedPolicy",
    "Policy",
    "PolicyError",
    "PolicyFile",
    "Rules",
    "Sandbox",
    "SandboxRules",
    "builtin_names",
    "format_loc",
    "json_schema",
    "load_policy",
    "locate_line",
    "patterns_of",
]
