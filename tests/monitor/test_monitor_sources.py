"""Every restore source is verified: git objects, the copy store, filtered files.

The agent can write `.git/objects` (always) and guard's store (under `guard watch`). Each
test rewrites or removes a source for real, makes the monitor restore from it, and
checks the disk afterwards: the original bytes, or "original unavailable" with the
agent's version kept in quarantine -- never the attacker's bytes.
"""

from __future__ import annotations

import os
import zlib
from collections.abc import Callable
from pathlib import Path

import pytest

from guard.monitor import Monitor, get_item, quarantine_root
from tests.monitor.conftest import git, wait_for


def _object(wt: Path, path: str) -> Path:
    blob = git(wt, "rev-parse", f":{path}").strip()
    return wt / ".git" / "objects" / blob[:2] / blob[2:]


def _rewrite_object(obj: Path, content: bytes) -> None:
    """What an agent does to poison a restore: the object keeps its name, not its bytes."""
    os.chmod(obj, 0o644)
    obj.write_bytes(zlib.compress(b"blob %d\0" % len(content) + content))


def _item_bytes(m: Monitor, path: Path) -> bytes:
    v = next(v for v in m.violations if v.path == str(path))
    item = v.action_taken.split("moved to quarantine ", 1)[1].split(";")[0]
    return get_item(quarantine_root(m.guard.roots), item).stored.read_bytes()


def test_a_rewritten_git_object_is_a_violation_and_never_restored(
    wt: Path, start_monitor: Callable[..., Monitor]
) -> None:
    """Attack: rewrite the loose object of src/app.py, then overwrite src/app.py. The
    object change is reported at once and the file is copied while it still holds its
    blob, so the restore writes the original, not the object's new bytes."""
    target = wt / "src" / "app.py"
    original = target.read_bytes()
    obj = _object(wt, "src/app.py")
    m = start_monitor(restore=True)
    _rewrite_object(obj, b"print('poisoned')\n")
    wait_for(lambda: any(v.path == str(obj) for v in m.violations), "the object's violation")
    target.write_text("agent\n")
    wait_for(lambda: any(v.path == str(target) for v in m.violations), "the file's violation")
    m.settle()
    assert target.read_bytes() == original
    ov = next(v for v in m.violations if v.path == str(obj))
    assert "src/app.py" in ov.detail and "verified copy" in ov.action_taken, ov
    fv = next(v for v in m.violations if v.path == str(target))
    assert "the baseline copy (SHA-256 checked)" in fv.action_taken, fv.action_taken
    assert _item_bytes(m, target) == b"agent\n"


def test_a_poisoned_object_with_no_clean_copy_left_is_original_unavailable(
    wt: Path, start_monitor: Callable[..., Monitor]
) -> None:
    """Attack: keep src/app.py open for writing (the restore waits for the writer), poison
    its object meanwhile, then close. Nothing holds the original any more: the restore
    refuses the object's bytes, says so, and the agent's version is in quarantine."""
    target = wt / "src" / "app.py"
    obj = _object(wt, "src/app.py")
    m = start_monitor(restore=True)
    with open(target, "w") as f:
        f.write("agent\n")
        f.flush()
        wait_for(lambda: str(target) in m.state.pending, "the write waiting to settle")
        _rewrite_object(obj, b"print('poisoned')\n")
        wait_for(lambda: any(v.path == str(obj) for v in m.violations), "object violation")
    wait_for(lambda: any(v.path == str(target) for v in m.violations), "the file's violation")
    m.settle()
    fv = next(v for v in m.violations if v.path == str(target))
    assert "original unavailable: its source was changed" in fv.action_taken, fv.action_taken
    assert "no longer holds its blob" in fv.action_taken
    assert not target.exists() or b"poisoned" not in target.read_bytes()
    assert _item_bytes(m, target) == b"agent\n"
    assert any(n.event == "error" and "original unavailable" in n.message for n in m.notices)
    # not left dirty: the next write there is reported (and quarantined) again
    before = len(m.violations)
    target.write_text("agent again\n")
    wait_for(lambda: len([v for v in m.violations[before:] if v.path == str(target)]) == 1,
             "the next write reported")


