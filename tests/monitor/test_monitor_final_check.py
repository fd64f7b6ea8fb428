"""The final reconciliation: the net for changes no event names.

It walks every path and compares each one's whole signature with the last consistent
state (guard/monitor/treeread.py ``differences``). The attacks: change files in ways
no watch reports (a write through a shared mapping after its descriptor is closed, a
write through a hard link from outside the worktree, a mode change, a deletion), with
no event handled at all, and hope the check at the stop misses one. With ``--restore``
the disk is checked afterwards: every file holds its first bytes and mode again.
"""

from __future__ import annotations

import mmap
import os
import stat
import subprocess
from collections.abc import Callable
from pathlib import Path

from guard.monitor import Monitor
from guard.monitor.entries import Sig
from guard.monitor.treeread import differences, walk
from tests.monitor.conftest import git

FIELDS = list(Sig._fields)


def test_attack_unseen_writes_are_undone_by_the_final_check(
    wt: Path, start_monitor: Callable[..., Monitor], tmp_path: Path
) -> None:
    """A shared mapping written after its descriptor closed, an outside hard link, a
    mode change, a deletion: with no event handled (the watch is stopped first), the
    stop's final reconciliation finds each one and --restore puts each back."""
    app, a_md, b_md, tool = (wt / "src" / "app.py", wt / "docs" / "a.md",
                             wt / "docs" / "b.md", wt / "src" / "tool.sh")
    firsts = {p: p.read_bytes() for p in (app, a_md, b_md, tool)}
    outside = tmp_path / "outside-link"
    os.link(a_md, outside)
    m = start_monitor(restore=True)
    m.stop_observer()  # nothing is reported by an event: only the final check can see it

    fd = os.open(app, os.O_RDWR)
    mapped = mmap.mmap(fd, len(firsts[app]), mmap.MAP_SHARED)
    os.close(fd)  # the descriptor is gone; the mapping still writes the file
    mapped[:5] = b"EVIL("
    mapped.flush()
    mapped.close()
    with open(outside, "r+b") as f:  # the same length: only the bytes and times move
        f.write(b"#!")
    os.utime(a_md, ns=(0, os.stat(a_md).st_mtime_ns - 10**9))  # mtime set back too
    tool.chmod(0o4755)
    b_md.unlink()
    assert app.read_bytes().startswith(b"EVIL(")

    m.stop()
    events = {v.path: v.event for v in m.violations}
    assert events.get(str(app)) == "reconcile:modified", events
    assert events.get(str(a_md)) == "reconcile:modified", events
    assert events.get(str(tool)) == "reconcile:attrib", events
    assert events.get(str(b_md)) == "reconcile:deleted", events
    for p, data in firsts.items():  # the disk: every file holds its first bytes again
        assert p.read_bytes() == data, p
    assert stat.S_IMODE(os.lstat(tool).st_mode) == 0o755


def test_differences_reports_a_change_of_any_field_of_any_kind(tmp_path: Path) -> None:
    """The inlined route for regular files compares what ``Sig.of`` does, field by
    field: a known signature off by one field (or of another kind) is a difference
    for a file, a directory, a symlink and a FIFO alike."""
    root = tmp_path / "t"
    (root / "d").mkdir(parents=True)
    (root / "d" / "f").write_text("content\n")
    (root / "x").write_text("#!/bin/sh\n")
    os.symlink("x", root / "link")
    os.mkfifo(root / "fifo")
    exact = {p: Sig.of(st, meta) for p, st, meta, _, _ in walk([root], lambda p: False)}
    assert len(exact) == 6
    last = dict(exact)
    assert differences([root], lambda p: False, None, last) == ([], 6)
    assert last == {}  # every path seen
    for path, sig in exact.items():
        for name in FIELDS:
            value = getattr(sig, name)
            if name == "kind":
                others = [sig._replace(kind=k) for k in ("file", "dir", "link", "other")
                          if k != value]
            elif isinstance(value, str):
                others = [sig._replace(**{name: value + "x"})]
            else:
                others = [sig._replace(**{name: value + 1})]
            for other in others:
                last = {**exact, path: other}
                diffs, walked = differences([root], lambda p: False, None, last)
                assert diffs == [(path, sig)], (path, name)
                assert walked == 6 and last == {}


