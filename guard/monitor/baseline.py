"""The baseline: what the watched trees looked like when watching started.

For every path: its ``lstat`` signature. For regular files also a SHA-256 of
the content and a way to put the content back:

* a tracked file whose content is what git's index holds is restored from
  git's object database (``git cat-file blob <id>``) — no copy, and the index
  and the working tree are never touched (only ``git ls-files`` and
  ``git cat-file`` run, both read-only);
* any other file up to ``size_cap`` bytes is copied into a content-addressed
  store under guard's data directory (agents may not write there);
* a larger untracked file is hashed but cannot be restored (the violation
  says so and the file is left where it is).

Symlinks keep their target text, directories their mode.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import shutil
import stat
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

from guard.effects import GuardError

DEFAULT_SIZE_CAP = 16 * 1024 * 1024
_CHUNK = 1 << 20
_IN_MEMORY = 1 << 20

#: progress(phase, done, total); total is 0 while it is not known yet
Progress = Callable[[str, int, int], None]


class BaselineError(GuardError):
    """The baseline cannot be taken or a path cannot be restored from it."""


@dataclass(frozen=True, slots=True)
class Sig:
    """What an ``lstat`` says about a path, reduced to what a change alters.

    Files compare every field (``ctime`` and the inode catch a content change
    whose mtime was set back with ``utime``); directories compare only type,
    mode and owner (their times move with every child).
    """

    kind: str  # file | dir | link | other
    mode: int
    uid: int
    gid: int
    size: int = 0
    mtime_ns: int = 0
    ctime_ns: int = 0
    ino: int = 0

    @classmethod
    def of(cls, st: os.stat_result) -> Sig:
        m = st.st_mode
        if stat.S_ISDIR(m):
            return cls("dir", stat.S_IMODE(m), st.st_uid, st.st_gid)
        kind = "file" if stat.S_ISREG(m) else "link" if stat.S_ISLNK(m) else "other"
        return cls(
            kind, stat.S_IMODE(m), st.st_uid, st.st_gid, st.st_size, st.st_mtime_ns,
            st.st_ctime_ns, st.st_ino,
        )

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

    @property
    def restorable(self) -> bool:
        return self.unrestorable is None


@dataclass
class BaselineStats:
    files: int = 0
    dirs: int = 0
    links: int = 0
    bytes: int = 0
    from_git: int = 0
    copied: int = 0
    copied_bytes: int = 0
    over_cap: int = 0
    unreadable: int = 0
    seconds: float = 0.0

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
        return "; ".join(parts) + f"; took {self.seconds:.2f} s"


def _human(n: int) -> str:
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{n} B"


@dataclass(frozen=True, slots=True)
class IndexEntry:
    """A stage-0 entry of git's index with the stat data git cached for it."""

    blob: str
    ctime_ns: int
    mtime_ns: int
    ino: int
    uid: int
    gid: int
    size: int


def git_index(worktree: Path) -> dict[str, IndexEntry]:
    """Absolute path -> index entry for every stage-0 regular file or symlink.

    Uses ``git ls-files --stage --debug -z`` (read-only: the index is not
    refreshed or rewritten).
    """
    if not (worktree / ".git").exists():
        return {}
    try:
        out = subprocess.run(
            ["git", "-C", str(worktree), "ls-files", "--stage", "--debug", "-z"],
            capture_output=True,
            check=True,
        ).stdout
    except FileNotFoundError:
        return {}  # no git binary: everything is hashed and copied instead
    except subprocess.CalledProcessError as exc:
        msg = exc.stderr.decode(errors="replace").strip()
        raise BaselineError(f"git ls-files failed in {worktree}: {msg}") from exc
    entries: dict[str, IndexEntry] = {}
    root = str(worktree)
    consumed = 0
    for m in _INDEX_RECORD.finditer(out):
        if m.start() != consumed:
            raise BaselineError(
                f"unexpected `git ls-files --debug` output in {worktree} at byte {consumed};"
                f" git {_git_version()} may format it differently"
            )
        consumed = m.end()
        mode, blob, stage, name, cs, cn, ms, mn, ino, uid, gid, size = m.groups()
        if stage != b"0" or mode == b"160000":
            continue
        entries[os.path.join(root, os.fsdecode(name))] = IndexEntry(
            blob.decode(),
            int(cs) * 1_000_000_000 + int(cn),
            int(ms) * 1_000_000_000 + int(mn),
            int(ino),
            int(uid),
            int(gid),
            int(size),
        )
    if consumed != len(out):
        raise BaselineError(
            f"unexpected `git ls-files --debug` output in {worktree} at byte {consumed};"
            f" git {_git_version()} may format it differently"
        )
    return entries


