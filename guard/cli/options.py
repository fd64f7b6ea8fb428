"""Options shared by several commands: one spelling, one help text, one default.

Use them as parameter annotations (``policy: PolicyOpt = None``). Reading
``--input`` and printing safely are :mod:`guard.cli._io`'s.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from guard.cli import completion

AgentOpt = Annotated[
    str,
    typer.Option(
        "--agent",
        "-a",
        help="Agent of the policy to decide for (e.g. plan, build). Default: plan.",
        autocompletion=completion.agents,
    ),
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
        "--cwd", "-C",
        help="Directory relative paths are resolved from. Default: the current one.",
    ),
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON instead of text.")]
