"""The shared typer application and the entry point."""

from __future__ import annotations

import sys

import typer

app = typer.Typer(
    name="guard",
    help=(
        "OpenOxide Guard: permission policies and a sandbox that make plan mode a runtime"
        " fact for coding agents.\n\n"
        "An agent in plan mode may explore and ask, but change nothing except its plan"
        " file. Start with:\n\n"
        "  guard demo                              # watch the default policy decide\n\n"
        "  guard check --agent plan write src/x.py # may the plan agent write there?\n\n"
        "  guard explain --agent plan write .openoxide/plans/p.md\n\n"
        "  guard install claude-code               # wire guard into Claude Code's hooks\n\n"
        "  guard run --agent plan -- aider         # confine any agent with Landlock\n\n"
        "  guard watch --agent plan --restore      # report and undo violations\n\n"
        "  guard mcp -- SERVER_CMD...              # guard any MCP server's tool calls\n\n"
        "  guard lint && guard review              # check the policy itself\n\n"
        "  guard plan-dir                          # where plan files live here"
    ),
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode="rich",
)


def main() -> None:
    """Console-script entry point: never lets a traceback reach the user."""
    from guard.effects import GuardError

    try:
        app()
    except GuardError as exc:
        print(f"guard: error: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
    except OSError as exc:  # a full disk, a read-only file system, a permission
        where = f"{exc.filename}: " if exc.filename else ""
        print(f"guard: error: {where}{exc.strerror or exc}", file=sys.stderr)
        raise SystemExit(2) from None
