"""Two real processes updating one session must never corrupt it nor lose an update."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

from guard.planning import Session, read_events

WORKER = textwrap.dedent(
    """
    import sys
    from guard.planning import Session, event_bus as events
    from guard.planning.checklist import PlanItem

    sid, cwd, tag, count = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    s = Session.load(sid, cwd)
    for n in range(count):
        with s.transaction() as fresh:
            fresh.notes.append(f"{tag}-{n}")
            # a large field makes a torn write visible as invalid JSON
            fresh.checklist = [PlanItem(step=f"{tag} step {n} " + "x" * 2000, status="in_progress")]
        events.publish(s, events.Violation(path=f"/{tag}/{n}", kind="write", detail="y" * 3000))
        Session.load(sid, cwd)  # reading while the other process writes must always succeed
    """
)

COUNT = 40


def test_two_processes_updating_one_session_lose_nothing(repo: Path, session: Session) -> None:
    """Attack (accidental): concurrent read-modify-write from a hook and a proxy process."""
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WORKER, session.id, str(repo), tag, str(COUNT)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for tag in ("a", "b")
    ]
    for proc in procs:
        _out, err = proc.communicate(timeout=240)
        assert proc.returncode == 0, err
    final = Session.load(session.id, repo)
    notes = final.notes
    assert len(notes) == 2 * COUNT, "an update was lost"
    for tag in ("a", "b"):
        mine = [n for n in notes if n.startswith(tag + "-")]
        assert mine == [f"{tag}-{n}" for n in range(COUNT)], "updates of one process reordered"
    json.loads(final.path.read_text())  # the file itself is intact JSON
    events = read_events(final)
    assert len(events) == 2 * COUNT
    assert {e.path for e in events if e.type == "violation"} == {  # type: ignore[union-attr]
        f"/{t}/{n}" for t in ("a", "b") for n in range(COUNT)
    }
