"""``guard plan``: enter plan mode, follow it, read and approve (or reject) the plan.

The subcommands of the ``guard plan`` group only. The group itself, the options it
shares with ``guard session``, ``guard mode`` and ``guard events`` are in
guard/cli/planning.py; what ``guard plan status`` prints, and the choice of the session a
command acts on, in guard/cli/plan_view.py.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from guard.cli.plan_view import no_session, print_data, resolve_session, show_status
from guard.cli.planning import (
    CwdOpt,
    JsonOpt,
    NewOpt,
    SessionOpt,
    plan_app,
    refuse_stacking,
    say_hooks_now,
    say_set_aside,
    session_console,
)
from guard.effects import GuardError
from guard.plaintext import visible
from guard.planning.answer import Choice, answer_exit, answer_questions, current_plan
from guard.planning.artifact import plan_digest, plan_text, read_plan_bytes
from guard.planning.current import describe_current_agent
from guard.planning.render import plan_panel
from guard.planning.runtime import list_plans
from guard.planning.session import Mode, Session, sessions_dir

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
    refuse_stacking(cwd, new)
    session = Session.start(cwd, Mode.PLAN, title=title.strip())
    say_set_aside(session, plans=True)
    current = describe_current_agent(cwd)
    if as_json:
        print_data({**session.summary(), "agent": current.agent, "why": current.reason})
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
    show_status(session_id, cwd, as_json)


@plan_app.command("path")
def plan_path(session_id: SessionOpt = None, cwd: CwdOpt = Path(".")) -> None:
    """Print the session's plan artifact path (fixed when it entered plan mode)."""
    session = resolve_session(cwd, session_id)
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
    raw: Annotated[
        bool,
        typer.Option(
            "--raw",
            help="Print the markdown as is (on a terminal, control characters made visible).",
        ),
    ] = False,
) -> None:
    """Render a plan document (the session's, or FILE), with its digest.

    Everything markdown would hide is shown and marked: HTML blocks and comments,
    link reference definitions, link targets; control, zero-width and bidi
    characters appear as escapes (\\x1b, \\u202e). The digest is what
    `guard plan exit --approve --digest` approves.
    """
    digest: str | None = None
    if file is not None:
        try:
            data = file.read_bytes()
        except OSError as exc:
            raise GuardError(f"cannot read {file}: {exc.strerror}") from None
        text: str | None = plan_text(data)
        digest = plan_digest(data)
        where: str | None = str(file)
    else:
        if session_id is None and cwd.is_dir() and no_session(cwd):
            sys.stdout.write(
                f"no open session here ({sessions_dir(cwd)}), so no plan to show:"
                " start one with `guard plan start TITLE`, or give a plan FILE\n"
            )
            return
        session = resolve_session(cwd, session_id)
        data_or_none = read_plan_bytes(session)
        where = session.plan_path
        text = None if data_or_none is None else plan_text(data_or_none)
        digest = None if data_or_none is None else plan_digest(data_or_none)
        if text is None:
            raise GuardError(
                f"the plan file of session {session.id} does not exist yet"
                + (f": {where}" if where else " (the session never entered plan mode)")
            )
    if raw:
        sys.stdout.write(visible(text or "") if sys.stdout.isatty() else text or "")
        return
    session_console().print(plan_panel(text, where))
    if digest is not None and text is not None:
        lines = text.count("\n") + (0 if text.endswith("\n") or not text else 1)
        sys.stdout.write(
            f"digest {digest} ({lines} lines): what `guard plan exit --approve --digest` takes\n"
        )


@plan_app.command("list")
def plan_list(cwd: CwdOpt = Path("."), as_json: JsonOpt = False) -> None:
    """List the plan files of this worktree (or project), oldest first."""
    plans = list_plans(cwd)
    if as_json:
        print_data({"plans": [p.to_json() for p in plans]})
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
    digest: Annotated[
        str | None,
        typer.Option(
            "--digest",
            metavar="SHA256",
            help="With --approve: approve only the plan whose bytes have this SHA-256 (the"
            " digest `guard plan status` and `guard plan show` print).",
        ),
    ] = None,
    session_id: SessionOpt = None,
    cwd: CwdOpt = Path("."),
) -> None:
    """Answer a plan exit: --approve, --reject REASON or --refine NOTE (exactly one).

    Approval is refused while the plan file is missing or empty, and binds to the
    plan's digest (SHA-256 of its bytes): --digest approves that text only (a plan
    changed since is refused); without it a terminal asks "Approve plan TITLE
    (N lines, digest ...)? y/n" first, and a script approves the plan as it is now
    and is told its digest. The answer is recorded and reaches the model on its
    next tool call or prompt.

    Examples:

      guard plan exit --approve
      guard plan exit --approve \\
        --digest "$(guard plan status --json | jq -r .plan_sha256)"
      guard plan exit --refine "also cover the migration" --session ID
    """
    chosen = [x for x in (approve or None, reject, refine) if x is not None]
    if len(chosen) != 1:
        raise GuardError("give exactly one of --approve, --reject REASON, --refine NOTE")
    if digest is not None and not approve:
        raise GuardError("--digest goes with --approve: it names the plan text you approve")
    if reject is not None and not reject.strip():
        raise GuardError("--reject needs a reason the model can act on")
    if refine is not None and not refine.strip():
        raise GuardError("--refine needs a note saying what to change")
    session = resolve_session(cwd, session_id)
    choice: Choice = "approve" if approve else "reject" if reject is not None else "refine"
    if approve and digest is None:
        digest = _ask_approval(session)
    answered = answer_exit(session, choice, reject or refine or "", digest=digest)
    outcome, said = answered.outcome, answered.said
    sys.stdout.write(f"{session.id}: {outcome.mode.value}: {visible(said)}\n")
    sys.stdout.write("  the model is told on its next tool call or prompt\n")
    if outcome.ok:
        say_hooks_now(cwd)


def _ask_approval(session: Session) -> str | None:
    """The digest of the plan as it is now; on a terminal, only once the user said yes."""
    shown = current_plan(session)
    if shown is None:
        return None  # answer_exit refuses, naming the missing or empty file
    question = visible(shown.question(), lines=False)
    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        sys.stdout.write(f"approving plan {visible(shown.title, lines=False)}"
                         f" ({shown.lines} lines, digest {shown.digest})\n")  # fmt: skip
        return shown.digest
    sys.stdout.write(f"{question} [y/N] ")
    sys.stdout.flush()
    if sys.stdin.readline().strip().lower() not in ("y", "yes"):
        raise GuardError("not approved (answer y to approve); the session stays in plan mode")
    return shown.digest


def _resume(session_id: str | None, cwd: Path) -> None:
    session = resolve_session(cwd, session_id)
    was = session.status
    if session.resume():
        how = "you own it now" if was == "orphaned" else "it decides again"
        sys.stdout.write(f"{session.id}: resumed; {how} ({session.mode.value} mode)\n")
    else:
        sys.stdout.write(f"{session.id}: open, nothing to resume ({session.mode.value} mode)\n")
    say_hooks_now(cwd)


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

    The answers reach the model on its next tool call or prompt.

    Example: guard plan answer "SQLite" "keep the old API"
    """
    session = resolve_session(cwd, session_id)
    answer_questions(session, list(answers))
    sys.stdout.write(f"{session.id}: answers recorded for the model\n")
