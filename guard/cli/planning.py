"""``guard session``, ``guard mode``, ``guard plan``, ``guard events``: the planning runtime."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console

from guard.cli._app import app, console, with_schema
from guard.effects import GuardError
from guard.planning import events as ev
from guard.planning.artifact import list_plans, read_plan
from guard.planning.handshake import UserDecision, plan_exit
from guard.planning.render import event_line, plan_panel, session_view
from guard.planning.session import Mode, Session, current_mode, sessions_dir

session_app = typer.Typer(
    help=(
        "Agent sessions: their mode (build or plan), plan artifact and checklist.\n\n"
        "  guard session start                 # new build-mode session, prints its id\n\n"
        "  guard session start --mode plan --title 'Add caching'\n\n"
        "  guard session list                  # most recently active first\n\n"
        "  guard session show                  # checklist and plan, side by side lanes"
    ),
    no_args_is_help=True,
)
plan_app = typer.Typer(
    help=(
        "Plan artifacts and the plan-mode exit.\n\n"
        "  guard plan path                     # the current session's plan file\n\n"
        "  guard plan show                     # render it\n\n"
        "  guard plan list                     # all plan files of this worktree\n\n"
        "  guard plan exit --approve           # leave plan mode (the only way out)\n\n"
        "  guard plan exit --reject 'too risky'   # stay in plan mode\n\n"
        "  guard plan exit --refine 'split step 2'\n\n"
        "  guard plan answer 'SQLite'           # answer the model's request_user_input"
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
    typer.Option("--session", "-s", help="Session id (default: the most recently active one)."),
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
    found = current_mode(cwd)
    if found is None:
        raise GuardError(f"no session in {sessions_dir(cwd)}: start one with `guard session start`")
    return found[1]


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
) -> None:
    """Start a session and print its id.

    Example: SID=$(guard session start --mode plan --title "Add caching")
    """
    session = Session.start(cwd, mode, id=session_id, title=title)
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
    """List the sessions of this worktree, most recently active first."""
    sessions = Session.list_all(cwd)
    if as_json:
        _print_json({"sessions": [s.summary() for s in sessions]})
        return
    console = _console()
    if not sessions:
        console.print(f"no sessions in {sessions_dir(cwd)} (start one: guard session start)")
        return
    for s in sessions:
        style = "bold magenta" if s.mode is Mode.PLAN else "bold cyan"
        console.print(
            f"{s.id}  [{style}]{s.mode.value:5}[/]  updated {s.updated_at}"
            f"  {len(s.checklist)} steps  {s.plan_path or ''}"
        )


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
    """Print or set a session's mode.

    Entering plan mode is the user's approval of plan_enter. Leaving it is not
    possible here: only an approved exit leaves plan mode (guard plan exit --approve).

    Examples:

      guard mode --session ID              # prints plan or build

      guard mode plan --session ID --title "Refactor auth"
    """
    session = _resolve(cwd, session_id)
    if mode is None:
        sys.stdout.write(session.mode.value + "\n")
        return
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
    if was_requested and session.mode is Mode.PLAN:
        session.deliver(f"The user accepted plan mode. Write your plan to {session.plan_path}.")
    sys.stdout.write(f"{session.id}: {session.mode.value}")
    if session.mode is Mode.PLAN:
        sys.stdout.write(f" (plan file: {session.plan_path})")
    sys.stdout.write("\n")


# ---- guard plan -------------------------------------------------------------------------------


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
    if session.mode is not Mode.PLAN:
        raise GuardError(f"session {session.id} is not in plan mode; there is no plan to exit")
    decision = (
        UserDecision.approve()
        if approve
        else UserDecision.reject(reject or "")
        if reject is not None
        else UserDecision.refine(refine or "")
    )
    outcome = plan_exit(session, decision, notify_model=True)
    if not outcome.ok and decision.choice == "approve":
        raise GuardError(outcome.text)
    # the model gets outcome.text on its next planning call; the user gets a summary
    plan = session.plan_path or "the plan file"
    if approve:
        said = f"plan approved ({plan}); the session is in build mode now"
    elif reject is not None:
        said = f"plan rejected ({reject.strip()}); still in plan mode, the model reworks {plan}"
    else:
        said = (
            f"refinement asked ({(refine or '').strip()}); still in plan mode, the model"
            f" updates {plan} and asks again"
        )
    sys.stdout.write(f"{session.id}: {outcome.mode.value}: {said}\n")
    sys.stdout.write("  the model is told on its next planning tool call\n")


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
    pending = [p for p in session.pending if p.kind == "request_user_input"]
    if not pending:
        raise GuardError(
            f"session {session.id} has no pending questions (see `guard session show`)"
        )
    questions = [q.get("question", "?") for q in pending[-1].detail.get("questions", [])]
    if len(answers) != len(questions):
        listed = "; ".join(f"{n + 1}. {q}" for n, q in enumerate(questions))
        raise GuardError(
            f"{len(questions)} question(s) wait for an answer, got {len(answers)}: {listed}"
        )
    lines = [f"Q: {q}\nA: {a}" for q, a in zip(questions, answers, strict=True)]
    with session.transaction() as s:
        s.pending = [p for p in s.pending if p is not None and p != pending[-1]]
        s.inbox.append("Answers from the user:\n" + "\n".join(lines))
    sys.stdout.write(f"{session.id}: answers recorded for the model\n")


# ---- guard events -----------------------------------------------------------------------------


@app.command("events")
def events_command(
    session_id: SessionOpt = None,
    follow: Annotated[
        bool, typer.Option("--follow", "-f", help="Keep printing new events (Ctrl-C stops).")
    ] = False,
    as_json: JsonOpt = False,
    cwd: CwdOpt = Path("."),
) -> None:
    """Print a session's events; --follow tails them as other processes publish.

    Examples:

      guard events                 # everything so far, current session

      guard events --follow --json --session ID | jq .type
    """
    session = _resolve(cwd, session_id)
    console = _console()
    stream = ev.follow(session) if follow else iter(ev.read_events(session))
    try:
        for event in stream:
            if as_json:
                sys.stdout.write(json.dumps(with_schema(event.model_dump(mode="json"))) + "\n")
                sys.stdout.flush()
            else:
                console.print(event_line(event))
                console.file.flush()
    except KeyboardInterrupt:
        return
    except BrokenPipeError:
        os._exit(0)
