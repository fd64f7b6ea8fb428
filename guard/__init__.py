"""OpenOxide Guard: permission policies and a sandbox for coding agents in plan mode.

The public API::

    from guard import Guard, Effect
    g = Guard.load()      # discovery: $GUARD_POLICY, .openoxide/policy.toml, builtin:default
    d = g.decide("plan", [Effect.write("src/app.py")])
    d.action, d.reason, d.rule   # Action.DENY, "...", "agents.plan.write.default"

Names are imported on first use, so `import guard` (and the hook client) stays cheap.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from guard.decide import Explanation, Guard
    from guard.effects import Action, Decision, Effect, EffectKind, GuardError, ToolCall
    from guard.paths import PlanDir, Roots, canonicalize, find_worktree, plan_dir
    from guard.policy import PolicyError, load_policy

_WHERE = {
    "Explanation": "guard.decide",
    "Guard": "guard.decide",
    "Action": "guard.effects",
    "Decision": "guard.effects",
    "Effect": "guard.effects",
    "EffectKind": "guard.effects",
    "GuardError": "guard.effects",
    "ToolCall": "guard.effects",
    "PlanDir": "guard.paths",
    "Roots": "guard.paths",
    "canonicalize": "guard.paths",
    "find_worktree": "guard.paths",
    "plan_dir": "guard.paths",
    "PolicyError": "guard.policy",
    "load_policy": "guard.policy",
}

__all__ = [
    "Action",
    "Decision",
    "Effect",
    "EffectKind",
    "Explanation",
    "Guard",
    "GuardError",
    "PlanDir",
    "PolicyError",
    "Roots",
    "ToolCall",
    "canonicalize",
    "find_worktree",
    "load_policy",
    "plan_dir",
]
__version__ = "0.1.0"


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'guard' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
