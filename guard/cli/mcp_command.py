"""``guard mcp``: put guard between any MCP client and a stdio MCP server."""

from __future__ import annotations

# Lazy imports: the MCP proxy loads when `guard mcp` runs (CLI start-up).
import contextlib
import enum
import os
import shutil
import sys
from pathlib import Path
from typing import Annotated

import typer

from guard.cli._base import a_directory
from guard.cli.options import CWD_HELP
from guard.decide import Guard
from guard.effects import GuardError
from guard.planning.owner import Owner
from guard.planning.session import Mode, Session, SessionNotFound, state_dirs

commands = typer.Typer()  # added to guard's application by guard.cli._app


class AuditLevel(enum.StrEnum):
    ALL = "all"
    REFUSALS = "refusals"


HELP = """\
Run an MCP server behind guard: every tools/call is checked against the policy.

The MCP client (Claude Desktop, Cursor, Codex, Gemini CLI...) starts `guard mcp`
instead of the server; guard starts the server (the command after `--`) and
forwards every message both ways. A denied call comes back as a tool result with
isError and the reason; a call the policy asks about is put to the user through
MCP elicitation when the client supports it, and refused otherwise.

guard adds the planning tools plan_enter, plan_exit, update_plan and
request_user_input. The proxy session starts in plan mode (--mode): the plan
agent's rules apply (read the project, write only the plan file) until the user
approves the plan (plan_exit, or `guard plan exit --approve --session ID`);
then the build agent's rules apply. --agent pins one agent instead. A session
the proxy starts belongs to it and ends when it exits (if the proxy is killed,
the session counts as orphaned: in plan mode it keeps the worktree in plan mode
for the hooks until you end it, approve its plan or take it over with
`guard plan resume`); a proxy that cannot start its server leaves no session behind.

While the agent in force is a plan-mode agent, the server process itself runs
under the kernel (Landlock: writes only to the plan directory and a private
$TMPDIR; no capabilities; seccomp), as under `guard run`; on a mode change guard
restarts it (confined or not) on the same connection, replaying the client's
initialize. Without Landlock it says so and relies on the analysis alone. Run an
installed server: `npx -y` cannot write its cache while confined.

stdout carries only MCP messages; logs go to stderr, decisions to the session's
event log (`guard events --session ID`).

Examples:

  # the server: npm install -g @modelcontextprotocol/server-filesystem
  guard mcp -- mcp-server-filesystem .
  # from a host's config, which starts servers elsewhere
  guard mcp --cwd ~/project -- mcp-server-filesystem ~/project
  guard mcp --mode build -- mcp-server-filesystem /path/to/project
  guard mcp --agent plan --policy .openoxide/policy.toml -- ./server --stdio
  # share a session with other proxies and the hooks
  guard mcp --session 20261202-abcd1234 -- mcp-server-filesystem .
"""


@commands.command("mcp", help=HELP)
def mcp_command(
    server: Annotated[
        list[str] | None,
        typer.Argument(
            help="The server command and its arguments, after `--`.", show_default=False
        ),
    ] = None,
    policy: Annotated[
        str | None,
        typer.Option(
            "--policy", "-p", help="Policy file or builtin:NAME (default: discovered as usual)."
        ),
    ] = None,
    agent: Annotated[
        str | None,
        typer.Option(
            "--agent", "-a", help="Pin the policy agent (default: by the session's mode)."
        ),
    ] = None,
    mode: Annotated[
        Mode, typer.Option("--mode", "-m", help="Mode of a new proxy session.")
    ] = Mode.PLAN,
    session_id: Annotated[
        str | None,
        typer.Option(
            "--session", "-s", help="Join (or create) this session id instead of a new one."
        ),
    ] = None,
    cwd: Annotated[
        Path,
        typer.Option(
            "--cwd",
            "-C",
            metavar="DIR",
            help=CWD_HELP + " The server starts there too.",
            show_default=False,
        ),
    ] = Path("."),
    audit: Annotated[
        AuditLevel,
        typer.Option(help="Which verdicts are recorded (audit log and session event log)."),
    ] = AuditLevel.ALL,
    ask_timeout: Annotated[
        float, typer.Option(help="Seconds to wait for the user's answer before refusing.")
    ] = 600.0,
    verbose: Annotated[
        bool, typer.Option("--verbose", "-v", help="Log allowed calls to stderr too.")
    ] = False,
) -> None:
    if not server:
        raise GuardError(
            "no server command: put it after `--`, e.g."
            " `guard mcp -- mcp-server-filesystem .` (see `guard mcp --help`)"
        )
    a_directory(cwd)
    if ask_timeout <= 0:
        raise GuardError(f"--ask-timeout {ask_timeout}: must be a positive number of seconds")
    workdir = os.path.realpath(cwd)
    _check_server_command(server[0], workdir)
    guard = Guard.load(policy, cwd=workdir)
    if audit is not AuditLevel.ALL and guard.managed is not None and "audit" in guard.managed.pins:
        raise GuardError(
            f"--audit {audit.value} is refused: the managed policy pins the audit"
            f" ([managed] pin in {', '.join(guard.managed.files)}); every call is recorded"
        )
    owner = Owner.this_process("guard mcp")
    fresh = [d for d in state_dirs(workdir) if not d.exists()]
    created = True
    if session_id is not None:
        try:
            session = Session.load(session_id, workdir)
            created = False
        except SessionNotFound:
            session = Session.start(
                workdir, mode, id=session_id, title="MCP proxy session", owner=owner
            )
    else:
        session = Session.start(workdir, mode, title="MCP proxy session", owner=owner)
    # the protocol owns the real stdout; anything else printed by accident goes to stderr
    protocol_out = os.fdopen(os.dup(sys.stdout.fileno()), "wb", buffering=0)
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    from guard.gate import policy_named
    from guard.mcp.proxy import McpProxy, run_proxy
    from guard.policy.freshness import PolicyWatch

    watch = PolicyWatch(
        guard,
        lambda: Guard.load(policy, cwd=workdir),
        discovered=policy_named(policy, os.environ) is None,
    )
    proxy = McpProxy(
        guard,
        session,
        list(server),
        cwd=workdir,
        agent=agent,
        client_out=protocol_out,
        verbose=verbose,
        ask_timeout=ask_timeout,
        audit_allowed=audit is AuditLevel.ALL,
        policy_watch=watch,
    )
    try:
        code = run_proxy(proxy)
    except KeyboardInterrupt:
        code = 130
    except GuardError:
        if created:  # the server never ran: leave no session behind
            session.remove(fresh)
            created = False
        raise
    finally:
        if created:
            with contextlib.suppress(GuardError, OSError):
                session.end("the guard mcp proxy that owned it exited")
    # the stdin reader thread may still block in read(): leave without interpreter teardown
    sys.stderr.flush()
    protocol_out.close()
    os._exit(code)


def _check_server_command(program: str, workdir: str) -> None:
    """Refuse, before anything is written, a server command that cannot be started."""
    if os.sep in program:
        path = program if os.path.isabs(program) else os.path.join(workdir, program)
        found = path if os.path.isfile(path) and os.access(path, os.X_OK) else None
    else:
        found = shutil.which(program)
    if found is None:
        raise GuardError(
            f"cannot start the MCP server {program!r}: no such executable"
            f"{' on $PATH' if os.sep not in program else ''}; check the command after `--`"
        )
