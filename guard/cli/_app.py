"""The shared typer application, the command-line conventions, and the entry point.

Conventions every command follows (kept here so that no command re-implements them):

- ``-h``/``--help``, ``-V``/``--version``, shell completion (``--install-completion``).
- Colour: ``--color auto|always|never`` (accepted anywhere before ``--``) and ``NO_COLOR``;
  with colour off no escape sequence is written at all (bold and dim included).
- Errors: one line on stderr, ``guard: error: ...``; usage errors name the command's
  ``--help``. Exit 2 for bad input or usage. With ``--json`` (or ``--format json``) the
  error is a JSON object on stderr instead: ``{"schema_version": 1, "error": ...}``.
- JSON output carries ``"schema_version": 1`` (see docs/json.md).
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Sequence
from enum import StrEnum
from typing import IO, Annotated, Any

import typer
import typer.core
import typer.rich_utils
from rich.console import Console

SCHEMA_VERSION = 1

# typer carries its own copy of click; its exception classes are reached through the
# one it exports (BadParameter -> UsageError -> ClickException).
_UsageError: type[Exception] = typer.BadParameter.__bases__[0]
_ClickException: type[Exception] = _UsageError.__bases__[0]


class ColorMode(StrEnum):
    auto = "auto"
    always = "always"
    never = "never"


_color: ColorMode = ColorMode.auto
_json_mode = False


def set_color(mode: ColorMode) -> None:
    """Set the colour mode for this process (and for typer's own help and errors)."""
    global _color
    _color = mode
    if not color_enabled(sys.stdout):
        typer.rich_utils.COLOR_SYSTEM = None
        typer.rich_utils.FORCE_TERMINAL = False
    elif mode is ColorMode.always:
        typer.rich_utils.FORCE_TERMINAL = True


def color_enabled(stream: IO[str] | None = None) -> bool:
    """Whether to style output written to ``stream`` (stdout by default)."""
    if _color is ColorMode.never:
        return False
    if _color is ColorMode.always:
        return True
    if os.environ.get("NO_COLOR", ""):
        return False
    stream = sys.stdout if stream is None else stream
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


def console(*, stderr: bool = False, soft_wrap: bool = True) -> Console:
    """A rich console that follows ``--color``/``NO_COLOR``; never wraps when not a terminal."""
    stream = sys.stderr if stderr else sys.stdout
    on = color_enabled(stream)
    return Console(
        stderr=stderr,
        highlight=False,
        soft_wrap=soft_wrap or not _isatty(stream),
        color_system="auto" if on else None,
        force_terminal=True if on and _color is ColorMode.always else None,
        no_color=not on,
    )


def _isatty(stream: IO[str]) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


def with_schema(data: dict[str, Any]) -> dict[str, Any]:
    """``data`` with ``schema_version`` first (every JSON object guard prints has one)."""
    return {"schema_version": SCHEMA_VERSION, **data}


def print_json(data: dict[str, Any], *, indent: int | None = None) -> None:
    """Print one JSON document (with ``schema_version``) on stdout."""
    sys.stdout.write(json.dumps(with_schema(data), indent=indent) + "\n")
    sys.stdout.flush()


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


def installed_version(unknown: str = "unknown") -> str:
    """guard's version as installed (the package's metadata); ``unknown`` when it is not."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("openoxide-guard")
    except PackageNotFoundError:  # pragma: no cover - run from a bare source tree
        return unknown


def _version(value: bool) -> None:
    if value:
        typer.echo(f"guard {installed_version('(version unknown: not installed)')}")
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


def _take_color(args: list[str]) -> tuple[list[str], ColorMode | None, str | None]:
    """Remove ``--color X`` / ``--color=X`` written before ``--``; (rest, mode, error)."""
    out: list[str] = []
    mode: ColorMode | None = None
    i = 0
    while i < len(args):
        a = args[i]
        if a == "--":
            out.extend(args[i:])
            break
        value: str | None = None
        if a == "--color":
            if i + 1 >= len(args):
                return args, None, "--color needs a value: auto, always or never"
            value, i = args[i + 1], i + 2
        elif a.startswith("--color="):
            value, i = a.split("=", 1)[1], i + 1
        else:
            out.append(a)
            i += 1
            continue
        try:
            mode = ColorMode(value)
        except ValueError:
            return args, None, f"--color {value!r}: use auto, always or never"
    return out, mode, None


def wants_json(args: Sequence[str]) -> bool:
    """Whether the command line asks for JSON output (``--json`` or ``--format json``)."""
    before = list(args[: args.index("--")] if "--" in args else args)
    for i, a in enumerate(before):
        if a == "--json" or a in ("--format=json", "-fjson"):
            return True
        if a in ("--format", "-f") and i + 1 < len(before) and before[i + 1] == "json":
            return True
    return False


def warn(message: str) -> None:
    """One warning on stderr (a JSON object with --json); never changes the exit code."""
    if _json_mode:
        sys.stderr.write(json.dumps(with_schema({"warning": message})) + "\n")
    else:
        sys.stderr.write(f"guard: warning: {message}\n")
    sys.stderr.flush()


def fail(message: str, *, as_json: bool, code: int = 2, **extra: Any) -> None:
    """Report an error the conventional way and leave with ``code``."""
    if as_json:
        sys.stderr.write(json.dumps(with_schema({"error": message, **extra})) + "\n")
    else:
        sys.stderr.write(f"guard: error: {message}\n")
    sys.stderr.flush()
    raise SystemExit(code)


def _message(exc: Exception) -> str:
    fmt = getattr(exc, "format_message", None)
    return str(fmt()) if callable(fmt) else str(exc)


def _exit_code(exc: Exception) -> int:
    code = getattr(exc, "exit_code", 2)
    return code if isinstance(code, int) else 2


def main(argv: Sequence[str] | None = None) -> None:
    """Console-script entry point: never lets a traceback reach the user."""
    from guard.effects import GuardError
    from guard.policy import PolicyError

    args = list(sys.argv[1:] if argv is None else argv)
    args, mode, problem = _take_color(args)
    as_json = wants_json(args)
    global _json_mode
    _json_mode = as_json
    if problem is not None:
        fail(problem, as_json=as_json)
    set_color(mode or ColorMode.auto)
    target, prog = app, "guard"
    if args[:1] == ["run"]:  # start-up cost of every confined command: see guard.cli.run
        from guard.cli.run import run_app

        target, prog, args = run_app, "guard run", args[1:]
    try:
        code = target(args=args, prog_name=prog, standalone_mode=False)
    except _UsageError as exc:
        ctx: Any = getattr(exc, "ctx", None)
        where = ctx.command_path if ctx is not None else "guard"
        msg = _message(exc).rstrip(".")
        fail(f"{msg} (see `{where} --help`)", as_json=as_json, code=_exit_code(exc))
    except typer.Abort:
        fail("aborted", as_json=as_json, code=130)
    except _ClickException as exc:
        fail(_message(exc), as_json=as_json, code=_exit_code(exc))
    except PolicyError as exc:
        fail(str(exc), as_json=as_json, problems=exc.problems)
    except GuardError as exc:
        fail(str(exc), as_json=as_json)
    except OSError as exc:  # a full disk, a read-only file system, a permission
        where = f"{exc.filename}: " if exc.filename else ""
        fail(f"{where}{exc.strerror or exc}", as_json=as_json)
    except Exception as exc:  # a bug: still one line, never a traceback (GUARD_DEBUG=1 shows it)
        if os.environ.get("GUARD_DEBUG"):
            raise
        fail(
            f"internal error: {type(exc).__name__}: {exc} (run again with GUARD_DEBUG=1 for"
            " the traceback, and please report it)",
            as_json=as_json,
        )
    raise SystemExit(code if isinstance(code, int) else 0)
