"""``guard ui``: the plan-mode cockpit. Textual is imported only when the command runs."""

# Lazy imports: textual (optional extra `ui`) only in `guard ui`; other commands run without it.

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Annotated

import typer

from guard.cli._base import ColorMode, a_directory, color_mode
from guard.cli.options import HereOpt
from guard.effects import GuardError
from guard.ui.state import Cockpit

commands = typer.Typer()  # added to guard's application by guard.cli._app

MISSING = (
    "guard ui needs Textual, an optional dependency: pip install 'openoxide-guard[ui]'"
    " (the hooks and every other command work without it)"
)


@commands.command("ui")
def ui_command(
    session_id: Annotated[
        str | None,
        typer.Option(
            "--session",
            "-s",
            help="Show this session (default: follow the one deciding for the worktree).",
        ),
    ] = None,
    cwd: HereOpt = Path("."),
) -> None:
    """The plan-mode cockpit: checklist, plan, activity and pending answers in one screen.

    Reads and writes only guard's own state (sessions, event logs, the audit
    log, plan files), so it and the CLI can be used side by side; no network
    port is opened. Keys: a approve, r reject, f refine, i answer questions,
    p start plan mode, e end the session, s switch session, d/h filter the
    activity, ? help, q quit. NO_COLOR (or --color never) draws it without colour.

    Example: guard ui --cwd ~/src/project
    """
    a_directory(cwd)
    try:
        from guard.ui.app import CockpitApp
    except ImportError as exc:
        if "textual" not in str(exc):
            raise
        raise GuardError(MISSING) from None

    if color_mode() is ColorMode.never:
        os.environ["NO_COLOR"] = "1"  # Textual reads it when the app starts
    source = Cockpit(cwd, session_id)
    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        raise GuardError(
            "guard ui needs a terminal (its input or output is not one); without one, use"
            " guard session show, guard plan status or guard events --follow"
        )
    CockpitApp(source).run()
