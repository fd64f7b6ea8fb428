"""The baseline finished while the command already runs (``guard run``): nothing lost.

The first phase (git status, copies of what git does not hold) ends before the
command starts; the second (the walk) runs alongside it. These tests hold the
second phase at its first step until the command has done its damage, so the
changes land before the walk could reach them, every time.
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from guard.decide import Guard
from guard.monitor import Monitor, Notice, gitstate, list_items, phases, quarantine_root
from guard.sandbox import roots, supervise

from .conftest import WAIT, git


def _held_progress(marker: Path, reached: threading.Event) -> object:
    """A progress callback that holds phase 2 at its start until ``marker`` exists."""

    def progress(phase: str, done: int, total: int) -> None:
        if phase == "scanning" and done == 0 and not reached.is_set():
            reached.set()
            deadline = WAIT
            step = 0.01
            while not marker.exists() and deadline > 0:
                threading.Event().wait(step)
                deadline -= step

    return progress


def _run_held(wt: Path, tmp_path: Path, script: str, *paths: Path) -> tuple[Monitor, Guard]:
    """``guard run`` of ``python -c script PATHS... MARKER`` with a restoring monitor whose
    phase 2 is held at its start until the command created MARKER: the command's changes
    land before the walk could read anything. The monitor and the policy."""
    marker = tmp_path / "damage-done"
    reached = threading.Event()
    g = Guard.load(worktree=wt)
    plan = roots.derive(g, "plan", private_tmp=False)
    made: list[Monitor] = []

    def factory() -> Monitor:
        m = Monitor(g, "plan", restore=True, background=True, reconcile_interval=None,
                    audit_path=tmp_path / "a.jsonl", progress=_held_progress(marker, reached))
        made.append(m)
        return m

    argv = [sys.executable, "-c", script, *map(str, paths), str(marker)]
    status = supervise.run(plan, argv, abi=0, allow_unconfined=True, monitor=factory,
                           quiet=True)
    assert status == 0
    assert reached.is_set(), "phase 2 never started"
    return made[0], g


def test_attack_command_changes_untracked_and_tracked_files_at_once_restore_is_exact(
    wt: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The attack: the confined command rewrites and chmods an untracked file and a
    tracked file the moment it starts, before the background baseline could read them.
    ``--restore`` puts both back exactly: bytes and mode on disk. (The command runs
    unconfined: no Landlock, and no namespaces, whose read-only view would refuse it.)"""
    from guard.sandbox import confine

    monkeypatch.setattr(confine, "_switches", frozenset({confine.NO_NAMESPACES}))
    tracked, untracked = wt / "src" / "tool.sh", wt / "notes.txt"
    before = {p: (p.read_bytes(), stat.S_IMODE(p.stat().st_mode)) for p in (tracked, untracked)}
    assert before[untracked][1] == 0o600 and before[tracked][1] & 0o100
    for i in range(1200):  # enough for the walk to matter
        (wt / "bulk").mkdir(exist_ok=True)
        (wt / "bulk" / f"{i}.txt").write_text(f"{i}\n")
    git(wt, "add", "bulk")
    git(wt, "commit", "-qm", "bulk")
    script = (
        "import os, sys\n"
        "t, u, marker = sys.argv[1:]\n"
        "open(t, 'wb').write(b'#!/bin/sh\\nrm -rf ~\\n'); os.chmod(t, 0o777)\n"
        "open(u, 'ab').write(b'agent was here'); os.chmod(u, 0o666)\n"
        "open(marker, 'w').close()\n"
    )
    m, g = _run_held(wt, tmp_path, script, tracked, untracked)
    # the command ran while phase 2 was held: the changes landed before the walk
    assert m.baseline_done.is_set()
    for p, (data, mode) in before.items():
        assert p.read_bytes() == data, f"{p.name}: bytes not restored"
        assert stat.S_IMODE(p.stat().st_mode) == mode, f"{p.name}: mode not restored"
    hits = {v.path for v in m.violations}
    assert {str(tracked), str(untracked)} <= hits
    assert not [v for v in m.violations if "restore failed" in v.action_taken]
    kept = {i.original: i.stored.read_bytes() for i in list_items(quarantine_root(g.roots))}
    assert kept[str(untracked)].endswith(b"agent was here")
    assert b"rm -rf" in kept[str(tracked)]