def test_attack_deleted_git_object_is_put_back_and_the_file_restored_from_it(
    wt: Path, start_monitor: Callable[..., Monitor]
) -> None:
    """Attack: delete src/app.py's loose object while its write waits to settle (before
    the monitor can copy the file). The object comes back from the object database
    snapshot (verified by its id), and the file is restored from it."""
    target = wt / "src" / "app.py"
    original = target.read_bytes()
    obj = _object(wt, "src/app.py")
    m = start_monitor(restore=True)
    assert m.baseline_done.wait(60)
    with open(target, "w") as f:  # the file's bytes go first, under the monitor's eyes
        f.write("agent\n")
        f.flush()
        wait_for(lambda: str(target) in m.state.pending, "the write waiting to settle")
        obj.unlink()
    wait_for(lambda: any(v.path == str(target) for v in m.violations), "the file's violation")
    m.settle()
    fv = next(v for v in m.violations if v.path == str(target))
    assert "restored from git blob" in fv.action_taken, fv.action_taken
    assert target.read_bytes() == original
    assert obj.is_file() and git(wt, "cat-file", "-p", ":src/app.py").encode() == original
    assert _item_bytes(m, target) == b"agent\n"


def test_attack_baseline_store_poisoned_restores_the_original_from_the_held_copy(
    wt: Path, start_monitor: Callable[..., Monitor]
) -> None:
    """Attack (possible under `guard watch`, where the agent runs as the user): overwrite
    guard's copy of the untracked notes.txt on disk, then overwrite notes.txt. The copy
    on disk fails its SHA-256 check and is never the only source: the copy the monitor
    holds in a file without a name puts the original back."""
    target = wt / "notes.txt"
    original = target.read_bytes()
    m = start_monitor(restore=True)
    assert m.baseline is not None
    entry = m.baseline.get(str(target))
    assert entry is not None and entry.copy is not None and entry.sha256 is not None
    Path(entry.copy).write_bytes(b"attacker's bytes\n")
    target.write_text("agent\n")
    wait_for(lambda: any(v.path == str(target) for v in m.violations), "the violation")
    m.settle()
    v = next(v for v in m.violations if v.path == str(target))
    assert "restored from the baseline copy (SHA-256 checked)" in v.action_taken, v
    assert target.read_bytes() == original
    assert _item_bytes(m, target) == b"agent\n"
    m.stop()  # everything was put back: the store is removed
    assert not m.store.exists()
    assert target.read_bytes() == original


def _commit_filtered(wt: Path, attributes: str, name: str, content: bytes) -> None:
    (wt / ".gitattributes").write_text(attributes)
    (wt / name).write_bytes(content)
    git(wt, "add", ".gitattributes", name)
    git(wt, "commit", "-qm", "filtered")
    # checked out again, as a clone would have it (smudge and eol applied)
    (wt / name).unlink()
    git(wt, "checkout", "--", name)
    assert git(wt, "status", "--porcelain", name) == ""


def test_an_eol_converted_file_is_restored_with_its_working_tree_bytes(
    wt: Path, start_monitor: Callable[..., Monitor]
) -> None:
    """A file git checks out with CRLF (`text eol=crlf`) holds bytes its blob does not:
    the restore brings back the CRLF file git status calls clean, not the LF blob."""
    _commit_filtered(wt, "*.txt text eol=crlf\n", "crlf.txt", b"one\ntwo\n")
    target = wt / "crlf.txt"
    assert target.read_bytes() == b"one\r\ntwo\r\n"
    m = start_monitor(restore=True)
    target.write_text("agent\n")
    wait_for(lambda: any(v.path == str(target) for v in m.violations), "the violation")
    m.settle()
    assert target.read_bytes() == b"one\r\ntwo\r\n"
    assert git(wt, "status", "--porcelain", "crlf.txt") == ""


