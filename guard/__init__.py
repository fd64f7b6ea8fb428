"""OpenOxide Guard: permission policies and a sandbox for coding agents in plan mode."""

from guard.effects import Action, Decision, Effect, EffectKind, GuardError, ToolCall
from guard.paths import PlanDir, Roots, canonicalize, find_worktree, plan_dir

__all__ = [
    "Action",
    "Decision",
    "Effect",
    "EffectKind",
    "GuardError",
    "PlanDir",
    "Roots",
    "ToolCall",
    "canonicalize",
    "find_worktree",
    "plan_dir",
]
__version__ = "0.1.0"
