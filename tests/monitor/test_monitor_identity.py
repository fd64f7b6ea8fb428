"""The worktree is the one the baseline was taken of: held by descriptor and identity.

Attack: rename the worktree away and put a modified copy in its place (before, both
backends reported nothing and the final scan compared the copy: "23 differ, 0 new
violations"), or move it aside and delete it. Each is a violation of its own, reported
at once, and nothing guard does writes into what now stands at the path.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

from guard.monitor import Monitor
from tests.monitor.conftest import wait_for


def _root_events(m: Monitor) -> list[str]:
    return [v.event for v in m.violations if v.rule == "monitor:worktree-identity"]


def test_a_worktree_swapped_for_a_modified_copy_is_reported_at_once(
    wt: Path, start_monitor: Callable[..., Monitor]
) -> None:
    m = start_monitor(restore=True)
    aside = wt.parent / "aside"
    copy = wt.parent / "copy"
    shutil.copytree(wt, copy, symlinks=True)
    (copy / "src" / "app.py").write_text("print('swapped')\n")
    wt.rename(aside)
    copy.rename(wt)
    wait_for(lambda: "root-replaced" in _root_events(m), "the swap reported")
    v = next(v for v in m.violations if v.event == "root-replaced")
    assert v.path == str(wt) and str(aside) in v.detail, v
    assert v.action_taken.startswith("refused: nothing is written into what stands"), v
    assert any(n.event == "error" and "another directory now stands" in n.message
               for n in m.notices)
    m.stop()
    # the final scan compared the tree it holds (untouched), not the copy
    final = next(n for n in m.notices if "reconciliation (final)" in n.message)
    assert "0 differ" in final.message, final.message
    assert _root_events(m).count("root-replaced") == 1
    assert (wt / "src" / "app.py").read_text() == "print('swapped')\n"  # not guard's to undo
    assert (aside / "src" / "app.py").read_text() == "print('hi')\n"
    assert not (wt / ".openoxide" / "quarantine").exists() or not list(
        (wt / ".openoxide" / "quarantine").rglob("manifest.json"))


def test_a_worktree_moved_aside_and_deleted_is_reported_and_the_store_kept(
    wt: Path, start_monitor: Callable[..., Monitor]
) -> None:
    """The untracked notes.txt existed only in the worktree and guard's copy: with the
    tree gone, the copy is all there is, so the store stays and its path is printed."""
    m = start_monitor(restore=True)
    aside = wt.parent / "aside"
    wt.rename(aside)
    wait_for(lambda: "root-moved" in _root_events(m), "the move reported")
    v = next(v for v in m.violations if v.event == "root-moved")
    assert str(aside) in v.detail, v
    shutil.rmtree(aside)
    wait_for(lambda: "root-removed" in _root_events(m), "the removal reported")
    m.stop()
    entry = m.baseline.get(str(wt / "notes.txt")) if m.baseline else None
    assert entry is not None and entry.copy is not None
    assert Path(entry.copy).read_bytes() == b"untracked \x00\xff bytes\n"
    assert any("store is kept at " + str(m.store) in n.message for n in m.notices)
