"""The ``guard`` command: a thin typer layer over the library.

Each command module registers its commands on :data:`app` when imported; the
list below is every command family (add a module there to add one).
:mod:`guard.cli.options` and :mod:`guard.cli.show` hold what commands share.
"""

from __future__ import annotations

from guard.cli import core, demo, effects, hooks, lint, mcp, monitor, planning, run
from guard.cli._app import app, main

COMMAND_MODULES = (core, demo, effects, hooks, lint, mcp, monitor, planning, run)

__all__ = ["app", "main"]
