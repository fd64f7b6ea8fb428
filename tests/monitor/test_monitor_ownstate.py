"""guard's own state is never a violation, and one monitor watches a tree at a time.

Each test runs the real thing: `guard watch --restore` as a process of its own beside
a real plan start/approve/end cycle, two real watchers, a watcher killed with SIGKILL,
and (with fanotify) a guarded process that tampers with the sessions directory.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from guard.decide import Guard
from guard.effects import GuardError
from guard.monitor import Monitor
from guard.monitor.ownstate import lock_path
from tests.monitor.conftest import WAIT, holds, wait_for
from tests.monitor.test_monitor_fanotify import _fanotify_or_skip


def _guard(wt: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "guard", *args], cwd=wt, capture_output=True,
                          text=True, timeout=WAIT, stdin=subprocess.DEVNULL)


class Watcher:
    """`guard watch --json` in ``wt``, its lines read on a thread."""

    def __init__(self, wt: Path, *extra: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "guard", "watch", "--agent", "plan", "--worktree", str(wt),
             "--json", "--reconcile-interval", "0", *extra],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.lines: list[dict[str, object]] = []
        self._t = threading.Thread(target=self._read, daemon=True)
        self._t.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(json.loads(line))

    def started(self) -> None:
        wait_for(lambda: any(r.get("event") == "start" for r in self.lines)
                 or self.proc.poll() is not None, "the watcher's start notice")
        assert self.proc.poll() is None, self.stderr()

    def violations(self) -> list[dict[str, object]]:
        return [r for r in self.lines if r.get("type") == "violation"]

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        rc = self.proc.wait(timeout=WAIT)
        self._t.join(timeout=10)
        return rc

    def stderr(self) -> str:
        return self.proc.stderr.read() if self.proc.stderr is not None else ""


def test_a_plan_cycle_beside_guard_watch_restore_is_no_violation(wt: Path) -> None:
    """Attack: none; the README's two sections together. `guard plan start`, writing the
    plan, `plan exit --approve` and `session end` beside `guard watch --restore`: guard's
    session files are neither reported nor quarantined, the session answers every step,
    and an agent write in the same time is still undone (the watcher is alive)."""
    w = Watcher(wt, "--restore")
    try:
        w.started()
        r = _guard(wt, "plan", "start", "Add caching")
        assert r.returncode == 0, r.stderr
        plan_file = Path(next(line.split(": ", 1)[1] for line in r.stdout.splitlines()
                              if line.startswith("Plan file: ")))
        session = r.stdout.split("(session ", 1)[1].split(")", 1)[0]
        plan_file.write_text("# Add caching\n\n1. add a cache\n")
        r = _guard(wt, "plan", "exit", "--approve")
        assert r.returncode == 0, r.stdout + r.stderr
        r = _guard(wt, "mode")
        assert r.returncode == 0 and r.stdout.splitlines()[0] == "build", r.stdout + r.stderr
        (wt / "src" / "evil.py").write_text("agent\n")
        r = _guard(wt, "session", "end", session)
        assert r.returncode == 0, r.stderr
        wait_for(lambda: bool(w.violations()), "the agent write reported")
        wait_for(lambda: not (wt / "src" / "evil.py").exists(), "the agent write undone")
    finally:
        rc = w.stop()
    assert rc == 1, w.stderr()
    assert [v["path"] for v in w.violations()] == [str(wt / "src" / "evil.py")]
    state = json.loads((wt / ".openoxide" / "sessions" / f"{session}.json").read_text())
    assert state["state"] == "ended"
    quarantined = [p for p in (wt / ".openoxide" / "quarantine").rglob("*")
                   if ".openoxide/sessions" in str(p) or ".openoxide/plans" in str(p)]
    assert quarantined == []


def test_a_second_watcher_is_refused_naming_the_first_and_a_dead_ones_lock_is_taken(
    wt: Path,
) -> None:
    """Attack: two `guard watch --restore` in one worktree (they used to quarantine each
    other's moves in a loop). The second refuses at once naming the first (pid, since);
    after the first is killed with SIGKILL its lock file is left behind, stale, and a new
    watcher takes it."""
    first = Watcher(wt, "--restore")
    try:
        first.started()
        second = _guard(wt, "watch", "--restore")
        assert second.returncode == 2
        err = second.stderr
        assert err.startswith("guard: error: another guard monitor is watching"), err
        assert f"pid {first.proc.pid}, since " in err and len(err.strip().splitlines()) == 1
        first.proc.send_signal(signal.SIGKILL)
        first.proc.wait(timeout=WAIT)
    finally:
        first.stop()
    lock = lock_path(Guard.load(worktree=wt).roots.data, wt)
    assert str(first.proc.pid) in lock.read_text()  # left behind by the killed holder
    third = Watcher(wt, "--restore")
    try:
        third.started()
        (wt / "docs" / "a.md").write_text("agent\n")
        a_md = wt / "docs" / "a.md"
        wait_for(lambda: holds(a_md, "# a\n"), "the write undone")
    finally:
        assert third.stop() == 1
    assert len(third.violations()) == 1  # one watcher, one report: no ping-pong
    assert lock.read_text() == ""  # released on a clean stop
    assert len(list((wt / ".openoxide" / "quarantine").rglob("manifest.json"))) == 1


def test_two_monitors_in_one_process_and_guard_run_share_the_lock(wt: Path) -> None:
    """The lock is the monitor's, not the CLI's: a second Monitor on the same tree refuses
    to start (so does `guard run`'s monitor); once the first stops, a new one starts."""
    g = Guard.load(worktree=wt)
    a = Monitor(g, "plan", reconcile_interval=None, session="first")
    a.start()
    try:
        b = Monitor(g, "plan", reconcile_interval=None, session="second")
        with pytest.raises(GuardError, match=r"another guard monitor is watching .*session first"):
            b.start()
        r = _guard(wt, "run", "--agent", "plan", "--", "true")
        assert r.returncode != 0 and "another guard monitor is watching" in r.stderr, r.stderr
    finally:
        a.stop()
    c = Monitor(g, "plan", reconcile_interval=None, session="third")
    with c:
        assert c.baseline is not None


def test_a_guarded_process_writing_guard_state_is_tampering_never_quarantined(
    wt: Path, start_monitor: Callable[..., Monitor],
) -> None:
    """Attack: the guarded process writes a session file of its own (to flip its mode).
    With fanotify the writer is known: a tampering report names it, and the file stays
    where it is (guard's state is never moved by the monitor); the same write by a
    process outside the guarded tree (a guard hook) is no report at all."""
    _fanotify_or_skip(wt)
    m = start_monitor(backend="fanotify", restore=True)
    sessions = wt / ".openoxide" / "sessions"
    sessions.mkdir()
    evil = sessions / "evil.json"
    # the writer stays alive until the report is in (a process that has exited leaves
    # nothing in /proc to say whose it was)
    script = f'read _; printf x > "{evil}"; read _; exit 0'
    guarded = subprocess.Popen(["sh", "-c", script], stdin=subprocess.PIPE)
    m.set_guarded_process(guarded.pid)
    assert guarded.stdin is not None
    try:
        guarded.stdin.write(b"go\n")
        guarded.stdin.flush()
        (sessions / "hook.json").write_text("{}\n")  # this process: not in the guarded tree
        wait_for(lambda: any(v.path == str(evil) for v in m.violations),
                 "the tampering report")
    finally:
        guarded.stdin.close()
        guarded.wait(timeout=WAIT)
    m.settle()
    assert [v.path for v in m.violations] == [str(evil)]
    v = m.violations[0]
    assert v.event.startswith("tampering:") and v.rule == "monitor:guard-state", v
    assert v.in_guarded_tree is True and "never quarantined" in v.action_taken
    assert evil.read_text() == "x" and (sessions / "hook.json").exists()
    assert not list((wt / ".openoxide" / "quarantine").rglob("manifest.json"))
    assert os.path.isdir(sessions)
