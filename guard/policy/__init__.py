"""Policy files: schema, loading with located errors, built-ins."""

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
from guard.policy.schema import AgentPolicy, KindRules, PolicyFile, SandboxRules, json_schema

__all__ = [
    "BUILTIN_PREFIX",
    "AgentPolicy",
    "KindRules",
    "LoadedPolicy",
    "PolicyError",
    "PolicyFile",
    "SandboxRules",
    "builtin_names",
    "format_loc",
    "json_schema",
    "load_policy",
    "locate_line",
    "patterns_of",
]
