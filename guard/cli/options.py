"""Options shared by several commands: one spelling, one help text, one default.

Use them as parameter annotations (``policy: PolicyOpt = None``). Reading
``--input`` and printing safely are :mod:`guard.cli._io`'s.
"""

# Lazy imports: guard.effects only for the error of a -C or -w that is no directory.

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from guard.cli import completion
from guard.cli._base import a_directory, a_worktree

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
#: -C/--cwd and -w/--worktree: one spelling, metavar and help on every command taking them
CWD_HELP = (
    "Work as if guard was started in DIR (as git -C does): relative paths, the worktree and"
    " its sessions are found from there. Default: the current directory."
)
WORKTREE_HELP = (
    "The worktree's root. Default: found by its VCS marker (.git, .hg, .jj, .svn) from"
    " --cwd, or from the current directory."
)


WorktreeOpt = Annotated[
    Path | None,
    typer.Option("--worktree", "-w", metavar="DIR", help=WORKTREE_HELP, callback=a_worktree),
]
CwdOpt = Annotated[
    Path | None,
    typer.Option("--cwd", "-C", metavar="DIR", help=CWD_HELP, callback=a_directory),
]
#: the same option where the command's default is Path(".")
HereOpt = Annotated[
    Path,
    typer.Option("--cwd", "-C", metavar="DIR", help=CWD_HELP, callback=a_directory,
                 show_default=False),
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON instead of text.")]
