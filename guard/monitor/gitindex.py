"""git's staging area as the monitor sees it: what is staged, not the stat cache.

Read-only git commands (``git status``, ``git diff``) rewrite ``.git/index`` to
refresh the stat data they cache; that changes nothing anyone commits. What
matters is the list of staged entries (mode, blob, stage, path): ``git
update-index --cacheinfo`` or ``git add`` change it, and the user's next commit
would take the agent's content. So the monitor keeps a copy of the index bytes
taken at start, compares staged entries (``git ls-files --stage`` run on a
private copy of the bytes, so the entries belong to exactly those bytes), and
restores by git's own protocol: create ``index.lock`` exclusively, write the
baseline bytes, rename it over ``index``.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
from pathlib import Path
from typing import TYPE_CHECKING, Any

from guard.monitor import hashes
from guard.monitor.fsops import new_file, open_regular, read_all, write_new_file

if TYPE_CHECKING:
    from guard.monitor.quarantine import Quarantine


class IndexBusy(OSError):
    """``index.lock`` exists: a git command is writing the index right now."""


def read_index(git_dir: str) -> bytes | None:
    """The index bytes (read by descriptor, only if a regular file); None when there is none."""
    try:
        dfd = os.open(git_dir, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        with open_regular(dfd, "index") as (fd, _):
            return read_all(fd)
    except FileNotFoundError:
        return None
    finally:
        os.close(dfd)


def staged(data: bytes | None, worktree: str, scratch: Path) -> str:
    """A digest of the staged entries in ``data``.

    "" for no index; "unreadable: ..." when git cannot read it (a corrupt index
    differs from any good one).
    """
    if data is None:
        return ""
    fd, tmp = new_file(str(scratch), "index")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        env = dict(os.environ, GIT_INDEX_FILE=tmp)
        res = subprocess.run(
            ["git", "-C", worktree, "ls-files", "--stage", "-z"],
            capture_output=True, env=env, stdin=subprocess.DEVNULL, check=False, timeout=60,
        )
    except (OSError, subprocess.SubprocessError) as exc:
        return f"unreadable: {exc}"
    finally:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
    if res.returncode != 0:
        return "unreadable: " + res.stderr.decode(errors="replace").strip()[:200]
    return hashes.sha256(res.stdout).hexdigest()


def write_index(git_dir: str, data: bytes) -> None:
    """Put ``data`` back as the index the way git does: exclusive ``index.lock``, then rename."""
    dfd = os.open(git_dir, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        try:
            fd = write_new_file(dfd, "index.lock", data, 0o644)
        except FileExistsError as exc:
            raise IndexBusy(exc.errno, "index.lock exists (a git command is running)") from exc
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        os.rename("index.lock", "index", src_dir_fd=dfd, dst_dir_fd=dfd)
    finally:
        os.close(dfd)


def quarantine_index(
    q: Quarantine, original: str, rel: str, data: bytes, meta: dict[str, Any]
) -> str:
    """Keep a copy of the index bytes (the index itself is replaced, not moved)."""
    slot, dest = q.plan(rel)
    fd = q.dir_fd(dest.parent)
    try:
        os.close(write_new_file(fd, dest.name, data, 0o600))
    finally:
        os.close(fd)
    q.write_manifest(slot, anchor=q.anchor, manifest={
        "session": q.session, "timestamp": slot.name, "original": original, "rel": rel,
        "stored": str(dest.relative_to(slot)), "kind": "file", "size": len(data),
        "sha256": hashes.sha256(data).hexdigest(), **meta, "restored_at": None,
    })
    return f"{q.session}/{slot.name}"
