"""What ``guard mode`` and ``guard plan status`` print, without typer, rich or pydantic.

Both are asked many times a day (a shell prompt, a status line), so their answers are
printed here from the planning library alone: :func:`guard.cli._main.main` calls
:func:`show_mode` and :func:`show_status` for a plain command line (:func:`parse_mode`,
:func:`parse_status`), and the typer commands (guard/cli/planning.py,
guard/cli/plan_command.py) call the same functions for everything else, so the two
paths print the same. The session model (pydantic) loads only where a session file
exists. Which session a command acts on (:func:`resolve_session`) is here too.
"""

# Lazy imports: session model, plan and checklist readers only where a session exists.

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from guard.cli._base import with_schema
from guard.effects import GuardError
from guard.planning._vocabulary import Mode, sessions_dir
from guard.planning.binding import worktrees_of
from guard.planning.current import describe_current_agent
from guard.planning.deciding import deciding_session

if TYPE_CHECKING:
    from guard.planning.session import Session

Decided = tuple[str, str, str, str, str]  # at, action, agent, tool, reason


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


def no_session(cwd: Path) -> bool:
    """No session decides for ``cwd`` (a corrupt session file raises: an error, not a state)."""
    return deciding_session(cwd) is None and not open_plans(cwd)


def resolve_session(cwd: Path, session_id: str | None) -> Session:
    if not cwd.is_dir():
        raise GuardError(f"--cwd {cwd}: not a directory")
    if session_id:
        from guard.planning.session import Session

        return Session.load(session_id, cwd)
    found = deciding_session(cwd)
    if found is None:  # a plan session of a worktree this directory lies in (a submodule...)
        around = open_plans(cwd)
        if around:
            return around[0]
        raise GuardError(
            f"no open session in {sessions_dir(cwd)} (ended ones, set-aside ones and"
            " orphaned build ones do not count): start one with `guard plan start TITLE`,"
            " or name one with --session ID from `guard session list`"
        )
    return found[0]


# ---- the plain command lines main() answers itself ------------------------------------------


def _plain(args: list[str], flags: tuple[str, ...]) -> dict[str, Any] | None:
    """``--session/-s ID``, ``--cwd/-C DIR`` and ``flags``, each at most once, as options;
    None for anything else (typer then reads the command line and says what is wrong)."""
    valued = {"--session": "session", "-s": "session", "--cwd": "cwd", "-C": "cwd"}
    out: dict[str, Any] = {}
    i = 0
    while i < len(args):
        a = args[i]
        i += 1
        if a in flags and a not in out:
            out[a] = True
            continue
        name, eq, value = a.partition("=") if a.startswith("--") else (a, "", "")
        key = valued.get(name)
        if key is None or key in out:
            return None
        if not eq:
            if i >= len(args):
                return None
            value = args[i]
            i += 1
        if not value or value.startswith("-"):
            return None
        out[key] = value
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
    """``guard mode`` without a MODE: the mode here and the agent the hooks use."""
    if session_id:
        sys.stdout.write(resolve_session(cwd, session_id).mode.value + "\n")
        return
    if not cwd.is_dir():
        raise GuardError(f"--cwd {cwd}: not a directory")
    found = deciding_session(cwd)
    if found is None or found[0].mode is not Mode.PLAN:
        around = open_plans(cwd)  # a plan of a worktree this one lies in holds here
        found = (around[0], "") if around else found
    sys.stdout.write((found[0].mode.value if found else "no open session") + "\n")
    sys.stdout.write(f"the hooks use {describe_current_agent(cwd).line()}\n")


# ---- guard plan status ----------------------------------------------------------------------


def recent_decisions(session: Session, cwd: Path, count: int = 5) -> list[Decided]:
    """The last decisions taken while the session existed: its own event log (the MCP
    proxy) and the project's audit log (the hooks, guard check)."""
    from guard.audit.logfile import default_log_path, read
    from guard.paths import Roots
    from guard.planning import event_bus as ev

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


def show_status(session_id: str | None, cwd: Path, as_json: bool) -> None:
    """The mode, the plan file, the checklist and the last decisions of a session."""
    current = describe_current_agent(cwd) if cwd.is_dir() else None
    if session_id is None and current is not None and no_session(cwd):
        if as_json:
            print_data({"session": None, "mode": None, "agent": current.agent,
                         "why": current.reason})  # fmt: skip
        else:
            sys.stdout.write(f"session   none open here ({sessions_dir(cwd)})\n")
            sys.stdout.write(f"hooks     {current.line()}\n")
            sys.stdout.write("start:    guard plan start TITLE\n")
        return
    _show_session(resolve_session(cwd, session_id), cwd, as_json)


def _show_session(session: Session, cwd: Path, as_json: bool) -> None:
    from guard.plaintext import visible
    from guard.planning.answer import current_plan
    from guard.planning.artifact import read_plan
    from guard.planning.todos import shown_checklist

    current = describe_current_agent(cwd)
    plan: str | None = None
    shown = None
    if session.plan_path:
        try:
            plan = read_plan(session)
            shown = current_plan(session)
        except GuardError as exc:
            plan = f"(unreadable: {exc})"
    recent = recent_decisions(session, cwd)
    items, explanation, source = shown_checklist(session)
    if as_json:
        print_data(
            {
                **session.summary(),
                "agent": current.agent,
                "why": current.reason,
                "plan_exists": plan is not None,
                "plan_sha256": shown.digest if shown else None,
                "plan_lines": shown.lines if shown else None,
                "checklist": [i.model_dump(mode="json") for i in items],
                "checklist_explanation": explanation,
                "checklist_from": source,
                "exits": [d.model_dump(mode="json") for d in session.decisions[-5:]],
                "decisions": [
                    {"at": at, "action": action, "agent": agent, "tool": tool, "reason": why}
                    for at, action, agent, tool, why in recent
                ],
            }
        )
        return
    lines: list[str] = [
        f"session   {session.id} ({session.status}, owner"
        f" {session.owner.describe() if session.owner else 'user'})",
        f"mode      {session.mode.value}",
        f"hooks     {current.line()}",
    ]
    if session.plan_path:
        state = "missing: not written yet" if plan is None else f"{len(plan)} characters"
        if shown is not None:
            state = f"{shown.lines} lines, digest {shown.digest}"
        lines.append(f"plan file {session.plan_path} ({state})")
    else:
        lines.append("plan file none (the session never entered plan mode)")
    lines += [f"waiting   {p.kind} since {p.at}" for p in session.pending]
    if items:
        lines.append(f"checklist ({source})" + (f": {explanation}" if explanation else ""))
        lines += [f"  [{item.status.value}] {item.step}" for item in items]
    lines += [
        f"exit      {d.at} {d.decision} by {d.by}: {d.text or '-'}"
        for d in session.decisions[-3:]
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
