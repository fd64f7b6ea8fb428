"""A snapshot of git's object database, taken with the baseline, to restore it from.

``rm -rf .git/objects`` loses a repository's history; the baseline of a clean tracked
file is its blob in there. The snapshot keeps every file of ``.git/objects`` as cheaply
as the file system allows, under guard's data directory:

* a reflink (``FICLONE``: a copy-on-write clone, no bytes copied) where it can;
* else a hard link of the file (git never rewrites an object or pack file, so the link
  keeps the bytes as long as nobody writes into that inode);
* else a copy, within a size limit (what is over it is not kept, and said).

Nothing kept there is trusted: a file is verified before it is restored, a loose
object by its object id (inflated and hashed), a pack, its index and reverse index by
the checksum trailer git writes (and which the snapshot recorded), anything else by
the SHA-256 read when the snapshot was taken. A hard link shares its inode with the
live file, so a write into it changes both: the restore then refuses it and says so.
Refs are not here: ``.git`` outside ``objects/`` is part of the baseline itself.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import stat
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

from guard.monitor import gitstate, hashes
from guard.monitor.entries import SourceChanged
from guard.monitor.fsops import Anchor, Unsafe, open_dir_at
from guard.monitor.treeread import blob_id, open_file

#: bytes the snapshot may copy when neither a reflink nor a hard link is possible
DEFAULT_OBJECTS_LIMIT = 1 << 30
_FICLONE = 0x40049409
_CHUNK = 1 << 20
_TRAILED = (".pack", ".idx", ".rev")


class ObjFile(NamedTuple):
    """One file of ``.git/objects`` as the snapshot found it."""

    rel: str  # below .git/objects
    check: str  # loose:<oid>, trailer:<hex> or sha256:<hex>
    mode: int
    ino: int
    size: int
    mtime_ns: int


@dataclass
class ObjectSnapshot:
    """The files of one ``.git/objects`` and where the snapshot keeps each."""

    objects: str  # the live .git/objects
    saved: Path  # the snapshot's directory
    files: dict[str, ObjFile] = field(default_factory=dict)
    dirs: dict[str, int] = field(default_factory=dict)  # rel -> mode ("" is objects/)
    method: str = ""  # reflink, hard link or copy (the last one used)
    counts: dict[str, int] = field(default_factory=dict)
    skipped: int = 0  # files over the copy limit: not kept
    skipped_bytes: int = 0
    #: rel -> the (inode, size, mtime) of a damaged file that could not be put back:
    #: reported once in that state, not at every scan
    refused: dict[str, tuple[int, int, int]] = field(default_factory=dict)

    @classmethod
    def take(cls, git_dir: str, saved: Path, limit: int = DEFAULT_OBJECTS_LIMIT
             ) -> ObjectSnapshot:
        objects = os.path.join(git_dir, "objects")
        snap = cls(objects, saved)
        saved.mkdir(parents=True, exist_ok=True, mode=0o700)
        copied = 0
        mode_order = ["reflink", "hard link", "copy"]
        for dirpath, dirnames, filenames in os.walk(objects):
            dirnames.sort()
            rel_dir = os.path.relpath(dirpath, objects)
            rel_dir = "" if rel_dir == "." else rel_dir
            with contextlib.suppress(OSError):
                snap.dirs[rel_dir] = stat.S_IMODE(os.lstat(dirpath).st_mode)
            for name in sorted(filenames):
                rel = os.path.join(rel_dir, name) if rel_dir else name
                src = os.path.join(dirpath, name)
                try:
                    st = os.lstat(src)
                    if not stat.S_ISREG(st.st_mode):
                        continue
                    check = _check_of(rel, src)
                except (OSError, ValueError):
                    continue
                dest = snap.kept(rel)
                dest.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
                used = ""
                for how in list(mode_order):
                    if how == "copy" and copied + st.st_size > limit:
                        break
                    try:
                        _keep(how, src, str(dest))
                        used = how
                        break
                    except OSError:
                        mode_order.remove(how)  # not on this file system: not tried again
                if not used:
                    snap.skipped += 1
                    snap.skipped_bytes += st.st_size
                    continue
                if used == "copy":
                    copied += st.st_size
                snap.counts[used] = snap.counts.get(used, 0) + 1
                snap.method = used
                snap.files[rel] = ObjFile(rel, check, stat.S_IMODE(st.st_mode), st.st_ino,
                                          st.st_size, st.st_mtime_ns)
        return snap

    def summary(self) -> str:
        how = ", ".join(f"{n:,} by {k}" for k, n in self.counts.items()) or "nothing"
        out = f"object database snapshot: {len(self.files):,} files ({how})"
        if self.skipped:
            out += (f"; {self.skipped:,} files ({self.skipped_bytes:,} bytes) over the copy"
                    " limit, not kept")
        return out

    def kept(self, rel: str) -> Path:
        """Where the snapshot keeps ``rel``: laid out as in ``.git/objects``, so that git
        reads the snapshot as an object directory (:meth:`blob`)."""
        return self.saved / rel

    def blob(self, oid: str, scratch: Path) -> bytes | None:
        """The bytes of blob ``oid`` as the snapshot holds them, verified against the id
        (hashed here): git reads the snapshot as its object directory. None when the
        snapshot does not hold it or what it holds is not that blob."""
        data = gitstate.cat_blob_in(self.saved, oid, scratch)
        if data is None or blob_id(data, len(oid)) != oid:
            return None
        return data

    def damaged(self, anchor: Anchor, under: str = "") -> list[str]:
        """Files of the snapshot at or below ``under`` (relative) that are gone, or whose
        bytes changed: one whose stat data moved is verified again (git "freshens" an
        object's times; a chmod changes nothing git reads)."""
        out: list[str] = []
        dirs: dict[str, int | None] = {}  # each directory opened once (a scan asks of all)
        try:
            for rel, f in list(self.files.items()):
                if under and rel != under and not rel.startswith(under + "/"):
                    continue
                self._check(anchor, rel, f, dirs, out)
        finally:
            for fd in dirs.values():
                if fd is not None:
                    os.close(fd)
        return out

    def _check(self, anchor: Anchor, rel: str, f: ObjFile, dirs: dict[str, int | None],
               out: list[str]) -> None:
        path = os.path.join(self.objects, rel)
        st = _lstat_in(anchor, self.objects, rel, dirs)
        now_id = (st.st_ino, st.st_size, st.st_mtime_ns) if st is not None else (0, 0, 0)
        if self.refused.get(rel) == now_id:
            return
        if st is None or not stat.S_ISREG(st.st_mode):
            out.append(rel)
            return
        if now_id == (f.ino, f.size, f.mtime_ns):
            return
        try:
            with open_file(path, anchor) as (fd, now):
                ok = _verify(f, fd)
        except OSError:
            ok = False
        if not ok:
            out.append(rel)
        else:
            self.files[rel] = ObjFile(rel, f.check, f.mode, now.st_ino, now.st_size,
                                      now.st_mtime_ns)

    def retry(self, under: str) -> None:
        """Forget the refusals at or below ``under`` (it changed again since)."""
        for rel in [r for r in self.refused if not under or r == under
                    or r.startswith(under + "/")]:
            del self.refused[rel]

    def refuse(self, rel: str, anchor: Anchor) -> None:
        """``rel`` cannot be put back: not reported again until it changes again."""
        st = anchor.lstat(os.path.join(self.objects, rel))
        self.refused[rel] = (st.st_ino, st.st_size, st.st_mtime_ns) if st else (0, 0, 0)

    def intact(self, rel: str) -> bool:
        """Whether the snapshot still holds what git wrote to ``rel`` (read and checked)."""
        try:
            fd = os.open(self.kept(rel),
                         os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        except OSError:
            return False
        try:
            return stat.S_ISREG(os.fstat(fd).st_mode) and _verify(self.files[rel], fd)
        finally:
            os.close(fd)

    def restore(self, rel: str, anchor: Anchor) -> None:
        """Put ``rel`` back (it must not exist): verified, copied, linked into place."""
        f = self.files[rel]
        src = self.kept(rel)
        path = os.path.join(self.objects, rel)
        for d in _dirs_of(rel):
            self._mkdir(d, anchor)
        pfd, name = anchor.parent(path)
        tmp = f".guard-restore-{os.urandom(8).hex()}"
        try:
            try:
                sfd = os.open(src, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
            except OSError as exc:
                raise SourceChanged(f"its snapshot {src} cannot be opened: {exc.strerror}"
                                    ) from None
            try:
                if not stat.S_ISREG(os.fstat(sfd).st_mode):
                    raise SourceChanged(f"its snapshot {src} is not a file any more")
                out = os.open(tmp, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
                              | os.O_CLOEXEC, 0o600, dir_fd=pfd)
                try:
                    _copy(sfd, out)
                    if not _verify(f, out):  # what is linked into place is what was verified
                        raise SourceChanged(f"the snapshot of .git/objects/{rel} no longer"
                                            f" holds what git wrote ({f.check[:20]}...)")
                    os.fchmod(out, f.mode)
                    os.utime(out, ns=(f.mtime_ns, f.mtime_ns))
                finally:
                    os.close(out)
            finally:
                os.close(sfd)
            os.link(tmp, name, src_dir_fd=pfd, dst_dir_fd=pfd, follow_symlinks=False)
        finally:
            with contextlib.suppress(OSError):
                os.unlink(tmp, dir_fd=pfd)
            os.close(pfd)
        st = anchor.lstat(path)
        if st is not None:  # the restored file is the one compared from now on
            self.files[rel] = ObjFile(rel, f.check, f.mode, st.st_ino, st.st_size,
                                      st.st_mtime_ns)

    def _mkdir(self, rel_dir: str, anchor: Anchor) -> None:
        path = os.path.join(self.objects, rel_dir) if rel_dir else self.objects
        if anchor.lstat(path) is not None:
            return
        pfd, name = anchor.parent(path, create=True)  # .git itself may be gone too
        try:
            with contextlib.suppress(FileExistsError):
                os.mkdir(name, 0o700, dir_fd=pfd)
            fd = open_dir_at(pfd, name)
            try:
                os.fchmod(fd, self.dirs.get(rel_dir, 0o755))
            finally:
                os.close(fd)
        finally:
            os.close(pfd)


def _dirs_of(rel: str) -> list[str]:
    parts = rel.split("/")[:-1]
    return [""] + ["/".join(parts[: i + 1]) for i in range(len(parts))]


def _keep(how: str, src: str, dest: str) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.unlink(dest)
    if how == "hard link":
        os.link(src, dest, follow_symlinks=False)
        return
    sfd = os.open(src, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        dfd = os.open(dest, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
        try:
            if how == "reflink":
                try:
                    fcntl.ioctl(dfd, _FICLONE, sfd)
                except OSError:
                    os.unlink(dest)
                    raise
            else:
                _copy(sfd, dfd)
        finally:
            os.close(dfd)
    finally:
        os.close(sfd)


def _copy(src: int, dst: int) -> None:
    os.lseek(src, 0, os.SEEK_SET)
    os.lseek(dst, 0, os.SEEK_SET)
    while chunk := os.read(src, _CHUNK):
        view = memoryview(chunk)
        while view:
            view = view[os.write(dst, view):]


def _check_of(rel: str, path: str) -> str:
    """What the file must verify against: its object id, its trailer, or its SHA-256."""
    name = rel.replace("/", "")
    if len(rel) in (41, 65) and rel[2:3] == "/" and all(c in "0123456789abcdef" for c in name):
        return "loose:" + name
    if rel.startswith("pack/") and rel.endswith(_TRAILED):
        with open(path, "rb") as fh:
            size = os.fstat(fh.fileno()).st_size
            n = 32 if _sha256_repo(path) else 20
            if size < n:
                raise ValueError("too short")
            fh.seek(size - n)
            return "trailer:" + fh.read(n).hex()
    with open(path, "rb") as fh:
        h = hashes.sha256(size=os.fstat(fh.fileno()).st_size)
        while chunk := fh.read(_CHUNK):
            h.update(chunk)
    return "sha256:" + h.hexdigest()


def _sha256_repo(path: str) -> bool:
    git = path.split("/objects/", 1)[0]
    try:
        return "sha256" in Path(git, "config").read_text(errors="replace").lower()
    except OSError:
        return False


def _verify(f: ObjFile, fd: int) -> bool:
    """Whether the bytes behind ``fd`` are the file the snapshot recorded."""
    kind, _, want = f.check.partition(":")
    os.lseek(fd, 0, os.SEEK_SET)
    size = os.fstat(fd).st_size
    if kind == "loose":
        h = hashes.sha256(size=size) if len(want) == 64 else hashes.sha1(size=size)
        inflate = zlib.decompressobj()
        try:
            while chunk := os.read(fd, _CHUNK):
                h.update(inflate.decompress(chunk))
            h.update(inflate.flush())
        except zlib.error:
            return False
        return inflate.eof and h.hexdigest() == want
    if kind == "trailer":
        n = len(want) // 2
        if size < n:
            return False
        h = hashes.sha256(size=size) if n == 32 else hashes.sha1(size=size)
        left = size - n
        while left > 0:
            chunk = os.read(fd, min(_CHUNK, left))
            if not chunk:
                return False
            h.update(chunk)
            left -= len(chunk)
        return os.read(fd, n).hex() == want == h.hexdigest()
    h = hashes.sha256(size=size)
    while chunk := os.read(fd, _CHUNK):
        h.update(chunk)
    return h.hexdigest() == want


def _lstat_in(anchor: Anchor, objects: str, rel: str, dirs: dict[str, int | None]
              ) -> os.stat_result | None:
    """``anchor.lstat`` of ``objects/rel``, its directory opened once per ``dirs`` (the
    caller closes them): None when it, or a directory on its way, is gone or not one."""
    d, _, name = rel.rpartition("/")
    if d not in dirs:
        try:
            dirs[d] = anchor.dir(objects + "/" + d if d else objects)
        except (FileNotFoundError, NotADirectoryError, Unsafe):
            dirs[d] = None
    fd = dirs[d]
    if fd is None:
        return None
    try:
        return os.stat(name, dir_fd=fd, follow_symlinks=False)
    except (FileNotFoundError, NotADirectoryError):
        return None
