"""Baseline copies in a file with no name, held open by the monitor alone.

Another process of the same user can write anything the user can write on disk,
guard's data directory included: a copy stored there is the agent's to change. The
held store is one file without a name (``O_TMPFILE`` in the store directory, or a
``memfd`` where the file system has no ``O_TMPFILE``), open only in this process and
reached only through its descriptor. The monitor makes itself non-dumpable
(:func:`make_undumpable`), so another process of the same user cannot open its
``/proc/PID/fd`` or attach to it with ptrace either. Root can still do both: see
SECURITY.md.

Each copy is a region of the file, named by its SHA-256 and checked against it on
every read. What does not fit under the limit is kept on disk only (verified by
SHA-256 when read; the baseline's report says how many).
"""

from __future__ import annotations

import ctypes
import os
import threading

from guard.monitor import hashes

#: bytes of baseline copies held in the nameless file (beyond: on disk only)
DEFAULT_HELD_LIMIT = 1 << 30
_PR_SET_DUMPABLE = 4
_O_TMPFILE = getattr(os, "O_TMPFILE", 0)


def make_undumpable() -> str:
    """``prctl(PR_SET_DUMPABLE, 0)``: ``/proc/PID/fd``, ``/proc/PID/mem`` and ptrace
    become root's only. Returns "" on success, else why it failed (the caller says so).

    An ``execve`` resets it, so the commands guard starts are not affected."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0) != 0:
            return os.strerror(ctypes.get_errno())
    except (OSError, AttributeError) as exc:
        return str(exc)
    return ""


class HeldStore:
    """Content-addressed copies in one nameless file: sha256 -> (offset, length)."""

    def __init__(self, near: str, limit: int = DEFAULT_HELD_LIMIT) -> None:
        self.limit = limit
        self.kind = "O_TMPFILE"
        fd = -1
        if _O_TMPFILE:
            try:
                fd = os.open(near, _O_TMPFILE | os.O_RDWR | os.O_CLOEXEC, 0o600)
            except OSError:
                fd = -1
        if fd < 0:
            fd = os.memfd_create("guard-baseline", os.MFD_CLOEXEC)
            self.kind = "memfd"
        self.fd = fd
        self.size = 0
        #: copies that did not fit under the limit (kept on disk only)
        self.refused = 0
        self._where: dict[str, tuple[int, int]] = {}
        self._lock = threading.Lock()

    def reserve(self, n: int) -> int | None:
        """A region of ``n`` bytes to write a copy into, or None when over the limit."""
        with self._lock:
            if self.fd < 0 or self.size + n > self.limit:
                self.refused += 1
                return None
            off, self.size = self.size, self.size + n
            return off

    def write(self, off: int, data: bytes | memoryview) -> None:
        view = memoryview(data)
        while view:
            n = os.pwrite(self.fd, view, off)
            view, off = view[n:], off + n

    def commit(self, sha: str, off: int, n: int) -> None:
        """The region holds the bytes whose SHA-256 is ``sha`` (written and hashed)."""
        with self._lock:
            self._where.setdefault(sha, (off, n))

    def put(self, sha: str, data: bytes) -> bool:
        """Hold ``data`` (whose SHA-256 is ``sha``). False when over the limit."""
        if self.has(sha):
            return True
        off = self.reserve(len(data))
        if off is None:
            return False
        self.write(off, data)
        self.commit(sha, off, len(data))
        return True

    def has(self, sha: str) -> bool:
        with self._lock:
            return sha in self._where

    def get(self, sha: str) -> bytes | None:
        """The held bytes for ``sha``, checked against it; None when not held or not whole."""
        with self._lock:
            where = self._where.get(sha)
            fd = self.fd
        if where is None or fd < 0:
            return None
        off, n = where
        chunks: list[bytes] = []
        got = 0
        while got < n:
            chunk = os.pread(fd, n - got, off + got)
            if not chunk:
                return None
            chunks.append(chunk)
            got += len(chunk)
        data = b"".join(chunks)
        return data if hashes.sha256(data).hexdigest() == sha else None

    def close(self) -> None:
        with self._lock:
            fd, self.fd = self.fd, -1
            self._where.clear()
        if fd >= 0:
            os.close(fd)
