"""Restore without loss: violating versions go to quarantine, the baseline comes back.

Every round trip compares bytes and permission bits.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import stat
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from guard.effects import EffectKind
from guard.monitor import Monitor, get_item, list_items, quarantine_root, restore_item
from tests.monitor.conftest import git, wait_for


def guard_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "guard", *args], capture_output=True, text=True, timeout=120
    )


PAYLOAD = bytes(range(256)) * 17 + b"\r\n\x00end"


def mode(p: Path) -> int:
    return stat.S_IMODE(os.lstat(p).st_mode)


def violation_for(m: Monitor, path: Path) -> None:
    wait_for(lambda: any(v.path == str(path) for v in m.violations), f"violation for {path}")


def settled_item(m: Monitor, path: Path) -> str:
    """The quarantine id named in the (first) violation of ``path``."""
    v = next(v for v in m.violations if v.path == str(path))
    assert "moved to quarantine " in v.action_taken, v.action_taken
    return v.action_taken.split("moved to quarantine ", 1)[1].split(";")[0]


def test_modified_tracked_file_is_quarantined_and_restored_from_git(
    wt: Path, start_monitor: Callable[..., Monitor]
) -> None:
    """Attack: overwrite committed code with a binary payload and make it executable."""
    target = wt / "src" / "app.py"
    before, before_mode = target.read_bytes(), mode(target)
    m = start_monitor(restore=True)
    target.write_bytes(PAYLOAD)
    target.chmod(0o750)
    violation_for(m, target)
    wait_for(lambda: target.read_bytes() == before, "baseline content back")
    assert mode(target) == before_mode
    item = get_item(quarantine_root(m.guard.roots), settled_item(m, target))
    # the quarantined version is the agent's, byte for byte (its mode may be caught
    # before or after the chmod, so it is one of the two the agent produced)
    assert item.stored.read_bytes() == PAYLOAD
    assert mode(item.stored) in (0o644, 0o750)
    assert item.manifest["original"] == str(target)
    assert item.manifest["in_baseline"] is True
    assert "git blob" in next(v for v in m.violations if v.path == str(target)).action_taken
    assert git(wt, "status", "--porcelain", "src") == ""  # index and tree consistent again


def test_deleted_untracked_file_is_restored_from_the_baseline_copy(
    wt: Path, start_monitor: Callable[..., Monitor]
) -> None:
    """Attack: delete an uncommitted file (git could not bring it back)."""
    target = wt / "notes.txt"
    before, before_mode = target.read_bytes(), mode(target)
    m = start_monitor(restore=True)
    target.unlink()
    violation_for(m, target)
    wait_for(target.exists, "file restored")
    assert target.read_bytes() == before
    assert mode(target) == before_mode == 0o600


def test_created_file_round_trips_through_quarantine_byte_for_byte(
    wt: Path, start_monitor: Callable[..., Monitor]
) -> None:
    target = wt / "src" / "dropped.bin"
    m = start_monitor(restore=True)
    fd = os.open(target, os.O_WRONLY | os.O_CREAT, 0o640)
    os.write(fd, PAYLOAD)
    os.close(fd)
    violation_for(m, target)
    wait_for(lambda: not target.exists(), "created file moved away")
    item_id = settled_item(m, target)
    m.stop()
    item = get_item(quarantine_root(m.guard.roots), item_id)
    assert item.manifest["in_baseline"] is False
    assert item.manifest["size"] == len(PAYLOAD)
    restore_item(item)
    assert target.read_bytes() == PAYLOAD
    assert mode(target) == 0o640
    assert get_item(quarantine_root(m.guard.roots), item_id).manifest["restored_at"]


def test_deleted_directory_tree_is_restored(
    wt: Path, start_monitor: Callable[..., Monitor]
) -> None:
    """Attack: rm -rf a directory. Each deleted file is a violation and comes back."""
    src = wt / "src"
    before = {p.name: (p.read_bytes(), mode(p)) for p in src.iterdir()}
    m = start_monitor(restore=True)
    # the monitor may put a file back before rmtree reaches the directory
    with contextlib.suppress(OSError):
        shutil.rmtree(src)
    for name in before:
        violation_for(m, src / name)
    try:
        wait_for(lambda: src.is_dir() and len(list(src.iterdir())) == len(before), "tree back")
    except AssertionError as exc:
        now = sorted(p.name for p in src.iterdir()) if src.is_dir() else "no directory"
        raise AssertionError(f"{exc}: now {now}; {m.violations}; {m.notices}") from None
    assert {p.name: (p.read_bytes(), mode(p)) for p in src.iterdir()} == before


def test_directory_moved_out_of_the_worktree_is_restored_and_nothing_lost(
    wt: Path, start_monitor: Callable[..., Monitor], tmp_path: Path
) -> None:
    """Attack: mv docs/ somewhere else (inotify sees only the directory leave)."""
    docs = wt / "docs"
    before = {p.name: p.read_bytes() for p in docs.iterdir()}
    m = start_monitor(restore=True)
    os.rename(docs, tmp_path / "stolen-docs")
    violation_for(m, docs)
    wait_for(lambda: docs.is_dir() and len(list(docs.iterdir())) == len(before), "docs back")
    assert {p.name: p.read_bytes() for p in docs.iterdir()} == before
    assert {p.name: p.read_bytes() for p in (tmp_path / "stolen-docs").iterdir()} == before


def test_rename_within_the_worktree_keeps_both_versions(
    wt: Path, start_monitor: Callable[..., Monitor]
) -> None:
    """Attack: mv src/app.py src/main.py — the source comes back, the new name is quarantined."""
    src, dest = wt / "src" / "app.py", wt / "src" / "main.py"
    content = src.read_bytes()
    m = start_monitor(restore=True)
    os.rename(src, dest)
    violation_for(m, dest)
    violation_for(m, src)
    wait_for(lambda: src.exists() and not dest.exists(), "rename undone")
    assert src.read_bytes() == content
    item = get_item(quarantine_root(m.guard.roots), settled_item(m, dest))
    assert item.stored.read_bytes() == content


def test_file_over_the_size_cap_is_left_in_place_and_said_so(
    wt: Path, start_monitor: Callable[..., Monitor]
) -> None:
    """Never delete what cannot be restored: an untracked file bigger than the cap stays."""
    big = wt / "big.dat"
    big.write_bytes(b"x" * 4096)
    m = start_monitor(restore=True, size_cap=1024)
    big.write_bytes(b"y" * 4096)
    violation_for(m, big)
    v = next(v for v in m.violations if v.path == str(big))
    assert v.action_taken.startswith("left in place"), v.action_taken
    assert "size cap" in v.action_taken
    assert big.read_bytes() == b"y" * 4096


def test_plan_file_is_never_quarantined(wt: Path, start_monitor: Callable[..., Monitor]) -> None:
    m = start_monitor(restore=True)
    plan = wt / ".openoxide" / "plans" / "p.md"
    plan.write_text("# plan\n")
    marker = wt / "marker.txt"
    marker.write_text("m\n")
    violation_for(m, marker)
    assert plan.read_text() == "# plan\n"
    assert [v.path for v in m.violations] == [str(marker)]


def test_quarantine_cli_list_show_restore_force_keeps_both(
    wt: Path, start_monitor: Callable[..., Monitor]
) -> None:
    """`guard quarantine restore --force` puts the agent's version back and quarantines the
    baseline version that was in the way — nothing is lost either way."""
    target = wt / "docs" / "a.md"
    original = target.read_bytes()
    m = start_monitor(restore=True)
    target.write_bytes(b"agent version\n")
    violation_for(m, target)
    wait_for(lambda: target.read_bytes() == original, "baseline back")
    item_id = settled_item(m, target)
    m.stop()
    res = guard_cli("quarantine", "list", "--worktree", str(wt), "--json")
    assert res.returncode == 0, res.stderr
    listed = json.loads(res.stdout)["items"]
    assert [i["id"] for i in listed] == [item_id]
    res = guard_cli("quarantine", "show", item_id, "--worktree", str(wt))
    assert res.returncode == 0 and str(target) in res.stdout and "rule" in res.stdout
    res = guard_cli("quarantine", "restore", item_id, "--worktree", str(wt))
    assert res.returncode == 2 and "--force" in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1
    assert target.read_bytes() == original  # refused: nothing touched
    res = guard_cli("quarantine", "restore", item_id, "--worktree", str(wt), "--force")
    assert res.returncode == 0, res.stderr
    assert target.read_bytes() == b"agent version\n"
    items = list_items(quarantine_root(m.guard.roots))
    displaced = [i for i in items if i.manifest.get("restore_of") == item_id]
    assert len(displaced) == 1 and displaced[0].stored.read_bytes() == original
    res = guard_cli("quarantine", "restore", item_id, "--worktree", str(wt))
    assert res.returncode == 2 and "already restored" in res.stderr


def test_quarantine_show_unknown_id_is_one_clear_error(wt: Path) -> None:
    res = guard_cli("quarantine", "show", "nope/123", "--worktree", str(wt))
    assert res.returncode == 2
    assert res.stderr.startswith("guard: error: no quarantine item 'nope/123'")
    assert len(res.stderr.strip().splitlines()) == 1


def test_quarantine_keeps_a_file_named_manifest_json(
    wt: Path, start_monitor: Callable[..., Monitor]
) -> None:
    """A worktree file called manifest.json must not overwrite the item's manifest."""
    target = wt / "manifest.json"
    m = start_monitor(restore=True)
    target.write_text('{"name": "ext"}\n')
    violation_for(m, target)
    item = get_item(quarantine_root(m.guard.roots), settled_item(m, target))
    assert item.stored.read_text() == '{"name": "ext"}\n'
    assert item.manifest["original"] == str(target)


