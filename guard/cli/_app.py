"""The shared typer application and the typer side of the command-line conventions.

The conventions themselves (colour, JSON errors, exit codes) are described and kept
in :mod:`guard.cli._base`, which needs no typer; their names are importable from here
too. Every command module registers its commands on :data:`app` when imported
(:mod:`guard.cli._commands` imports them all).
"""

from __future__ import annotations

import sys
from typing import Annotated, Any, NoReturn

import typer
import typer.core
import typer.rich_utils
from rich.console import Console

from guard.cli._base import (
    SCHEMA_VERSION,
    ColorMode,
    color_enabled,
    color_mode,
    fail,
    fail_for,
    installed_version,
    isatty,
    main,
    print_json,
    set_color_mode,
    take_color,
    version_text,
    wants_json,
    warn,
    with_schema,
)

__all__ = [
    "SCHEMA_VERSION",
    "ColorMode",
    "app",
    "color_enabled",
    "console",
    "dispatch",
    "fail",
    "installed_version",
    "main",
    "print_json",
    "set_color",
    "take_color",
    "wants_json",
    "warn",
    "with_schema",
]

# typer carries its own copy of click; its exception classes are reached through the
# one it exports (BadParameter -> UsageError -> ClickException).
_UsageError: type[Exception] = typer.BadParameter.__bases__[0]
_ClickException: type[Exception] = _UsageError.__bases__[0]


def set_color(mode: ColorMode) -> None:
    """Set the colour mode for this process (and for typer's own help and errors)."""
    set_color_mode(mode)
    if not color_enabled(sys.stdout):
        typer.rich_utils.COLOR_SYSTEM = None
        typer.rich_utils.FORCE_TERMINAL = False
    elif mode is ColorMode.always:
        typer.rich_utils.FORCE_TERMINAL = True


def console(*, stderr: bool = False, soft_wrap: bool = True) -> Console:
    """A rich console that follows ``--color``/``NO_COLOR``; never wraps when not a terminal."""
    stream = sys.stderr if stderr else sys.stdout
    on = color_enabled(stream)
    return Console(
        stderr=stderr,
        highlight=False,
        soft_wrap=soft_wrap or not isatty(stream),
        color_system="auto" if on else None,
        force_terminal=True if on and color_mode() is ColorMode.always else None,
        no_color=not on,
    )


def _no_type_for_flags(self: typer.core.TyperOption, ctx: Any) -> str | None:
    # typer's rich help shows a value type for every option, `<bool>` for flags too;
    # a flag takes no value, so it gets none (as in click's plain help).
    if self.is_flag or self.count:
        return None
    if self.metavar is not None:
        return self.metavar
    shown = self.display_type(ctx)
    return shown + "..." if self.nargs != 1 else shown


typer.core.TyperOption.display_type_rich = _no_type_for_flags  # type: ignore[method-assign]


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


def _message(exc: Exception) -> str:
    fmt = getattr(exc, "format_message", None)
    return str(fmt()) if callable(fmt) else str(exc)


def _exit_code(exc: Exception) -> int:
    code = getattr(exc, "exit_code", 2)
    return code if isinstance(code, int) else 2


def dispatch(args: list[str], *, as_json: bool) -> NoReturn:
    """Run the command line ``args`` (``--color`` already taken) through typer; exit."""
    set_color(color_mode())  # typer's own help and errors follow it too
    target, prog = app, "guard"
    if args[:1] == ["run"]:  # the one command: see guard.cli.runner
        from guard.cli.run import run_app

        target, prog, args = run_app, "guard run", args[1:]
    else:
        from guard.cli import _commands  # noqa: F401  (registers every command on app)
    try:
        code = target(args=args, prog_name=prog, standalone_mode=False)
    except _UsageError as exc:
        ctx: Any = getattr(exc, "ctx", None)
        where = ctx.command_path if ctx is not None else prog  # no context: option parsing
        # no arguments where some are needed: typer has printed the help already
        msg = _message(exc).rstrip(".") or "no command given"
        fail(f"{msg} (see `{where} --help`)", as_json=as_json, code=_exit_code(exc))
    except typer.Abort:
        fail("aborted", as_json=as_json, code=130)
    except _ClickException as exc:
        fail(_message(exc), as_json=as_json, code=_exit_code(exc))
    except Exception as exc:
        fail_for(exc, as_json=as_json)
    raise SystemExit(code if isinstance(code, int) else 0)
