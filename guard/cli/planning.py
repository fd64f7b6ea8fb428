"""``guard session``, ``guard mode``, ``guard plan``, ``guard events``: the planning runtime."""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console

from guard.cli._app import app, console, with_schema
from guard.effects import GuardError
from guard.planning import events as ev
from guard.planning.answer import Choice, answer_exit, answer_questions
from guard.planning.artifact import read_plan
from guard.planning.deciding import deciding_session
from guard.planning.render import event_line, plan_panel, session_view
from guard.planning.runtime import describe_current_agent, list_plans
from guard.planning.session import Mode, Session, pin, sessions_dir

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
        "  guard session start                 # new build-mode session, prints its id\n\n"
        "  guard session start --mode plan --title 'Add caching'\n\n"
        "  guard session list                  # newest first: state and owner\n\n"
        "  guard session show                  # checklist and plan, side by side lanes\n\n"
        "  guard session end                   # the deciding session stops deciding"
    ),
    no_args_is_help=True,
)
plan_app = typer.Typer(
    help=(
        "Plan mode for the worktree: start it, follow it, approve the plan.\n\n"
        "  guard plan start 'Add caching'      # plan mode here; prints what to do next\n\n"
        "  guard plan status                   # mode, plan file, checklist, last decisions\n\n"
        "  guard plan path                     # the current session's plan file\n\n"
        "  guard plan show                     # render it\n\n"
        "  guard plan list                     # all plan files of this worktree\n\n"
        "  guard plan exit --approve           # leave plan mode (the only way out)\n\n"
        "  guard plan exit --reject 'too risky'   # stay in plan mode\n\n"
        "  guard plan exit --refine 'split step 2'\n\n"
        "  guard plan answer 'SQLite'           # answer the model's request_user_input\n\n"
        "  guard plan resume ID                # take over an orphaned plan session"
    ),
    no_args_is_help=True,
)
app.add_typer(session_app, name="session")
app.add_typer(plan_app, name="plan")

