"""``guard``'s typer application: the root command, and every command family added to it.

Each command module defines its commands on a typer application of its own
(``commands``) and imports nothing of this one; this module imports them all and adds
their commands and groups to :data:`app`. The order of :data:`FAMILIES` is the order
of the commands in ``guard --help``. A new command family is a new module added there.
How a command line reaches :data:`app` is :func:`guard.cli._main.dispatch`.
"""

from __future__ import annotations

import typer

from guard.cli import audit_command as audit
from guard.cli import confine_command as confine
from guard.cli import (
    core,
    demo,
    hooks,
    import_command,
    lint,
    monitor,
    plan_command,  # noqa: F401  (its commands are on planning's `plan` group)
    planning,
    replay,
    resume,  # noqa: F401  (its command is on planning's `session` group)
    run,
    ui,
)
from guard.cli import effects_command as effects
from guard.cli import mcp_command as mcp
from guard.cli import policy_command as policy
from guard.cli._families import root

__all__ = ["FAMILIES", "app"]

app = root()

# plan and resume define no family of their own: they add their commands to the
# `plan` and `session` groups of guard.cli.planning (imported above for that).
FAMILIES: tuple[typer.Typer, ...] = tuple(
    family.commands
    for family in (
        audit, core, demo, effects, hooks, lint, import_command, mcp, monitor, planning,
        replay, run, confine, ui, policy,
    )
)
for _family in FAMILIES:
    app.registered_commands.extend(_family.registered_commands)
    app.registered_groups.extend(_family.registered_groups)
