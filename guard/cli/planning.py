"""``guard session``, ``guard mode``, ``guard events``, and what ``guard plan`` shares with them.

This module makes the ``guard session`` and ``guard plan`` groups and holds the options the
planning runtime's commands share; which session a command acts on (``resolve_session``)
and what ``guard mode`` prints are guard/cli/plan_view.py's. The ``guard plan``
subcommands are in guard/cli/plan_command.py, and ``guard session resume`` in
guard/cli/resume.py; none of them is here.
"""

from __future__ import annotations

# Lazy imports: the cockpit's tail reader only for `guard events --follow` (CLI start-up).
import json
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape

from guard.audit.logfile import default_log_path
from guard.cli import completion
from guard.cli._base import with_schema
from guard.cli._typer import console
from guard.cli.options import HereOpt
from guard.cli.plan_view import (
    open_plans,
    print_data,
    resolve_session,
    show_mode,
)
from guard.effects import GuardError
from guard.paths import Roots
from guard.plaintext import visible
from guard.planning import event_bus as ev
from guard.planning.artifact import read_plan
from guard.planning.current import describe_current_agent
from guard.planning.deciding import deciding_session
from guard.planning.render import event_line, session_view
from guard.planning.session import Mode, Session, pin, sessions_dir

commands = typer.Typer()  # added to guard's application by guard.cli._app

session_app = typer.Typer(
    help=(
        "Agent sessions: their mode (build or plan), plan artifact and checklist.\n\n"
        "A session has an owner and an end. One started from the command line is the"
        " user's and stays open until `guard session end`; one started by `guard mcp`"
        " ends when that proxy exits. The newest open session decides for the worktree"
        " (a plan session before a build one; or the one pinned with"
        " `guard mode MODE --session ID`); ended sessions never decide. A plan session"
        " whose owning process died (orphaned) stays in plan mode until you end it,"
        " approve its plan or take it over (`guard plan resume ID`); an orphaned build"
        " session decides nothing.\n\n"
        "Examples:\n\n"
        "  guard session start                # a build-mode session; prints its id\n"
        "  guard session start --mode plan --title 'Add caching'\n"
        "  guard session list                 # newest first: state and owner\n"
        "  guard session show                 # checklist and plan, side by side\n"
        "  guard session end                  # the deciding session stops deciding"
    ),
    no_args_is_help=True,
)
plan_app = typer.Typer(
    help=(
        "Plan mode for the worktree: start it, follow it, approve the plan.\n\n"
        "Examples:\n\n"
        "  guard plan start 'Add caching'        # plan mode here; what to do next\n"
        "  guard plan status                     # mode, plan file, checklist\n"
        "  guard plan path                       # the current session's plan file\n"
        "  guard plan show                       # render it\n"
        "  guard plan list                       # all plan files of this worktree\n"
        "  guard plan exit --approve             # leave plan mode (the only way)\n"
        "  guard plan exit --reject 'too risky'  # stay in plan mode\n"
        "  guard plan exit --refine 'split step 2'\n"
        "  guard plan answer 'SQLite'            # answer request_user_input\n"
        "  guard plan resume ID                  # take over an orphaned session"
    ),
    no_args_is_help=True,
)
commands.add_typer(session_app, name="session")
commands.add_typer(plan_app, name="plan")

