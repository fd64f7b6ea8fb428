"""The baseline: what the watched trees looked like when watching started.

For every path: its ``lstat`` signature. For regular files also a SHA-256 of
the content and a way to put the content back:

* a tracked file whose content is what git's index holds is restored from
  git's object database (``git cat-file blob <id>``) — no copy, and the index
  and the working tree are never touched (only ``git ls-files`` and
  ``git cat-file`` run, both read-only);
* any other file up to ``size_cap`` bytes is copied into a file with no name that
  only the monitor holds (:mod:`guard.monitor.heldstore`), and into a
  content-addressed store under guard's data directory, kept when a restore failed
  (an agent of the same user can write there: it is verified, never the only source);
* a larger untracked file is hashed but cannot be restored (the violation
  says so and the file is left where it is).

Symlinks keep their target text, directories their mode.

This module holds :class:`Baseline`: taking each path's record (reading and
copying a file's content), answering what a path held, and putting a path back.
It does not hold the per-path records and errors (:mod:`guard.monitor.entries`),
the walk and the hashing (:mod:`guard.monitor.treeread`), or the order in which
the baseline is taken before and while the command runs (:mod:`guard.monitor.phases`,
which builds a :class:`Baseline`; :func:`guard.monitor.phases.take` takes both at once).
"""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from guard.monitor import gitstate, hashes
from guard.monitor.entries import (
    DEFAULT_SIZE_CAP,
    BaselineError,
    BaselineStats,
    BlobUnavailable,
    Entry,
    Progress,
    Sig,
    SourceChanged,
)
from guard.monitor.fsops import (
    HASH_CAP,
    Anchor,
    Identity,
    NotRegular,
    dir_meta_at,
    hash_fd,
    inode_flags,
    new_file,
    open_dir_at,
    open_regular,
    remove_tree,
    reset_dir_meta,
    sampled_fd,
    write_new_file,
    xattrs_of,
)
from guard.monitor.fsops import USER_FLAGS as _USER_FLAGS
from guard.monitor.gitstate import IndexEntry
from guard.monitor.heldstore import HeldStore
from guard.monitor.treeread import CHUNK as _CHUNK
from guard.monitor.treeread import blob_id, git_blob_id, hash_file, open_file, read_copy

if TYPE_CHECKING:
    from guard.monitor.objsnap import ObjectSnapshot

_IN_MEMORY = 1 << 20