CwdOpt = Annotated[
    Path,
    typer.Option(
        "--cwd", "-C", help="Directory whose worktree (or project) to use.", file_okay=False
    ),
]
SessionOpt = Annotated[
    str | None,
    typer.Option(
        "--session",
        "-s",
        help="Session id (default: the one deciding here: pinned, else the newest open one).",
    ),
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON instead of text.")]


def _console() -> Console:
    # wraps to the terminal's width on a terminal; never splits a line when piped
    return console(soft_wrap=False)


def _resolve(cwd: Path, session_id: str | None) -> Session:
    if not cwd.is_dir():
        raise GuardError(f"--cwd {cwd}: not a directory")
    if session_id:
        return Session.load(session_id, cwd)
    found = deciding_session(cwd)
    if found is None:  # a plan session of a worktree this directory lies in (a submodule...)
        around = _open_plans(cwd)
        if around:
            return around[0]
        raise GuardError(
            f"no open session in {sessions_dir(cwd)} (ended ones, set-aside ones and"
            " orphaned build ones do not count): start one with `guard plan start TITLE`,"
            " or name one with --session ID from `guard session list`"
        )
    return found[0]


def _open_plans(cwd: Path) -> list[Session]:
    """The plan sessions that decide around ``cwd``: its worktree's, and those of every
    worktree it lies in or beside (guard.planning.binding)."""
    from guard.planning.binding import worktrees_of

    places = [Path(p) for p in worktrees_of([str(cwd)])] or [cwd]
    return [
        s for p in places for s in Session.list_all(p) if s.decides and s.mode is Mode.PLAN
    ]


def _refuse_stacking(cwd: Path, new: bool) -> None:
    """One plan session per worktree unless asked: name the open one, or go on (--new)."""
    found = _open_plans(cwd)
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


def _say_set_aside(session: Session, plans: bool) -> None:
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


def _no_session(cwd: Path) -> bool:
    """No session decides for ``cwd`` (a corrupt session file raises: an error, not a state)."""
    return deciding_session(cwd) is None and not _open_plans(cwd)


def _print_json(data: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(with_schema(data), indent=2) + "\n")


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
        _refuse_stacking(cwd, new)
    session = Session.start(cwd, mode, id=session_id, title=title)
    _say_set_aside(session, plans=mode is Mode.PLAN or new)
    if as_json:
        _print_json(session.summary())
    else:
        sys.stdout.write(session.id + "\n")


@session_app.command("show")
def session_show(
    session_id: Annotated[str | None, typer.Argument(help="Session id (default: current).")] = None,
    cwd: CwdOpt = Path("."),
    as_json: JsonOpt = False,
) -> None:
    """Show a session: its mode, the checklist lane and the plan lane.

    Example: guard session show 20261202-1a2b3c4d
    """
    session = _resolve(cwd, session_id)
    if as_json:
        data = session.model_dump(mode="json")
        data["plan"] = read_plan(session)
        _print_json(data)
        return
    _console().print(session_view(session))


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
        _print_json(
            {"sessions": [{**s.summary(), "deciding": s.id == deciding} for s in sessions]}
        )
        return
    console = _console()
    if not sessions:
        console.print(f"no sessions in {sessions_dir(cwd)} (start one: guard plan start TITLE)")
        return
    for s in sessions:
        style = "bold magenta" if s.mode is Mode.PLAN else "bold cyan"
        mark = "*" if s.id == deciding else " "
        owner = s.owner.describe() if s.owner else "user"
        console.print(
            f"{mark} {s.id}  [{style}]{s.mode.value:5}[/]  {s.status:8}  owner {owner}"
            f"  started {s.created_at}  {s.plan_path or ''}",
            markup=True,
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
    session = _resolve(cwd, session_id)
    if not session.end("ended by the user with `guard session end`"):
        raise GuardError(f"session {session.id} has already ended ({session.end_reason})")
    sys.stdout.write(f"{session.id}: ended\n")
    sys.stdout.write(f"the hooks now use {describe_current_agent(cwd).line()}\n")


def _resume(session_id: str | None, cwd: Path) -> None:
    session = _resolve(cwd, session_id)
    was = session.status
    if session.resume():
        how = "you own it now" if was == "orphaned" else "it decides again"
        sys.stdout.write(f"{session.id}: resumed; {how} ({session.mode.value} mode)\n")
    else:
        sys.stdout.write(f"{session.id}: open, nothing to resume ({session.mode.value} mode)\n")
    sys.stdout.write(f"the hooks now use {describe_current_agent(cwd).line()}\n")


# ---- guard mode -------------------------------------------------------------------------------


@app.command("mode")
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
        if session_id:
            sys.stdout.write(_resolve(cwd, session_id).mode.value + "\n")
            return
        if not cwd.is_dir():
            raise GuardError(f"--cwd {cwd}: not a directory")
        found = deciding_session(cwd)
        if found is None or found[0].mode is not Mode.PLAN:
            around = _open_plans(cwd)  # a plan of a worktree this one lies in holds here
            found = (around[0], "") if around else found
        sys.stdout.write((found[0].mode.value if found else "no open session") + "\n")
        sys.stdout.write(f"the hooks use {describe_current_agent(cwd).line()}\n")
        return
    session = _resolve(cwd, session_id)
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


# ---- guard plan -------------------------------------------------------------------------------


Decided = tuple[str, str, str, str, str]  # at, action, agent, tool, reason


def _recent_decisions(session: Session, cwd: Path, count: int = 5) -> list[Decided]:
    """The last decisions taken while the session existed: its own event log (the MCP
    proxy) and the project's audit log (the hooks, guard check)."""
    from guard.audit import default_log_path, read
    from guard.paths import Roots

    found: list[Decided] = [
        (e.at, e.action.value, e.agent or "-", e.tool or "-", e.reason)
        for e in ev.read_events(session)
        if isinstance(e, ev.Decision)
    ]
    log = default_log_path(Roots.discover(cwd))
    if log.exists():
        for r in read(log):
            at = str(r.get("ts", ""))
            if r.get("type") != "verdict" or r.get("source") == "mcp" or at < session.created_at:
                continue
            found.append(
                (
                    at,
                    str(r.get("decision", "?")),
                    str(r.get("agent", "-")),
                    str(r.get("tool_name", "-")),
                    str(r.get("reason", "")),
                )
            )
    return sorted(found)[-count:]


NEXT_STEPS = """\
Next, in your agent (guard's hooks installed once with `guard install HOST`):
  1. Ask it for the plan, e.g. "Plan: {title}". It may read everything and write
     only the plan file; guard tells it the path at each turn and in every refusal.
  2. Read the plan:      guard plan show
  3. Approve it:         guard plan exit --approve     (or --refine NOTE / --reject REASON)
     The host's own gesture is kept too: Claude Code's ExitPlanMode (approve in its
     prompt or with the command above), Gemini CLI's exit_plan_mode and Codex's
     <proposed_plan> (their plan becomes the plan file; approve with the command above).
  4. Build: the same agent session carries on under the build agent; no restart.
Stop planning without a plan: guard session end {sid}
"""


@plan_app.command("start")
def plan_start(
    title: Annotated[str, typer.Argument(help="What the plan is for; names the plan file.")],
    cwd: CwdOpt = Path("."),
    as_json: JsonOpt = False,
    new: NewOpt = False,
) -> None:
    """Enter plan mode for this worktree and print what to do next in your agent.

    Starts a session in plan mode, owned by you: it decides for the worktree
    (the hooks use the plan agent) until you approve the plan or end it.
    With a plan session open here already, it refuses and names it; --new
    starts another and sets the open one aside. Older sessions never decide
    again on their own: ending or approving this one leaves them set aside
    until `guard plan resume ID`.

    Example: guard plan start "Add caching"
    """
    if not title.strip():
        raise GuardError("guard plan start: give a title, e.g. `guard plan start 'Add caching'`")
    if not cwd.is_dir():
        raise GuardError(f"--cwd {cwd}: not a directory")
    _refuse_stacking(cwd, new)
    session = Session.start(cwd, Mode.PLAN, title=title.strip())
    _say_set_aside(session, plans=True)
    current = describe_current_agent(cwd)
    if as_json:
        _print_json({**session.summary(), "agent": current.agent, "why": current.reason})
        return
    where = session.worktree or session.project
    out = sys.stdout
    out.write(f"Plan mode for {where} (session {session.id}).\n")
    out.write(f"Plan file: {session.plan_path}\n")
    out.write(f"The hooks use {current.line()}\n")
    if current.session is None or current.session.id != session.id:
        out.write(
            "warning: this session does not decide here (see the reason above);"
            " unset $GUARD_AGENT or end the pinned session for the hooks to follow it\n"
        )
    out.write("\n" + NEXT_STEPS.format(title=title.strip(), sid=session.id))


@plan_app.command("status")
def plan_status(
    session_id: SessionOpt = None,
    cwd: CwdOpt = Path("."),
    as_json: JsonOpt = False,
) -> None:
    """Show the mode, the plan file, the checklist and the last decisions of a session.

    With no open session here it says so, and which agent the hooks use (exit 0).
    """
    current = describe_current_agent(cwd) if cwd.is_dir() else None
    if session_id is None and current is not None and _no_session(cwd):
        if as_json:
            _print_json({"session": None, "mode": None, "agent": current.agent,
                         "why": current.reason})  # fmt: skip
        else:
            sys.stdout.write(f"session   none open here ({sessions_dir(cwd)})\n")
            sys.stdout.write(f"hooks     {current.line()}\n")
            sys.stdout.write("start:    guard plan start TITLE\n")
        return
    session = _resolve(cwd, session_id)
    current = describe_current_agent(cwd)
    plan = None
    if session.plan_path:
        try:
            plan = read_plan(session)
        except GuardError as exc:
            plan = f"(unreadable: {exc})"
    recent = _recent_decisions(session, cwd)
    if as_json:
        _print_json(
            {
                **session.summary(),
                "agent": current.agent,
                "why": current.reason,
                "plan_exists": plan is not None,
                "checklist": [i.model_dump(mode="json") for i in session.checklist],
                "exits": [d.model_dump(mode="json") for d in session.decisions[-5:]],
                "decisions": [
                    {"at": at, "action": action, "agent": agent, "tool": tool, "reason": why}
                    for at, action, agent, tool, why in recent
                ],
            }
        )
        return
    out = sys.stdout
    out.write(f"session   {session.id} ({session.status}, owner ")
    out.write(f"{session.owner.describe() if session.owner else 'user'})\n")
    out.write(f"mode      {session.mode.value}\n")
    out.write(f"hooks     {current.line()}\n")
    if session.plan_path:
        state = "missing: not written yet" if plan is None else f"{len(plan)} characters"
        out.write(f"plan file {session.plan_path} ({state})\n")
    else:
        out.write("plan file none (the session never entered plan mode)\n")
    for p in session.pending:
        out.write(f"waiting   {p.kind} since {p.at}\n")
    if session.checklist:
        out.write("checklist\n")
        for item in session.checklist:
            out.write(f"  [{item.status.value}] {item.step}\n")
    for d in session.decisions[-3:]:
        out.write(f"exit      {d.at} {d.decision} by {d.by}: {d.text or '-'}\n")
    if recent:
        out.write("last decisions\n")
        for at, action, agent, tool, why in recent:
            out.write(f"  {at} {action.upper():5} {agent} {tool}: {why}\n")
    if session.mode is Mode.PLAN:
        out.write(f"approve:  guard plan exit --approve --session {session.id}\n")


@plan_app.command("path")
def plan_path(session_id: SessionOpt = None, cwd: CwdOpt = Path(".")) -> None:
    """Print the session's plan artifact path (fixed when it entered plan mode)."""
    session = _resolve(cwd, session_id)
    if not session.plan_path:
        raise GuardError(
            f"session {session.id} has no plan file yet: it gets one on entering plan mode"
            f" (`guard mode plan --session {session.id}`)"
        )
    sys.stdout.write(session.plan_path + "\n")


@plan_app.command("show")
def plan_show(
    file: Annotated[
        Path | None, typer.Argument(help="A plan file (default: the session's).", dir_okay=False)
    ] = None,
    session_id: SessionOpt = None,
    cwd: CwdOpt = Path("."),
    raw: Annotated[bool, typer.Option("--raw", help="Print the markdown as is.")] = False,
) -> None:
    """Render a plan document (the session's, or FILE)."""
    if file is not None:
        try:
            text: str | None = file.read_text(encoding="utf-8")
        except OSError as exc:
            raise GuardError(f"cannot read {file}: {exc.strerror}") from None
        where: str | None = str(file)
    else:
        if session_id is None and cwd.is_dir() and _no_session(cwd):
            sys.stdout.write(
                f"no open session here ({sessions_dir(cwd)}), so no plan to show:"
                " start one with `guard plan start TITLE`, or give a plan FILE\n"
            )
            return
        session = _resolve(cwd, session_id)
        text, where = read_plan(session), session.plan_path
        if text is None:
            raise GuardError(
                f"the plan file of session {session.id} does not exist yet"
                + (f": {where}" if where else " (the session never entered plan mode)")
            )
    if raw:
        sys.stdout.write(text or "")
        return
    _console().print(plan_panel(text, where))


@plan_app.command("list")
def plan_list(cwd: CwdOpt = Path("."), as_json: JsonOpt = False) -> None:
    """List the plan files of this worktree (or project), oldest first."""
    plans = list_plans(cwd)
    if as_json:
        _print_json({"plans": [p.to_json() for p in plans]})
        return
    if not plans:
        sys.stdout.write("no plan files yet\n")
        return
    for p in plans:
        sys.stdout.write(f"{p.created}  {p.size:>7} B  {p.session or '-':20}  {p.path}\n")


@plan_app.command("exit")
def plan_exit_command(
    approve: Annotated[
        bool, typer.Option("--approve", help="Approve the plan: go to build.")
    ] = False,
    reject: Annotated[
        str | None, typer.Option("--reject", metavar="REASON", help="Reject; stay in plan mode.")
    ] = None,
    refine: Annotated[
        str | None, typer.Option("--refine", metavar="NOTE", help="Ask for changes; stay in plan.")
    ] = None,
    session_id: SessionOpt = None,
    cwd: CwdOpt = Path("."),
) -> None:
    """Answer a plan exit: --approve, --reject REASON or --refine NOTE (exactly one).

    Approval is refused while the plan file is missing or empty. The answer is
    recorded and handed to the model on its next planning tool call.

    Examples:

      guard plan exit --approve

      guard plan exit --refine "also cover the migration" --session ID
    """
    chosen = [x for x in (approve or None, reject, refine) if x is not None]
    if len(chosen) != 1:
        raise GuardError("give exactly one of --approve, --reject REASON, --refine NOTE")
    if reject is not None and not reject.strip():
        raise GuardError("--reject needs a reason the model can act on")
    if refine is not None and not refine.strip():
        raise GuardError("--refine needs a note saying what to change")
    session = _resolve(cwd, session_id)
    choice: Choice = "approve" if approve else "reject" if reject is not None else "refine"
    answered = answer_exit(session, choice, reject or refine or "")
    outcome, said = answered.outcome, answered.said
    sys.stdout.write(f"{session.id}: {outcome.mode.value}: {said}\n")
    sys.stdout.write("  the model is told on its next planning tool call\n")
    if outcome.ok:
        sys.stdout.write(f"the hooks now use {describe_current_agent(cwd).line()}\n")


@plan_app.command("resume")
def plan_resume(
    session_id: Annotated[
        str | None, typer.Argument(help="Session id (default: the one deciding here).")
    ] = None,
    cwd: CwdOpt = Path("."),
) -> None:
    """Take a plan session over: an orphaned one (its owning process died) becomes yours.

    An orphaned plan session keeps the worktree in plan mode, and every refusal
    says so, until you act: resume it (keep planning, owned by you), approve its
    plan (`guard plan exit --approve`) or end it (`guard session end`).

    Example: guard plan resume 20261202-1a2b3c4d
    """
    _resume(session_id, cwd)


@plan_app.command("answer")
def plan_answer(
    answers: Annotated[list[str], typer.Argument(help="One answer per question, in order.")],
    session_id: SessionOpt = None,
    cwd: CwdOpt = Path("."),
) -> None:
    """Answer the model's pending request_user_input questions.

    The answers reach the model on its next planning tool call.

    Example: guard plan answer "SQLite" "keep the old API"
    """
    session = _resolve(cwd, session_id)
    answer_questions(session, list(answers))
    sys.stdout.write(f"{session.id}: answers recorded for the model\n")


# ---- guard events -----------------------------------------------------------------------------


@app.command("events")
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
    session = _resolve(cwd, session_id)
    console = _console()
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
                    sys.stdout.write(
                        f"{at} audit {str(what).upper()} {who} {tool}: {item.get('reason', '')}\n"
                    )
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
    from guard.audit import default_log_path
    from guard.paths import Roots
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
