"""git's own state and directory metadata: changes the plan agent could hide from a diff.

Real git, real xattrs/ACLs/inode flags on the test's file system; each test runs
the attack and checks the disk (and git's view of it) afterwards.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import struct
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from guard.monitor import Monitor, list_items, quarantine_root
from guard.monitor.fsops import inode_flags, set_inode_flags
from tests.monitor.conftest import git, wait_for


def run_git(wt: Path, *args: str, stdin: str | None = None) -> str:
    return subprocess.run(["git", "-C", str(wt), *args], check=True, capture_output=True,
                          text=True, input=stdin).stdout


def staged(wt: Path, name: str) -> str:
    return run_git(wt, "ls-files", "-s", name)


def test_attack_update_index_cacheinfo_poisons_the_index_reported_and_undone(
    wt: Path, start_monitor: Callable[..., Monitor]
) -> None:
    """`git update-index --cacheinfo` stages the agent's blob for src/app.py without
    touching the file: the user's next commit would take it. Reported, the index is put
    back, and the poisoned index is kept in quarantine."""
    before = staged(wt, "src/app.py")
    m = start_monitor(restore=True)
    blob = run_git(wt, "hash-object", "-w", "--stdin", stdin="import evil\n").strip()
    run_git(wt, "update-index", "--cacheinfo", f"100644,{blob},src/app.py")
    index = str(wt / ".git" / "index")
    wait_for(lambda: any(v.path == index for v in m.violations), "index violation")
    wait_for(lambda: staged(wt, "src/app.py") == before, "the staged blob is the original again")
    assert m.settle()
    assert run_git(wt, "diff", "--cached", "--name-only") == ""
    v = next(v for v in m.violations if v.path == index)
    assert "agents.plan.write" in v.rule and "index restored" in v.action_taken
    kept = [i for i in list_items(quarantine_root(m.guard.roots)) if i.original == index]
    assert len(kept) == 1
    data = kept[0].stored.read_bytes()
    assert kept[0].manifest["sha256"] == hashlib.sha256(data).hexdigest()
    env = dict(os.environ, GIT_INDEX_FILE=str(kept[0].stored))
    poisoned = subprocess.run(["git", "-C", str(wt), "ls-files", "-s", "src/app.py"],
                              env=env, capture_output=True, text=True, check=True).stdout
    assert blob in poisoned  # the agent's version of the index, kept


def test_git_add_in_report_mode_is_reported_once(
    wt: Path, start_monitor: Callable[..., Monitor]
) -> None:
    m = start_monitor()
    (wt / "notes.txt").write_bytes(b"changed\n")
    run_git(wt, "add", "notes.txt")
    index = str(wt / ".git" / "index")
    wait_for(lambda: any(v.path == index for v in m.violations), "index violation")
    run_git(wt, "status", "--porcelain")
    assert m.settle()
    assert [v.path for v in m.violations].count(index) == 1


def test_rewriting_the_index_without_changing_what_is_staged_is_not_reported(
    wt: Path, start_monitor: Callable[..., Monitor]
) -> None:
    """Read-only git commands refresh the index's stat cache; a new index format
    version rewrites every byte. Neither changes what is staged: no violation."""
    before = (wt / ".git" / "index").read_bytes()
    m = start_monitor(restore=True)
    run_git(wt, "update-index", "--index-version", "4")
    run_git(wt, "status", "--porcelain")
    assert (wt / ".git" / "index").read_bytes() != before  # it really was rewritten
    sentinel = wt / "sentinel.txt"
    sentinel.write_text("s\n")
    wait_for(lambda: any(v.path == str(sentinel) for v in m.violations), "sentinel")
    assert m.settle()
    assert [v.path for v in m.violations] == [str(sentinel)]


def test_attack_git_config_refs_and_commit_are_reported_and_undone(
    wt: Path, start_monitor: Callable[..., Monitor]
) -> None:
    """core.hooksPath pointed elsewhere, a new branch, and a commit: all reported, and
    .git/config, the refs and HEAD's commit are back to what they were."""
    config = (wt / ".git" / "config").read_bytes()
    head = run_git(wt, "rev-parse", "HEAD").strip()
    branch = run_git(wt, "symbolic-ref", "--short", "HEAD").strip()
    m = start_monitor(restore=True)
    run_git(wt, "config", "core.hooksPath", "/tmp/evil-hooks")
    run_git(wt, "update-ref", "refs/heads/evil", "HEAD")
    run_git(wt, "-c", "user.name=a", "-c", "user.email=a@a", "commit", "-q", "--allow-empty",
            "-m", "agent commit")
    cfg, ref = str(wt / ".git" / "config"), str(wt / ".git" / "refs" / "heads" / "evil")
    for path in (cfg, ref, str(wt / ".git" / "refs" / "heads" / branch)):
        wait_for(lambda p=path: any(v.path == p for v in m.violations), f"violation for {path}")
    assert m.settle()
    assert (wt / ".git" / "config").read_bytes() == config
    assert subprocess.run(["git", "-C", str(wt), "config", "--get", "core.hooksPath"],
                          capture_output=True).returncode == 1
    assert not (wt / ".git" / "refs" / "heads" / "evil").exists()
    assert run_git(wt, "rev-parse", "HEAD").strip() == head
    assert git(wt, "status", "--porcelain", "src") == ""