_INDEX_RECORD = re.compile(
    rb"(\d+) ([0-9a-f]+) (\d)\t([^\0]*)\0"
    rb"  ctime: (\d+):(\d+)\n"
    rb"  mtime: (\d+):(\d+)\n"
    rb"  dev: \d+\tino: (\d+)\n"
    rb"  uid: (\d+)\tgid: (\d+)\n"
    rb"  size: (\d+)\tflags: [0-9a-f]+\n"
)


def _git_version() -> str:
    try:
        return subprocess.run(["git", "--version"], capture_output=True, text=True).stdout.strip()
    except OSError:
        return "?"


def _index_mtime_ns(worktree: Path | None) -> int:
    if worktree is None:
        return 0
    try:
        return os.stat(worktree / ".git" / "index").st_mtime_ns
    except OSError:
        return 0


def git_blob_id(path: str) -> str:
    """The id git would give the file's content as a blob."""
    size = os.lstat(path).st_size
    h = hashlib.sha1(usedforsecurity=False)
    h.update(b"blob %d\0" % size)
    with open(path, "rb") as f:
        while chunk := f.read(_CHUNK):
            h.update(chunk)
    return h.hexdigest()


def walk(roots: list[Path], ignore: Callable[[str], bool]) -> Iterator[tuple[str, os.stat_result]]:
    """Every path under ``roots`` (roots included) with its lstat, minus ignored subtrees."""
    stack = [str(r) for r in roots]
    for r in stack:
        try:
            yield r, os.lstat(r)
        except FileNotFoundError:
            continue
    while stack:
        d = stack.pop()
        try:
            it = os.scandir(d)
        except (FileNotFoundError, NotADirectoryError):
            continue
        except PermissionError as exc:
            raise BaselineError(f"cannot list {d}: {exc.strerror}") from exc
        with it:
            for e in it:
                p = e.path
                if ignore(p):
                    continue
                try:
                    st = e.stat(follow_symlinks=False)
                except FileNotFoundError:
                    continue
                yield p, st
                if stat.S_ISDIR(st.st_mode):
                    stack.append(p)