def test_a_file_converted_by_a_nested_gitattributes_is_restored_with_its_bytes(
    wt: Path, start_monitor: Callable[..., Monitor]
) -> None:
    """The attributes come from a tracked ``sub/.gitattributes`` (none at the top, none
    in .git/info): the index names it, so the baseline still asks git which files convert
    and copies the CRLF bytes; the restore brings them back."""
    (wt / "sub").mkdir()
    (wt / "sub" / ".gitattributes").write_text("*.txt text eol=crlf\n")
    target = wt / "sub" / "crlf.txt"
    target.write_bytes(b"one\ntwo\n")
    git(wt, "add", "sub")
    git(wt, "commit", "-qm", "nested attributes")
    target.unlink()  # checked out again, as a clone would have it
    git(wt, "checkout", "--", "sub/crlf.txt")
    assert target.read_bytes() == b"one\r\ntwo\r\n"
    assert not (wt / ".gitattributes").exists()
    assert git(wt, "status", "--porcelain", "sub") == ""
    m = start_monitor(restore=True)
    target.write_text("agent\n")
    wait_for(lambda: any(v.path == str(target) for v in m.violations), "the violation")
    m.settle()
    assert target.read_bytes() == b"one\r\ntwo\r\n"


def test_the_index_tells_when_no_gitattributes_is_tracked(wt: Path) -> None:
    """The shortcut that spares a git command: only an index that provably names no
    .gitattributes says False; one that names it, or one git must read, says None."""
    from guard.monitor import gitstate

    index = (wt / ".git" / "index").read_bytes()
    assert b".gitattributes" not in index
    assert gitstate._tracked_attributes(index) is False
    assert gitstate._tracked_attributes(None) is None
    assert gitstate._tracked_attributes(b"DIRC\0\0\0\x04" + index[8:]) is None  # version 4
    (wt / "deep" / "er").mkdir(parents=True)
    (wt / "deep" / "er" / ".gitattributes").write_text("* text\n")
    git(wt, "add", "deep")
    index = (wt / ".git" / "index").read_bytes()
    assert gitstate._tracked_attributes(index) is None
    assert gitstate.converted_paths(wt, index) == gitstate.converted_paths(wt)


def test_a_clean_filtered_notebook_is_restored_with_its_outputs(
    wt: Path, start_monitor: Callable[..., Monitor]
) -> None:
    """An nbstripout-style clean filter (a real script git runs) strips outputs from what
    is committed; the working tree keeps them and git calls the file clean. Restoring
    from the blob would lose the outputs; the restore brings back the file as it was."""
    strip = wt.parent / "strip-outputs.sh"
    strip.write_text("#!/bin/sh\ngrep -v '\"output\"'\nexit 0\n")
    strip.chmod(0o755)
    git(wt, "config", "filter.nbstrip.clean", str(strip))
    git(wt, "config", "filter.nbstrip.smudge", "cat")
    notebook = b'{"cells": [\n  {"source": "1+1"},\n  {"output": "2"}\n]}\n'
    (wt / ".gitattributes").write_text("*.ipynb filter=nbstrip\n")
    target = wt / "a.ipynb"
    target.write_bytes(notebook)
    git(wt, "add", ".gitattributes", "a.ipynb")
    git(wt, "commit", "-qm", "notebook")
    assert b'"output"' not in git(wt, "show", "HEAD:a.ipynb").encode()
    assert git(wt, "status", "--porcelain", "a.ipynb") == ""
    m = start_monitor(restore=True)
    target.write_text("{}\n")
    wait_for(lambda: any(v.path == str(target) for v in m.violations), "the violation")
    m.settle()
    assert target.read_bytes() == notebook
    v = next(v for v in m.violations if v.path == str(target))
    assert "the baseline copy (SHA-256 checked)" in v.action_taken, v.action_taken


