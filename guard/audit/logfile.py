"""The audit log file: one JSON object per line, appended atomically, rotated by size.

The log lives under guard's data directory (``<data>/audit/<project key>.jsonl``),
which every shipped agent is denied writing. Writers are the monitor and the
hook adapters, possibly several processes at once. Each record is written
with a single ``write(2)`` on a descriptor opened with ``O_APPEND`` while an
exclusive ``flock`` is held, so records never interleave and a reader never
sees half a line from a live writer. Under the same lock a writer

* removes a torn last line left by a writer that was killed inside its
  ``write(2)`` (the kernel can stop a large write at a page boundary on
  SIGKILL), so a record is never glued to the rest of a dead one;
* takes a failed or short write (a full disk) back with ``ftruncate`` to the
  size it found, and raises :class:`~guard.audit.AuditError`: a record is wholly in the
  log or not at all, and the caller (the hook) then fails closed;
* rotates the log once the next record would take it past
  ``$GUARD_AUDIT_MAX_BYTES`` (default 16 MiB, ``0`` turns rotation off): the
  full file is renamed to ``<name>.<n>`` (``n`` = 1, 2, ... oldest first) and
  the record starts a new file. Writers waiting for the lock on the old file
  notice that its name now points elsewhere and reopen, so no record is lost
  or written twice. Rotated files are never deleted by guard;
* chains each line to the one before it (:func:`guard.audit.chain.chain_lines`,
  from the head it finds at the end of the log).

:func:`read` yields the rotated parts first, then the current file.

This module holds the file: its path, a record's encoding, appending
(:func:`append`, :func:`append_many`, :class:`Appender`), rotation and reading back.
It does not hold the key or the chain's format (:mod:`guard.audit.chain`), the sinks a
front door writes through (:mod:`guard.audit.sinks`), the batching writer thread
(:mod:`guard.audit.buffered`) or the chain check (:mod:`guard.audit.verify`).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from guard import locking
from guard.audit import AuditError
from guard.audit.chain import SHIPPED_CHAIN_KEYS, _chain_of, chain_lines, load_key
from guard.paths import Roots, project_key

AUDIT_SUBDIR = "audit"
MAX_BYTES_ENV = "GUARD_AUDIT_MAX_BYTES"
DEFAULT_MAX_BYTES = 16 << 20


def _last_line(fd: int, size: int) -> bytes:
    """The last line (without its newline) of the first ``size`` bytes, which end one."""
    end = size - 1
    pos = end
    while pos > 0:
        start = max(0, pos - 65536)
        chunk = os.pread(fd, pos - start, start)
        cut = chunk.rfind(b"\n")
        if cut >= 0:
            return os.pread(fd, end - (start + cut + 1), start + cut + 1)
        pos = start
    return os.pread(fd, end, 0)


def _head_of(fd: int, size: int, path: Path) -> tuple[int, bytes]:
    """The chain's head where the log ends: its last record's (number, MAC), from the
    newest rotated part when the file is empty; ``(0, b"")`` (a new chain) when there is
    no record, or the last one is not chained."""
    if size == 0:
        parts = rotated(path)
        if not parts:
            return 0, b""
        try:
            pfd = os.open(parts[-1], os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW)
        except FileNotFoundError:
            return 0, b""
        try:
            psize = _whole_records_end(pfd, os.fstat(pfd).st_size)
            return _head_of(pfd, psize, parts[-1]) if psize else (0, b"")
        finally:
            os.close(pfd)
    chained = _chain_of(_last_line(fd, size))
    return (0, b"") if chained is None else (chained[0], chained[1])


def project_of(roots: Roots) -> str:
    """The project key: of the worktree, or without one the fallback plan directory's name."""
    if roots.worktree is not None:
        return project_key(roots.worktree)
    return roots.plans.name  # <data>/plans/<project key>


def default_log_path(roots: Roots) -> Path:
    """``<data>/audit/<project key>.jsonl``: guard's data dir, which agents may not write."""
    return roots.data / AUDIT_SUBDIR / f"{project_of(roots)}.jsonl"


def now_iso() -> str:
    """A UTC timestamp with microseconds, the format every record uses."""
    return iso_of(time.time_ns())


