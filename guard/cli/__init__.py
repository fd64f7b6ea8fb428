"""The ``guard`` command: a thin typer layer over the library.

Each module in this package registers its commands on :data:`app` when it is
imported; a new command family is a new module imported here.
:mod:`guard.cli.options` and :mod:`guard.cli.show` hold what commands share.
"""

from __future__ import annotations

from guard.cli import core, demo, effects, hooks, lint, mcp, monitor, planning, replay, run
from guard.cli._app import app, main

__all__ = [
    "app",
    "core",
    "demo",
    "effects",
    "hooks",
    "lint",
    "main",
    "mcp",
    "monitor",
    "planning",
    "replay",
    "run",
]
