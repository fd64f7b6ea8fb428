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
import struct
import subprocess
from pathlib import Path
from typing import TYPE_CHECKING, Any

from guard.monitor import hashes
from guard.monitor.fsops import new_file, open_regular, read_all, write_new_file
from guard.monitor.gitstate import _EXTENDED, _HEAD, _varint, can_parse

if TYPE_CHECKING:
    from guard.monitor.quarantine import Quarantine

_MODE_OID_FLAGS = struct.Struct(">L12x20sH").unpack_from  # an entry's, from its offset 24


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
    """A digest of the staged entries in ``data``: the SHA-256 of what ``git ls-files
    --stage -z`` prints for it (:func:`listing`, or git itself).

    "" for no index; "unreadable: ..." when git cannot read it (a corrupt index
    differs from any good one).
    """
    if data is None:
        return ""
    if len(data) <= LISTED_MAX and can_parse(Path(worktree)):
        printed = listing(data)
        if printed is not None:
            return hashes.sha256(printed).hexdigest()
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


#: indexes up to this size are listed here (a few milliseconds at most); a larger one by
#: git, which lists it faster than the git process takes to start here
LISTED_MAX = 256 * 1024
#: the extensions whose presence leaves the listing to this module: TREE (git reads
#: the entries whatever it holds); any other (a split or sparse index, resolve-undo,
#: the untracked cache) is left to git
_PLAIN = frozenset((b"TREE",))
_ITA_OR_SKIP = 0x2000 | 0x4000  # the extended flags git knows (intent-to-add, skip-worktree)


def listing(data: bytes) -> bytes | None:
    """What ``git ls-files --stage -z`` prints for the index ``data`` of a SHA-1 repository
    (``<mode> <blob> <stage>\\t<name>\\0`` per entry, in the index's order), or None when
    git is to answer: anything it might read otherwise or refuse (a checksum that does not
    match, entries out of order, an entry or extension not listed here)."""
    if len(data) < 32:
        return None
    sig, version, count = _HEAD.unpack_from(data, 0)
    end_of_entries = len(data) - 20
    trailer = data[end_of_entries:]
    if sig != b"DIRC" or version not in (2, 3, 4):
        return None
    if hashes.sha1(data[:end_of_entries]).digest() != trailer:
        return None  # an index without its checksum (index.skipHash) too: git answers
    out: list[bytes] = []
    pos, prev, prev_stage = 12, b"", -1
    try:
        for _ in range(count):
            start = pos
            mode, oid, flags = _MODE_OID_FLAGS(data, pos + 24)
            pos += 62
            if flags & _EXTENDED:
                (ext,) = struct.unpack_from(">H", data, pos)
                if version < 3 or ext & ~_ITA_OR_SKIP:
                    return None
                pos += 2
            if version == 4:
                strip, pos = _varint(data, pos)
                if strip > len(prev):
                    return None
                end = data.index(b"\0", pos, end_of_entries)
                name = prev[: len(prev) - strip] + data[pos:end]
                pos = end + 1
            else:
                end = data.index(b"\0", pos, end_of_entries)
                name = data[pos:end]
                pos = start + ((end - start + 8) & ~7)
            stage = flags >> 12 & 3
            if (flags & 0xFFF) != min(len(name), 0xFFF) or mode >> 12 == 0o04 or not name:
                return None  # git would read another name; a sparse directory entry
            if name < prev or (name == prev and (prev_stage == 0 or stage <= prev_stage)):
                return None  # out of order: git refuses the index
            out.append(b"%06o %s %d\t%s\0" % (mode, oid.hex().encode(), stage, name))
            prev, prev_stage = name, stage
        while pos < end_of_entries:
            tag, size = struct.unpack_from(">4sL", data, pos)
            if tag not in _PLAIN:
                return None
            pos += 8 + size
    except (struct.error, ValueError):
        return None
    return b"".join(out) if pos == end_of_entries else None


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
