"""``guard``'s typer application: the root command, and every command family added to it.

Each command module defines its commands on a typer application of its own
(``commands``) and imports nothing of this one; this module imports them all and adds
their commands and groups to :data:`app`. The order of :data:`FAMILIES` is the order
of the commands in ``guard --help``. A new command family is a new module added there.
How a command line reaches :data:`app` is :func:`guard.cli._main.dispatch`.
"""

from __future__ import annotations

from typing import Annotated

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
from guard.cli._base import ColorMode, version_text
from guard.cli._typer import set_color

__all__ = ["FAMILIES", "app"]

app = typer.Typer(
    name="guard",
    help=(
        "OpenOxide Guard: permission policies and a sandbox that make plan mode a runtime"
        " fact for coding agents.\n\n"
        "An agent in plan mode may explore and ask, but change nothing except its plan"
        " file. Start with:\n\n"
        "  guard demo                              # watch the default policy decide\n\n"
        "  guard check write src/x.py              # may the plan agent write? exit 1: no\n\n"
        "  guard explain --agent plan write .openoxide/plans/p.md\n\n"
        "  guard install claude-code               # wire guard into Claude Code's hooks\n\n"
        "  guard run --agent plan -- aider         # confine any agent with Landlock\n\n"
        "  guard watch --agent plan --restore      # report and undo violations\n\n"
        "  guard mcp -- SERVER_CMD...              # guard any MCP server's tool calls\n\n"
        "  guard lint && guard review              # check the policy itself\n\n"
        "  guard plan-dir                          # where plan files live here\n\n"
        "Exit codes: 0 success/allow, 1 deny/violation, 3 ask/findings, 2 bad input or"
        " usage. NO_COLOR or --color never turns colour off; --json output is described in"
        " docs/json.md."
    ),
    no_args_is_help=True,
    add_completion=True,
    pretty_exceptions_enable=False,
    rich_markup_mode="rich",
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _version(value: bool) -> None:
    if value:
        typer.echo(version_text(), nl=False)
        raise typer.Exit(0)


@app.callback()
def _root(
    version: Annotated[
        bool,
        typer.Option(
            "--version",
            "-V",
            help="Print guard's version and exit.",
            callback=_version,
            is_eager=True,
        ),
    ] = False,
    color: Annotated[
        ColorMode,
        typer.Option(
            "--color",
            help="Colour and styles: auto (a terminal, unless NO_COLOR is set), always, never."
            " Accepted after any command too.",
        ),
    ] = ColorMode.auto,
) -> None:
    """OpenOxide Guard."""
    # main() already applied --color wherever it was written; this applies it for
    # callers that run `app` directly (tests through typer's runner).
    if color is not ColorMode.auto:
        set_color(color)


# plan and resume define no family of their own: they add their commands to the
# `plan` and `session` groups of guard.cli.planning (imported above for that).
FAMILIES: tuple[typer.Typer, ...] = tuple(
    family.commands
    for family in (
        audit, confine, core, demo, effects, hooks, lint, import_command, mcp, monitor,
        planning, replay, run, ui,
    )
)
for _family in FAMILIES:
    app.registered_commands.extend(_family.registered_commands)
    app.registered_groups.extend(_family.registered_groups)
