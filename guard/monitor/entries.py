"""What the baseline records about each path, and the errors taking or using it raises.

Holds :class:`Sig` (an ``lstat`` reduced to what a change alters), :class:`Entry`
(one path of the baseline and where its content can be got back from),
:class:`BaselineStats` (the counts a baseline prints), the default size cap, the
progress callback type, and :class:`BaselineError` / :class:`SourceChanged` /
:class:`BlobUnavailable`.

It does not read, walk, copy or restore anything: reading the trees is
:mod:`guard.monitor.treeread`, taking and restoring the baseline
:mod:`guard.monitor.baseline` and :mod:`guard.monitor.phases`.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple

from guard.effects import GuardError

DEFAULT_SIZE_CAP = 16 * 1024 * 1024

_S_IFMT = 0o170000
_S_IFREG = stat.S_IFREG
_new = tuple.__new__

#: progress(phase, done, total); total is 0 while it is not known yet
Progress = Callable[[str, int, int], None]


class BaselineError(GuardError):
    """The baseline cannot be taken or a path cannot be restored from it."""


class SourceChanged(BaselineError):
    """What a restore would write is not what the baseline read: its source changed."""

    def __init__(self, why: str) -> None:
        super().__init__(f"original unavailable: its source was changed ({why})")


class BlobUnavailable(SourceChanged):
    """A tracked file's git blob is neither in the repository's object database nor in
    the snapshot of it: the database may be being put back, so a later try may work."""


class Sig(NamedTuple):
    """What an ``lstat`` says about a path, reduced to what a change alters.

    Files compare every field (``ctime`` and the inode catch a content change
    whose mtime was set back with ``utime``, or an xattr/ACL change); directories
    compare type, mode, owner and ``meta`` — a digest of their extended attributes
    (ACLs included) and user inode flags — but not times, which move with every
    child. (A tuple: the baseline holds one per path, and phase 2 and every
    reconciliation build or compare one per path.)
    """

    kind: str  # file | dir | link | other
    mode: int
    uid: int
    gid: int
    size: int = 0
    mtime_ns: int = 0
    ctime_ns: int = 0
    ino: int = 0
    meta: str = ""

    @classmethod
    def of(cls, st: os.stat_result, meta: str = "") -> Sig:
        m = st.st_mode
        if m & _S_IFMT == _S_IFREG:  # nearly every path: built without the keyword machinery
            return _new(cls, ("file", m & 0o7777, st.st_uid, st.st_gid, st.st_size,
                              st.st_mtime_ns, st.st_ctime_ns, st.st_ino, ""))
        if stat.S_ISDIR(m):
            return cls("dir", stat.S_IMODE(m), st.st_uid, st.st_gid, meta=meta)
        kind = "link" if stat.S_ISLNK(m) else "other"
        return cls(
            kind, stat.S_IMODE(m), st.st_uid, st.st_gid, st.st_size, st.st_mtime_ns,
            st.st_ctime_ns, st.st_ino,
        )

    def matches(self, st: os.stat_result, meta: str = "") -> bool:
        """``Sig.of(st, meta) == self`` (the final reconciliation asks it of every path)."""
        return Sig.of(st, meta) == self

    @classmethod
    def lstat(cls, path: str) -> Sig | None:
        try:
            return cls.of(os.lstat(path))
        except (FileNotFoundError, NotADirectoryError):
            return None

    def same_content_attrs(self, other: Sig) -> bool:
        """True when only ctime/inode differ (e.g. an xattr or a same-mode chmod)."""
        return (self.kind, self.mode, self.uid, self.gid, self.size, self.mtime_ns) == (
            other.kind, other.mode, other.uid, other.gid, other.size, other.mtime_ns,
        )


@dataclass(slots=True)
class Entry:
    """One path of the baseline."""

    path: str
    sig: Sig
    atime_ns: int = 0
    sha256: str | None = None  # None for clean tracked files: their blob id is the hash
    blob: str | None = None  # git blob id when the content is in git's object database
    copy: str | None = None  # path of the copy in the store
    link: str | None = None  # symlink target
    unrestorable: str | None = None  # why the content cannot be put back
    xattrs: dict[str, bytes] | None = None  # directories: extended attributes and ACLs
    flags: int | None = None  # directories: user inode flags (chattr)

    @property
    def restorable(self) -> bool:
        return self.unrestorable is None


class BaselineStats:
    """The counts a baseline prints (each class-level default is shadowed on the first update)."""

    files: int = 0
    dirs: int = 0
    links: int = 0
    bytes: int = 0
    from_git: int = 0
    copied: int = 0
    copied_bytes: int = 0
    over_cap: int = 0
    unreadable: int = 0
    special: int = 0
    ignored: int = 0
    seconds: float = 0.0  # all of it
    blocking: float = 0.0  # what the command waited for (the first phase)

    def summary(self) -> str:
        parts = [
            f"{self.files:,} files, {self.dirs:,} directories, {self.links:,} symlinks"
            f" ({_human(self.bytes)})",
            f"{self.from_git:,} restorable from git objects",
            f"{self.copied:,} copied ({_human(self.copied_bytes)})",
        ]
        if self.over_cap:
            parts.append(f"{self.over_cap:,} over the size cap (not restorable)")
        if self.unreadable:
            parts.append(f"{self.unreadable:,} unreadable (not restorable)")
        if self.special:
            parts.append(f"{self.special:,} FIFOs, sockets or devices (never opened)")
        if self.ignored:
            parts.append(f"{self.ignored:,} ignored by git (never copied, not restorable)")
        return "; ".join(parts) + (
            f"; took {self.seconds:.2f} s ({self.blocking:.2f} s before the command could start)"
        )


def _human(n: int) -> str:
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{n} B"
