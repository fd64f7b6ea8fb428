"""The audit log: one JSON object per line, appended atomically, rotated by size.

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
  size it found, and raises :class:`AuditError`: a record is wholly in the
  log or not at all, and the caller (the hook) then fails closed;
* rotates the log once the next record would take it past
  ``$GUARD_AUDIT_MAX_BYTES`` (default 16 MiB, ``0`` turns rotation off): the
  full file is renamed to ``<name>.<n>`` (``n`` = 1, 2, ... oldest first) and
  the record starts a new file. Writers waiting for the lock on the old file
  notice that its name now points elsewhere and reopen, so no record is lost
  or written twice. Rotated files are never deleted by guard.

:func:`read` yields the rotated parts first, then the current file.

Every record is chained (:func:`chain_lines`, checked by :func:`verify` and ``guard
audit verify``): under the same lock, the writer appends to each line
``"chain_seq": N, "chain": MAC`` as its last two keys, where ``N`` counts the records
of the log (1, 2, ..., across rotations) and ``MAC`` is the HMAC-SHA256, under the
installation's key (:func:`load_key`, ``<data>/keys/audit.key``, 0600), of ``N``, the
previous record's MAC and the record's own bytes (every other key of the line: the
verdict and the fleet envelope alike). The chain continues from the log's last
record (read back under the lock; an appender that wrote it remembers it). A record
without the key cannot be added, edited, removed or moved without :func:`verify`
naming its line; what the chain does not prove is said in SECURITY.md. A writer gives
each record it wrote (the dict) the chain keys, plus ``chain_prev`` (the MAC it
continues from) and ``chain_log`` (the log's name), so that the copy shipped through
syslog can be checked on its own at the collector (:func:`verify_shipped`).

Every front door writes through one :class:`AuditSink` (the hook runner, ``guard
check --audit-log``, the MCP proxy, the monitor), and every record shares one
envelope: ``ts``, ``type`` (``verdict``, ``violation``, ``notice``), ``source``
(``hook``, ``check``, ``mcp``, ``monitor``). A verdict record is made by
:meth:`guard.gate.Verdict.record`, so a hook's and a proxy's decisions read the
same.
"""

from __future__ import annotations

import atexit
import contextlib
import errno
import fcntl
import hmac
import json
import os
import re
import stat
import threading
from collections.abc import Callable, Iterator, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Generic, Protocol, TypeVar

from guard.effects import GuardError
from guard.paths import Roots, project_key

AUDIT_SUBDIR = "audit"
MAX_BYTES_ENV = "GUARD_AUDIT_MAX_BYTES"
DEFAULT_MAX_BYTES = 16 << 20


class AuditError(GuardError):
    """The audit log cannot be written or read."""


KEY_SUBDIR = "keys"
KEY_NAME = "audit.key"
KEY_BYTES = 32
#: the keys the writer adds to every line of an audit log, last
CHAIN_KEYS = ("chain_seq", "chain")
#: the chain keys a shipped record carries (:func:`append_records`): the local line's two, the MAC
#: it continues from, and the log's file name (one chain per log: per user and project)
SHIPPED_CHAIN_KEYS = ("chain_seq", "chain", "chain_prev", "chain_log")
_CHAIN = re.compile(rb', "chain_seq": ([1-9][0-9]{0,17}), "chain": "([0-9a-f]{64})"\}\Z')
_keys: dict[Path, tuple[tuple[int, ...], bytes]] = {}  # path -> (file identity, key)


_default_key: tuple[tuple[str | None, str | None], Path] | None = None


def key_path(data: Path | None = None) -> Path:
    """The installation's audit key: ``<data>/keys/audit.key`` (guard's data directory,
    looked up again only when ``$HOME`` or ``$XDG_DATA_HOME`` changed)."""
    global _default_key
    if data is not None:
        return data / KEY_SUBDIR / KEY_NAME
    env = (os.environ.get("HOME"), os.environ.get("XDG_DATA_HOME"))
    if _default_key is None or _default_key[0] != env:
        from guard.paths import data_dir

        _default_key = (env, data_dir() / KEY_SUBDIR / KEY_NAME)
    return _default_key[1]


