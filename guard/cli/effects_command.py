"""`guard effects`: what guard reads out of one tool call, before any policy decides."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from guard.analysis import DIALECTS, effects_for
from guard.cli._base import print_json
from guard.cli._io import printable, read_json_input
from guard.cli._typer import console
from guard.effects import GuardError

commands = typer.Typer()  # added to guard's application by guard.cli._app

HELP = (
    "Print the effects guard finds in one tool call (reads, writes, deletes, exec, network)."
    "\n\nNo policy is consulted: this shows what the policy would be asked about. A target"
    " shown as <unknown> (a write into $VAR, a program guard does not analyse) is decided"
    " by the policy's default for that kind."
)


@commands.command(
    "effects",
    help=HELP,
    epilog=(
        "Examples:\n\n"
        "  guard effects --dialect claude-code --tool Bash \\\n"
        "    --input '{\"command\": \"sed -i s/a/b/ x.py\"}'\n\n"
        "  guard effects --dialect codex --tool shell --json \\\n"
        "    --input '{\"command\": [\"bash\", \"-lc\", \"ls > out\"]}'\n\n"
        "  guard effects --dialect mcp --tool move_file \\\n"
        "    --input '{\"source\": \"a\", \"destination\": \"b\"}'\n\n"
        "  guard effects --dialect gemini --tool write_file --input @call.json\n\n"
        "Then ask the policy with: guard check --agent plan --dialect ... (same options).\n\n"
        f"Dialects: {', '.join(DIALECTS)}. Exit codes: 0 effects printed, 2 bad input."
    ),
)
def effects(
    dialect: Annotated[
        str, typer.Option("--dialect", "-d", help=f"Host agent dialect: {', '.join(DIALECTS)}.")
    ],
    tool: Annotated[str, typer.Option("--tool", "-t", help="Tool name as the host sends it.")],
    tool_input: Annotated[
        str,
        typer.Option(
            "--input",
            "-i",
            help="The tool input: a JSON object, @FILE holding one, or - for standard input.",
        ),
    ] = "{}",
    cwd: Annotated[
        Path | None,
        typer.Option(
            "--cwd", "-C", metavar="DIR",
            help="Working directory of the call (relative paths stay relative). Default: none.",
        ),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of text.")] = False,
) -> None:
    """Print the effects guard finds in one tool call (see HELP)."""
    if cwd is not None and not cwd.is_dir():
        raise GuardError(f"--cwd {cwd}: not a directory")
    args = read_json_input(tool_input)
    if not isinstance(args, dict):
        raise GuardError(
            f"--input must be a JSON object, got {type(args).__name__};"
            ' e.g. \'{"file_path": "src/a.py"}\''
        )
    where = str(cwd) if cwd is not None else os.getcwd()
    found = effects_for(dialect, tool, args, where)
    if as_json:
        effects_json = [
            {"kind": e.kind.value, "target": e.target, "detail": e.detail or None} for e in found
        ]
        print_json({"dialect": dialect, "tool": tool, "effects": effects_json}, indent=2)
        return
    out = console()
    width = max(len(e.kind.value) for e in found)
    for e in found:
        target = e.target if e.target is not None else "<unknown>"
        detail = f"  [dim]# {escape(printable(e.detail))}[/dim]" if e.detail else ""
        out.print(f"{e.kind.value:<{width}}  {escape(printable(target))}{detail}")