def test_differences_in_walk_order_and_unseen_left_behind(tmp_path: Path) -> None:
    """A new directory comes before what is in it; a path gone from the disk stays in
    the mapping (not seen); an ignored subtree is neither walked nor seen."""
    root = tmp_path / "t"
    (root / "keep").mkdir(parents=True)
    (root / "keep" / "k").write_text("k\n")
    (root / "skip").mkdir()
    (root / "skip" / "s").write_text("s\n")

    def ign(p: str) -> bool:
        return p == str(root / "skip")

    last: dict[str, Sig | None] = {
        p: Sig.of(st, meta) for p, st, meta, _, _ in walk([root], ign)}
    (root / "keep" / "k").unlink()
    (root / "new" / "deeper").mkdir(parents=True)
    (root / "new" / "deeper" / "n").write_text("n\n")
    diffs, walked = differences([root], ign, None, last)
    order = [p for p, _ in diffs]
    # a directory's signature leaves its times out: only the new paths differ
    assert order == [str(root / "new"), str(root / "new" / "deeper"),
                     str(root / "new" / "deeper" / "n")]
    assert list(last) == [str(root / "keep" / "k")]
    assert walked == 5
    every: dict[str, Sig | None] = {}  # nothing known: every path, in walk()'s own order
    assert [p for p, _ in differences([root], ign, None, every)[0]] == [
        p for p, _, _, _, _ in walk([root], ign)]


def test_attack_a_path_that_became_known_during_the_walk_and_is_gone_is_reported(
    wt: Path, start_monitor: Callable[..., Monitor]
) -> None:
    """The scan compares against a snapshot; a path the monitor learns of while the
    walk runs (an allowed write handled meanwhile, here put in by hand) and that is
    gone by the end is checked on the disk too, as is a deleted baseline file."""
    m = start_monitor(final_reconcile=False)
    m.stop_observer()
    ghost = str(wt / "docs" / "ghost.md")
    (wt / "docs" / "b.md").unlink()
    real = m.ignored
    added: list[str] = []

    def ignored(path: str) -> bool:
        if not added:
            with m.lock:
                m.state.known[ghost] = Sig("file", 0o644, os.getuid(), os.getgid(), 1)
            added.append(ghost)
        return real(path)

    m.ignored = ignored  # type: ignore[method-assign]
    found = {v.path: v.event for v in m.reconcile("test")}
    assert found == {ghost: "reconcile:deleted", str(wt / "docs" / "b.md"): "reconcile:deleted"}


def test_attack_object_database_damaged_unseen_is_put_back_by_the_final_check(
    wt: Path, start_monitor: Callable[..., Monitor], tmp_path: Path
) -> None:
    """With no event handled, the final check's look at the object database (each
    fan-out directory opened once, by descriptor) finds a deleted loose object, one
    renamed over with other bytes, and a whole fan-out directory moved out of the
    worktree: each is put back, and git reads its history."""
    blobs = [git(wt, "rev-parse", f"HEAD:{p}").strip()
             for p in ("docs/a.md", "docs/b.md", "src/app.py")]
    objs = wt / ".git" / "objects"
    assert len({b[:2] for b in blobs}) == 3  # three fan-out directories (fixed content)
    firsts = {b: (objs / b[:2] / b[2:]).read_bytes() for b in blobs}
    head = git(wt, "rev-parse", "HEAD").strip()
    m = start_monitor(restore=True)
    assert m.baseline_done.wait(60)
    m.stop_observer()
    gone, rewritten, moved = blobs
    (objs / gone[:2] / gone[2:]).unlink()
    tmp = objs / rewritten[:2] / "tmp"
    tmp.write_bytes(b"not a git object")
    os.rename(tmp, objs / rewritten[:2] / rewritten[2:])
    os.rename(objs / moved[:2], tmp_path / "fanout-moved-out")

    m.stop()
    assert any(v.path == str(objs) and "restored from the object database"
               in v.action_taken for v in m.violations), m.violations
    for b, data in firsts.items():  # the disk: git's own bytes, in real directories
        assert (objs / b[:2] / b[2:]).read_bytes() == data, b
    assert git(wt, "rev-parse", "HEAD").strip() == head
    subprocess.run(["git", "-C", str(wt), "fsck", "--no-dangling"], check=True,
                   capture_output=True)