def test_attack_in_a_repository_with_nothing_staged_untracked_file_restored_exactly(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The attack: in a repository where nothing was ever staged (``git init``, no
    ``.git/index``), the command rewrites and chmods an untracked file the moment it
    starts. Phase 1 reads the index as empty (no ``git ls-files``: git has no index to
    list) and copies the file git status names; ``--restore`` puts it back exactly."""
    from guard.sandbox import confine

    monkeypatch.setattr(confine, "_switches", frozenset({confine.NO_NAMESPACES}))
    wt = tmp_path / "fresh"
    wt.mkdir()
    git(wt, "init", "-q")
    (wt / ".openoxide" / "plans").mkdir(parents=True)
    notes = wt / "notes.txt"
    notes.write_text("mine\n")
    notes.chmod(0o640)
    assert not (wt / ".git" / "index").exists()
    listed: list[Path] = []
    real_ls_files = gitstate._ls_files

    def ls_files(worktree: Path) -> dict[str, gitstate.IndexEntry]:
        listed.append(worktree)
        return real_ls_files(worktree)

    monkeypatch.setattr(gitstate, "_ls_files", ls_files)
    script = (
        "import os, sys\n"
        "u, marker = sys.argv[1:]\n"
        "open(u, 'wb').write(b'agent was here'); os.chmod(u, 0o666)\n"
        "open(marker, 'w').close()\n"
    )
    m, g = _run_held(wt, tmp_path, script, notes)
    assert m.baseline is not None and m.baseline.status is not None
    assert str(notes) in m.baseline.status.untracked
    assert listed == [], "git ls-files ran for a repository without an index"
    assert notes.read_bytes() == b"mine\n"
    assert stat.S_IMODE(notes.stat().st_mode) == 0o640
    assert str(notes) in {v.path for v in m.violations}
    assert not [v for v in m.violations if "restore failed" in v.action_taken]
    kept = {i.original: i.stored.read_bytes() for i in list_items(quarantine_root(g.roots))}
    assert kept[str(notes)] == b"agent was here"


def test_tracked_file_deleted_before_the_walk_comes_back_from_git(
    wt: Path, tmp_path: Path
) -> None:
    """A clean tracked file (and its directory) removed before phase 2 listed it: git's
    blob brings it back, the directory too."""
    docs = wt / "docs"
    before = {p: p.read_bytes() for p in docs.iterdir()}
    marker = tmp_path / "gone"
    reached = threading.Event()
    m = Monitor(Guard.load(worktree=wt), "plan", restore=True, background=True,
                reconcile_interval=None, audit_path=tmp_path / "a.jsonl",
                progress=_held_progress(marker, reached))
    m.start()
    try:
        assert reached.wait(WAIT) or m.baseline_done.is_set()
        subprocess.run(["rm", "-rf", str(docs)], check=True)
        marker.touch()
        assert m.baseline_done.wait(WAIT)
        assert m.settle()
    finally:
        m.stop()
    assert {p: p.read_bytes() for p in docs.iterdir()} == before


def test_change_after_the_walk_before_ready_is_an_ordinary_violation_and_restored(
    wt: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The attack: the command rewrites and chmods a clean tracked file just after phase
    2's walk has read it, before the monitor says it is ready (while its events are still
    gathered as "early"). The walk's record is from before the change, so the change is
    an ordinary violation (not ``during-baseline``, which is adopted, never undone) and
    ``--restore`` puts bytes and mode back."""
    tool = wt / "src" / "tool.sh"
    before = (tool.read_bytes(), stat.S_IMODE(tool.stat().st_mode))
    old = tool.stat().st_mtime - 60
    os.utime(tool, (old, old))
    git(wt, "update-index", "--refresh")  # a trusted (not racily clean) index entry
    entry = gitstate.read_index_entries(wt, (wt / ".git" / "index").read_bytes())
    assert entry[str(tool)].trusted
    check_blobs = phases._check_blobs
    struck = threading.Event()

    def strike_then_check(bl: object, early: set[str]) -> None:
        # the walk and its events snapshot are done; the monitor is not ready yet
        subprocess.run(["sh", "-c", 'printf "rm -rf ~\\n" > "$1"; chmod 600 "$1"', "sh",
                        str(tool)], check=True)
        struck.set()
        check_blobs(bl, early)  # type: ignore[arg-type]

    monkeypatch.setattr(phases, "_check_blobs", strike_then_check)
    m = Monitor(Guard.load(worktree=wt), "plan", restore=True, background=True,
                reconcile_interval=None, audit_path=tmp_path / "a.jsonl")
    m.start()
    try:
        assert m.baseline_done.wait(WAIT) and struck.is_set()
        assert m.settle()
    finally:
        m.stop()
    assert (tool.read_bytes(), stat.S_IMODE(tool.stat().st_mode)) == before
    hits = [v for v in m.violations if v.path == str(tool)]
    assert hits and not [v for v in hits if v.event.startswith("during-baseline")], hits
    assert not [v for v in hits if "restore failed" in v.action_taken], hits


def test_ignored_trees_are_never_copied_and_said_to_be_unrestorable(
    wt: Path, tmp_path: Path
) -> None:
    (wt / ".gitignore").write_text(".venv/\n")
    lib = wt / ".venv" / "lib"
    lib.mkdir(parents=True)
    (lib / "site.py").write_text("SECRET = 'not copied'\n")
    notices: list[Notice] = []
    m = Monitor(Guard.load(worktree=wt), "plan", restore=True, reconcile_interval=None,
                audit_path=tmp_path / "a.jsonl", on_notice=notices.append)
    m.start()
    try:
        assert m.baseline is not None
        entry = m.baseline.get(str(lib / "site.py"))
        assert entry is not None and entry.copy is None and not entry.restorable
        stored = [p.read_bytes() for p in (m.store / "objects").iterdir()]
        assert all(b"not copied" not in d for d in stored)
        assert any(n.event == "not-restorable" and ".venv" in n.message for n in notices)
        (lib / "site.py").write_text("changed\n")
        assert m.settle()
        v = [v for v in m.violations if v.path == str(lib / "site.py")]
        assert v and "cannot restore" in v[0].action_taken
    finally:
        m.stop()
    assert (lib / "site.py").read_text() == "changed\n"  # reported, left in place


@pytest.mark.parametrize("version", ["2", "3", "4"])
def test_index_read_directly_matches_git_ls_files(wt: Path, version: str) -> None:
    """The index parser against git itself: every version, an assume-unchanged and a
    skip-worktree entry, a deep path, an executable and a symlink."""
    deep = wt / "a" / "b" / "c" / ("long-name-" * 20)
    deep.mkdir(parents=True)
    (deep / "f.txt").write_text("deep\n")
    os.symlink("../src/app.py", wt / "docs" / "link")
    git(wt, "add", "-A")
    git(wt, "update-index", "--assume-unchanged", "docs/a.md")
    git(wt, "update-index", "--skip-worktree", "docs/b.md")
    git(wt, "update-index", f"--index-version={version}")
    data = (wt / ".git" / "index").read_bytes()
    parsed = gitstate.parse_index(data)
    assert parsed is not None
    root = str(wt) + "/"
    direct = {root + k: v for k, v in parsed.items()}
    assert direct == gitstate._ls_files(wt)
    assert not direct[root + "docs/a.md"].trusted and not direct[root + "docs/b.md"].trusted
    quick = gitstate.untrusted_names(data)
    if version == "4":
        assert quick is None
    else:
        assert quick == {"docs/a.md", "docs/b.md"}


def test_phase_two_never_runs_below_the_monitors_priority_so_a_busy_machine_cannot_stall_it(
    wt: Path, tmp_path: Path
) -> None:
    """The hazard: phase 2 at a lower priority (``SCHED_IDLE``, a nice value) holds the
    interpreter's lock at it. With the machine's CPUs taken by other programs the
    scheduler seldom runs it, so the event handler and the stop, which wait for that
    lock, wait with it: ``guard run`` as an unprivileged user under two busy loops took
    over 120 s to end a one-second command, and such a process cannot raise a thread's
    priority back (``RLIMIT_NICE``). The walk's thread, and what it runs, keep the
    monitor's own policy and nice value."""
    seen: list[tuple[str, int, int]] = []
    reached = threading.Event()

    def progress(phase: str, done: int, total: int) -> None:
        if phase == "scanning":
            seen.append((threading.current_thread().name, os.sched_getscheduler(0),
                         os.getpriority(os.PRIO_PROCESS, threading.get_native_id())))
            reached.set()

    own = (os.sched_getscheduler(0), os.getpriority(os.PRIO_PROCESS, threading.get_native_id()))
    m = Monitor(Guard.load(worktree=wt), "plan", restore=True, background=True,
                reconcile_interval=None, audit_path=tmp_path / "a.jsonl", progress=progress)
    m.start()
    try:
        assert reached.wait(WAIT), "phase 2 never reported progress"  # then stop: no hurry
    finally:
        m.stop()
    assert m.baseline_done.is_set()
    assert {name for name, _, _ in seen} == {"guard-baseline"}  # the background walk
    assert {(policy, nice) for _, policy, nice in seen} == {own}


def test_a_stop_never_waits_forever_for_a_stuck_thread_it_names_it_and_keeps_the_store(
    wt: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Guard always answers: a monitor thread that never ends (here phase 2, held in its
    progress callback) must not make ``stop()`` and with it ``guard run`` or ``guard
    watch`` hang. The stop waits its bound, names the thread and where it stands,
    skips the final reconciliation it cannot trust, and keeps the baseline store."""
    from guard.monitor import watcher

    monkeypatch.setattr(watcher, "STOP_WAIT", 0.5)
    held, release = threading.Event(), threading.Event()

    def progress(phase: str, done: int, total: int) -> None:
        if phase == "scanning" and not held.is_set():
            held.set()
            release.wait(WAIT)

    notices: list[Notice] = []
    m = Monitor(Guard.load(worktree=wt), "plan", restore=True, background=True,
                reconcile_interval=None, audit_path=tmp_path / "a.jsonl", progress=progress,
                on_notice=notices.append)
    m.start()
    try:
        assert held.wait(WAIT), "phase 2 never started"
        m.stop()  # returns although phase 2 is still held
        stopped = [n.message for n in notices if n.event == "stop"]
        errors = [n.message for n in notices if n.event == "error"]
        assert stopped, [n.event for n in notices]
        assert any("did not stop within 0.5 s" in e and "guard-baseline" in e
                   and "progress" in e for e in errors), errors
        assert not any(n.event == "reconcile" for n in notices)
        assert any("baseline store is kept" in e for e in errors), errors
        assert m.store.is_dir()
    finally:
        release.set()
        assert m.state.baseline_thread is not None
        m.state.baseline_thread.join(WAIT)