@dataclass
class Baseline:
    """The state of the watched trees at one point, and the means to restore it.

    Each file's identity (device, inode, size, mtime, ctime) is captured together
    with its content: the bytes are read by descriptor between two fstats that
    agree, and that identity is what the monitor compares later. A file whose
    identity differs between the listing and the read changed while the baseline
    was taken: it is named in ``changed`` (the monitor reports it).
    """

    store: Path
    worktree: Path | None
    entries: dict[str, Entry] = field(default_factory=dict)
    stats: BaselineStats = field(default_factory=BaselineStats)
    changed: dict[str, str] = field(default_factory=dict)
    anchor: Anchor | None = None
    temp_names: set[str] = field(default_factory=set)  # the restore's own temporary files
    index_mtime: int = 0
    #: tracked files git converts on checkout (filters, eol): read and copied, never
    #: restored from their blob by git's stat shortcut (gitstate.converted_paths)
    filtered: set[str] = field(default_factory=set)

    # filled by the two phases (guard/monitor/phases.py)
    status: gitstate.Status | None = None  # git status before the command started
    index: dict[str, IndexEntry] = field(default_factory=dict)
    index_data: bytes | None = None  # the index bytes, until phase 2 parses them
    #: paths whose baseline is their state before the command started, whatever
    #: happened to them since (a copy taken then, git's blob, or absent then)
    exact: set[str] = field(default_factory=set)
    #: paths changed while the first phase ran (before the command started)
    pre_early: set[str] = field(default_factory=set)
    #: paths with an event when phase 2's walk had ended (None until then): any other
    #: path's later event came after the walk read it, unless it was read again since
    walk_early: set[str] | None = None
    #: paths read again after the walk (their git blob was missing)
    reread: set[str] = field(default_factory=set)
    roots: list[Path] = field(default_factory=list)
    size_cap: int = DEFAULT_SIZE_CAP
    ignore: Callable[[str], bool] | None = None
    progress: Progress | None = None
    started: float = 0.0
    #: the copies only this process can open (see guard/monitor/heldstore.py)
    held: HeldStore | None = None
    #: .git -> the snapshot of its object database, once taken (restoring.take_snapshots)
    snapshots: dict[str, ObjectSnapshot] = field(default_factory=dict)

    def record(
        self, path: str, st: os.stat_result, meta: str, pfd: int | None, name: str,
        ie: IndexEntry | None, cap: int,
    ) -> Entry:
        sig = Sig.of(st, meta)
        e = Entry(path, sig, atime_ns=st.st_atime_ns)
        s = self.stats
        if sig.kind == "dir":
            s.dirs += 1
            if meta:
                with contextlib.suppress(OSError):
                    fd = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW,
                                 dir_fd=pfd) if pfd is not None else os.open(path, os.O_RDONLY)
                    try:
                        e.xattrs = xattrs_of(fd)
                        e.flags = (inode_flags(fd) or 0) & _USER_FLAGS
                    finally:
                        os.close(fd)
        elif sig.kind == "link":
            s.links += 1
            try:
                e.link = os.readlink(name, dir_fd=pfd) if pfd is not None else os.readlink(path)
            except OSError as exc:
                e.unrestorable = f"cannot read the symlink: {exc.strerror}"
        elif sig.kind == "file":
            s.files += 1
            s.bytes += sig.size
            if ie is not None and path not in self.filtered and self.clean(st, ie):
                # git status's own shortcut: the stat data git cached matches, and the
                # entry is older than the index (not "racily clean"): the content is
                # the blob, already in git's object database. Nothing to read.
                e.blob = ie.blob
                s.from_git += 1
                return e
            try:
                assert pfd is not None
                self._content(e, st, pfd, name, ie.blob if ie is not None else None, cap)
            except NotRegular:
                self.changed[path] = "replaced by something that is not a file"
                e.unrestorable = "replaced by something that is not a file while the baseline ran"
            except OSError as exc:
                s.unreadable += 1
                e.unrestorable = f"could not be read when the baseline was taken: {exc.strerror}"
        else:
            s.special += 1
            e.unrestorable = "not a regular file, directory or symlink (never opened)"
        return e

    def clean(self, st: os.stat_result, ie: IndexEntry) -> bool:
        return (
            st.st_mtime_ns == ie.mtime_ns
            and st.st_ctime_ns == ie.ctime_ns
            and st.st_ino == ie.ino
            and st.st_uid == ie.uid
            and st.st_gid == ie.gid
            and st.st_size % (1 << 32) == ie.size
            and ie.mtime_ns < self.index_mtime
        )

    def same_content(self, e: Entry, path: str) -> bool:
        """Whether ``path`` now holds the baseline bytes of ``e`` (hashing it by descriptor).

        Another size is never the same content (nothing is read); a file over the hash
        cap is compared by its sampled digest (see :func:`fsops.sampled_fd`)."""
        with open_file(path, self.anchor) as (fd, st):
            if st.st_size != e.sig.size:
                return False
            if e.sha256 is not None and e.sha256.startswith("sampled:"):
                return sampled_fd(fd, st.st_size) == e.sha256
        if e.sha256 is not None:
            return hash_file(path, self.anchor) == e.sha256
        if e.blob is not None:
            return git_blob_id(path, self.anchor) == e.blob
        return False

    def _content(
        self, e: Entry, listed: os.stat_result, pfd: int, name: str, blob: str | None, cap: int
    ) -> None:
        """Read the file once by descriptor; identity before == after, or read again."""
        with open_regular(pfd, name) as (fd, before):
            if Identity.of(before) != Identity.of(listed):
                self.changed[e.path] = "changed between the listing and the read"
            if before.st_size > cap and (blob is None or before.st_size > HASH_CAP):
                # never read whole (a 16 TiB sparse file would take hours): sampled
                e.sha256 = sampled_fd(fd, before.st_size)
                after = os.fstat(fd)
                if Identity.of(after) != Identity.of(before):
                    self.changed[e.path] = "changed while it was being read"
                e.sig, e.atime_ns = Sig.of(after), after.st_atime_ns
                self._over_cap(e, cap)
                e.unrestorable = (e.unrestorable or "") + (
                    "; compared by size, times and a sampled digest (16 slices of 64 KiB),"
                    " never read whole")
                return
            for _ in range(5):
                data, sha, gid, n = self._read(fd, before.st_size, blob, cap)
                after = os.fstat(fd)
                if Identity.of(after) == Identity.of(before) and n == after.st_size:
                    break
                self.changed[e.path] = "changed while it was being read"
                before = after
            else:
                e.unrestorable = "kept changing while the baseline was taken"
                return
        # the identity the content belongs to: later comparisons are against it
        e.sig = Sig.of(after)
        e.atime_ns = after.st_atime_ns
        e.sha256 = sha
        if blob is not None and gid == blob:
            e.blob = blob
            self.stats.from_git += 1
        elif data is not None:
            e.copy = data
            self.stats.copied += 1
            self.stats.copied_bytes += n
        else:
            self._over_cap(e, cap)

    def _read(
        self, fd: int, size: int, blob: str | None, cap: int
    ) -> tuple[str | None, str, str | None, int]:
        """(copy path or None, sha256, git blob id or None, bytes read)."""
        os.lseek(fd, 0, os.SEEK_SET)
        sha = hashes.sha256(size=size)
        # a size that differs from what is read fails the identity check: read again
        git = hashes.sha1(b"blob %d\0" % size, size=size) if blob is not None else None
        chunks: list[bytes] = []
        tmp_fd, tmp_name = (-1, "")
        keep = size <= cap
        region = None
        if keep and size > _IN_MEMORY:
            tmp_fd, tmp_name = new_file(str(self.store))
            region = self.held.reserve(size) if self.held is not None else None
        n = 0
        try:
            while chunk := os.read(fd, _CHUNK):
                n += len(chunk)
                sha.update(chunk)
                if git is not None:
                    git.update(chunk)
                if keep and n > cap:
                    keep = False
                if tmp_fd >= 0:
                    if keep:
                        os.write(tmp_fd, chunk)
                    if region is not None and self.held is not None and n <= size:
                        self.held.write(region + n - len(chunk), chunk)
                elif keep:
                    chunks.append(chunk)
            digest = sha.hexdigest()
            gid = git.hexdigest() if git is not None else None
            if gid is not None and gid == blob:
                return None, digest, gid, n
            if not keep:
                return None, digest, gid, n
            dest = self.store / "objects" / digest
            if region is not None and self.held is not None and n == size:
                self.held.commit(digest, region, n)
            if tmp_fd >= 0:
                os.close(tmp_fd)
                tmp_fd = -1
                os.replace(tmp_name, dest)
                tmp_name = ""
            else:
                self._store_bytes(digest, b"".join(chunks))
            return str(dest), digest, gid, n
        finally:
            if tmp_fd >= 0:
                os.close(tmp_fd)
            if tmp_name:
                with contextlib.suppress(OSError):
                    os.unlink(tmp_name)

    def _over_cap(self, e: Entry, cap: int) -> None:
        self.stats.over_cap += 1
        e.unrestorable = (
            f"{e.sig.size:,} bytes, over the baseline size cap of {cap:,} bytes and not in git"
            " (raise --size-cap to make such files restorable)"
        )

    def _store_bytes(self, sha: str, data: bytes) -> str:
        dest = self.store / "objects" / sha
        if self.held is not None:
            self.held.put(sha, data)
        # always written afresh: a file already at that name may not hold those bytes
        fd, tmp = new_file(str(self.store))
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
        finally:
            os.close(fd)
        os.replace(tmp, dest)
        return str(dest)

    def secure(self, path: str) -> bool:
        """Copy a file restored from git into the store while it still holds its blob
        (its git object was touched). True when the entry now has a verified copy."""
        e = self.entries.get(path)
        if e is None or e.blob is None or e.copy is not None:
            return False
        with open_file(path, self.anchor) as (fd, st):
            if st.st_size > self.size_cap:
                return False
            chunks = []
            while chunk := os.read(fd, _CHUNK):
                chunks.append(chunk)
        data = b"".join(chunks)
        if blob_id(data, len(e.blob)) != e.blob:
            return False  # changed already: the object is all there is
        sha = hashes.sha256(data).hexdigest()
        dest = self._store_bytes(sha, data)
        e.sha256, e.copy = sha, dest
        return True

    # -- queries -----------------------------------------------------------

    def get(self, path: str) -> Entry | None:
        return self.entries.get(path)

    def over_cap(self) -> list[Entry]:
        """Files that cannot be restored because they were too large to copy."""
        return [e for e in self.entries.values() if e.unrestorable and "size cap" in e.unrestorable]

    def under(self, directory: str) -> list[Entry]:
        """Entries strictly below ``directory``, parents before children."""
        prefix = directory.rstrip("/") + "/"
        return sorted(
            (e for p, e in self.entries.items() if p.startswith(prefix)), key=lambda e: e.path
        )

    def content(self, e: Entry) -> bytes:
        """The baseline bytes of a file entry, verified against the hash the baseline took.

        The held copy (no name, only this process can open it) comes first; the copy on
        disk must hash to its SHA-256, git's bytes to the blob id (computed here, never
        taken from git). A blob the repository no longer holds (or holds changed) is read
        from the snapshot of its object database, verified the same way: ``rm -rf
        .git/objects`` may still be running. Anything else is :class:`SourceChanged`:
        the source can be written by the agent (``.git/objects`` always, the store
        under ``guard watch``).
        """
        if e.copy is not None and e.sha256 is not None:
            held = self.held.get(e.sha256) if self.held is not None else None
            if held is not None:
                return held
            data = read_copy(e.copy)
            if data is None:
                raise SourceChanged(f"its baseline copy {e.copy} is gone")
            if hashes.sha256(data).hexdigest() != e.sha256:
                raise SourceChanged(f"its baseline copy {e.copy} no longer holds what the"
                                    f" baseline read (SHA-256 {e.sha256[:12]})")
            return data
        if e.blob is not None and self.worktree is not None:
            root_fd = self.anchor.fd_of(str(self.worktree)) if self.anchor else None
            data = gitstate.cat_blob(self.worktree, e.blob, self.store, root_fd)
            if data is not None and blob_id(data, len(e.blob)) == e.blob:
                return data
            for objects in list(self.snapshots.values()):
                kept = objects.blob(e.blob, self.store)
                if kept is not None:
                    return kept
            snap = ("; the snapshot of the object database does not hold it either"
                    if self.snapshots else "; the object database's snapshot is not taken yet")
            if data is None:
                raise BlobUnavailable(f"git object {e.blob[:12]} is gone from the object"
                                      f" database{snap}")
            raise BlobUnavailable(f"git object {e.blob[:12]} no longer holds its blob"
                                  f" (its bytes hash to another id){snap}")
        raise BaselineError(f"{e.path}: no baseline content ({e.unrestorable})")

    # -- restoring ---------------------------------------------------------

    def restore(self, path: str) -> Sig:
        """Recreate ``path`` (which must not exist) as it was; parents too. Returns its new sig.

        Every directory on the way is opened with O_NOFOLLOW from the watched root:
        a parent swapped for a symlink is refused (:class:`Unsafe`), never written
        through. A process deleting the parent meanwhile (``rm -rf`` still running)
        is outlasted: the parent is recreated and the restore tried again.
        """
        for attempt in range(5):
            try:
                return self._restore_once(path)
            except FileNotFoundError:
                if attempt == 4:
                    raise
        raise AssertionError("unreachable")

    def _anchor(self) -> Anchor:
        if self.anchor is None:
            raise BaselineError("this baseline has no anchored roots")
        return self.anchor

    def _restore_once(self, path: str) -> Sig:
        e = self.entries.get(path)
        if e is None:
            raise BaselineError(f"{path} was not in the baseline")
        if not e.restorable:
            raise BaselineError(f"{path} cannot be restored: {e.unrestorable}")
        anchor = self._anchor()
        parent = os.path.dirname(path)
        if parent in self.entries and anchor.lstat(parent) is None:
            self.restore(parent)
        try:
            pfd, name = anchor.parent(path)
        except FileNotFoundError:
            if parent in self.entries:
                self.restore(parent)
                pfd, name = anchor.parent(path)
            else:
                raise BaselineError(
                    f"{path}: parent {parent} is gone and was not in the baseline"
                ) from None
        restored_owner = True
        try:
            if e.sig.kind == "dir":
                try:
                    os.mkdir(name, 0o700, dir_fd=pfd)
                except FileExistsError:
                    st = os.stat(name, dir_fd=pfd, follow_symlinks=False)
                    if not stat.S_ISDIR(st.st_mode):
                        raise BaselineError(f"{path}: something else is in the way") from None
                fd = open_dir_at(pfd, name)
            elif e.sig.kind == "link":
                assert e.link is not None
                os.symlink(e.link, name, dir_fd=pfd)
                fd = -1
            else:
                restored_owner = self._restore_file(e, pfd, name)
                fd = -1
            owned = restored_owner  # a file's is set before it is linked into place
            try:
                if e.sig.kind != "file":
                    owned = self._attrs(e, pfd, name, fd)
            finally:
                if fd >= 0:
                    os.close(fd)
            st = os.stat(name, dir_fd=pfd, follow_symlinks=False)
            meta = dir_meta_at(pfd, name) if e.sig.kind == "dir" else ""
        finally:
            os.close(pfd)
        return _as_set(Sig.of(st, meta), e, owned)

    def _restore_file(self, e: Entry, pfd: int, name: str) -> bool:
        """Write the content under a temporary name, then link(2) it into place.

        Nobody ever sees a half-restored file, and link(2) never replaces what
        may have appeared at the name meanwhile (EEXIST instead). True when its
        owner was set too (:meth:`_attrs`).
        """
        tmp = f".guard-restore-{os.urandom(8).hex()}"
        self.temp_names.add(os.path.join(os.path.dirname(e.path), tmp))
        data = self.content(e)
        want = hashes.sha256(data).hexdigest()
        fd = write_new_file(pfd, tmp, data, e.sig.mode)
        try:
            try:
                if hash_fd(fd)[0] != want:  # what is linked into place is what was verified
                    raise SourceChanged(f"the restore's temporary file {tmp} was written to")
                owned = self._attrs(e, pfd, tmp, fd)
            finally:
                os.close(fd)
            os.link(tmp, name, src_dir_fd=pfd, dst_dir_fd=pfd, follow_symlinks=False)
        finally:
            os.unlink(tmp, dir_fd=pfd)
        return owned

    def _attrs(self, e: Entry, pfd: int, name: str, fd: int) -> bool:
        """Mode, owner, times (and a directory's xattrs/flags) of ``e``, by descriptor.

        True when the owner was set too (False: not root, the path stays ours).
        """
        k = e.sig.kind
        if k == "dir":
            # first: an append-only flag refuses chmod and chown
            reset_dir_meta(fd, e.xattrs or {}, e.flags or 0)
        if k != "link":
            os.chmod(fd, e.sig.mode)
        # not root: the file stays ours; the mode and content are what matter
        owned = True
        try:
            if k == "link":
                os.chown(name, e.sig.uid, e.sig.gid, dir_fd=pfd, follow_symlinks=False)
            else:
                os.chown(fd, e.sig.uid, e.sig.gid)
        except PermissionError:
            owned = False
        if k == "file":
            os.utime(fd, ns=(e.atime_ns, e.sig.mtime_ns))
        elif k == "link":
            os.utime(name, ns=(e.atime_ns, e.sig.mtime_ns), dir_fd=pfd, follow_symlinks=False)
        return owned

    def reset_attrs(self, path: str) -> Sig | None:
        """Put mode/owner/times (directories: xattrs, ACLs, flags) of an existing path back."""
        e = self.entries.get(path)
        if e is None:
            return None
        anchor = self._anchor()
        pfd, name = anchor.parent(path)
        try:
            st = os.stat(name, dir_fd=pfd, follow_symlinks=False)
            if Sig.of(st).kind != e.sig.kind:
                raise BaselineError(f"{path}: something else is in the way")
            if e.sig.kind == "dir":
                fd = open_dir_at(pfd, name)
            elif e.sig.kind == "file":
                with open_regular(pfd, name) as (rfd, _):
                    fd = os.dup(rfd)
            else:
                fd = -1
            try:
                owned = self._attrs(e, pfd, name, fd)
            finally:
                if fd >= 0:
                    os.close(fd)
            st = os.stat(name, dir_fd=pfd, follow_symlinks=False)
            meta = dir_meta_at(pfd, name) if e.sig.kind == "dir" else ""
        finally:
            os.close(pfd)
        return _as_set(Sig.of(st, meta), e, owned)

    def close(self) -> None:
        if self.anchor is not None:
            self.anchor.close()
        if self.held is not None:
            self.held.close()

    def discard(self) -> None:
        """Delete the store (guard's own copies, nothing anyone else wrote)."""
        self.close()
        remove_tree(str(self.store))


def _as_set(sig: Sig, e: Entry, owned: bool) -> Sig:
    """The signature of a path guard has just restored, with the mode (and the owner,
    when guard could set it) guard set rather than what a later ``stat`` read.

    Between guard's chmod/chown and its ``stat``, another process may chmod or chown
    the path; read back, its change would count as the restored state and its event
    would then find nothing to do. Recorded as set, the change stays a difference.
    """
    if e.sig.kind == "link":
        return sig  # a symlink's mode is fixed; its owner is set by name, same as files
    mode = e.sig.mode
    uid, gid = (e.sig.uid, e.sig.gid) if owned else (sig.uid, sig.gid)
    if (sig.mode, sig.uid, sig.gid) == (mode, uid, gid):
        return sig
    return sig._replace(mode=mode, uid=uid, gid=gid)