def test_chown_is_undone(wt: Path, start_monitor: Callable[..., Monitor]) -> None:
    """Attack: hand a file to another user (needs root, as the tests run in CI)."""
    import pytest

    if os.geteuid() != 0:
        pytest.skip("chown to another user needs root")
    target = wt / "docs" / "b.md"
    owner = os.lstat(target).st_uid
    m = start_monitor(restore=True)
    os.chown(target, 4242, 4242)
    violation_for(m, target)
    wait_for(lambda: os.lstat(target).st_uid == owner, "owner restored")
    assert target.read_text() == "# b\n"


def test_attack_chmod_landing_between_the_restore_and_its_read_back_is_undone_too(
    wt: Path, start_monitor: Callable[..., Monitor], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Attack: chmod src/ to 0700, and again in the instant after guard put its mode
    back but before guard read the result (the window is forced here by chmod-ing from
    inside guard's restore). Read back, the agent's mode would pass for the restored
    state and its own event would find nothing to do. src/ must end at its mode."""
    from guard.monitor.baseline import Baseline

    src = wt / "src"
    before = mode(src)
    original = Baseline._attrs
    raced: list[str] = []

    def attrs_then_agent(self: Baseline, e: object, pfd: int, name: str, fd: int) -> bool:
        owned = original(self, e, pfd, name, fd)  # type: ignore[arg-type]
        if name == "src" and not raced:
            raced.append(name)
            os.chmod(src, 0o700)  # the agent's second chmod, in the window
        return owned

    monkeypatch.setattr(Baseline, "_attrs", attrs_then_agent)
    m = start_monitor(restore=True)
    src.chmod(0o700)
    wait_for(lambda: raced and mode(src) == before, "src/ mode restored after the raced chmod")
    assert m.settle()
    assert mode(src) == before
    assert sum(v.path == str(src) for v in m.violations) >= 2, m.violations


def test_a_file_made_again_after_its_first_version_was_gone_is_quarantined(
    wt: Path, start_monitor: Callable[..., Monitor]
) -> None:
    """Attack: create a file and remove it before the monitor handles its event (on a busy
    machine the restore then finds nothing to move), then create it again at the same path.
    The second version is a new change like any other: moved into quarantine, never left
    in the tree because the first one was already reported."""
    target = wt / "src" / "again.txt"
    m = start_monitor(restore=True)
    # the first version's event, handled once the file is gone
    first = m.change(str(target), EffectKind.WRITE, "created")
    assert first is not None and first.action_taken.startswith("nothing to restore"), first
    target.write_text("agent\n")
    assert m.settle()
    assert not target.exists(), "the second version was left in the tree"
    assert any(v.path == str(target) and "moved to quarantine" in v.action_taken
               for v in m.violations), [v.action_taken for v in m.violations]
