"""`guard check`, `guard explain`, `guard schema`, `guard plan-dir`."""

from __future__ import annotations

# Lazy imports: the policy schema (pydantic) only for `guard schema` (CLI start-up).
import json
import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from guard import hosts
from guard.cli._base import a_directory, print_json
from guard.cli._typer import console
from guard.cli.explain_view import ExplainOptions, run_explain
from guard.cli.options import AgentOpt, CwdOpt, JsonOpt, PolicyOpt, WorktreeOpt
from guard.cli.quick import (
    CheckOptions,
    run_check,
)
from guard.paths import plan_dir

commands = typer.Typer()  # added to guard's application by guard.cli._app


def _out() -> Console:
    return console()


@commands.command(
    epilog=(
        "Examples:\n\n"
        "  guard check --agent plan write src/main.py            # exit 1: denied\n\n"
        "  guard check --agent plan write .openoxide/plans/p.md  # exit 0: allowed\n\n"
        "  guard check --agent plan --json read .env             # exit 3: ask\n\n"
        "  guard check --agent plan --dialect claude-code --tool Bash \\\n"
        '    --input \'{"command": "echo hi > src/x"}\'         # exit 1\n\n'
        "A plan-mode shell call is decided as on a host whose hook can only allow or"
        " refuse (Codex, Cursor): guard's grammar runs directly, anything else is refused"
        " with its confined form; --host HOST decides as that host's hook does.\n\n"
        "Exit codes: 0 allow, 1 deny, 3 ask, 4 allowed confined (--host of a host that"
        " rewrites calls), 2 bad input or usage. With --audit-log the"
        " verdict is also appended to that file, as the hook records it."
    )
)
def check(
    agent: AgentOpt = "plan",
    kind: Annotated[
        str | None, typer.Argument(help="Effect kind: read, write, delete, exec or network.")
    ] = None,
    path: Annotated[
        str | None,
        typer.Argument(help="Path the effect touches (for network: HOST or HOST:PORT)."),
    ] = None,
    policy: PolicyOpt = None,
    worktree: WorktreeOpt = None,
    cwd: CwdOpt = None,
    dialect: Annotated[
        str | None,
        typer.Option(help=f"Check a whole tool call: {', '.join(hosts.DIALECTS)} or mcp."),
    ] = None,
    tool: Annotated[str | None, typer.Option(help="Tool name in that dialect, e.g. Bash.")] = None,
    tool_input: Annotated[
        str | None,
        typer.Option(
            "--input",
            "-i",
            help="The tool's input: a JSON object, @FILE holding one, or - for standard input.",
        ),
    ] = None,
    as_json: JsonOpt = False,
    audit_log: Annotated[
        Path | None,
        typer.Option(help="Also append the verdict to this audit log (JSONL), as the hook does."),
    ] = None,
    host: Annotated[
        str | None,
        typer.Option(help="Decide as this host's hook does (e.g. codex, claude-code)."),
    ] = None,
) -> None:
    """Decide whether AGENT may do KIND to PATH (or make a whole tool call).

    Prints the decision and the reason; the exit code carries the decision.
    The decision is the gate's, as for a hook or the MCP proxy.
    """
    options = CheckOptions(
        kind=kind,
        path=path,
        agent=agent,
        policy=policy,
        worktree=worktree,
        cwd=cwd,
        dialect=dialect,
        tool=tool,
        tool_input=tool_input,
        as_json=as_json,
        audit_log=audit_log,
        host=host,
    )
    raise typer.Exit(run_check(options))


@commands.command(
    epilog=(
        "Example:\n\n"
        "  guard explain --agent plan write .openoxide/plans/p.md\n\n"
        "Each matching pattern is shown as FILE:LINE:PATTERN<TAB>PATH, like"
        " `git check-ignore -v`. Lists are consulted in order protected, deny, ask, allow;"
        " inside a list the last matching pattern wins."
    )
)
def explain(
    kind: Annotated[str, typer.Argument(help="read, write, delete, exec or network.")],
    path: Annotated[str, typer.Argument(help="Path (or HOST or HOST:PORT) to explain.")],
    agent: AgentOpt = "plan",
    policy: PolicyOpt = None,
    worktree: WorktreeOpt = None,
    cwd: CwdOpt = None,
) -> None:
    """Show every list consulted, every pattern that matched, and which one decided."""
    options = ExplainOptions(kind=kind, path=path, agent=agent, policy=policy,
                             worktree=worktree, cwd=cwd)  # fmt: skip
    raise typer.Exit(run_explain(options))


@commands.command()
def schema() -> None:
    """Print the JSON Schema of policy files (for editor completion).

    Example: guard schema > .openoxide/policy.schema.json
    """
    from guard.policy import json_schema

    print(json.dumps(json_schema(), indent=2))


@commands.command("plan-dir")
def plan_dir_cmd(
    cwd: CwdOpt = None,
    worktree: WorktreeOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Print where plan files live here, and which rule chose it.

    Inside a worktree (a .git, .hg, .jj or .svn marker): <worktree>/.openoxide/plans.
    Elsewhere: the user data directory, under a key stable per directory.
    """
    a_directory(cwd)
    pd = plan_dir(cwd, worktree)
    if as_json:
        print_json(pd.to_json())
    else:
        print(pd.path)
        print(f"  because {pd.reason}", file=sys.stderr)
