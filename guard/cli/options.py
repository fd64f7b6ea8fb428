"""Options shared by several commands: one spelling, one help text, one default.

Use them as parameter annotations (``policy: PolicyOpt = None``);
:func:`read_tool_input` reads the ``--input`` of ``guard effects`` and ``guard check``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from guard.effects import GuardError

AgentOpt = Annotated[
    str, typer.Option("--agent", "-a", help="Agent of the policy to decide for (e.g. plan, build).")
]
PolicyOpt = Annotated[
    str | None,
    typer.Option(
        "--policy",
        "-p",
        help="Policy file or builtin:NAME. Default: $GUARD_POLICY, then"
        " <worktree>/.openoxide/policy.toml, then builtin:default.",
    ),
]
WorktreeOpt = Annotated[
    Path | None,
    typer.Option(
        "--worktree",
        "-w",
        help="Worktree root. Default: found by its VCS marker from --cwd (or the current"
        " directory).",
    ),
]
CwdOpt = Annotated[
    Path | None,
    typer.Option(
        "--cwd", help="Directory relative paths are resolved from. Default: the current one."
    ),
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON instead of text.")]


def read_tool_input(text: str) -> Any:
    """--input JSON, ``@FILE`` (JSON in a file) or ``-`` (JSON on standard input)."""
    where = "--input"
    if text == "-":
        text, where = sys.stdin.read(), "--input - (standard input)"
    elif text.startswith("@"):
        path = Path(text[1:])
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise GuardError(f"--input @{path}: cannot read it: {exc.strerror}") from None
        where = f"--input @{path}"
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise GuardError(
            f"{where} is not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno};"
            ' expected an object such as \'{"command": "ls"}\''
        ) from None
