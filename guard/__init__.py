"""OpenOxide Guard: permission policies and a sandbox for coding agents in plan mode.

The public API::

    from guard import Guard, Effect
    g = Guard.load()      # discovery: $GUARD_POLICY, .openoxide/policy.toml, builtin:default
    d = g.decide("plan", [Effect.write("src/app.py")])
    d.action, d.reason, d.rule   # Action.DENY, "...", "agents.plan.write.default"

Names are imported on first use, so `import guard` (and the hook client) stays cheap.
"""

# Lazy imports: the modules behind the names, on first use: `import guard` stays cheap for hooks.

from __future__ import annotations

from guard.version import __version__ as __version__

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (TAB and hook speed)
if TYPE_CHECKING:
    from types import ModuleType
    from typing import Any

    from guard.decide import Explanation, Guard
    from guard.effects import Action, Decision, Effect, EffectKind, GuardError, ToolCall
    from guard.gate import Gate, Verdict, VerdictAction
    from guard.paths import PlanDir, Roots, canonicalize, find_worktree, plan_dir
    from guard.policy import PolicyError, load_policy

_WHERE = {
    "Explanation": "decide",
    "Guard": "decide",
    "Action": "effects",
    "Decision": "effects",
    "Effect": "effects",
    "EffectKind": "effects",
    "GuardError": "effects",
    "ToolCall": "effects",
    "Gate": "gate",
    "Verdict": "gate",
    "VerdictAction": "gate",
    "PlanDir": "paths",
    "Roots": "paths",
    "canonicalize": "paths",
    "find_worktree": "paths",
    "plan_dir": "paths",
    "PolicyError": "policy",
    "load_policy": "policy",
}

__all__ = [
    "Action",
    "Decision",
    "Effect",
    "EffectKind",
    "Explanation",
    "Gate",
    "Guard",
    "GuardError",
    "PlanDir",
    "PolicyError",
    "Roots",
    "ToolCall",
    "Verdict",
    "VerdictAction",
    "canonicalize",
    "find_worktree",
    "load_policy",
    "plan_dir",
]


def _module(name: str) -> ModuleType:
    if name == "decide":
        from guard import decide

        return decide
    if name == "effects":
        from guard import effects

        return effects
    if name == "gate":
        from guard import gate

        return gate
    if name == "paths":
        from guard import paths

        return paths
    from guard import policy

    return policy


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'guard' has no attribute {name!r}")
    value = getattr(_module(module), name)
    globals()[name] = value
    return value