def iso_of(ns: int) -> str:
    """``ns`` nanoseconds since the epoch as a record's timestamp: the text of
    ``datetime.strftime("%Y-%m-%dT%H:%M:%S.%fZ")`` in UTC, without importing datetime
    (the monitor writes records before ``guard run``'s command starts)."""
    s, us = divmod(ns // 1000, 1_000_000)
    t = time.gmtime(s)
    return (f"{t.tm_year:04d}-{t.tm_mon:02d}-{t.tm_mday:02d}T{t.tm_hour:02d}:{t.tm_min:02d}"
            f":{t.tm_sec:02d}.{us:06d}Z")


#: json.dumps(record, ensure_ascii=False, sort_keys=True, default=str), made once
_ENCODER = json.JSONEncoder(ensure_ascii=False, sort_keys=True, default=str)


def encode(record: dict[str, Any]) -> bytes:
    """One record as one line of UTF-8 JSON (newlines inside values are escaped by JSON)."""
    try:
        line = _ENCODER.encode(record)
    except (TypeError, ValueError) as exc:
        raise AuditError(f"audit record cannot be encoded as JSON: {exc}") from exc
    return line.encode("utf-8", "surrogateescape") + b"\n"


#: ``<log>.held``: the records of verdicts that could not be logged because the log stayed
#: locked (each answered with a deny). Appended without a lock: one ``write(2)`` with
#: ``O_APPEND`` lands whole, whoever holds the log's lock.
HELD_SUFFIX = ".held"


def append_held(path: Path, record: dict[str, Any], why: str) -> Path:
    """Keep ``record`` in ``<path>.held`` with ``why`` the log refused it, taking no lock
    (guard's data directory is out of a confined command's view, so what holds the log's
    lock cannot stop this write). Returns the file's path; raises OSError."""
    held = path.with_name(path.name + HELD_SUFFIX)
    line = encode_many([{**record, "answered": "deny", "held": why}])
    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW
    fd = os.open(held, flags, 0o600)
    try:
        _write_all(fd, line)
    finally:
        os.close(fd)
    return held


def max_bytes() -> int:
    """The size at which the log rotates: ``$GUARD_AUDIT_MAX_BYTES``, 0 for never."""
    raw = os.environ.get(MAX_BYTES_ENV, "").strip()
    if not raw:
        return DEFAULT_MAX_BYTES
    try:
        value = int(raw)
    except ValueError:
        raise AuditError(
            f"${MAX_BYTES_ENV}={raw!r} is not a number of bytes; set it to an integer"
            " (0 turns rotation off) or unset it"
        ) from None
    if value < 0:
        raise AuditError(f"${MAX_BYTES_ENV}={raw!r} is negative; use 0 to turn rotation off")
    return value


def rotated(path: Path) -> list[Path]:
    """The rotated parts of the log at ``path``, oldest first (``<name>.1``, ``<name>.2`` ...)."""
    pattern = re.compile(re.escape(path.name) + r"\.([0-9]+)")
    found: list[tuple[int, Path]] = []
    try:
        names = os.listdir(path.parent)
    except FileNotFoundError:
        return []
    except OSError as exc:
        raise AuditError(f"cannot list {path.parent}: {exc.strerror or exc}") from exc
    for name in names:
        m = pattern.fullmatch(name)
        if m:
            found.append((int(m.group(1)), path.parent / name))
    return [p for _, p in sorted(found)]


def _open(path: Path) -> int:
    flags = os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW
    try:
        try:
            return os.open(path, flags, 0o600)
        except FileNotFoundError:
            path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            return os.open(path, flags, 0o600)
    except OSError as exc:
        raise AuditError(f"cannot open audit log {path}: {exc.strerror or exc}") from exc


def _whole_records_end(fd: int, size: int) -> int:
    """The offset just after the last newline: a killed writer's torn tail starts there."""
    if size == 0 or os.pread(fd, 1, size - 1) == b"\n":
        return size
    end = size
    while end > 0:
        start = max(0, end - 65536)
        chunk = os.pread(fd, end - start, start)
        cut = chunk.rfind(b"\n")
        if cut >= 0:
            return start + cut + 1
        end = start
    return 0


def _write_all(fd: int, data: bytes) -> None:
    written = 0
    while written < len(data):
        n = os.write(fd, data[written:])
        if n == 0:
            raise OSError(28, "short write (no space left on device?)")
        written += n


def append(record: dict[str, Any], path: Path | None = None, roots: Roots | None = None) -> Path:
    """Append ``record`` to the audit log at ``path`` (default: the project's log).

    Adds ``ts`` when the record has none. Returns the log's path. Raises
    :class:`AuditError` with the path and the cause when the log cannot be
    written; a record is either wholly in the log or not at all.
    """
    if path is None:
        path = default_log_path(roots if roots is not None else Roots.discover())
    return append_many([record], path)


def append_many(records: list[dict[str, Any]], path: Path) -> Path:
    """Append ``records``, in order, to the audit log at ``path`` with one ``write(2)``.

    Like :func:`append` (one lock, torn-tail repair, rotation, take-back on a
    failed write), for a batch: the records are all in the log or none is.
    """
    appender = Appender(path)
    try:
        append_records(appender, records)
    finally:
        appender.close()
    return path


def append_records(appender: Appender, records: list[dict[str, Any]]) -> None:
    """Append ``records`` through ``appender`` (one batch), then give each dict, in place,
    the chain keys a shipped copy carries (:data:`SHIPPED_CHAIN_KEYS`): the record as
    written is the dict less those keys, so a collector can check its MAC
    (:func:`guard.audit.verify.verify_shipped`)."""
    stamp = now_iso()
    for r in records:
        r.setdefault("ts", stamp)  # the dict as written: a shipped copy must match it
    appender.append(encode_many(records, stamp))
    if appender.audit:
        name = appender.path.name
        for r, (seq, mac, prev) in zip(records, appender.links, strict=True):
            r["chain_seq"], r["chain"] = seq, mac.decode()
            r["chain_prev"], r["chain_log"] = prev.decode(), name


class Appender:
    """Appends batches of lines to one file, keeping its descriptor open between batches.

    Each batch: one exclusive ``flock``, one ``write(2)``, a failed write taken back,
    and with ``audit=True`` the torn-tail repair and the rotation (:func:`append_many`
    is one batch through a throwaway appender). The file stays open. Under
    the lock, the path is checked to still name the open file (another writer may
    have rotated it, a session may have been removed): if it does not, the path is
    opened again; that check (one ``lstat``, compared with the device and inode the
    descriptor had when opened) also gives the size. The torn-tail check reads nothing
    while the file ends where this
    appender's last write ended. Not thread-safe: one writer thread (or the owner's
    loop) at a time, which :class:`BufferedWriter` guarantees.

    ``audit=False`` appends like :func:`guard.planning._store.append_lines` (a
    session's event log: mode 0644, no repair, no rotation, the directory must exist).
    """

    def __init__(self, path: Path, *, audit: bool = True) -> None:
        self.path = path
        self.audit = audit
        self._fd = -1
        self._id = (-1, -1)  # (device, inode) of the open file: fixed while it is open
        self._end = -1  # where the last write of this appender ended (-1: unknown)
        self._head: tuple[int, bytes] = (0, b"")  # the chain's head at _end
        #: (number, MAC, previous MAC) of each line of the last batch written
        self.links: list[tuple[int, bytes, bytes]] = []

    def _open(self) -> int:
        if self.audit:
            return _open(self.path)
        flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC
        return os.open(self.path, flags, 0o644)

    def close(self) -> None:
        fd, self._fd, self._end = self._fd, -1, -1
        if fd >= 0:
            os.close(fd)  # releases a lock still held

    def append(self, data: bytes) -> None:
        """Append ``data`` (whole lines) in one write under the lock. Raises AuditError
        (audit log) or OSError (an event log) with the file left as it was."""
        try:
            self._append(data)
        except OSError as exc:
            self.close()
            if not self.audit:
                raise
            raise AuditError(
                f"cannot append to audit log {self.path}: {exc.strerror or exc}"
            ) from exc

    def _append(self, data: bytes) -> None:
        limit = max_bytes() if self.audit else 0
        key = load_key() if self.audit else b""
        for _attempt in range(100):
            if self._fd < 0:
                self._fd = self._open()
                self._end = -1
                try:
                    mine = os.fstat(self._fd)
                except OSError:
                    self.close()
                    raise
                self._id = (mine.st_dev, mine.st_ino)
            fd = self._fd
            locking.flock(fd, f"the audit log {self.path}" if self.audit else str(self.path))
            # One lstat of the path, under the lock: it still names the open file (an
            # inode held open is never reused, so the same device and inode are this
            # file), and then its size is where this batch goes.
            try:
                st = os.stat(self.path, follow_symlinks=False)
                moved = (st.st_dev, st.st_ino) != self._id
            except FileNotFoundError:
                moved = True
            if moved:  # rotated or removed while closed or while we waited: open it again
                self.close()
                continue
            size = st.st_size
            if self.audit and size != self._end:
                whole = _whole_records_end(fd, size)
                if whole != size:
                    os.ftruncate(fd, whole)  # a killed writer's torn tail, never a record
                    size = whole
            out = data
            links: list[tuple[int, bytes, bytes]] = []
            if self.audit:
                head = self._head if size == self._end else _head_of(fd, size, self.path)
                out, head = chain_lines(key, data, head, links)
            if limit and size and size + len(out) > limit:
                parts = rotated(self.path)
                number = int(parts[-1].name.rsplit(".", 1)[1]) + 1 if parts else 1
                os.rename(self.path, self.path.with_name(f"{self.path.name}.{number}"))
                self.close()  # waiting writers see the rename once the lock is released
                continue
            try:
                _write_all(fd, out)
            except OSError:
                with contextlib.suppress(OSError):
                    os.ftruncate(fd, size)  # take back a partial batch
                raise
            self._end = size + len(out)
            if self.audit:
                self._head = head
                self.links = links
            fcntl.flock(fd, fcntl.LOCK_UN)
            return
        raise OSError(errno.EAGAIN, "it keeps being replaced")


def encode_many(records: list[dict[str, Any]], stamp: str | None = None) -> bytes:
    """Records as lines, each stamped with ``ts`` (``stamp``, else now: the same for the
    batch) if it has none."""
    stamp = stamp or now_iso()
    out = []
    for r in records:
        if "chain" in r or "chain_seq" in r or "chain_prev" in r or "chain_log" in r:
            # the writer's to add, never a caller's
            r = {k: v for k, v in r.items() if k not in SHIPPED_CHAIN_KEYS}
        out.append(encode(r if "ts" in r else {"ts": stamp, **r}))
    return b"".join(out)


def fsync_file(path: Path) -> None:
    """Make what was appended to ``path`` durable (a file that is gone needs nothing)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW)
    except FileNotFoundError:
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _records(handle: Any, path: Path) -> Iterator[dict[str, Any]]:
    for number, raw in enumerate(handle, start=1):
        if not raw.strip():
            continue
        try:
            value = json.loads(raw)
        except ValueError as exc:
            raise AuditError(
                f"{path}:{number}: not a JSON record ({exc}); the log may have been edited"
                " by hand — move the bad line aside to read the rest"
            ) from exc
        if not isinstance(value, dict):
            raise AuditError(f"{path}:{number}: record is not a JSON object")
        yield value


def _open_parts(path: Path) -> list[tuple[Path, Any]]:
    """Open every part of the log at once, so that a rotation cannot hide one from us."""
    for _attempt in range(100):
        parts = rotated(path)
        handles: list[tuple[Path, Any]] = []
        try:
            for part in [*parts, path]:
                try:
                    handles.append((part, part.open("rb")))
                except FileNotFoundError:
                    if part != path:
                        break  # renamed under us: start again
            else:
                if rotated(path) == parts:
                    return handles
        except OSError as exc:
            for _, h in handles:
                h.close()
            raise AuditError(f"cannot read audit log {path}: {exc.strerror or exc}") from exc
        for _, h in handles:
            h.close()
    raise AuditError(f"cannot read audit log {path}: it keeps being rotated")


def read(path: Path) -> Iterator[dict[str, Any]]:
    """The records of a log, rotated parts first, in order.

    Every part is opened before the first is read, so a rotation meanwhile
    neither hides nor repeats a record. A malformed line is an error naming
    its file and line number.
    """
    handles = _open_parts(path)
    try:
        for part, handle in handles:
            yield from _records(handle, part)
    finally:
        for _, handle in handles:
            handle.close()