def _read_key(path: Path) -> bytes:
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        st = os.fstat(fd)
        identity = (st.st_dev, st.st_ino, st.st_mode, st.st_uid)
        if not stat.S_ISREG(st.st_mode):
            raise AuditError(f"the audit key {path} is not a regular file; remove it")
        if st.st_uid != os.getuid() or st.st_mode & 0o077:
            raise AuditError(
                f"the audit key {path} is not this user's alone (owner uid {st.st_uid},"
                f" mode {stat.S_IMODE(st.st_mode):o}); `chmod 600` it if it is yours, else"
                " remove it (records chained with it can then no longer be verified)"
            )
        key = os.read(fd, KEY_BYTES + 1)
    finally:
        os.close(fd)
    if len(key) != KEY_BYTES:
        raise AuditError(
            f"the audit key {path} holds {len(key)} bytes, not {KEY_BYTES}; it was damaged"
        )
    _keys[path] = (identity, key)
    return key


def load_key(path: Path | None = None, *, create: bool = True) -> bytes:
    """The installation's audit key (created, 0600, in a 0700 directory, when missing and
    ``create``). Raises :class:`AuditError` naming the file and the fix."""
    path = key_path() if path is None else path
    cached = _keys.get(path)
    if cached is not None:
        try:
            st = os.stat(path, follow_symlinks=False)
            if (st.st_dev, st.st_ino, st.st_mode, st.st_uid) == cached[0]:
                return cached[1]  # still the key read before (one stat per record)
        except OSError:
            pass
    try:
        try:
            key = _read_key(path)
        except FileNotFoundError:
            if not create:
                raise AuditError(
                    f"no audit key at {path}: records are chained with the key of the"
                    " installation (and user) that wrote them; run this as that user, or"
                    " name the key with --key"
                ) from None
            path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            tmp = path.with_name(f".{path.name}.{os.getpid()}.{os.urandom(4).hex()}")
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
            try:
                os.write(fd, os.urandom(KEY_BYTES))
                os.fsync(fd)
            finally:
                os.close(fd)
            try:
                os.link(tmp, path)  # never replaces a key another writer made meanwhile
            except FileExistsError:
                pass
            finally:
                os.unlink(tmp)
            key = _read_key(path)
    except OSError as exc:
        raise AuditError(f"cannot read the audit key {path}: {exc.strerror or exc}") from exc
    return key


def load_key_path() -> Path:
    """The installation's key file, made first when missing (see :func:`load_key`)."""
    path = key_path()
    load_key(path)
    return path


def _mac(key: bytes, seq: int, prev: bytes, body: bytes) -> bytes:
    return hmac.digest(key, b"%d\n%s\n%s" % (seq, prev, body), "sha256").hex().encode()


def chain_lines(
    key: bytes,
    data: bytes,
    head: tuple[int, bytes],
    links: list[tuple[int, bytes, bytes]] | None = None,
) -> tuple[bytes, tuple[int, bytes]]:
    """``data`` (lines, each one JSON object) with the chain keys added to each, after
    ``head`` (the last record's number and MAC; ``(0, b"")`` for none); and the new head.
    ``links`` gets each line's (number, MAC, the MAC it continues from)."""
    seq, prev = head
    out = []
    for body in data.split(b"\n")[:-1]:
        if len(body) < 3 or body[-1:] != b"}":
            raise AuditError("an audit record must be a non-empty JSON object on one line")
        seq += 1
        mac = _mac(key, seq, prev, body)
        if links is not None:
            links.append((seq, mac, prev))
        prev = mac
        out.append(b'%s, "chain_seq": %d, "chain": "%s"}\n' % (body[:-1], seq, prev))
    return b"".join(out), (seq, prev)


def _chain_of(line: bytes) -> tuple[int, bytes, bytes] | None:
    """(number, MAC, the bytes the MAC covers) of a chained line, None when it has none."""
    m = _CHAIN.search(line)
    if m is None:
        return None
    return int(m.group(1)), m.group(2), line[: m.start()] + b"}"


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
    # the same text as strftime("%Y-%m-%dT%H:%M:%S.%fZ"), in less time
    return datetime.now(UTC).replace(tzinfo=None).isoformat(timespec="microseconds") + "Z"


