"""Every command family, registered on the typer application: ``guard``'s whole command tree.

The order of the imports is the order of the commands in ``guard --help``.
"""

from __future__ import annotations

from guard.cli import (
    audit,
    core,
    demo,
    effects,
    hooks,
    lint,
    mcp,
    monitor,
    plan,
    planning,
    replay,
    resume,
    run,
    ui,
)
from guard.cli._app import app

__all__ = [
    "app",
    "audit",
    "core",
    "demo",
    "effects",
    "hooks",
    "lint",
    "mcp",
    "monitor",
    "plan",
    "planning",
    "replay",
    "resume",
    "run",
    "ui",
]
