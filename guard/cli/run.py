"""``guard run``: start any command confined by Landlock, with the monitor alongside."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer
from rich.console import Console

from guard.cli._app import app, print_json
from guard.cli.show import print_violation
from guard.effects import GuardError

if TYPE_CHECKING:
    from guard.monitor import Violation

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
        "  guard run --agent plan --explain            # the writable roots as JSON; runs nothing",
    ]
)


def _load_guard(policy: str | None, worktree: Path | None) -> Any:
    from guard.decide import Guard

    return Guard.load(policy=policy, worktree=worktree)


class _MonitorHandle:
    """Creates guard's monitor for the run, prints what it reports, keeps it for the summary."""

    def __init__(
        self, guard: Any, agent: str, *, restore: bool, audit: Path | None, quiet: bool
    ) -> None:
        self.guard = guard
        self.agent = agent
        self.restore = restore
        self.audit = audit
        self.quiet = quiet
        self.monitor: Any = None
        self._tty = sys.stderr.isatty()
        self._err = Console(stderr=True, highlight=False, soft_wrap=True)

    def _violation(self, v: Violation) -> None:
        print_violation(self._err, v, self.guard.roots, prefix="guard monitor: ")

    def _notice(self, n: Any) -> None:
        if self.quiet and n.event in ("backend", "start", "stop"):
            return
        print(f"guard monitor: {n.message}", file=sys.stderr, flush=True)

    def _progress(self, stage: str, done: int, total: int) -> None:
        if self.quiet or not self._tty:
            return
        of = f"/{total}" if total else ""
        end = "\n" if total and done >= total and stage == "hashing" else ""
        print(f"\rguard monitor: baseline {stage} {done}{of} files", end=end, file=sys.stderr)

    def __call__(self) -> Any:
        from guard.monitor import Monitor

        self.monitor = Monitor(
            self.guard,
            self.agent,
            restore=self.restore,
            audit_path=self.audit,
            on_violation=self._violation,
            on_notice=self._notice,
            progress=self._progress,
            background=True,
        )
        return self.monitor

    def summary(self) -> str | None:
        m = self.monitor
        if m is None:
            return None
        n = len(m.violations)
        what = "violation" if n == 1 else "violations"
        return f"monitor: {n} {what} seen; audit log {m.audit_path}"


def _monitor_factory(
    guard: Any, agent: str, *, restore: bool, audit: Path | None, quiet: bool = False
) -> _MonitorHandle:
    """A factory for guard's monitor, which runs alongside the command."""
    return _MonitorHandle(guard, agent, restore=restore, audit=audit, quiet=quiet)


_COMMAND: dict[str, Any] = {
    "help": _HELP,
    "context_settings": {"allow_interspersed_args": False},
    "no_args_is_help": True,
}


@app.command("run", **_COMMAND)
def run_command(
    command: list[str] = typer.Argument(
        None, metavar="-- COMMAND [ARGS]...", help="The command to confine, after `--`."
    ),
    agent: str = typer.Option("plan", "--agent", "-a", help="The policy's agent to confine as."),
    policy: str | None = typer.Option(
        None, "--policy", "-p", help="Policy file or builtin:NAME (default: discovered)."
    ),
    worktree: Path | None = typer.Option(
        None, "--worktree", "-w", help="The worktree (default: found from the current directory)."
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
) -> None:
    from guard.sandbox import landlock, roots, seccomp, supervise

    if not command and not explain:
        raise GuardError("no command given; usage: guard run --agent plan -- COMMAND [ARGS]...")
    guard = _load_guard(policy, worktree)
    # On the command line a relative directory means one relative to here.
    writable = [w if w.startswith(("{", "~", "/")) else os.path.abspath(w) for w in writable]
    plan = roots.derive(
        guard, agent, extra_writable=writable, private_tmp=not explain, create=not explain
    )
    if explain:
        abi = landlock.abi_version()
        doc = {
            "agent": plan.agent,
            "mode": plan.mode,
            "worktree": str(plan.worktree) if plan.worktree else None,
            "landlock_abi": abi,
            "landlock": landlock.unavailable_reason() or "available",
            "handled": landlock.right_names(landlock.handled_rights(abi)),
            "signals_scoped": abi >= 6,
            "tiocsti_filtered": seccomp.supported(),
            "seccomp": "system-state syscalls refused" if seccomp.supported() else "unsupported",
            "capabilities": "all dropped",
            "writable": [{"path": r.path, "why": r.why, "ioctl": r.ioctl} for r in plan.roots],
            "notes": plan.notes,
        }
        print_json(doc, indent=2)
        return
    monitor = None
    if not no_monitor:
        monitor = _monitor_factory(guard, agent, restore=restore, audit=audit, quiet=quiet)
    elif not quiet:
        print("guard run: --no-monitor: chmod/chown/utime/xattr go unwatched", file=sys.stderr)
    status = supervise.run(
        plan,
        command,
        allow_unconfined=allow_unconfined,
        monitor=monitor,
        quiet=quiet,
    )
    summary = monitor.summary() if monitor is not None else None
    if summary is not None:
        violations = len(monitor.monitor.violations) if monitor and monitor.monitor else 0
        if violations or not quiet:
            print(f"guard run: {summary}", file=sys.stderr)
    raise typer.Exit(status)


# `guard run` alone: the same command without building guard's whole command tree
# first (typer reads every command's signature for that), which every confined
# command would otherwise pay at start-up. guard.cli._app.main dispatches to it.
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