def hash_file(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(_CHUNK):
            h.update(chunk)
    return h.hexdigest()


@dataclass
class Baseline:
    """The state of the watched trees at one point, and the means to restore it."""

    store: Path
    worktree: Path | None
    entries: dict[str, Entry] = field(default_factory=dict)
    stats: BaselineStats = field(default_factory=BaselineStats)
    _index_mtime: int = 0

    @classmethod
    def take(
        cls,
        roots: list[Path],
        *,
        store: Path,
        worktree: Path | None,
        ignore: Callable[[str], bool],
        size_cap: int = DEFAULT_SIZE_CAP,
        progress: Progress | None = None,
    ) -> Baseline:
        start = time.perf_counter()
        store.mkdir(parents=True, exist_ok=True, mode=0o700)
        (store / "objects").mkdir(exist_ok=True)
        bl = cls(store=store, worktree=worktree)
        index = git_index(worktree) if worktree is not None else {}
        bl._index_mtime = _index_mtime_ns(worktree)
        listing: list[tuple[str, os.stat_result]] = []
        for i, item in enumerate(walk(roots, ignore), start=1):
            listing.append(item)
            if progress is not None and i % 2000 == 0:
                progress("scanning", i, 0)
        total = len(listing)
        if progress is not None:
            progress("scanning", total, total)
        for i, (path, st) in enumerate(listing, start=1):
            bl.entries[path] = bl._record(path, st, index.get(path), size_cap)
            if progress is not None and (i % 500 == 0 or i == total):
                progress("hashing", i, total)
        bl.stats.seconds = time.perf_counter() - start
        return bl

    def _record(
        self, path: str, st: os.stat_result, ie: IndexEntry | None, cap: int
    ) -> Entry:
        sig = Sig.of(st)
        e = Entry(path, sig, atime_ns=st.st_atime_ns)
        s = self.stats
        if sig.kind == "dir":
            s.dirs += 1
        elif sig.kind == "link":
            s.links += 1
            try:
                e.link = os.readlink(path)
            except OSError as exc:
                e.unrestorable = f"cannot read the symlink: {exc.strerror}"
        elif sig.kind == "file":
            s.files += 1
            s.bytes += sig.size
            if ie is not None and self._clean(st, ie):
                # git status's own shortcut: the stat data git cached matches, and the
                # entry is older than the index (not "racily clean"): the content is
                # the blob, already in git's object database. Nothing to read.
                e.blob = ie.blob
                s.from_git += 1
                return e
            try:
                self._content(e, ie.blob if ie is not None else None, cap)
            except OSError as exc:
                s.unreadable += 1
                e.unrestorable = f"could not be read when the baseline was taken: {exc.strerror}"
        else:
            e.unrestorable = "not a regular file, directory or symlink"
        return e

    def _clean(self, st: os.stat_result, ie: IndexEntry) -> bool:
        return (
            st.st_mtime_ns == ie.mtime_ns
            and st.st_ctime_ns == ie.ctime_ns
            and st.st_ino == ie.ino
            and st.st_uid == ie.uid
            and st.st_gid == ie.gid
            and st.st_size % (1 << 32) == ie.size
            and ie.mtime_ns < self._index_mtime
        )

    def same_content(self, e: Entry, path: str) -> bool:
        """Whether ``path`` now holds the baseline bytes of ``e`` (hashing it)."""
        if e.sha256 is not None:
            return hash_file(path) == e.sha256
        if e.blob is not None:
            return git_blob_id(path) == e.blob
        return False

    def _content(self, e: Entry, blob: str | None, cap: int) -> None:
        size = e.sig.size
        sha = hashlib.sha256()
        git = hashlib.sha1(usedforsecurity=False) if blob is not None else None
        with open(e.path, "rb") as f:
            if size <= _IN_MEMORY:
                data = f.read()
                sha.update(data)
                if git is not None:
                    git.update(b"blob %d\0" % len(data))
                    git.update(data)
                e.sha256 = sha.hexdigest()
                if git is not None and git.hexdigest() == blob:
                    e.blob = blob
                    self.stats.from_git += 1
                elif len(data) <= cap:
                    e.copy = self._store_bytes(e.sha256, data)
                    self.stats.copied += 1
                    self.stats.copied_bytes += len(data)
                else:
                    self._over_cap(e, cap)
                return
            tmp: BinaryIO | None = None
            tmp_name = ""
            if size <= cap:
                fd, tmp_name = tempfile.mkstemp(dir=self.store)
                tmp = os.fdopen(fd, "wb")
            try:
                if git is not None:
                    git.update(b"blob %d\0" % size)
                n = 0
                while chunk := f.read(_CHUNK):
                    n += len(chunk)
                    sha.update(chunk)
                    if git is not None:
                        git.update(chunk)
                    if tmp is not None:
                        tmp.write(chunk)
                e.sha256 = sha.hexdigest()
                if git is not None and n == size and git.hexdigest() == blob:
                    e.blob = blob
                    self.stats.from_git += 1
                elif tmp is not None:
                    tmp.close()
                    dest = self.store / "objects" / e.sha256
                    os.replace(tmp_name, dest)
                    tmp = None
                    e.copy = str(dest)
                    self.stats.copied += 1
                    self.stats.copied_bytes += n
                else:
                    self._over_cap(e, cap)
            finally:
                if tmp is not None:
                    tmp.close()
                    os.unlink(tmp_name)

    def _over_cap(self, e: Entry, cap: int) -> None:
        self.stats.over_cap += 1
        e.unrestorable = (
            f"{e.sig.size:,} bytes, over the baseline size cap of {cap:,} bytes and not in git"
            " (raise --size-cap to make such files restorable)"
        )

    def _store_bytes(self, sha: str, data: bytes) -> str:
        dest = self.store / "objects" / sha
        if not dest.exists():
            fd, tmp = tempfile.mkstemp(dir=self.store)
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            os.replace(tmp, dest)
        return str(dest)

    # -- queries -----------------------------------------------------------

    def get(self, path: str) -> Entry | None:
        return self.entries.get(path)

    def under(self, directory: str) -> list[Entry]:
        """Entries strictly below ``directory``, parents before children."""
        prefix = directory.rstrip("/") + "/"
        return sorted(
            (e for p, e in self.entries.items() if p.startswith(prefix)), key=lambda e: e.path
        )

    def content(self, e: Entry) -> bytes:
        """The baseline bytes of a file entry."""
        if e.blob is not None and self.worktree is not None:
            try:
                out = subprocess.run(
                    ["git", "-C", str(self.worktree), "cat-file", "blob", e.blob],
                    capture_output=True,
                    check=True,
                )
            except (OSError, subprocess.CalledProcessError) as exc:
                raise BaselineError(f"cannot read git blob {e.blob} for {e.path}: {exc}") from exc
            return out.stdout
        if e.copy is not None:
            with open(e.copy, "rb") as f:
                return f.read()
        raise BaselineError(f"{e.path}: no baseline content ({e.unrestorable})")

    # -- restoring ---------------------------------------------------------

    def restore(self, path: str) -> Sig:
        """Recreate ``path`` (which must not exist) as it was; parents too. Returns its new sig.

        A process deleting the parent meanwhile (``rm -rf`` still running) is
        outlasted: the parent is recreated and the restore tried again.
        """
        for attempt in range(5):
            try:
                return self._restore_once(path)
            except FileNotFoundError:
                if attempt == 4:
                    raise
        raise AssertionError("unreachable")

    def _restore_once(self, path: str) -> Sig:
        e = self.entries.get(path)
        if e is None:
            raise BaselineError(f"{path} was not in the baseline")
        if not e.restorable:
            raise BaselineError(f"{path} cannot be restored: {e.unrestorable}")
        parent = os.path.dirname(path)
        if not os.path.lexists(parent):
            if parent in self.entries:
                self.restore(parent)
            else:
                raise BaselineError(f"{path}: parent {parent} is gone and was not in the baseline")
        if e.sig.kind == "dir":
            if os.path.lexists(path):
                if not os.path.isdir(path) or os.path.islink(path):
                    raise BaselineError(f"{path}: something else is in the way")
            else:
                os.mkdir(path, 0o700)
        elif e.sig.kind == "link":
            assert e.link is not None
            os.symlink(e.link, path)
        else:
            data = self.content(e)
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
            with os.fdopen(fd, "wb") as f:
                f.write(data)
        self._attrs(e)
        sig = Sig.lstat(path)
        if sig is None:
            raise BaselineError(f"{path} vanished while it was being restored")
        return sig

    def _attrs(self, e: Entry) -> None:
        p = e.path
        if e.sig.kind != "link":
            os.chmod(p, e.sig.mode)
        # not root: the file stays ours; the mode and content are what matter
        with contextlib.suppress(PermissionError):
            os.chown(p, e.sig.uid, e.sig.gid, follow_symlinks=False)
        if e.sig.kind == "file":
            os.utime(p, ns=(e.atime_ns, e.sig.mtime_ns))
        elif e.sig.kind == "link":
            os.utime(p, ns=(e.atime_ns, e.sig.mtime_ns), follow_symlinks=False)

    def reset_attrs(self, path: str) -> Sig | None:
        """Put mode/owner/times of an existing path back (for an attribute-only change)."""
        e = self.entries.get(path)
        if e is None:
            return None
        self._attrs(e)
        return Sig.lstat(path)

    def discard(self) -> None:
        """Delete the store (guard's own copies, nothing anyone else wrote)."""
        shutil.rmtree(self.store, ignore_errors=True)