def encode(record: dict[str, Any]) -> bytes:
    """One record as one line of UTF-8 JSON (newlines inside values are escaped by JSON)."""
    try:
        line = json.dumps(record, ensure_ascii=False, sort_keys=True, default=str)
    except (TypeError, ValueError) as exc:
        raise AuditError(f"audit record cannot be encoded as JSON: {exc}") from exc
    return line.encode("utf-8", "surrogateescape") + b"\n"


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
    (:func:`verify_shipped`)."""
    stamp = now_iso()
    for r in records:
        r.setdefault("ts", stamp)  # the dict as written: a shipped copy must match it
    appender.append(encode_many(records))
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
    opened again. The torn-tail check reads nothing while the file ends where this
    appender's last write ended. Not thread-safe: one writer thread (or the owner's
    loop) at a time, which :class:`BufferedWriter` guarantees.

    ``audit=False`` appends like :func:`guard.planning._store.append_lines` (a
    session's event log: mode 0644, no repair, no rotation, the directory must exist).
    """

    def __init__(self, path: Path, *, audit: bool = True) -> None:
        self.path = path
        self.audit = audit
        self._fd = -1
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
            fd = self._fd
            fcntl.flock(fd, fcntl.LOCK_EX)
            mine = os.fstat(fd)
            try:
                st = os.stat(self.path, follow_symlinks=False)
                moved = (st.st_dev, st.st_ino) != (mine.st_dev, mine.st_ino)
            except FileNotFoundError:
                moved = True
            if moved:  # rotated or removed while closed or while we waited: open it again
                self.close()
                continue
            size = mine.st_size
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


def encode_many(records: list[dict[str, Any]]) -> bytes:
    """Records as lines, each stamped with ``ts`` (the same for the batch) if it has none."""
    stamp = now_iso()
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


class AuditSink(Protocol):
    """Where a front door's records go. ``roots`` are those the decision was made against.

    ``write`` raises :class:`AuditError` when the record cannot be kept; the gate
    then turns the verdict into a deny (an unrecorded allow is not allowed).
    """

    def write(self, record: Mapping[str, Any], roots: Roots | None = None) -> None: ...


class AuditLog:
    """The audit log as a sink: ``path``, or the project's log of the decision's roots."""

    def __init__(self, path: Path | None = None) -> None:
        self.path = path

    def write(self, record: Mapping[str, Any], roots: Roots | None = None) -> None:
        if self.path is None and roots is None:
            cwd = record.get("cwd")
            roots = Roots.discover(cwd if isinstance(cwd, str) and cwd else None)
        # a dict is written as is: it gets the chain keys its shipped copy carries
        append(record if isinstance(record, dict) else dict(record), self.path, roots=roots)


class MemorySink:
    """Keeps records in a list (tests, and front doors that show them later)."""

    def __init__(self) -> None:
        self.records: list[dict[str, Any]] = []

    def write(self, record: Mapping[str, Any], roots: Roots | None = None) -> None:
        self.records.append(dict(record))


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


T = TypeVar("T")

#: Seconds a written batch may wait for its fsync, so that one fsync covers many batches.
SYNC_INTERVAL = 0.05

#: Writes a batch of items; per item None (written) or why it could not be, and the
#: files to fsync.
PersistBatch = Callable[[list[T]], tuple[list[str | None], set[Path]]]