# -- directory attributes ------------------------------------------------------------


def _acl(*entries: tuple[int, int, int]) -> bytes:
    return struct.pack("<I", 2) + b"".join(struct.pack("<HHI", *e) for e in entries)


_UNDEF = 0xFFFFFFFF
DEFAULT_ACL = _acl((0x01, 7, _UNDEF), (0x02, 7, 4242), (0x04, 5, _UNDEF), (0x10, 7, _UNDEF),
                   (0x20, 5, _UNDEF))
APPEND_ONLY = 0x20


def _chattr(path: Path, add: int = 0, remove: int = 0) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        cur = inode_flags(fd)
        if cur is None:
            raise OSError(errno.ENOTTY, "no inode flags here")
        set_inode_flags(fd, (cur | add) & ~remove)
    finally:
        os.close(fd)


@pytest.fixture
def unflag(wt: Path) -> Iterator[None]:
    yield
    with contextlib.suppress(OSError):
        _chattr(wt / "docs", remove=APPEND_ONLY)  # let the tmp dir be removed


def _attack(name: str, d: Path) -> None:
    try:
        if name == "mode":
            d.chmod(0o777)
        elif name == "owner":
            os.chown(d, 4242, 4242)
        elif name == "xattr":
            os.setxattr(d, "user.agent", b"was here")
        elif name == "default-acl":
            os.setxattr(d, "system.posix_acl_default", DEFAULT_ACL)
        elif name == "append-only":
            _chattr(d, add=APPEND_ONLY)
    except OSError as exc:
        if exc.errno in (errno.EOPNOTSUPP, errno.ENOTTY, errno.EPERM, errno.EINVAL):
            pytest.skip(f"{name} is not supported here: {exc.strerror}")
        raise


def _state(d: Path) -> tuple[int, int, int, dict[str, bytes], int | None]:
    st = os.lstat(d)
    names = sorted(os.listxattr(d, follow_symlinks=False))
    xa = {n: os.getxattr(d, n, follow_symlinks=False) for n in names}
    fd = os.open(d, os.O_RDONLY | os.O_DIRECTORY)
    try:
        flags = inode_flags(fd)
    finally:
        os.close(fd)
    return st.st_mode, st.st_uid, st.st_gid, xa, (flags or 0) & APPEND_ONLY


@pytest.mark.parametrize("attack", ["mode", "owner", "xattr", "default-acl", "append-only"])
def test_attack_directory_attribute_change_is_reported_and_undone(
    wt: Path, start_monitor: Callable[..., Monitor], attack: str, unflag: None
) -> None:
    """chmod/chown, an xattr, a default ACL (inherited by every file the user creates
    later) or the append-only flag on a worktree directory."""
    if attack in ("owner", "append-only") and os.geteuid() != 0:
        pytest.skip(f"{attack} needs root")
    d = wt / "docs"
    before = _state(d)
    m = start_monitor(restore=True)
    _attack(attack, d)
    # inode flags change without an inotify event: the reconciliation scan that
    # settle() runs (periodic in real use) is what finds them
    assert m.settle()
    hits = [v for v in m.violations if v.path == str(d)]
    assert hits, f"{attack} not reported: {m.violations}"
    assert hits[0].event in ("attrib", "reconcile:attrib"), hits[0]
    assert "restored" in hits[0].action_taken
    assert _state(d) == before, f"{attack} not undone"
