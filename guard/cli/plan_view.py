"""What ``guard mode`` and ``guard plan status`` print, without typer, rich or pydantic.

Both are asked many times a day (a shell prompt, a status line), so their answers are
printed here from the planning library alone: :func:`guard.cli._main.main` calls
:func:`show_mode` and :func:`show_status` for a plain command line (:func:`parse_mode`,
:func:`parse_status`), and the typer commands (guard/cli/planning.py,
guard/cli/plan_command.py) call the same functions for everything else, so the two
paths print the same. Sessions and their event logs are read by hand
(guard.planning.session_file, guard.planning.status_view); the session and event models
(pydantic) load only for a file or line the hand check leaves to them. Which session a
command acts on (:func:`resolve_session`, :func:`resolve_view`) is here too.
"""

# Lazy imports: session model, plan, audit log readers only where a session exists.

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from guard.cli._base import a_directory, read_options, with_schema
from guard.effects import GuardError
from guard.planning._vocabulary import Mode, check_session_id, sessions_dir
from guard.planning.binding import worktrees_of
from guard.planning.current import describe_current_agent
from guard.planning.deciding import deciding_facts, deciding_session, list_facts, read_facts
from guard.planning.session_file import SessionFacts
from guard.planning.status_view import Decided, StatusView, events_of, read_view

if TYPE_CHECKING:
    from guard.planning.session import Session


def print_data(data: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(with_schema(data), indent=2) + "\n")


def open_plans(cwd: Path) -> list[Session]:
    """The plan sessions that decide around ``cwd``: its worktree's, and those of every
    worktree it lies in or beside (guard.planning.binding)."""
    places = [Path(p) for p in worktrees_of([str(cwd)])] or [cwd]
    places = [p for p in places if sessions_dir(p).is_dir()]
    if not places:  # no sessions directory anywhere around: nothing to load
        return []
    from guard.planning.session import Session

    return [
        s for p in places for s in Session.list_all(p) if s.decides and s.mode is Mode.PLAN
    ]


def plans_around(cwd: Path) -> list[SessionFacts]:
    """:func:`open_plans`, read without the session model (the same sessions and errors)."""
    places = [Path(p) for p in worktrees_of([str(cwd)])] or [cwd]
    return [s for p in places for s in list_facts(p) if s.decides and s.mode is Mode.PLAN]


def no_session(cwd: Path) -> bool:
    """No session decides for ``cwd`` (a corrupt session file raises: an error, not a state)."""
    return deciding_facts(cwd) is None and not plans_around(cwd)


def _none_open(cwd: Path) -> GuardError:
    return GuardError(
        f"no open session in {sessions_dir(cwd)} (ended ones, set-aside ones and"
        " orphaned build ones do not count): start one with `guard plan start TITLE`,"
        " or name one with --session ID from `guard session list`"
    )


def resolve_session(cwd: Path, session_id: str | None) -> Session:
    a_directory(cwd)
    if session_id:
        from guard.planning.session import Session

        return Session.load(session_id, cwd)
    found = deciding_session(cwd)
    if found is None:  # a plan session of a worktree this directory lies in (a submodule...)
        around = open_plans(cwd)
        if around:
            return around[0]
        raise _none_open(cwd)
    return found[0]


def resolve_view(cwd: Path, session_id: str | None) -> StatusView:
    """:func:`resolve_session`'s session as ``guard plan status`` shows it, read without the
    models where the files allow (guard.planning.status_view): the same session and errors."""
    a_directory(cwd)
    if session_id:
        check_session_id(session_id)
        return read_view(sessions_dir(cwd) / f"{session_id}.json")
    found = deciding_facts(cwd)
    if found is None:  # a plan session of a worktree this directory lies in (a submodule...)
        around = plans_around(cwd)
        if not around:
            raise _none_open(cwd)
        found = (around[0], "")
    return read_view(found[0].directory / f"{found[0].id}.json")


# ---- the plain command lines main() answers itself ------------------------------------------


_VALUED = {"--session": "session", "-s": "session", "--cwd": "cwd", "-C": "cwd"}


def _plain(args: list[str], flags: tuple[str, ...]) -> dict[str, Any] | None:
    """``--session/-s ID``, ``--cwd/-C DIR`` and ``flags``, each at most once, as options
    (read as ``guard check`` reads its own: :func:`guard.cli._base.read_options`); None
    for anything else (typer then reads the command line and says what is wrong)."""
    read = read_options(args, _VALUED, {flag: flag for flag in flags})
    if read is None or read[1] or any(args.count(flag) > 1 for flag in flags):
        return None  # a positional or a flag given twice: typer's to read
    out = read[0]
    cwd = Path(out.get("cwd", "."))
    if cwd.exists() and not cwd.is_dir():
        return None  # typer's message for a file given as --cwd
    out["cwd"] = cwd
    return out


def parse_mode(args: list[str]) -> tuple[str | None, Path] | None:
    """``guard mode [--session ID] [--cwd DIR]`` (printing, not setting) as (session, cwd)."""
    read = _plain(args, ())
    return None if read is None else (read.get("session"), read["cwd"])


def parse_status(args: list[str]) -> tuple[str | None, Path, bool] | None:
    """``guard plan status [--session ID] [--cwd DIR] [--json]`` as (session, cwd, json)."""
    read = _plain(args, ("--json",))
    return None if read is None else (read.get("session"), read["cwd"], "--json" in read)


# ---- guard mode (printing) ------------------------------------------------------------------


