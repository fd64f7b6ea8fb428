"""The root of ``guard``'s typer application, and which module defines each command.

``guard CMD …`` loads only the module (the family) that defines CMD, so that a command
pays for its own imports alone (``guard mode`` does not load lint, the doctor or the
policy schema); ``guard --help``, a misspelt command and completion load every family
(:mod:`guard.cli._app`). :data:`FAMILY_OF` must name every top-level command:
tests/test_cli_speed.py compares it with the whole application.
"""

# Lazy imports: each command family's module when its command runs (CLI start-up speed).

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated

import typer

from guard.cli._base import ColorMode, version_text
from guard.cli._typer import set_color
from guard.cli.root_help import COLOR_HELP, ROOT_HELP, SUMMARIES, VERSION_HELP

__all__ = ["FAMILY_OF", "SUMMARIES", "app_for", "help_app", "root"]


def _version(value: bool) -> None:
    if value:
        typer.echo(version_text(), nl=False)
        raise typer.Exit(0)


def root() -> typer.Typer:
    """A new root application: guard's help text and global options, no command yet."""
    app = typer.Typer(
        name="guard",
        help=ROOT_HELP,
        no_args_is_help=True,
        add_completion=True,
        pretty_exceptions_enable=False,
        rich_markup_mode="rich",
        context_settings={"help_option_names": ["-h", "--help"]},
    )

    @app.callback()
    def _root(
        version: Annotated[
            bool,
            typer.Option(
                "--version",
                "-V",
                help=VERSION_HELP,
                callback=_version,
                is_eager=True,
            ),
        ] = False,
        color: Annotated[
            ColorMode,
            typer.Option(
                "--color",
                help=COLOR_HELP,
            ),
        ] = ColorMode.auto,
    ) -> None:
        """OpenOxide Guard."""
        # main() already applied --color wherever it was written; this applies it for
        # callers that run `app` directly (tests through typer's runner).
        if color is not ColorMode.auto:
            set_color(color)

    return app


def _audit() -> list[typer.Typer]:
    from guard.cli import audit_command

    return [audit_command.commands]


def _confine() -> list[typer.Typer]:
    from guard.cli import confine_command

    return [confine_command.commands]


def _core() -> list[typer.Typer]:
    from guard.cli import core

    return [core.commands]


def _demo() -> list[typer.Typer]:
    from guard.cli import demo

    return [demo.commands]


def _effects() -> list[typer.Typer]:
    from guard.cli import effects_command

    return [effects_command.commands]


def _hooks() -> list[typer.Typer]:
    from guard.cli import hooks

    return [hooks.commands]


def _lint() -> list[typer.Typer]:
    from guard.cli import lint

    return [lint.commands]


def _import() -> list[typer.Typer]:
    from guard.cli import import_command

    return [import_command.commands]


def _mcp() -> list[typer.Typer]:
    from guard.cli import mcp_command

    return [mcp_command.commands]


def _monitor() -> list[typer.Typer]:
    from guard.cli import monitor

    return [monitor.commands]


def _planning() -> list[typer.Typer]:
    # plan_command and resume add their commands to planning's `plan` and `session` groups
    from guard.cli import plan_command, planning, resume  # noqa: F401

    return [planning.commands]


def _policy() -> list[typer.Typer]:
    from guard.cli import policy_command

    return [policy_command.commands]


def _replay() -> list[typer.Typer]:
    from guard.cli import replay

    return [replay.commands]


def _run() -> list[typer.Typer]:
    from guard.cli import run

    return [run.commands]


def _ui() -> list[typer.Typer]:
    from guard.cli import ui

    return [ui.commands]


#: top-level command -> the loader of the family that defines it
FAMILY_OF: dict[str, Callable[[], list[typer.Typer]]] = {
    "audit": _audit,
    "check": _core, "explain": _core, "schema": _core, "plan-dir": _core,
    "demo": _demo,
    "effects": _effects,
    "hook": _hooks, "install": _hooks, "uninstall": _hooks, "doctor": _hooks,
    "lint": _lint, "review": _lint,
    "import": _import,
    "mcp": _mcp,
    "watch": _monitor, "quarantine": _monitor,
    "mode": _planning, "events": _planning, "session": _planning, "plan": _planning,
    "replay": _replay,
    "policy": _policy,
    "run": _run,
    "confine": _confine,
    "ui": _ui,
}  # fmt: skip


def _listed() -> None:
    """Stands for a command in ``guard --help``'s list; never run."""


def help_app() -> typer.Typer:
    """The root with every command listed by its summary: ``guard --help`` without
    importing the command families."""
    app = root()
    for name, summary in SUMMARIES:
        app.command(name, help=summary)(_listed)
    return app


def command_of(args: list[str]) -> str | None:
    """The top-level command a command line names (the root's options skipped), if any."""
    it = iter(args)
    for word in it:
        if word == "--color":
            next(it, None)
        elif word.startswith("-"):
            return None  # --help, --version, completion: the root answers
        else:
            return word
    return None


def app_for(args: list[str]) -> typer.Typer | None:
    """A root application holding only the family of the command ``args`` names; None when
    it names none guard knows (the whole application then answers, with did-you-mean)."""
    name = command_of(args)
    loader = FAMILY_OF.get(name) if name is not None else None
    if loader is None:
        return None
    app = root()
    for family in loader():
        app.registered_commands.extend(family.registered_commands)
        app.registered_groups.extend(family.registered_groups)
    return app