def test_attack_object_database_gone_while_the_file_is_restored_reads_the_snapshot(
    wt: Path, start_monitor: Callable[..., Monitor]
) -> None:
    """Attack: while src/app.py's write waits to settle, move `.git/objects` away and put
    a file in its place, so that neither git nor the monitor's repair can read or put back
    the repository's objects when the file is restored. The restore does not depend on
    them: src/app.py's blob is read from the object database snapshot taken at baseline,
    verified by its id, and the original is back."""
    target = wt / "src" / "app.py"
    original = target.read_bytes()
    objects = wt / ".git" / "objects"
    m = start_monitor(restore=True)
    assert m.baseline_done.wait(60)
    with open(target, "w") as f:
        f.write("agent\n")
        f.flush()
        wait_for(lambda: str(target) in m.state.pending, "the write waiting to settle")
        objects.rename(wt / ".git" / "objects.gone")  # at once: nothing to repair meanwhile
        objects.write_text("not an object database\n")
    wait_for(lambda: any(v.path == str(target) for v in m.violations), "the file's violation")
    m.settle()
    fv = next(v for v in m.violations if v.path == str(target))
    assert "restored from git blob" in fv.action_taken, fv.action_taken
    assert target.read_bytes() == original
    assert _item_bytes(m, target) == b"agent\n"


def test_a_blob_neither_git_nor_the_snapshot_holds_is_tried_a_bounded_number_of_times(
    wt: Path, start_monitor: Callable[..., Monitor]
) -> None:
    """Attack: while src/app.py's write waits to settle, poison its object through its
    inode (the hard-linked snapshot shares it). No source holds the blob: each scan tries the
    restore again (the database may still be being put back), BLOB_ATTEMPTS times in
    all, each said; then it is left missing and reported so, and scans stop trying."""
    from guard.monitor.restoring import BLOB_ATTEMPTS

    target = wt / "src" / "app.py"
    obj = _object(wt, "src/app.py")
    m = start_monitor(restore=True)
    assert m.baseline_done.wait(60)
    snap = next(iter(m.objects.values()))
    if snap.counts.get("hard link", 0) != len(snap.files):
        pytest.skip("the snapshot holds its own copies here (reflink or copy): it stays clean")
    with open(target, "w") as f:  # no clean copy of the file is taken meanwhile
        f.write("agent\n")
        f.flush()
        wait_for(lambda: str(target) in m.state.pending, "the write waiting to settle")
        _rewrite_object(obj, b"print('poisoned')\n")
        wait_for(lambda: any(v.path == str(obj) for v in m.violations), "object violation")
    wait_for(lambda: any(v.path == str(target) for v in m.violations), "the file's violation")
    assert m.settle()
    tries = [v.action_taken for v in m.violations if v.path == str(target)]
    assert len(tries) == BLOB_ATTEMPTS, tries
    assert all("original unavailable" in t for t in tries), tries
    assert f"attempt 1 of {BLOB_ATTEMPTS}; tried again at the next scan" in tries[0]
    assert f"attempt {BLOB_ATTEMPTS} of {BLOB_ATTEMPTS}; not tried again" in tries[-1]
    assert not target.exists()
    assert _item_bytes(m, target) == b"agent\n"
    m.reconcile("again")
    assert len([v for v in m.violations if v.path == str(target)]) == BLOB_ATTEMPTS


def test_the_configuration_read_beside_git_status_answers_as_the_one_read_alone(
    wt: Path
) -> None:
    """Phase 1 starts its ``git config`` read beside ``git status`` (gitstate.config_start):
    with ``core.autocrlf`` set, every tracked file may convert, and that read says so as the
    one converted_paths runs itself does; with nothing set, neither names a file."""
    from guard.monitor import gitstate

    index = (wt / ".git" / "index").read_bytes()
    git(wt, "config", "core.autocrlf", "true")
    alone = gitstate.converted_paths(wt, index)
    assert str(wt / "src" / "app.py") in alone
    assert gitstate.converted_paths(wt, index, False, gitstate.config_start(wt)) == alone
    git(wt, "config", "--unset", "core.autocrlf")
    assert gitstate.converted_paths(wt, index, False, gitstate.config_start(wt)) == set()
    assert gitstate.converted_paths(wt, index) == set()
