"""File operations that never follow, never block and never adopt.

Everything the monitor does to a watched tree goes through here:

* a path is reached from a directory file descriptor held since the monitor
  started (:class:`Anchor`), one component at a time with
  ``openat(O_DIRECTORY | O_NOFOLLOW)``: a directory swapped for a symlink after
  an event is refused (:class:`Unsafe`), never descended through;
* a file is opened for reading only when it is a regular file: it is pinned with
  ``O_PATH | O_NOFOLLOW`` (which opens nothing: no FIFO rendezvous, no device
  driver), checked with ``fstat``, and only then reopened for reading through
  ``/proc/self/fd`` — the same inode, whatever the name points to by then;
* renames, creations and attribute changes name their target relative to the
  parent's descriptor, so the object acted on is the one that was checked.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import itertools
import os
import stat
import struct
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

from guard.monitor import hashes

_CHUNK = 1 << 20
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_O_PATH = getattr(os, "O_PATH", 0)


class Unsafe(OSError):
    """A path cannot be reached without following a symlink (or is not what was observed)."""


def kind_of(mode: int) -> str:
    """``file``, ``dir``, ``symlink``, ``fifo``, ``socket``, ``char-device`` or ``block-device``."""
    if stat.S_ISREG(mode):
        return "file"
    if stat.S_ISDIR(mode):
        return "dir"
    if stat.S_ISLNK(mode):
        return "symlink"
    if stat.S_ISFIFO(mode):
        return "fifo"
    if stat.S_ISSOCK(mode):
        return "socket"
    if stat.S_ISCHR(mode):
        return "char-device"
    if stat.S_ISBLK(mode):
        return "block-device"
    return "unknown"


class Identity(NamedTuple):
    """What ties content to the moment it was read: a change moves one of these."""

    dev: int
    ino: int
    size: int
    mtime_ns: int
    ctime_ns: int

    @classmethod
    def of(cls, st: os.stat_result) -> Identity:
        return cls(st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def identity(path: Path) -> tuple[int, int]:
    """(device, inode) of ``path`` itself (a symlink is not followed)."""
    st = os.lstat(path)
    return st.st_dev, st.st_ino


def open_dir_at(dirfd: int, name: str) -> int:
    """``openat(dirfd, name, O_DIRECTORY|O_NOFOLLOW)``; a symlink or non-directory is Unsafe."""
    try:
        return os.open(name, _DIR_FLAGS, dir_fd=dirfd)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            raise Unsafe(exc.errno, f"{name} is not a directory (a symlink is never followed)")\
                from exc
        raise


class Anchor:
    """Directory descriptors for trusted bases; paths below them are reached without following.

    ``bases`` are absolute, already canonical directories (the watched roots, the
    quarantine's parent). Each is opened once (following, since it is trusted)
    and kept open until :meth:`close`.
    """

    def __init__(self, bases: list[str]) -> None:
        self._fds: dict[str, int] = {}
        self._retired: list[int] = []  # replaced by rebind: closed with the others
        for b in sorted(set(bases), key=len, reverse=True):
            with contextlib.suppress(OSError):
                self._fds[b] = os.open(b, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)

    def close(self) -> None:
        fds, self._fds = self._fds, {}
        retired, self._retired = self._retired, []
        for fd in [*fds.values(), *retired]:
            with contextlib.suppress(OSError):
                os.close(fd)

    def rebind(self, base: str, fd: int) -> None:
        """Hold ``fd`` for ``base`` from now on (a watched root recreated at its path). The
        old descriptor stays open until :meth:`close`: another thread may be using it."""
        old = self._fds.get(base)
        if old is not None:
            self._retired.append(old)
        self._fds[base] = fd

    def fd_of(self, base: str) -> int | None:
        """The descriptor held for ``base`` (None when it is not one of the bases)."""
        return self._fds.get(base)

    def covers(self, path: str) -> bool:
        """Whether ``path`` is at or below one of the bases."""
        return any(path == b or path.startswith(b.rstrip("/") + "/") for b in self._fds)

    def _base(self, path: str) -> tuple[int, list[str]]:
        for base, fd in self._fds.items():
            if path == base:
                return fd, []
            if path.startswith(base.rstrip("/") + "/"):
                rest = path[len(base.rstrip("/")) + 1 :]
                return fd, [p for p in rest.split("/") if p]
        raise Unsafe(errno.EXDEV, f"{path} is outside the trees guard watches")

    def parent(self, path: str, *, create: bool = False) -> tuple[int, str]:
        """(descriptor of the parent directory, last name). The caller closes the fd.

        Every component is opened with O_NOFOLLOW; with ``create`` missing
        directories are made (mode 0700). ``..`` and ``.`` are refused.
        """
        fd, parts = self._base(path)
        if not parts:
            raise Unsafe(errno.EINVAL, f"{path}: a watched root has no parent here")
        if any(p in (".", "..") for p in parts):
            raise Unsafe(errno.EINVAL, f"{path}: '.' and '..' are not followed")
        cur = os.dup(fd)
        try:
            for name in parts[:-1]:
                try:
                    nxt = open_dir_at(cur, name)
                except FileNotFoundError:
                    if not create:
                        raise
                    with contextlib.suppress(FileExistsError):
                        os.mkdir(name, 0o700, dir_fd=cur)
                    nxt = open_dir_at(cur, name)
                os.close(cur)
                cur = nxt
        except BaseException:
            os.close(cur)
            raise
        return cur, parts[-1]

    def dir(self, path: str, *, create: bool = False) -> int:
        """A descriptor of the directory ``path`` itself, reached without following."""
        fd, parts = self._base(path)
        if not parts:
            return os.dup(fd)
        pfd, name = self.parent(path, create=create)
        try:
            try:
                return open_dir_at(pfd, name)
            except FileNotFoundError:
                if not create:
                    raise
                with contextlib.suppress(FileExistsError):
                    os.mkdir(name, 0o700, dir_fd=pfd)
                return open_dir_at(pfd, name)
        finally:
            os.close(pfd)

    def lstat(self, path: str) -> os.stat_result | None:
        """lstat without following any component; None when it (or a parent) is gone.

        A parent that became a symlink also gives None: the observed path no
        longer exists as such (what the symlink now is, is reported on its own).
        """
        try:
            fd, parts = self._base(path)
        except Unsafe:
            return None
        if not parts:
            return os.fstat(fd)
        try:
            pfd, name = self.parent(path)
        except (FileNotFoundError, NotADirectoryError, Unsafe):
            return None
        try:
            return os.stat(name, dir_fd=pfd, follow_symlinks=False)
        except (FileNotFoundError, NotADirectoryError):
            return None
        finally:
            os.close(pfd)


@contextlib.contextmanager
def open_regular(dirfd: int, name: str) -> Iterator[tuple[int, os.stat_result]]:
    """Yield (read fd, fstat) of ``name`` if it is a regular file, else raise NotRegular.

    The name is pinned with O_PATH|O_NOFOLLOW (no open(2) of a FIFO or device ever
    happens), checked with fstat, and reopened for reading through /proc/self/fd.
    """
    if _O_PATH:
        pin = os.open(name, _O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dirfd)
        try:
            st = os.fstat(pin)
            if not stat.S_ISREG(st.st_mode):
                raise NotRegular(errno.EINVAL, f"{name} is a {kind_of(st.st_mode)}, not a file")
            try:
                fd = os.open(f"/proc/self/fd/{pin}", os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK)
            except FileNotFoundError:  # no /proc: fall back to a non-blocking open by name
                fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC,
                             dir_fd=dirfd)
        finally:
            os.close(pin)
    else:  # pragma: no cover - Linux always has O_PATH
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC,
                     dir_fd=dirfd)
    try:
        st2 = os.fstat(fd)
        if not stat.S_ISREG(st2.st_mode) or (_O_PATH and (st2.st_dev, st2.st_ino)
                                            != (st.st_dev, st.st_ino)):
            raise NotRegular(errno.EINVAL, f"{name} is a {kind_of(st2.st_mode)}, not a file")
        yield fd, st2
    finally:
        os.close(fd)


class NotRegular(OSError):
    """Something that is not a regular file where a regular file was expected."""


def read_all(fd: int) -> bytes:
    os.lseek(fd, 0, os.SEEK_SET)
    chunks: list[bytes] = []
    while chunk := os.read(fd, _CHUNK):
        chunks.append(chunk)
    return b"".join(chunks)


def hash_fd(fd: int) -> tuple[str, int]:
    """(SHA-256, size) of what ``fd`` holds from offset 0."""
    os.lseek(fd, 0, os.SEEK_SET)
    h = hashes.sha256(size=os.fstat(fd).st_size)
    n = 0
    while chunk := os.read(fd, _CHUNK):
        h.update(chunk)
        n += len(chunk)
    return h.hexdigest(), n


#: files larger than this are never read whole by the monitor: a sampled digest instead
HASH_CAP = 256 * 1024 * 1024
_SAMPLES = 16
_SAMPLE = 64 * 1024


def sampled_fd(fd: int, size: int) -> str:
    """``sampled:<SHA-256>`` of a large file: its size and 16 slices of 64 KiB spread
    evenly from the first byte to the last, read with ``pread`` (a hole reads as zeros
    without any disk I/O). Bounded work whatever the size; it tells most changes apart,
    not all of them: a change between the slices with size and times kept is missed."""
    h = hashes.sha256(b"sampled %d\0" % size, size=_SAMPLES * _SAMPLE)
    last = max(size - _SAMPLE, 0)
    for i in range(_SAMPLES):
        off = last * i // (_SAMPLES - 1)
        h.update(os.pread(fd, _SAMPLE, off))
    return "sampled:" + h.hexdigest()


def digest_fd(fd: int, cap: int = HASH_CAP) -> tuple[str, int]:
    """(SHA-256, or a sampled digest beyond ``cap`` bytes, and the size read)."""
    size = os.fstat(fd).st_size
    if size > cap:
        return sampled_fd(fd, size), size
    return hash_fd(fd)


def describe_stable(dirfd: int, name: str, attempts: int = 20) -> dict[str, object]:
    """Kind, mode, size and (for a regular file) SHA-256 of ``name``, read by descriptor.

    For a file, the hash is taken between two fstats that agree on size, mtime
    and ctime, so size and digest describe one version of the bytes; if a writer
    keeps changing it, ``stable`` is False and the last reading is returned.
    """
    st = os.stat(name, dir_fd=dirfd, follow_symlinks=False)
    kind = kind_of(st.st_mode)
    out: dict[str, object] = {"kind": kind, "mode": oct(stat.S_IMODE(st.st_mode)), "size": 0}
    if kind == "symlink":
        out["target"] = os.readlink(name, dir_fd=dirfd)
    if kind != "file":
        return out
    with open_regular(dirfd, name) as (fd, before):
        for _ in range(attempts):
            digest, n = digest_fd(fd)  # sampled beyond HASH_CAP: never endless
            after = os.fstat(fd)
            if Identity.of(before) == Identity.of(after) and n == after.st_size:
                out.update(size=n, sha256=digest, stable=True)
                return out
            before = after
        out.update(size=n, sha256=digest, stable=False)
        return out


def write_new_file(dirfd: int, name: str, data: bytes, mode: int) -> int:
    """Create ``name`` (O_EXCL|O_NOFOLLOW) with ``data``; returns the open fd (caller closes)."""
    fd = os.open(name, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                 0o600, dir_fd=dirfd)
    try:
        view = memoryview(data)
        while view:
            n = os.write(fd, view)
            view = view[n:]
        os.fchmod(fd, mode)
    except BaseException:
        os.close(fd)
        raise
    return fd


def copy_fd_to(src: int, dirfd: int, name: str, mode: int) -> None:
    """Copy an open regular file into a new ``name`` under ``dirfd`` (keeps mode and times)."""
    st = os.fstat(src)
    out = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                  0o600, dir_fd=dirfd)
    try:
        os.lseek(src, 0, os.SEEK_SET)
        while chunk := os.read(src, _CHUNK):
            os.write(out, chunk)
        os.fchmod(out, mode)
        os.utime(out, ns=(st.st_atime_ns, st.st_mtime_ns))
    finally:
        os.close(out)


def xattrs_of(path_or_fd: str | int) -> dict[str, bytes]:
    """Extended attributes (ACLs included: they are ``system.posix_acl_*``); {} if unsupported."""
    out: dict[str, bytes] = {}
    try:
        if isinstance(path_or_fd, int):
            names = os.listxattr(path_or_fd)
        else:
            names = os.listxattr(path_or_fd, follow_symlinks=False)
    except OSError:
        return out
    for n in sorted(names):
        with contextlib.suppress(OSError):
            if isinstance(path_or_fd, int):
                out[n] = os.getxattr(path_or_fd, n)
            else:
                out[n] = os.getxattr(path_or_fd, n, follow_symlinks=False)
    return out


_FS_IOC_GETFLAGS = 0x80086601
_FS_IOC_SETFLAGS = 0x40086602


def inode_flags(fd: int) -> int | None:
    """``chattr`` flags (append-only, immutable, ...) of an open directory or file; None if n/a."""

    try:
        buf = fcntl.ioctl(fd, _FS_IOC_GETFLAGS, b"\0" * 8)
    except OSError:
        return None
    return int(struct.unpack("l", buf)[0]) & 0xFFFFFFFF


def set_inode_flags(fd: int, flags: int) -> None:

    fcntl.ioctl(fd, _FS_IOC_SETFLAGS, struct.pack("l", flags))


#: chattr flags a user sets (append-only, immutable, nodump, noatime, sync, ...); the
#: rest (extents, htree index, ...) are the file system's own bookkeeping
USER_FLAGS = 0x1 | 0x2 | 0x4 | 0x8 | 0x10 | 0x20 | 0x40 | 0x80 | 0x4000 | 0x8000 | 0x10000 \
    | 0x20000 | 0x800000 | 0x20000000


def dir_meta(fd: int) -> str:
    """A digest of a directory's xattrs/ACLs and user inode flags ("" when it has none)."""
    xa = xattrs_of(fd)
    flags = (inode_flags(fd) or 0) & USER_FLAGS
    if not xa and not flags:
        return ""
    h = hashes.sha256()
    for k, v in xa.items():
        h.update(k.encode() + b"\0" + v + b"\0")
    h.update(b"flags %d" % flags)
    return h.hexdigest()[:16]


def dir_meta_at(pfd: int, name: str) -> str:
    """:func:`dir_meta` of the directory ``name`` under ``pfd`` (never following)."""
    fd = open_dir_at(pfd, name)
    try:
        return dir_meta(fd)
    finally:
        os.close(fd)


def reset_dir_meta(fd: int, want: dict[str, bytes], flags: int) -> None:
    """Remove added xattrs/ACLs, put back the ``want`` ones and the user inode ``flags``."""
    have = xattrs_of(fd)
    for k in have:
        if k not in want:
            with contextlib.suppress(OSError):
                os.removexattr(fd, k)
    for k, v in want.items():
        if have.get(k) != v:
            with contextlib.suppress(OSError):
                os.setxattr(fd, k, v)
    cur = inode_flags(fd)
    if cur is not None and (cur & USER_FLAGS) != flags:
        with contextlib.suppress(OSError):
            set_inode_flags(fd, (cur & ~USER_FLAGS) | flags)


_NEW = itertools.count()


def new_file(directory: str, prefix: str = ".new") -> tuple[int, str]:
    """A new file in ``directory`` (guard's own store), opened for writing (0600): named by
    ``prefix``, this process and a counter, or when that name is taken by random bytes
    (``O_EXCL``: never one that was there). Cheaper than ``tempfile.mkstemp`` for each of
    the many small copies phase 1 makes, and tempfile (with shutil, random, bz2 and lzma)
    stays unloaded."""
    name = f"{directory}/{prefix}-{os.getpid()}-{next(_NEW)}"
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    for _ in range(100):
        try:
            return os.open(name, flags, 0o600), name
        except FileExistsError:
            name = f"{directory}/{prefix}-{os.urandom(8).hex()}"
    raise FileExistsError(errno.EEXIST, "no free name for a new file", directory)


def remove_tree(path: str) -> None:
    """Delete the directory ``path`` and everything in it (guard's own store), reached by
    descriptor and never through a symlink (``path`` itself a symlink: nothing is
    deleted); what cannot be deleted is left, as ``shutil.rmtree(ignore_errors=True)``."""
    try:
        fd = os.open(path, _DIR_FLAGS)
    except OSError:
        return
    try:
        _empty(fd)
    finally:
        os.close(fd)
    with contextlib.suppress(OSError):
        os.rmdir(path)


def _empty(dfd: int) -> None:
    with os.scandir(dfd) as it:
        entries = [(e.name, e.is_dir(follow_symlinks=False)) for e in it]
    for name, is_dir in entries:
        with contextlib.suppress(OSError):
            if is_dir:
                sub = os.open(name, _DIR_FLAGS, dir_fd=dfd)
                try:
                    _empty(sub)
                finally:
                    os.close(sub)
                os.rmdir(name, dir_fd=dfd)
            else:
                os.unlink(name, dir_fd=dfd)