CwdOpt = HereOpt
SessionOpt = Annotated[
    str | None,
    typer.Option(
        "--session",
        "-s",
        help="Session id (default: the one deciding here: pinned, else the newest open one).",
        autocompletion=completion.sessions,
    ),
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON instead of text.")]


def session_console() -> Console:
    # wraps to the terminal's width on a terminal; never splits a line when piped
    return console(soft_wrap=False)


def refuse_stacking(cwd: Path, new: bool) -> None:
    """One plan session per worktree unless asked: name the open one, or go on (--new)."""
    found = open_plans(cwd)
    if not found or new:
        return
    s = found[0]
    state = ", orphaned: its owner is gone" if s.status == "orphaned" else ""
    raise GuardError(
        f"plan mode is already on here: session {s.id} ({s.title or 'untitled'}; plan file"
        f" {s.plan_path}; started {s.created_at}{state}). Go on with it (`guard plan status`),"
        f" approve its plan (`guard plan exit --approve --session {s.id}`), end it"
        f" (`guard session end {s.id}`), or start another with --new (the open one is set"
        f" aside until `guard plan resume {s.id}`)"
    )


def say_set_aside(session: Session, plans: bool) -> None:
    for other in session.set_aside_others(plans=plans):
        sys.stderr.write(
            f"set aside session {other.id} ({other.mode.value}): it decides nothing until"
            f" `guard plan resume {other.id}`\n"
        )


NewOpt = Annotated[
    bool,
    typer.Option(
        "--new",
        help="Start it even though a plan session is open here; the open one is set aside"
        " (it decides nothing until `guard plan resume ID`).",
    ),
]


def say_hooks_now(cwd: Path) -> None:
    """The line after a session's state changed: which agent the hooks decide as now."""
    sys.stdout.write(f"the hooks now use {describe_current_agent(cwd).line()}\n")


# ---- guard session ----------------------------------------------------------------------------


@session_app.command("start")
def session_start(
    mode: Annotated[
        Mode, typer.Option("--mode", "-m", help="Start in build (default) or plan mode.")
    ] = Mode.BUILD,
    title: Annotated[
        str | None, typer.Option("--title", "-t", help="Plan title (names the plan file).")
    ] = None,
    session_id: Annotated[
        str | None, typer.Option("--id", help="Use this id (e.g. the host agent's session id).")
    ] = None,
    cwd: CwdOpt = Path("."),
    as_json: JsonOpt = False,
    new: NewOpt = False,
) -> None:
    """Start a session and print its id.

    The older open sessions of the worktree it replaces are set aside: build ones
    always, plan ones with --new (without it, an open plan session is a refusal).
    Ending this session later never makes them decide again (`guard plan resume ID`).

    Example: SID=$(guard session start --mode plan --title "Add caching")
    """
    if mode is Mode.PLAN and cwd.is_dir():
        refuse_stacking(cwd, new)
    session = Session.start(cwd, mode, id=session_id, title=title)
    say_set_aside(session, plans=mode is Mode.PLAN or new)
    if as_json:
        print_data(session.summary())
    else:
        sys.stdout.write(session.id + "\n")


@session_app.command("show")
def session_show(
    session_id: Annotated[
        str | None,
        typer.Argument(help="Session id (default: current).", autocompletion=completion.sessions),
    ] = None,
    cwd: CwdOpt = Path("."),
    as_json: JsonOpt = False,
) -> None:
    """Show a session: its mode, the checklist lane and the plan lane.

    Example: guard session show 20261202-1a2b3c4d
    """
    session = resolve_session(cwd, session_id)
    if as_json:
        data = session.model_dump(mode="json")
        data["plan"] = read_plan(session)
        print_data(data)
        return
    session_console().print(session_view(session))


@session_app.command("list")
def session_list(cwd: CwdOpt = Path("."), as_json: JsonOpt = False) -> None:
    """List the sessions of this worktree, newest first, with their state and owner.

    The session marked * decides for the worktree. States: open; ended
    (`guard session end`, or its process exited); orphaned (its process died
    without ending it: in plan mode it stays in force until you end it,
    approve its plan or resume it; in build mode it decides nothing).
    """
    sessions = sorted(
        Session.list_all(cwd), key=lambda s: (s.created_at, s.active_ns), reverse=True
    )
    found = deciding_session(cwd) if sessions else None
    deciding = found[0].id if found else None
    if as_json:
        print_data(
            {"sessions": [{**s.summary(), "deciding": s.id == deciding} for s in sessions]}
        )
        return
    console = session_console()
    if not sessions:
        console.print(f"no sessions in {sessions_dir(cwd)} (start one: guard plan start TITLE)")
        return
    for s in sessions:
        style = "bold magenta" if s.mode is Mode.PLAN else "bold cyan"
        mark = "*" if s.id == deciding else " "
        owner = s.owner.describe() if s.owner else "user"
        tail = visible(f"{s.status:8}  owner {owner}  started {s.created_at}  {s.plan_path or ''}",
                       lines=False)  # fmt: skip
        console.print(
            f"{mark} {escape(s.id)}  [{style}]{s.mode.value:5}[/]  {escape(tail)}", markup=True
        )


@session_app.command("end")
def session_end(
    session_id: Annotated[
        str | None, typer.Argument(help="Session id (default: the one deciding here).")
    ] = None,
    cwd: CwdOpt = Path("."),
) -> None:
    """End a session: it no longer decides anything (its files stay, for the record).

    Ending a session in plan mode does not approve its plan. The hooks then
    follow another session that still decides here (never one set aside: that
    needs `guard plan resume ID`), or the host's own permission mode.

    Example: guard session end 20261202-1a2b3c4d
    """
    session = resolve_session(cwd, session_id)
    if not session.end("ended by the user with `guard session end`"):
        raise GuardError(f"session {session.id} has already ended ({session.end_reason})")
    sys.stdout.write(f"{session.id}: ended\n")
    say_hooks_now(cwd)


# ---- guard mode -------------------------------------------------------------------------------


@commands.command("mode")
def mode_command(
    mode: Annotated[
        Mode | None, typer.Argument(help="plan or build; omit to print the current mode.")
    ] = None,
    session_id: SessionOpt = None,
    title: Annotated[
        str | None, typer.Option("--title", "-t", help="Plan title when entering plan mode.")
    ] = None,
    cwd: CwdOpt = Path("."),
) -> None:
    """Print or set a session's mode, and the agent guard's hooks use here, with the reason.

    Entering plan mode is the user's approval of plan_enter. Leaving it is not
    possible here: only an approved exit leaves plan mode (guard plan exit --approve).
    Setting a mode with --session also pins that session: it decides for the
    worktree (instead of the newest open one) until it ends.

    Examples:

      guard mode                           # the mode here and the hooks' agent

      guard mode --session ID              # prints plan or build

      guard mode plan --session ID --title "Refactor auth"
    """
    if mode is None:
        show_mode(session_id, cwd)
        return
    session = resolve_session(cwd, session_id)
    if mode is Mode.BUILD and session.mode is Mode.PLAN:
        raise GuardError(
            f"session {session.id} is in plan mode; only an approved exit leaves it:"
            f" `guard plan exit --approve --session {session.id}`"
            " (or --reject REASON / --refine NOTE to keep planning)"
        )
    if mode is Mode.PLAN and title is not None and session.mode is not Mode.PLAN:
        with session.transaction() as s:
            s.title = title
    was_requested = any(p.kind == "plan_enter" for p in session.pending)
    session.set_mode(mode, "set by the user with `guard mode`")
    if session_id:
        pin(session.directory, session.id)
    if was_requested and session.mode is Mode.PLAN:
        session.deliver(f"The user accepted plan mode. Write your plan to {session.plan_path}.")
    sys.stdout.write(f"{session.id}: {session.mode.value}")
    if session.mode is Mode.PLAN:
        sys.stdout.write(f" (plan file: {session.plan_path})")
    sys.stdout.write("\n")



# ---- guard events -----------------------------------------------------------------------------


@commands.command("events")
def events_command(
    session_id: SessionOpt = None,
    follow: Annotated[
        bool, typer.Option("--follow", "-f", help="Keep printing new events (Ctrl-C stops).")
    ] = False,
    audit: Annotated[
        bool,
        typer.Option(
            "--audit",
            help="Also the project's audit records since the session began (the hooks'"
            " decisions, monitor violations): everything `guard ui` shows. Each has"
            ' "log": "audit".',
        ),
    ] = False,
    as_json: JsonOpt = False,
    cwd: CwdOpt = Path("."),
) -> None:
    """Print a session's events; --follow tails them as other processes publish.

    Examples:

      guard events                 # everything so far, current session

      guard events --follow --json --session ID | jq .type

      guard events --audit --json  # with the hooks' decisions from the audit log
    """
    session = resolve_session(cwd, session_id)
    console = session_console()
    stream: Iterator[ev.Event | dict[str, Any]]
    if audit:
        stream = _with_audit(session, cwd, follow)
    else:
        stream = ev.follow(session) if follow else iter(ev.read_events(session))
    try:
        for item in stream:
            if isinstance(item, dict):
                if as_json:
                    sys.stdout.write(json.dumps(with_schema({**item, "log": "audit"})) + "\n")
                else:
                    what = item.get("decision") or item.get("type", "?")
                    at = item.get("ts") or item.get("timestamp", "")
                    tool = item.get("tool_name") or item.get("path") or "-"
                    who = item.get("host", item.get("source", "-"))
                    line = f"{at} audit {str(what).upper()} {who} {tool}: {item.get('reason', '')}"
                    sys.stdout.write(visible(line, lines=False) + "\n")
                sys.stdout.flush()
            elif as_json:
                sys.stdout.write(json.dumps(with_schema(item.model_dump(mode="json"))) + "\n")
                sys.stdout.flush()
            else:
                console.print(event_line(item))
                console.file.flush()
    except KeyboardInterrupt:
        return
    except BrokenPipeError:
        os._exit(0)


def _with_audit(
    session: Session, cwd: Path, follow: bool
) -> Iterator[ev.Event | dict[str, Any]]:
    """The session's events and the project's audit records since it began, as they come."""
    from guard.ui.state import Tail

    events, records = Tail(session.events_path), Tail(default_log_path(Roots.discover(cwd)))
    lineno = 0
    while True:
        for raw in events.lines():
            if not raw:
                continue
            lineno += 1
            try:
                yield ev.parse_event(raw)
            except ValueError as exc:
                raise GuardError(
                    f"{session.events_path}: line {lineno} is not a valid event"
                    f" ({str(exc).splitlines()[0]}); remove or fix that line"
                ) from None
        for raw in records.lines():
            try:
                record = json.loads(raw) if raw else None
            except ValueError:
                continue  # `guard audit verify` reports a damaged log; this only shows it
            if (
                isinstance(record, dict)
                and record.get("type") in ("verdict", "violation", "notice")
                and record.get("source") != "mcp"  # the proxy's are in the session's own log
                and str(record.get("ts") or record.get("timestamp", "")) >= session.created_at
            ):
                yield record
        if not follow:
            return
        time.sleep(0.2)
