"""OpenOxide Guard: permission policies and a sandbox for coding agents in plan mode.

The public API::

    from guard import Guard, Effect
    g = Guard.load()      # discovery: $GUARD_POLICY, .openoxide/policy.toml, builtin:default
    d = g.decide("plan", [Effect.write("src/app.py")])
    d.action, d.reason, d.rule   # Action.DENY, "...", "agents.plan.write.default"
"""

from guard.decide import Explanation, Guard
from guard.effects import Action, Decision, Effect, EffectKind, GuardError, ToolCall
from guard.paths import PlanDir, Roots, canonicalize, find_worktree, plan_dir
from guard.policy import PolicyError, load_policy

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
