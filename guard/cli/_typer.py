"""The typer side of the command-line conventions: colour for typer and rich, and errors.

:func:`set_color` tells typer's own help and errors the colour mode, :func:`console` is
the rich console every command prints with (:mod:`guard.cli._console`), and
:func:`run_typer` runs a typer application so that its usage errors, aborts and a
command's exceptions are said the conventional way (:mod:`guard.cli._base`). Flags show
no value type in ``--help``. No command and no application is defined here: the application is
:mod:`guard.cli._app`.
"""

from __future__ import annotations

# Lazy imports: typer's rich help module only when help is rendered (CLI start-up).
import sys
from typing import Any, NoReturn

import typer
import typer.core

from guard.cli._base import (
    ColorMode,
    color_enabled,
    fail,
    fail_for,
    set_color_mode,
)
from guard.cli._console import console
from guard.cli._helptext import first_paragraph, help_text, highlighter, paragraphs

__all__ = ["console", "run_typer", "set_color"]

# typer carries its own copy of click; its exception classes are reached through the
# one it exports (BadParameter -> UsageError -> ClickException).
_UsageError: type[Exception] = typer.BadParameter.__bases__[0]
_ClickException: type[Exception] = _UsageError.__bases__[0]


#: typer's help settings for the colour mode, applied when help is rendered: typer's rich
#: help module (rich's markdown, traceback…) loads only then, not for every command.
_HELP_SETTINGS: dict[str, Any] = {}


def _apply_help_settings() -> None:
    import typer.rich_utils

    for key, value in _HELP_SETTINGS.items():
        setattr(typer.rich_utils, key, value)
    typer.rich_utils._get_help_text = _help_text
    typer.rich_utils._make_command_help = _command_help


def _help_text(*, obj: Any, markup_mode: Any) -> Any:
    """A command's own help with its paragraphs as written (guard.cli._helptext), in place
    of typer's, which keeps the source's line breaks inside a paragraph."""
    from rich.console import Group

    return Group(*help_text(obj.help or "", deprecated=bool(obj.deprecated)))


def _command_help(*, help_text: str, markup_mode: Any) -> Any:
    """A command's line in its group's list: its first paragraph, as one line of prose."""
    from rich.text import Text

    return highlighter()(Text.from_markup(first_paragraph(help_text)))


def set_color(mode: ColorMode) -> None:
    """Set the colour mode for this process (and for typer's own help and errors)."""
    set_color_mode(mode)
    _HELP_SETTINGS.clear()
    if not color_enabled(sys.stdout):
        _HELP_SETTINGS.update(COLOR_SYSTEM=None, FORCE_TERMINAL=False)
    elif mode is ColorMode.always:
        _HELP_SETTINGS.update(FORCE_TERMINAL=True)
    if "typer.rich_utils" in sys.modules:
        _apply_help_settings()


def _with_help_settings(cls: Any) -> None:
    original = cls.format_help

    def format_help(self: Any, ctx: Any, formatter: Any) -> Any:
        _apply_help_settings()
        if self.epilog:  # typer keeps its paragraphs as they are: give them as written
            self.epilog = "\n\n".join(paragraphs(self.epilog))
        return original(self, ctx, formatter)

    cls.format_help = format_help


_with_help_settings(typer.core.TyperCommand)
_with_help_settings(typer.core.TyperGroup)


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


def _message(exc: Exception) -> str:
    fmt = getattr(exc, "format_message", None)
    return str(fmt()) if callable(fmt) else str(exc)


def _exit_code(exc: Exception) -> int:
    code = getattr(exc, "exit_code", 2)
    return code if isinstance(code, int) else 2


def run_typer(target: typer.Typer, args: list[str], *, prog: str, as_json: bool) -> NoReturn:
    """Run ``args`` through the typer application ``target`` named ``prog``; exit."""
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
