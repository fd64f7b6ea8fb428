"""``guard session resume``: the user has looked at a host session guard held."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from guard.audit.sinks import AuditLog
from guard.cli.options import HereOpt
from guard.cli.planning import session_app
from guard.decide import Guard
from guard.fleet.records import stamp
from guard.fleet.syslog import ship
from guard.hooks import missed, reconcile
from guard.paths import Roots


@session_app.command("resume")
def session_resume(
    host_session: Annotated[
        str | None,
        typer.Option("--host-session", help="Only this host session id (default: every held"
                     " session of this worktree)."),
    ] = None,
    restore: Annotated[
        bool,
        typer.Option("--restore", help="Undo what landed since the session's start first: the"
                     " current versions go to the quarantine."),
    ] = False,
    cwd: HereOpt = Path("."),
) -> None:
    """Lift the hold guard put on a host session that ran a tool without guard's decision.

    When a host (Claude Code, Codex, Gemini CLI, OpenCode) runs a tool whose pre-tool
    hook never ran, guard records `hook_missed` and, in plan mode, refuses every further
    call of that host session. Look at what landed (this command prints it), then resume;
    `--restore` first puts the worktree back as it was at the session's start.

      guard session resume                    # every held session here
      guard session resume --restore          # ...undoing what landed first
      guard session resume --host-session ID  # one host session
    """
    roots = Roots.discover(str(cwd))
    here = str(roots.worktree) if roots.worktree is not None else os.path.realpath(cwd)
    chosen = [
        (path, data) for path, data in missed.holds()
        if (host_session is None and data.get("worktree") in (here, None)
            and (data.get("worktree") is not None or data.get("cwd") == here))
        or (host_session is not None and data.get("session_id") == host_session)
    ]
    if not chosen:
        sys.stdout.write(f"no held host session for {here}: nothing to resume\n")
        return
    log = AuditLog()
    for path, data in chosen:
        host, session = str(data.get("host")), data.get("session_id")
        sid = session if isinstance(session, str) else None
        sys.stdout.write(f"{host} session {sid or '?'}: {missed.held_reason(data)}\n")
        report = reconcile.landed(roots.worktree, host, sid, data.get("cwd"))
        sys.stdout.write("  " + (reconcile.describe(report) or "no report") + "\n")
        if restore:
            start = reconcile.start_of(host, sid, data.get("cwd"))
            key = "missed-" + path.stem.removeprefix("held-")[:12]
            for line in reconcile.restore(report, start, key):
                sys.stdout.write(f"  {line}\n")
        path.unlink(missing_ok=True)
        record = {"type": "notice", "source": "cli", "event": "hook_missed_resumed",
                  "host": host, "session_id": sid, "restored": restore,
                  "message": f"the user resumed {host} session {sid} after hook_missed",
                  "landed": report}
        stamp(record, None, session=sid, host_agent=host)
        log.write(record, roots)
        _ship(record, cwd)
        sys.stdout.write("  resumed: guard decides this session's calls again\n")


def _ship(record: dict[str, Any], cwd: Path) -> None:
    """Ship the notice like every other record (a shipped chain has no hole at it)."""
    try:
        g = Guard.load(cwd=str(cwd))
    except Exception as exc:  # the record is in the local log; say why it is not shipped
        sys.stderr.write(f"guard: the notice is not shipped: {exc}\n")
        return
    why = ship(g.audit_settings, [record], g.roots.data)
    if why is not None:
        sys.stderr.write(f"guard: {why}\n")