def show_mode(session_id: str | None, cwd: Path) -> None:
    """``guard mode`` without a MODE: the mode here and the agent the hooks use (the
    sessions read without their model: guard.planning.session_file)."""
    a_directory(cwd)
    if session_id:
        check_session_id(session_id)
        path = sessions_dir(cwd) / f"{session_id}.json"
        sys.stdout.write(read_facts(path).mode.value + "\n")
        return
    found: tuple[SessionFacts, str] | None = deciding_facts(cwd)
    if found is None or found[0].mode is not Mode.PLAN:
        places = [Path(p) for p in worktrees_of([str(cwd)])] or [cwd]
        around = [s for p in places for s in list_facts(p) if s.decides and s.mode is Mode.PLAN]
        found = (around[0], "") if around else found  # a plan of a worktree this one lies in
    sys.stdout.write((found[0].mode.value if found else "no open session") + "\n")
    sys.stdout.write(f"the hooks use {describe_current_agent(cwd, plain=True).line()}\n")


# ---- guard plan status ----------------------------------------------------------------------


def recent_decisions(
    decided: list[Decided], since: str, cwd: Path, count: int = 5
) -> list[Decided]:
    """The last decisions taken while the session existed (since ``since``): ``decided``
    (its own event log: the MCP proxy) and the project's audit log (the hooks, guard check)."""
    from guard.audit.logfile import default_log_path, read
    from guard.paths import Roots

    found = list(decided)
    log = default_log_path(Roots.discover(cwd))
    if log.exists():
        for r in read(log):
            at = str(r.get("ts", ""))
            if r.get("type") != "verdict" or r.get("source") == "mcp" or at < since:
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


def show_status(session_id: str | None, cwd: Path, as_json: bool) -> None:
    """The mode, the plan file, the checklist and the last decisions of a session."""
    current = describe_current_agent(cwd, plain=True) if cwd.is_dir() else None
    if session_id is None and current is not None and no_session(cwd):
        if as_json:
            print_data({"session": None, "mode": None, "agent": current.agent,
                         "why": current.reason})  # fmt: skip
        else:
            sys.stdout.write(f"session   none open here ({sessions_dir(cwd)})\n")
            sys.stdout.write(f"hooks     {current.line()}\n")
            sys.stdout.write("start:    guard plan start TITLE\n")
        return
    _show_session(resolve_view(cwd, session_id), cwd, as_json)


def _show_session(session: StatusView, cwd: Path, as_json: bool) -> None:
    from guard.plaintext import visible
    from guard.planning.artifact import (
        count_lines,
        plan_digest,
        plan_text,
        read_plan,
        read_plan_bytes,
    )

    current = describe_current_agent(cwd, plain=True)
    plan: str | None = None
    shown: tuple[int, str] | None = None  # lines, digest
    unreadable: str | None = None  # why the plan file could not be read
    if session.plan_path:
        try:
            plan = read_plan(session)
            data = read_plan_bytes(session)  # as guard.planning.answer.current_plan
            if data is not None and plan_text(data).strip():
                shown = count_lines(data), plan_digest(data)
        except GuardError as exc:
            plan, unreadable = "", str(exc)
    decided, latest = events_of(session)
    recent = recent_decisions(decided, session.created_at, cwd)
    # the latest checklist update of its events, else the session's own (as
    # guard.planning.todos.shown_checklist: guard session show prints the same)
    items, explanation, source = latest or (session.checklist, session.explanation,
                                            "update_plan")  # fmt: skip
    if as_json:
        print_data(
            {
                **session.summary,
                "agent": current.agent,
                "why": current.reason,
                "plan_exists": plan is not None,
                "plan_sha256": shown[1] if shown else None,
                "plan_lines": shown[0] if shown else None,
                "checklist": items,
                "checklist_explanation": explanation,
                "checklist_from": source,
                "exits": session.exits[-5:],
                "decisions": [
                    {"at": at, "action": action, "agent": agent, "tool": tool, "reason": why}
                    for at, action, agent, tool, why in recent
                ],
            }
        )
        return
    lines: list[str] = [
        f"session   {session.id} ({session.status}, owner {session.owner})",
        f"mode      {session.mode.value}",
        f"hooks     {current.line()}",
    ]
    if session.plan_path:
        state = "missing: not written yet" if plan is None else f"{len(plan)} characters"
        if unreadable is not None:
            state = f"unreadable: {unreadable}"
        elif shown is not None:
            state = f"{shown[0]} lines, digest {shown[1]}"
        lines.append(f"plan file {session.plan_path} ({state})")
    else:
        lines.append("plan file none (the session never entered plan mode)")
    lines += [f"waiting   {kind} since {at}" for kind, at in session.pending]
    if items:
        lines.append(f"checklist ({source})" + (f": {explanation}" if explanation else ""))
        lines += [f"  [{item['status']}] {item['step']}" for item in items]
    lines += [
        f"exit      {d['at']} {d['decision']} by {d['by']}: {d['text'] or '-'}"
        for d in session.exits[-3:]
    ]
    if recent:
        lines.append("last decisions")
        lines += [
            f"  {at} {action.upper():5} {agent} {tool}: {why}"
            for at, action, agent, tool, why in recent
        ]
    if session.mode is Mode.PLAN:
        lines.append(f"approve:  guard plan exit --approve --session {session.id}")
    sys.stdout.write("".join(visible(line, lines=False) + "\n" for line in lines))
