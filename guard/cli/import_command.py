"""``guard import``: a host agent's permission settings converted into a guard policy draft.

Holds the ``import`` group and one command per host that has an importer (its
``importer`` part, guard/hosts/<host>/importer.py, which also says what the command
takes and shows). Linting and reviewing a policy are
guard.cli.lint's.
"""

from __future__ import annotations

import os
import shlex
import sys
from pathlib import Path

import typer

from guard import hosts
from guard.hosts import Host
from guard.importers import read_json, validate, write_atomically
from guard.paths import find_worktree

PROJECT_POLICY = ".openoxide/policy.toml"

commands = typer.Typer()  # added to guard's application by guard.cli._app

import_app = typer.Typer(
    help="Convert a host agent's permission settings into a guard policy (with notes on"
    " every construct that does not convert exactly).",
    no_args_is_help=True,
)
commands.add_typer(import_app, name="import")


def _import(kind: str, source: Path, output: Path | None, force: bool,
            agent: str | None = None) -> None:
    data = read_json(str(source), f"{kind} settings file")
    draft = hosts.by_name(kind).importer()(data, str(source))
    name = draft.retarget(agent)
    text = draft.to_toml()
    validate(text)
    for note in draft.notes.items:
        typer.echo(f"guard import: note: {note}", err=True)
    if output is None:
        sys.stdout.write(text)
    else:
        write_atomically(output, text, force)
        typer.echo(
            f"guard import: wrote {output} ({len(draft.notes.items)} note(s));"
            f" check it with: guard lint {output}",
            err=True,
        )
    typer.echo(f"guard import: {_take_effect(kind, output, name if agent else None)}", err=True)


def _take_effect(host: str, output: Path | None, agent: str | None) -> str:
    """The one command that makes the imported policy decide this host's hook calls."""
    pin = f" --agent {agent}" if agent else ""
    if output is None:
        return (f"to make it take effect, write it with -o {PROJECT_POLICY}, then run:"
                f" guard install {host}{pin}")
    wt = find_worktree(os.getcwd())
    out = Path(os.path.abspath(output))
    if wt is not None and out == Path(os.path.realpath(wt)) / PROJECT_POLICY:
        where = "the hooks read it from this worktree"
        return f"to make it take effect ({where}), run: guard install {host}{pin}"
    return (f"to make it take effect, run: guard install {host}{pin}"
            f" --policy {shlex.quote(str(out))}")


_OUT = typer.Option(None, "--output", "-o", help="Write the policy here (default: stdout).")
_FORCE = typer.Option(False, "--force", help="Replace --output if it exists.")
_AGENT = typer.Option(
    None, "--agent",
    help="Name the imported agent (default: build, the agent the hooks decide as outside"
    " plan mode; the host's denials are added to plan too). With a name, install the hooks"
    " pinned to it: guard install HOST --agent NAME.",
)


def _command(host: Host) -> None:
    """``guard import HOST``, described by the host's importer part."""
    part = host.part("importer")
    metavar, argument_help = part.ARGUMENT

    def run(
        settings: Path = typer.Argument(..., help=argument_help, metavar=metavar),
        output: Path | None = _OUT,
        force: bool = _FORCE,
        agent: str | None = _AGENT,
    ) -> None:
        _import(host.name, settings, output, force, agent)

    run.__doc__ = part.SUMMARY
    run.__name__ = f"import_{host.module}"
    epilog = "Examples:\n\n" + "\n\n".join(f"  {e}" for e in part.EXAMPLES)
    import_app.command(host.name, epilog=epilog)(run)


for _host in hosts.HOSTS:
    if _host.importable:
        _command(_host)
