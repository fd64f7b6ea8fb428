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
