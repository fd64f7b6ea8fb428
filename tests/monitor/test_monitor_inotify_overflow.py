"""The overflow attack on the inotify backend (the one an unprivileged user's monitor
uses): the agent drowns its own changes in a flood of events while phase 2 of the
baseline has not reached them, hoping the walk takes the states it left as the
baseline.

The real inotify reader (watchdog's, guard's subclass) is held before its next read
until the flood is in the kernel's queue, so that the queue overflows every time;
phase 2 is held at its start the same way. No timing is asserted.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from guard.decide import Guard
from guard.monitor import Monitor
from guard.monitor.inotify import _FD
from tests.monitor.conftest import WAIT, git, wait_for
from tests.monitor.test_monitor_background import _held_progress
from tests.monitor.test_monitor_fanscale import damage_script


class _Gate:
    """Holds guard's inotify reader before its next read while closed."""

    def __init__(self) -> None:
        self.open = threading.Event()
        self.open.set()
        self.waiting = threading.Event()


@pytest.fixture
def gate(monkeypatch: pytest.MonkeyPatch) -> Iterator[_Gate]:
    g = _Gate()
    read = _FD._read_event_buffer

    def held(self: _FD, *args: Any, **kw: Any) -> bytes:
        if not g.open.is_set():
            g.waiting.set()
            g.open.wait(WAIT * 2)
        return read(self, *args, **kw)

    monkeypatch.setattr(_FD, "_read_event_buffer", held)
    yield g
    g.open.set()


def _queue_limit() -> int:
    return int(Path("/proc/sys/fs/inotify/max_queued_events").read_text())


def test_attack_inotify_events_drowned_in_an_overflow_while_phase_two_waits_changes_still_undone(
    wt: Path, tmp_path: Path, gate: _Gate
) -> None:
    """The attack, on inotify: while phase 2 has not read the tree yet, the agent makes
    one change (the reader, held, stops before its next read), floods the queue with
    create/close/delete of a scratch file in the worktree until the kernel's inotify
    queue overflows, then rewrites a clean tracked file (same size, its mtime set back),
    clears a tracked script's executable bit and creates a file. None of it may become
    the baseline. Checked on the disk after --restore: bytes and modes back, the new
    files gone into quarantine, the scratch file not left behind."""
    app, tool, new = wt / "src" / "app.py", wt / "src" / "tool.sh", wt / "src" / "new.py"
    first = wt / "first.txt"
    old = app.stat().st_mtime - 60
    for f in (app, tool):
        os.utime(f, (old, old))
    git(wt, "update-index", "--refresh")  # trusted index entries (not racily clean)
    before = {f: (f.read_bytes(), f.stat().st_mode & 0o777) for f in (app, tool)}
    rounds = _queue_limit() // 3 + 2000  # three events a round: past the queue's limit
    marker = tmp_path / "damage-done"
    reached = threading.Event()
    m = Monitor(Guard.load(worktree=wt), "plan", restore=True, background=True,
                reconcile_interval=None, audit_path=tmp_path / "a.jsonl",
                progress=_held_progress(marker, reached), backend="inotify")
    m.start()
    try:
        assert m.backend is not None and m.backend.backend == "inotify", m.backend
        wait_for(reached.is_set, "phase 2 held at its start")
        gate.open.clear()
        # the reader may be waiting inside a read already: this event ends that read,
        # and the next one waits at the gate
        first.write_text("agent\n")
        wait_for(gate.waiting.is_set, "the inotify reader held before its next read")
        agent = f"""
import os
scratch = {str(wt / "flood.tmp")!r}
for i in range({rounds}):
    os.close(os.open(scratch, os.O_CREAT | os.O_WRONLY))
    os.unlink(scratch)
""" + damage_script(app, tool, new)
        subprocess.run([sys.executable, "-c", agent], check=True)
        gate.open.set()
        marker.touch()
        assert m.baseline_done.wait(WAIT)
        assert m.settle(WAIT)
    finally:
        gate.open.set()
        m.stop()
    assert m.overflows >= 1, "the flood did not overflow the queue: the test proves nothing"
    assert {f: (f.read_bytes(), f.stat().st_mode & 0o777) for f in (app, tool)} == before
    assert not new.exists() and not first.exists() and not (wt / "flood.tmp").exists()
    hit = {v.path for v in m.violations}
    assert {str(app), str(tool), str(new)} <= hit, m.violations
