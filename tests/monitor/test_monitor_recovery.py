"""What an agent destroys wholesale comes back: git's object database, a swapped or deleted
worktree, guard's own copies.

Each test runs its attack for real against a real git worktree with `--restore` on, and
checks the disk afterwards (git itself reads the repository back).
"""

from __future__ import annotations

import ctypes
import json
import os
import shutil
import subprocess
import sys
import zlib
from collections.abc import Callable
from pathlib import Path

from guard.monitor import Monitor, list_items, quarantine_root
from tests.monitor.conftest import git, wait_for


def _git_ok(wt: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["git", "-C", str(wt), *args], capture_output=True, text=True)


def _read_or_none(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return None


def _history_intact(wt: Path, head: str) -> None:
    assert git(wt, "rev-parse", "HEAD").strip() == head
    fsck = _git_ok(wt, "fsck", "--full", "--strict")
    assert fsck.returncode == 0, fsck.stderr
    assert git(wt, "show", "HEAD:src/app.py") == "print('hi')\n"
    assert git(wt, "status", "--porcelain", "--untracked-files=no") == ""


def test_attack_rm_rf_git_objects_and_refs_is_undone(
    wt: Path, start_monitor: Callable[..., Monitor]
) -> None:
    """Attack: `rm -rf .git/objects .git/refs` (the repository's whole history). The
    object database comes back from the snapshot (each file verified by its object id),
    the refs from the baseline: git reads the same history afterwards."""
    git(wt, "gc", "-q")  # a pack, its index and reverse index, and loose objects after it
    (wt / "docs" / "c.md").write_text("# c\n")
    git(wt, "add", "docs/c.md")
    git(wt, "commit", "-qm", "loose")
    head = git(wt, "rev-parse", "HEAD").strip()
    m = start_monitor(restore=True)
    assert m.baseline_done.wait(60)
    assert any(n.event == "objects" and "object database snapshot" in n.message
               for n in m.notices), m.notices
    subprocess.run(["rm", "-rf", str(wt / ".git" / "objects"), str(wt / ".git" / "refs")],
                   capture_output=True)
    wait_for(lambda: m.settle(30), "the monitor settled")
    assert any(v.path == str(wt / ".git" / "objects") and "restored from the object database"
               in v.action_taken for v in m.violations), m.violations
    m.stop()
    _history_intact(wt, head)
    assert (wt / "docs" / "c.md").read_text() == "# c\n"


def test_attack_rewritten_loose_object_is_quarantined_and_put_back(
    wt: Path, start_monitor: Callable[..., Monitor]
) -> None:
    """Attack: rewrite a loose object in place with other bytes (its name kept). The
    damaged version goes into quarantine and git's own bytes are put back."""
    blob = git(wt, "rev-parse", "HEAD:docs/a.md").strip()
    obj = wt / ".git" / "objects" / blob[:2] / blob[2:]
    original = obj.read_bytes()
    head = git(wt, "rev-parse", "HEAD").strip()
    m = start_monitor(restore=True)
    assert m.baseline_done.wait(60)
    poison = b"poisoned\n"
    os.chmod(obj, 0o644)
    tmp = obj.with_name("tmp")
    tmp.write_bytes(zlib.compress(b"blob %d\0" % len(poison) + poison))
    os.rename(tmp, obj)  # a new inode: the snapshot's hard link still holds git's bytes
    # (between the damaged version's move into quarantine and the restore, no file)
    wait_for(lambda: _read_or_none(obj) == original, "the object put back")
    assert m.settle()
    m.stop()
    _history_intact(wt, head)
    kept = [i for i in list_items(quarantine_root(m.guard.roots)) if i.original == str(obj)]
    assert kept and zlib.decompress(kept[0].stored.read_bytes()).endswith(poison)


def test_attack_object_rewritten_through_its_inode_is_refused_not_trusted(
    wt: Path, start_monitor: Callable[..., Monitor]
) -> None:
    """Attack: write into the object's own inode (chmod u+w, then truncate and write):
    a hard-linked snapshot shares it, so the snapshot changes too. Verified by its
    object id, it is refused: the poisoned bytes are never restored, and the failure
    is reported (where the file system has reflinks, the snapshot is a copy instead)."""
    blob = git(wt, "rev-parse", "HEAD:docs/a.md").strip()
    obj = wt / ".git" / "objects" / blob[:2] / blob[2:]
    m = start_monitor(restore=True)
    assert m.baseline_done.wait(60)
    snap = m.objects[str(wt / ".git")]
    poison = b"poisoned\n"
    os.chmod(obj, 0o644)
    obj.write_bytes(zlib.compress(b"blob %d\0" % len(poison) + poison))  # same inode
    assert m.settle()
    v = [v for v in m.violations if v.path == str(wt / ".git" / "objects")]
    assert v, m.violations
    m.stop()
    if snap.counts.get("hard link"):
        assert "original unavailable" in v[-1].action_taken, v
        assert zlib.decompress(obj.read_bytes()).endswith(poison)  # left, reported
        # something was not put back: the store stays, and guard quarantine lists it
        assert m.store.is_dir()
        res = subprocess.run([sys.executable, "-m", "guard", "quarantine", "list", "--worktree",
                              str(wt), "--json"], capture_output=True, text=True)
        assert res.returncode == 0, res.stderr
        kept = json.loads(res.stdout)["kept_stores"]
        assert {"session": m.session, "path": str(m.store)} in kept, kept
    else:  # a reflink or a copy: its own bytes
        assert git(wt, "cat-file", "blob", blob) == "# a\n"


_PR_GET_DUMPABLE = 3


def test_the_monitor_is_not_dumpable_and_its_copies_have_no_name(
    wt: Path, start_monitor: Callable[..., Monitor]
) -> None:
    """Another process of the same user cannot open the monitor's /proc/PID/fd: the
    monitor is non-dumpable, and the copies it restores from are in a file with no name."""
    m = start_monitor(restore=True)
    libc = ctypes.CDLL(None, use_errno=True)
    assert libc.prctl(_PR_GET_DUMPABLE, 0, 0, 0, 0) == 0
    assert m.baseline is not None and m.baseline.held is not None
    link = os.readlink(f"/proc/self/fd/{m.baseline.held.fd}")
    assert link.startswith("/memfd:") or link.endswith("(deleted)"), link
    entry = m.baseline.get(str(wt / "notes.txt"))
    assert entry is not None and entry.sha256 is not None
    assert m.baseline.held.has(entry.sha256)


_ATTACKER = r"""
import os, subprocess, sys
from pathlib import Path
from guard.decide import Guard
from guard.monitor import Monitor
wt = Path(sys.argv[1])
m = Monitor(Guard.load(worktree=wt), "plan", restore=True, reconcile_interval=None,
            session="held", audit_path=wt.parent / "audit.jsonl")
m.start()
fd = m.baseline.held.fd
entry = m.baseline.get(str(wt / "notes.txt"))
# another process of the same user: opens the held copy through /proc, then rewrites
# the copy on disk and the file itself
probe = subprocess.run([sys.executable, "-c",
    "import os, sys\n"
    "try:\n"
    "    os.open(sys.argv[1], os.O_RDWR)\n"
    "    print('opened')\n"
    "except OSError as exc:\n"
    "    print('refused', exc.errno)\n",
    f"/proc/{os.getpid()}/fd/{fd}"], capture_output=True, text=True)
print(probe.stdout.strip())
Path(entry.copy).write_bytes(b"attacker\n")
(wt / "notes.txt").write_bytes(b"agent\n")
m.settle()
m.stop()
print("notes:", (wt / "notes.txt").read_bytes())
"""


def test_attack_same_user_cannot_open_the_held_store_and_poisons_the_disk_copy(
    tmp_path: Path,
) -> None:
    """As uid 65534 (root can open anything): a process of the monitor's own user tries
    to open the held store through /proc/PID/fd (refused: the monitor is non-dumpable),
    rewrites the copy on disk and the untracked file: the original comes back."""
    from tests.sandbox.unprivileged import as_user, reachable_dir, require_unprivileged

    require_unprivileged()
    work = reachable_dir("guard-held-", "nobody")
    try:
        wt = work / "wt"
        wt.mkdir()
        git(wt, "init", "-q")
        (wt / "a.txt").write_text("a\n")
        git(wt, "add", "-A")
        git(wt, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "init")
        (wt / "notes.txt").write_bytes(b"only here\n")
        (wt / ".openoxide" / "plans").mkdir(parents=True)
        for dirpath, dirnames, filenames in os.walk(work):
            for name in [*dirnames, *filenames]:
                os.lchown(os.path.join(dirpath, name), 65534, 65534)
        checkout = Path(__file__).resolve().parents[2]
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(work),
               "XDG_DATA_HOME": str(work / "data"), "PYTHONPATH": str(checkout),
               "PYTHONDONTWRITEBYTECODE": "1"}
        proc = subprocess.run(as_user("nobody", [sys.executable, "-c", _ATTACKER, str(wt)]),
                              cwd=work, env=env, capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert "refused 13" in proc.stdout, proc.stdout  # EACCES
        assert "notes: b'only here\\n'" in proc.stdout, proc.stdout
        assert (wt / "notes.txt").read_bytes() == b"only here\n"
    finally:
        shutil.rmtree(work, ignore_errors=True)
