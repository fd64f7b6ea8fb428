"""The worktree is the one the baseline was taken of: held by descriptor and identity.

Attack: rename the worktree away and put a modified copy in its place (before, both
backends reported nothing and the final scan compared the copy), or move it aside and
delete it. Each is a violation of its own, reported at once; with `--restore` it is
undone: the tree held by descriptor is put back at its path (the copy into quarantine),
or, when it was deleted, recreated at its path with every path of the baseline.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from guard.monitor import Monitor, list_items, quarantine_root
from tests.monitor.conftest import git, holds, wait_for


def _root_events(m: Monitor) -> list[str]:
    return [v.event for v in m.violations if v.rule == "monitor:worktree-identity"]


def test_attack_worktree_swapped_for_a_modified_copy_is_put_back(
    wt: Path, start_monitor: Callable[..., Monitor]
) -> None:
    m = start_monitor(restore=True)
    aside = wt.parent / "aside"
    copy = wt.parent / "copy"
    shutil.copytree(wt, copy, symlinks=True)
    (copy / "src" / "app.py").write_text("print('swapped')\n")
    (copy / "src" / "app.py").chmod(0o4755)
    wt.rename(aside)
    copy.rename(wt)
    wait_for(lambda: "root-replaced" in _root_events(m), "the swap reported")
    wait_for(lambda: not aside.exists(), "the watched tree put back")
    v = next(v for v in m.violations if v.event == "root-replaced")
    assert v.path == str(wt) and str(aside) in v.detail, v
    assert "the watched tree was put back from" in v.action_taken, v
    assert m.settle()
    m.stop()
    assert _root_events(m).count("root-replaced") == 1
    app = wt / "src" / "app.py"
    assert app.read_text() == "print('hi')\n"
    assert not os.stat(app).st_mode & (stat.S_ISUID | 0o111)
    items = [i for i in list_items(quarantine_root(m.guard.roots)) if i.original == str(aside)]
    assert items and items[0].manifest["kind"] == "dir", v
    assert (items[0].stored / "src" / "app.py").read_text() == "print('swapped')\n"
    assert git(wt, "status", "--porcelain", "--untracked-files=no") == ""


def test_attack_worktree_moved_away_is_moved_back(
    wt: Path, start_monitor: Callable[..., Monitor]
) -> None:
    m = start_monitor(restore=True)
    aside = wt.parent / "aside"
    wt.rename(aside)
    wait_for(lambda: "root-moved" in _root_events(m), "the move reported")
    wait_for(lambda: wt.is_dir() and not aside.exists(), "the watched tree moved back")
    assert m.settle()
    m.stop()
    assert (wt / "notes.txt").read_bytes() == b"untracked \x00\xff bytes\n"
    assert not m.store.exists()  # everything is back: the store is removed


def test_attack_worktree_moved_aside_and_deleted_loses_nothing(
    wt: Path, start_monitor: Callable[..., Monitor]
) -> None:
    """Attack: `mv wt aside && rm -rf aside`, with an untracked NOTES.txt that existed
    nowhere else. The tree is recreated at its path; git's objects come back from their
    snapshot, .git's files and NOTES.txt from the copies the monitor holds, the tracked
    files from git: nothing is lost, and git reads the same history."""
    (wt / "NOTES.txt").write_bytes(b"only here \x00 notes\n")
    head = git(wt, "rev-parse", "HEAD").strip()
    m = start_monitor(restore=True)
    assert m.baseline_done.wait(60)
    aside = wt.parent / "aside"
    # the monitor busy meanwhile (its locks held): it finds the tree gone, never half
    # deleted (that it would move back while rm -rf runs, and rm -rf -f exits 0 anyway)
    with m.state.roots_lock, m.lock:
        subprocess.run(["sh", "-c", f'mv "{wt}" "{aside}" && rm -rf "{aside}"'], check=True)
    wait_for(lambda: holds(wt / "NOTES.txt", b"only here \x00 notes\n")
             and holds(wt / "src" / "app.py", "print('hi')\n"), "the worktree restored")
    assert m.settle()
    m.stop()
    assert (wt / "notes.txt").read_bytes() == b"untracked \x00\xff bytes\n"
    assert (wt / "src" / "tool.sh").read_text() == "#!/bin/sh\necho tool\n"
    assert os.stat(wt / "src" / "tool.sh").st_mode & 0o100
    assert git(wt, "rev-parse", "HEAD").strip() == head
    assert git(wt, "status", "--porcelain", "--untracked-files=no") == ""
    fsck = subprocess.run(["git", "-C", str(wt), "fsck", "--full"], capture_output=True)
    assert fsck.returncode == 0, fsck.stderr
    v = next(v for v in m.violations if v.rule == "monitor:worktree-identity"
             and "recreated" in v.action_taken)
    assert v.event in ("root-removed", "root-moved"), v


def _swap(wt: Path, plan: bytes) -> Path:
    """The worktree renamed away and a modified copy put in its place; the agent then
    writes its plan (in policy) into the copy, which now stands at the path."""
    aside, copy = wt.parent / "aside", wt.parent / "copy"
    shutil.copytree(wt, copy, symlinks=True)
    (copy / "src" / "app.py").write_text("print('swapped')\n")
    wt.rename(aside)
    copy.rename(wt)
    (wt / ".openoxide" / "plans" / "plan.md").write_bytes(plan)
    return aside


@pytest.mark.parametrize("backend", ["fanotify", "inotify"])
def test_swapped_worktree_sync_answers_and_settle_undoes_it_and_keeps_the_plan(
    wt: Path, start_monitor: Callable[..., Monitor], backend: str
) -> None:
    """Attack: the swap, then asking the monitor for a consistent state at once. sync
    never drops its marker where no watch sees it (fanotify: at the path, its mark
    covers the copy; inotify: no marker while the copy stands there, and otherwise
    through the directory held in the watched tree), so it answers instead of waiting
    out its timeout; settle checks the roots itself, so when it returns the swap is
    undone — and the plan the agent wrote meanwhile is in place."""
    m = start_monitor(restore=True, backend=backend)
    assert m.baseline_done.wait(60)
    assert m.backend is not None and m.backend.backend == backend
    aside = _swap(wt, b"# the plan, written during the swap\n")
    # a marker no watch sees would wait the whole hour; inotify answers False at once
    # while the copy (which no watch covers) stands at the path, True once it is undone
    assert m.sync(3600) or backend == "inotify", m.notices
    assert m.settle(3600)
    assert (wt / "src" / "app.py").read_text() == "print('hi')\n"  # no wait_for: settled
    assert not aside.exists()
    assert (wt / ".openoxide" / "plans" / "plan.md").read_bytes() == (
        b"# the plan, written during the swap\n")
    # the tree put back is watched under its own name again (fanotify names directories
    # from a cache a swap's renames rewrite): a write there is seen as an event and
    # undone, with no scan (none runs unless asked) to find it instead
    (wt / "docs" / "a.md").write_text("# after the swap\n")
    wait_for(lambda: any(v.path == str(wt / "docs" / "a.md") for v in m.violations)
             and holds(wt / "docs" / "a.md", "# a\n"), "the write after the swap undone")
    m.stop()
    assert not [n for n in m.notices if n.event == "sync-timeout"], m.notices
    v = next(v for v in m.violations if v.event == "root-replaced")
    assert "plan files written in it are in place" in v.action_taken, v
    items = [i for i in list_items(quarantine_root(m.guard.roots)) if i.original == str(aside)]
    assert items and (items[0].stored / "src" / "app.py").read_text() == "print('swapped')\n"


def _recreated(m: Monitor) -> bool:
    return any(v.rule == "monitor:worktree-identity" and "recreated at" in v.action_taken
               for v in m.violations)


@pytest.mark.parametrize("backend", ["fanotify", "inotify"])
def test_recreated_worktree_sync_answers_at_once(
    wt: Path, start_monitor: Callable[..., Monitor], backend: str
) -> None:
    """Attack: the worktree moved aside and deleted, then a consistent state asked for.
    inotify's watches went with the removed tree: sync knows no watch covers the tree
    now at the path and answers False at once (the scan stands in, every 5 s), never
    waiting for a marker nothing can see; fanotify's mark covers the new tree."""
    m = start_monitor(restore=True, backend=backend)
    assert m.baseline_done.wait(60)
    aside = wt.parent / "aside"
    # the monitor busy meanwhile (its locks held): it finds the tree gone, not half
    # deleted (see test_attack_worktree_moved_aside_and_deleted_loses_nothing)
    with m.state.roots_lock, m.lock:
        subprocess.run(["sh", "-c", f'mv "{wt}" "{aside}" && rm -rf "{aside}"'], check=True)
    assert m.settle(3600)
    assert _recreated(m), m.violations
    assert holds(wt / "src" / "app.py", "print('hi')\n")
    assert m.sync(3600) is (backend == "fanotify")  # inotify: False at once, not in an hour
    assert m.degraded is (backend == "inotify"), (m.violations, m.notices)
    (wt / "docs" / "a.md").write_text("# changed\n")
    assert m.settle(3600)
    assert (wt / "docs" / "a.md").read_text() == "# a\n"
    m.stop()
    assert not [n for n in m.notices if n.event == "sync-timeout"], m.notices


@pytest.mark.parametrize("backend", ["fanotify", "inotify"])
def test_attack_worktree_swapped_twice_in_a_row_is_put_back_twice(
    wt: Path, start_monitor: Callable[..., Monitor], backend: str
) -> None:
    """Attack: the swap again, as soon as the first was undone, through the same names.
    The second is a swap of its own, not the first one reported again (and left alone)."""
    m = start_monitor(restore=True, backend=backend)
    assert m.baseline_done.wait(60)
    for attempt in range(2):
        aside = _swap(wt, b"# plan %d\n" % attempt)
        m.check_roots()  # undone now (the monitor also checks twice a second)
        assert not aside.exists()
        assert (wt / "src" / "app.py").read_text() == "print('hi')\n"
    assert m.settle(3600)
    m.stop()
    assert _root_events(m).count("root-replaced") == 2, m.violations
    assert (wt / ".openoxide" / "plans" / "plan.md").read_bytes() == b"# plan 1\n"
