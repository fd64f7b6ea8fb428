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

__all__ = ["FAMILY_OF", "SUMMARIES", "app_for", "help_app", "root"]


def _version(value: bool) -> None:
    if value:
        typer.echo(version_text(), nl=False)
        raise typer.Exit(0)


def root() -> typer.Typer:
    """A new root application: guard's help text and global options, no command yet."""
    app = typer.Typer(
        name="guard",
        help=(
            "OpenOxide Guard: permission policies and a sandbox that make plan mode a runtime"
            " fact for coding agents.\n\n"
            "An agent in plan mode may explore and ask, but change nothing except its plan"
            " file. Start with:\n\n"
            "  guard demo                              # watch the default policy decide\n\n"
            "  guard check write src/x.py              # may the plan agent write? exit 1: no\n\n"
            "  guard explain --agent plan write .openoxide/plans/p.md\n\n"
            "  guard install claude-code               # wire guard into Claude Code's hooks\n\n"
            "  guard run --agent plan -- aider         # confine any agent with Landlock\n\n"
            "  guard watch --agent plan --restore      # report and undo violations\n\n"
            "  guard mcp -- SERVER_CMD...              # guard any MCP server's tool calls\n\n"
            "  guard lint && guard review              # check the policy itself\n\n"
            "  guard plan-dir                          # where plan files live here\n\n"
            "Exit codes: 0 success/allow, 1 deny/violation, 3 ask/findings, 2 bad input or"
            " usage. NO_COLOR or --color never turns colour off; --json output is described in"
            " docs/json.md."
        ),
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
                help="Print guard's version and exit.",
                callback=_version,
                is_eager=True,
            ),
        ] = False,
        color: Annotated[
            ColorMode,
            typer.Option(
                "--color",
                help="Colour and styles: auto (a terminal, unless NO_COLOR is set), always, never."
                " Accepted after any command too.",
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


#: ``guard --help``'s list, in its order: each command's first help line. Printed without
#: loading any family; tests/test_cli_speed.py checks it against the whole application.
SUMMARIES: tuple[tuple[str, str], ...] = (
    ("check", "Decide whether AGENT may do KIND to PATH (or make a whole tool call)."),
    ("explain", "Show every list consulted, every pattern that matched, and which one"
     " decided."),
    ("schema", "Print the JSON Schema of policy files (for editor completion)."),
    ("plan-dir", "Print where plan files live here, and which rule chose it."),
    ("demo", "Feed scripted tool calls to the built-in default policy and show each"
     " decision."),
    ("effects", "Print the effects guard finds in one tool call (reads, writes, deletes,"
     " exec, network)."),
    ("hook", "Answer one host hook call: read the pending tool call on stdin, print the"
     " host's answer."),
    ("install", "Wire guard's hook into a host agent's settings file."),
    ("uninstall", "Take out what guard install wrote, and say what was left and why."),
    ("doctor", "Show which host agents are wired to guard here, whether their hook commands"
     " still run, and which guard layers are active on this machine."),
    ("lint", "Check policy files for mistakes that weaken plan mode: the rule catalog GLxxx."),
    ("review", "Security review of plan-mode isolation here: active layers and a red-team"
     " matrix."),
    ("mcp", "Run an MCP server behind guard: every tools/call is checked against the"
     " policy."),
    ("watch", "Watch the worktree while an agent works: report (and with --restore undo)"
     " every change its policy does not allow."),
    ("mode", "Print or set a session's mode, and the agent guard's hooks use here, with the"
     " reason."),
    ("events", "Print a session's events; --follow tails them as other processes publish."),
    ("replay", "What would the policy have decided for the tool calls of past sessions?"),
    ("run", "Run COMMAND so that the kernel refuses every write the agent's mode forbids."),
    ("confine", "Run ARGV under the confinement of this worktree's plan-mode shell commands."),
    ("ui", "The plan-mode cockpit: checklist, plan, activity and pending answers in one"
     " screen."),
    ("audit", "The audit log's integrity: `verify` checks the HMAC chain of its records"
     " (SECURITY.md, \"Audit trail\")."),
    ("import", "Convert a host agent's permission settings into a guard policy (with notes"
     " on every construct that does not convert exactly)."),
    ("quarantine", "Inspect and restore what `guard watch --restore` moved aside."),
    ("session", "Agent sessions: their mode (build or plan), plan artifact and checklist."),
    ("plan", "Plan mode for the worktree: start it, follow it, approve the plan."),
    ("policy", "Built-in policies: print one with line numbers (the lines explain cites)."),
)


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