class BufferedWriter(Generic[T]):
    """Writes records off the caller's path, in order, in batches, and never drops one.

    :meth:`submit` numbers each item (1, 2, ...) and returns at once. A thread
    hands everything queued since its last batch to ``persist``, which writes
    it (one ``write(2)`` per file); :attr:`written` is then the number of the
    last item of the batch. An owner that has a moment anyway may instead write
    the queue itself with :meth:`drain` (no hand-off between threads, no wake-up):
    the MCP proxy does, once it has forwarded the call, while the server works.
    Batches are written one at a time and in order, whoever writes them.
    A second thread fsyncs the files written, at most
    every :data:`SYNC_INTERVAL` seconds, so one fsync covers every batch of
    that interval.

    What this guarantees, and what a caller must do for it:

    * a killed process (SIGKILL included) loses only the items not yet
      :attr:`written`: a caller that must not act on an unrecorded item waits
      for it (:meth:`ready`, :meth:`flush`) — the MCP proxy forwards no answer
      of a checked call before the call's record is written;
    * a crash of the machine (power loss) can also lose what was written but
      not yet synced: at most the last :data:`SYNC_INTERVAL` seconds plus the
      time the fsync took;
    * :meth:`close` (called by the owner on shutdown, on SIGTERM/SIGINT, and
      registered with :mod:`atexit`) writes and syncs everything before it
      returns;
    * an item that could not be written (a full disk) is reported by
      :meth:`failure`, and :attr:`broken` stays set until a batch succeeds;
      the owner then writes the next item with :meth:`write_now` (on its own
      path, so that it can refuse the call when that write fails too).
    """

    def __init__(
        self,
        persist: PersistBatch[T],
        *,
        log: Callable[[str], None] | None = None,
        sync_interval: float = SYNC_INTERVAL,
    ) -> None:
        self._persist = persist
        self._log = log or (lambda _text: None)
        self.sync_interval = sync_interval
        self._cond = threading.Condition()
        self._queue: list[tuple[int, T]] = []
        self._persisting = threading.Lock()  # one batch at a time, taken and written in order
        self.submitted = 0
        self.written = 0
        self.broken: str | None = None
        self._failures: dict[int, str] = {}
        self._flushing = 0  # callers waiting in flush()
        self._notify: Callable[[], None] | None = None
        self._notify_at: int | None = None
        self._thread: threading.Thread | None = None
        self._closing = False
        self._dirty: set[Path] = set()
        self._sync_cond = threading.Condition()
        self._sync_stop = False
        self._stopping = threading.Event()
        self._syncer: threading.Thread | None = None

    # -- the owner's side ------------------------------------------------------------------

    def start(self, notify: Callable[[], None] | None = None) -> None:
        """Start the threads; ``notify`` is called (from the thread that wrote it) when an item
        a :meth:`ready` call asked about is written."""
        self._notify = notify
        self._thread = threading.Thread(target=self._run, name="guard-audit-writer", daemon=True)
        self._syncer = threading.Thread(target=self._sync_run, name="guard-audit-sync", daemon=True)
        self._thread.start()
        self._syncer.start()
        atexit.register(self.close)

    def submit(self, item: T, *, wake: bool = True) -> int:
        """Queue ``item``; its number. Without a running thread it is written now.

        ``wake=False`` leaves the writer asleep until :meth:`kick` (or the next
        :meth:`ready`, :meth:`flush` or :meth:`close`): a caller that has something more
        urgent to do first (forward the call) kicks it after that, so that the writer does
        not take the interpreter lock from it in between.
        """
        if self._thread is None:
            return self.write_now(item)
        with self._cond:
            self.submitted += 1
            seq = self.submitted
            self._queue.append((seq, item))
            if wake:
                self._cond.notify()
        return seq

    def kick(self) -> None:
        """Wake the writer for the items queued with ``wake=False``."""
        with self._cond:
            if self._queue:
                self._cond.notify()

    def write_now(self, item: T) -> int:
        """Write ``item`` before returning (after everything queued before it); its number.

        Raises :class:`AuditError` when it cannot be written.
        """
        with self._persisting:  # after the batch under way, with everything queued before
            with self._cond:
                self.submitted += 1
                seq = self.submitted
                batch, self._queue = self._queue, []
            batch.append((seq, item))
            errors = self._write_batch(batch)
        if errors[-1] is not None:
            raise AuditError(errors[-1])
        return seq

    def drain(self) -> None:
        """Write everything queued, now, on the caller's thread (no hand-off to the writer
        thread): for an owner whose loop has a moment while it waits anyway (the MCP proxy,
        once it has forwarded the call, writes while the server works)."""
        with self._persisting:
            with self._cond:
                batch, self._queue = self._queue, []
            if batch:
                self._write_batch(batch)

    @contextlib.contextmanager
    def persisting(self) -> Iterator[None]:
        """Hold off every batch for the block (e.g. to close files ``persist`` keeps open)."""
        with self._persisting:
            yield

    def ready(self, seq: int) -> bool:
        """True when item ``seq`` is written (or failed); else ``notify`` is called once it is."""
        with self._cond:
            if self.written >= seq:
                return True
            if self._notify_at is None or seq < self._notify_at:
                self._notify_at = seq
            if self._queue:
                self._cond.notify()
            return False

    def failure(self, seq: int) -> str | None:
        """Why item ``seq`` could not be written; None when it was (or is not yet known)."""
        with self._cond:
            return self._failures.get(seq)

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until everything submitted so far is written; False on timeout."""
        with self._cond:
            target = self.submitted
            self._flushing += 1
            try:
                self._cond.notify_all()
                return self._cond.wait_for(lambda: self.written >= target, timeout)
            finally:
                self._flushing -= 1

    def close(self, timeout: float = 30.0) -> bool:
        """Write and sync everything queued, stop the threads; False when items are left.

        Idempotent; safe from an atexit hook or a signal handler's shutdown path.
        """
        thread, syncer = self._thread, self._syncer
        with self._cond:
            self._closing = True
            self._cond.notify_all()
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)
        self._stopping.set()
        with self._sync_cond:
            self._sync_stop = True
            self._sync_cond.notify_all()
        if syncer is not None and syncer is not threading.current_thread():
            syncer.join(timeout)
        self._sync_dirty()  # whatever the syncer had not reached
        with contextlib.suppress(Exception):
            atexit.unregister(self.close)
        with self._cond:
            left = self.submitted - self.written
        if left:
            self._log(f"audit log: {left} records not yet written")
        return left == 0

    # -- the threads -----------------------------------------------------------------------

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._queue and not self._closing:
                    self._cond.wait()
                if not self._queue:
                    return  # closing, and everything is written
            self.drain()

    def _write_batch(self, batch: list[tuple[int, T]]) -> list[str | None]:
        """Persist ``batch`` (the caller holds ``_persisting`` and took it from the queue
        under it, so batches are written in the order of their numbers)."""
        try:
            errors, dirty = self._persist([item for _, item in batch])
        except Exception as exc:  # a bug in persist: every item of the batch failed
            errors, dirty = [f"{type(exc).__name__}: {exc}"] * len(batch), set()
        wake = False
        with self._cond:
            for (seq, _), err in zip(batch, errors, strict=True):
                if err is not None:
                    if len(self._failures) >= 10000:
                        self._failures.pop(next(iter(self._failures)))
                    self._failures[seq] = err
            self.broken = next((e for e in reversed(errors) if e is not None), None)
            self.written = max(self.written, batch[-1][0])
            if self._notify_at is not None and self.written >= self._notify_at:
                self._notify_at = None
                wake = True
            if self._flushing:  # else nobody waits for it: wake no thread for nothing
                self._cond.notify_all()
        if dirty:
            with self._sync_cond:
                self._dirty |= dirty
                self._sync_cond.notify()
        if wake and self._notify is not None:
            try:
                self._notify()
            except Exception as exc:  # e.g. the owner's event loop is already closed
                self._log(f"audit log: cannot wake the owner: {exc}")
        return errors

    def _sync_run(self) -> None:
        while True:
            with self._sync_cond:
                while not self._dirty and not self._sync_stop:
                    self._sync_cond.wait()
                if self._sync_stop:
                    return  # close() syncs what is left
            self._stopping.wait(self.sync_interval)  # let more batches come: one fsync
            self._sync_dirty()

    def _sync_dirty(self) -> None:
        with self._sync_cond:
            paths, self._dirty = self._dirty, set()
        for path in sorted(paths):
            try:
                fsync_file(path)
            except OSError as exc:
                self._log(f"audit log: cannot sync {path}: {exc.strerror or exc}")
