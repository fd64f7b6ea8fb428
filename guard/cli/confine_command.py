"""``guard confine -- ARGV...``: run ARGV as a plan-mode shell command runs on a rewriting host.

The confined form Codex's and Cursor's plan-mode refusals hand the model: those hosts'
hooks cannot rewrite a command, so the model runs ``GUARD confine -- bash -c '…'``
itself, and this command gives ARGV exactly the confinement the Claude Code hook's
rewrite gives a plan-mode shell command of the current worktree's plan session
(:func:`guard.sandbox.confiner.confined_run`): namespaces, Landlock, seccomp, guard's
egress proxy; the plan directory, a private TMPDIR and the terminal writable. It writes
one audit record (where guard's data directory is read-only, inside a host's sandbox,
it says that it could not and goes on: the kernel's confinement does not depend on the
record), then replaces itself with the confinement helper, so its exit status
is ARGV's. Where a wall cannot stack (inside another sandbox: Codex's seccomp refuses
new namespaces), it says which on stderr, and the policy's ``require`` decides whether
ARGV runs on the walls that remain. It never runs ARGV unconfined (exit 126).

:func:`execute` runs without typer (:mod:`guard.cli._main` calls it for a plain
``guard confine -- …``); the typer command gives it ``--help``.
"""

# Lazy imports: the policy, the gate, the sandbox: a confined command starts soon.

from __future__ import annotations

import os
import sys

import typer

from guard.cli._base import hold_standard_streams
from guard.effects import GuardError

commands = typer.Typer()  # added to guard's application by guard.cli._app

#: The exit status when ARGV was not started (as the confinement helper's).
NOT_STARTED = 126

_HELP = "\n\n".join([
    "Run ARGV under the confinement of this worktree's plan-mode shell commands.",
    "The confined form guard hands a model on hosts whose hooks can only allow or refuse"
    " (Codex CLI, Cursor): `GUARD confine -- bash -c 'COMMAND'`. ARGV may read anything;"
    " it may write only the plan directory, a private TMPDIR and the terminal; it reaches"
    " no network but guard's egress proxy (the policy's network rules decide), no other"
    " processes and no local sockets. Inside another sandbox, where a wall cannot stack,"
    " guard says which and the policy's \\[agents.NAME.sandbox] require decides.",
    "The exit status is ARGV's; 126 when it was not started.",
    "Example:",
    "  guard confine -- bash -c 'pytest -q; echo done > .openoxide/plans/notes.md'",
])  # fmt: skip


def execute(argv: list[str], cwd: str | None = None) -> int:
    """Record and run ``argv`` confined (never returns when it runs: the helper replaces
    this process); the exit status when it cannot."""
    from guard.audit.sinks import AuditLog
    from guard.effects import ToolCall
    from guard.gate import Gate, Verdict, VerdictAction, agent_for_mode
    from guard.sandbox.confiner import confined_run

    if not argv:
        raise GuardError("no command given; usage: guard confine -- COMMAND [ARGS]...")
    hold_standard_streams()  # before anything is opened: ARGV inherits 0-2
    if any("\0" in a for a in argv):
        raise GuardError("the command contains a NUL character; no program can receive it")
    here = os.path.abspath(cwd or os.getcwd())
    call = ToolCall("guard", "confine", {"argv": list(argv)}, here)
    gate = Gate(env=os.environ, sink=AuditLog(), source="confine")
    chosen = gate.resolve(call)
    guard = chosen.guard
    agent = agent_for_mode(guard, "plan")
    helper, how = confined_run(guard, agent, list(argv), here)
    action = VerdictAction.ALLOW_CONFINED if helper is not None else VerdictAction.DENY
    verdict = Verdict(
        action, f"guard confine: {how}", "guard.confine", call, agent, "guard confine",
        guard=guard,
    )  # fmt: skip
    recorded = gate.record(verdict, {"argv": list(argv)})
    if recorded.failed and helper is not None:
        # inside a host's sandbox guard's data directory may be read-only: the kernel's
        # confinement does not depend on the record, so ARGV runs, and this is said
        print(f"guard confine: not recorded ({recorded.reason}); running it confined",
              file=sys.stderr, flush=True)
    if helper is None:
        print(f"guard confine: {verdict.reason}; the command was NOT started", file=sys.stderr)
        return NOT_STARTED
    if "fallback" in how or "walls are off" in how:  # a wall that could not stack
        print(f"guard confine: {how}", file=sys.stderr, flush=True)
    sys.stdout.flush()
    sys.stderr.flush()
    os.execv(helper[0], helper)
    return NOT_STARTED  # pragma: no cover (execv does not return)


@commands.command(
    "confine", help=_HELP, context_settings={"allow_interspersed_args": False},
    no_args_is_help=True,
)  # fmt: skip
def confine_command(
    command: list[str] = typer.Argument(
        None, metavar="-- ARGV...", help="The command to run confined, after `--`."
    ),
) -> None:
    raise typer.Exit(execute(command or []))
