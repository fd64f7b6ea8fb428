"""``guard run``: start any command confined by Landlock, with the monitor alongside.

The typer command: its help and its usage errors. What it does is
:func:`guard.cli.run_plain.execute`, which ``guard run`` reaches without typer when
the command line is a plain one (:func:`guard.cli.run_plain.parse`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from guard.cli.options import CWD_HELP, WORKTREE_HELP
from guard.cli.run_plain import RunOptions, execute

commands = typer.Typer()  # added to guard's application by guard.cli._app

_HELP = "\n\n".join(
    [
        "Run COMMAND so that the kernel refuses every write the agent's mode forbids.",
        "For agents without hooks (aider, scripts, anything), and as the layer that holds"
        " when a hook is skipped. The command may read and execute anything; it may write"
        " only to the plan directory, /dev/null, the terminal, a private TMPDIR, the"
        " directories the policy lists under \\[agents.NAME.sandbox] writable, and"
        " --writable DIR. In build mode the worktree is writable too. Every process the"
        " command starts inherits the restriction.",
        "Every capability is dropped and a seccomp filter refuses what changes the system"
        " outside files: hostname, clock, mounts, kernel modules, System V IPC, device nodes,"
        " ownership, set-user-ID bits, extended attributes and ACLs, inode flags. The"
        " monitor watches the worktree for the whole run and reports what the kernel layers"
        " allow but should not happen (plain chmod, utime); --restore undoes it.",
        "The exit status is the command's (128+N when signal N killed it); signals sent to"
        " guard are forwarded to it. Put the command after --.",
        "Examples:",
        "  guard run --agent plan -- python examples/naughty_agent.py",
        "  guard run --agent plan -- aider --chat-mode ask",
        "  guard run --agent plan --writable ~/.cache/myagent -- myagent --plan",
        "  guard run --agent plan --restore -- bash    # an interactive, confined shell",
        "  guard run --agent plan --explain            # the writable roots as JSON",
    ]
)


_COMMAND: dict[str, Any] = {
    "help": _HELP,
    "context_settings": {"allow_interspersed_args": False},
    "no_args_is_help": True,
}


@commands.command("run", **_COMMAND)
def run_command(
    command: list[str] = typer.Argument(
        None, metavar="-- COMMAND [ARGS]...", help="The command to confine, after `--`."
    ),
    agent: str = typer.Option("plan", "--agent", "-a", help="The policy's agent to confine as."),
    policy: str | None = typer.Option(
        None, "--policy", "-p", help="Policy file or builtin:NAME (default: discovered)."
    ),
    worktree: Path | None = typer.Option(
        None, "--worktree", "-w", metavar="DIR", help=WORKTREE_HELP
    ),
    cwd: Path | None = typer.Option(
        None, "--cwd", "-C", metavar="DIR", help=CWD_HELP + " COMMAND starts there too."
    ),
    writable: list[str] = typer.Option(
        [],
        "--writable",
        help="An extra writable directory (repeatable); {tmp}/, {home}/... roots allowed.",
    ),
    restore: bool = typer.Option(
        False, "--restore", help="Have the monitor undo violations it sees (chmod, ...)."
    ),
    audit: Path | None = typer.Option(None, "--audit", help="The monitor's audit log (JSONL)."),
    allow_unconfined: bool = typer.Option(
        False,
        "--allow-unconfined",
        help="Without Landlock, run anyway under the monitor alone (loudly).",
    ),
    no_monitor: bool = typer.Option(
        False, "--no-monitor", help="Landlock only; nothing watches for chmod/utime/xattr."
    ),
    explain: bool = typer.Option(
        False, "--explain", help="Print the sandbox that would be applied (JSON) and exit."
    ),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="Only warnings and errors."),
    baseline_limit: int = typer.Option(
        20_000,
        "--baseline-limit",
        min=0,
        help="Most files the monitor's baseline may cover; above it guard run refuses to"
        " start, naming the count (0: no limit).",
    ),
) -> None:
    status = execute(
        RunOptions(
            command=command or [],
            agent=agent,
            policy=policy,
            worktree=worktree,
            cwd=cwd,
            writable=writable,
            restore=restore,
            audit=audit,
            allow_unconfined=allow_unconfined,
            no_monitor=no_monitor,
            explain=explain,
            quiet=quiet,
            baseline_limit=baseline_limit,
        )
    )
    raise typer.Exit(status)


# `guard run` alone: the same command without building guard's whole command tree
# first (typer reads every command's signature for that). guard.cli._main.dispatch
# sends the command lines guard.cli.run_plain.parse leaves to typer here.
run_app = typer.Typer(
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode="rich",
    context_settings={"help_option_names": ["-h", "--help"]},
)
run_app.command(
    "run",
    **{**_COMMAND, "context_settings": {"allow_interspersed_args": False,
                                        "help_option_names": ["-h", "--help"]}},
)(run_command)
