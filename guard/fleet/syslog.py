"""Shipping audit records as RFC 5424 syslog, without a decision ever waiting for it.

``[audit] syslog = "unix:/dev/log" | "tcp://HOST:PORT" | "udp://HOST:PORT"`` (the
effective table: the managed layer's keys win). The local audit log stays the source
of truth; shipping is a copy:

* the writer of a record (the hook, hookd, ``guard check``, the MCP proxy, the monitor)
  appends it, once it is in the local log, to a **spool** in guard's data directory
  (``<data>/spool/syslog-<key of the target>/queue``: one ``write(2)`` under ``flock``,
  like the audit log) and returns. Nothing on that path touches the network. A spool
  past ``spool_max_bytes`` takes no more records; each one refused is counted, and the
  count is shipped as a ``notice`` record once there is room;
* a **shipper** process (``python -m guard.fleet.syslog SPOOL``; one per spool, started
  by the first writer that finds none, kept by an exclusive lock) sends the spool in
  order and keeps its place in ``sent``. On TCP it counts as sent only what the peer's
  kernel acknowledged (``SIOCOUTQ``); after a lost connection it resends from there, so
  a record may arrive twice (its ``record_id`` says so) but is never skipped. After a
  restart (of the shipper, the machine or the collector) it resumes from ``sent``.
  When everything is sent the spool is emptied. It exits after ``$GUARD_SHIP_IDLE``
  seconds (default 300) with nothing to send; while records wait it keeps trying, at
  most 5 s apart.

Each record is one message: ``<PRI>1 TS HOST openoxide-guard - TYPE - JSON`` where
``TS`` and ``HOST`` are the record's, ``TYPE`` is ``verdict``, ``violation`` or
``notice``, and ``JSON`` is the record as ASCII JSON (nothing for a relay to escape),
with the chain keys its audit log writer gave it, so that the collector can check it
(``guard audit verify --shipped``).
TCP uses octet-counting framing (RFC 6587: ``LEN SP MSG``); UDP and Unix datagram
sockets one datagram per message. A record whose message would pass
:data:`MAX_MESSAGE` bytes is shipped shortened (its envelope and verdict, and the size
and SHA-256 of the whole record, which the local log keeps whole).
"""

# Lazy imports: ctypes only when the shipper watches its spool, the audit key only when it
# signs a notice: hooks ship records (speed).

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import json
import os
import select
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from guard import locking
from guard.fleet.records import stamp
from guard.paths import data_dir

APP_NAME = "openoxide-guard"
MAX_MESSAGE = 60 * 1024  # below rsyslog's maxMessageSize="64k" with the header
IDLE = float(os.environ.get("GUARD_SHIP_IDLE", "300"))  # seconds a shipper waits for work
BATCH = 1 << 20  # bytes of the spool read (and sent) at a time
FACILITIES = {
    "kern": 0, "user": 1, "mail": 2, "daemon": 3, "auth": 4, "syslog": 5, "lpr": 6,
    "news": 7, "uucp": 8, "cron": 9, "authpriv": 10, "ftp": 11,
    **{f"local{n}": 16 + n for n in range(8)},
}  # fmt: skip
#: RFC 5424 severities: error for a failed pipeline, warning for a refusal or a violation
SEVERITY = {"deny": 4, "ask": 5, "allow": 6, "allow_confined": 6}
SIOCOUTQ = 0x5411  # TIOCOUTQ: bytes in a TCP socket's send queue not yet acknowledged
KEEP = (
    "ts", "type", "source", "audit_schema", "record_id", "hostname", "user", "uid", "session",
    "guard_version", "policy_digest", "host_agent", "host_agent_version", "agent",
    "tool_name", "decision", "reason", "rule", "event", "path", "cwd",
    "chain_seq", "chain", "chain_prev", "chain_log",
)  # fmt: skip


class ShipError(Exception):
    """A target that cannot be parsed."""


@dataclass(frozen=True, slots=True)
class Target:
    """Where records go: ``unix`` (a datagram socket path), ``tcp`` or ``udp``."""

    scheme: str
    address: str  # the socket path, or the host
    port: int = 0

    @classmethod
    def parse(cls, url: str) -> Target:
        if url.startswith("unix:"):
            path = url[5:]
            if not path.startswith("/"):
                raise ShipError(f"syslog target {url!r}: unix: needs an absolute path")
            return cls("unix", path)
        for scheme in ("tcp", "udp"):
            if url.startswith(scheme + "://"):
                rest = url[len(scheme) + 3 :]
                host, sep, port = rest.rpartition(":")
                if not sep or not port.isdigit() or not host:
                    break
                return cls(scheme, host.strip("[]"), int(port))
        raise ShipError(f"syslog target {url!r}: use unix:/PATH, tcp://HOST:PORT or"
                        " udp://HOST:PORT")

    def __str__(self) -> str:
        return f"unix:{self.address}" if self.scheme == "unix" else (
            f"{self.scheme}://{self.address}:{self.port}")


# -- messages --------------------------------------------------------------------------


def body(record: Mapping[str, Any]) -> bytes:
    """The record as one line of ASCII JSON."""
    return json.dumps(record, ensure_ascii=True, sort_keys=True, default=str).encode("ascii")


def shorten(record: Mapping[str, Any], size: int, digest: str) -> dict[str, Any]:
    out = {k: record[k] for k in KEEP if k in record}
    out["truncated"] = {"bytes": size, "sha256": digest}
    return out


def severity_of(record: Mapping[str, Any]) -> int:
    kind = record.get("type")
    if kind == "verdict":
        if str(record.get("rule", "")).endswith("fail closed"):
            return 3
        return SEVERITY.get(str(record.get("decision")), 5)
    return 4 if kind == "violation" else 5


def spool_line(record: Mapping[str, Any]) -> bytes:
    """A record as the spool keeps it: ``SEVERITY TYPE TS HOST JSON`` (the header fields
    worked out by the writer, who has the record at hand; the shipper parses nothing)."""
    kind = "".join(c for c in str(record.get("type") or "-") if "!" <= c <= "~")[:32] or "-"
    ts = "".join(c for c in str(record.get("ts") or "-") if "!" <= c <= "~")[:40] or "-"
    host = "".join(c for c in str(record.get("hostname") or "-") if "!" <= c <= "~")[:255]
    head = f"{severity_of(record)} {kind} {ts} {host or '-'} ".encode("ascii")
    return head + body(record) + b"\n"


def message(line: bytes, facility: int) -> bytes:
    """One spool line (without its newline) as an RFC 5424 message."""
    parts = line.split(b" ", 4)
    if len(parts) != 5 or not parts[0].isdigit():
        parts = [b"5", b"notice", b"-", b"-", line]
    severity, kind, ts, host, data = parts
    head = b"<%d>1 %s %s " % (facility * 8 + int(severity), ts, host) + (
        APP_NAME.encode() + b" - " + kind + b" - ")
    if len(head) + len(data) > MAX_MESSAGE:
        try:
            record = json.loads(data)
        except ValueError:
            record = {}
        data = body(shorten(record, len(data), hashlib.sha256(data).hexdigest()))
    return head + data


def frame(msg: bytes, scheme: str) -> bytes:
    """Octet-counting on TCP (RFC 6587); datagrams carry the message alone."""
    return b"%d %s" % (len(msg), msg) if scheme == "tcp" else msg


# -- the spool (the writer's side) ----------------------------------------------------


def sign_notice(record: dict[str, Any], spool: Path) -> None:
    """Sign a shipper's notice (in no local log, so not chained) with the installation's
    audit key, found beside the spool (``<data>/spool/<name>`` -> ``<data>/keys``), so a
    collector can tell it from a forged one (``guard audit verify --shipped``). Without
    a key it goes unsigned, and the collector's check names it."""
    from guard.audit import AuditError
    from guard.audit.chain import NOTICE_MAC, key_path, load_key, notice_mac

    try:
        key = load_key(key_path(spool.parent.parent), create=False)
    except AuditError:
        return
    record[NOTICE_MAC] = notice_mac(key, record)


def spool_dir(target: Target, data: Path | None = None) -> Path:
    """``<data>/spool/syslog-<key of the target>`` (``data``: guard's data directory)."""
    key = hashlib.sha256(str(target).encode()).hexdigest()[:16]
    return (data or data_dir()) / "spool" / f"syslog-{key}"


class Spool:
    """One target's spool, as a writer uses it: append, and make sure a shipper runs."""

    def __init__(self, target: Target, facility: str, max_bytes: int,
                 directory: Path | None = None) -> None:
        self.target = target
        self.facility = facility
        self.max_bytes = max_bytes
        self.dir = directory or spool_dir(target)
        self._fd = -1
        self._ino = -1
        self._lock = threading.Lock()
        self._lockfd = -1
        self._started: subprocess.Popen[bytes] | None = None  # the shipper this process started

    def _open(self) -> int:
        if self._fd >= 0:
            return self._fd
        self.dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        conf = self.dir / "target"
        text = f"{self.target}\n{self.facility}\n{self.max_bytes}\n"
        with contextlib.suppress(OSError):
            if not conf.exists() or conf.read_text() != text:
                tmp = self.dir / f".target.{os.getpid()}"
                tmp.write_text(text)
                os.replace(tmp, conf)
        flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW
        self._fd = os.open(self.dir / "queue", flags, 0o600)
        return self._fd

    def append(self, lines: bytes, count: int) -> bool:
        """Append ``count`` records (``lines``) unless the spool is full; False when it
        was (the records are counted as not shipped). Raises OSError."""
        with self._lock:
            fd = self._open()
            locking.flock(fd, f"the syslog spool {self.dir}")
            try:
                size = os.fstat(fd).st_size
                if self.max_bytes and size + len(lines) > self.max_bytes:
                    dropped = os.open(self.dir / "dropped",
                                      os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC,
                                      0o600)
                    try:
                        os.write(dropped, b"x" * count)
                    finally:
                        os.close(dropped)
                    return False
                written = 0
                while written < len(lines):
                    written += os.write(fd, lines[written:])
                return True
            finally:
                fcntl.flock(fd, fcntl.LOCK_UN)

    def ensure_shipper(self) -> None:
        """Start the shipper when none holds the spool's lock (two system calls on a
        descriptor kept open: the lock is tried and, when free, let go at once)."""
        with self._lock:
            if self._lockfd < 0:
                self._lockfd = os.open(self.dir / "lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC,
                                       0o600)
            if self._started is not None and self._started.poll() is None:
                return  # ours is starting (or runs): it takes the lock in a moment
            try:
                fcntl.flock(self._lockfd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                return  # a shipper holds it
            fcntl.flock(self._lockfd, fcntl.LOCK_UN)
            env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
            self._started = subprocess.Popen(
                [sys.executable, "-I", "-m", "guard.fleet.syslog", str(self.dir)],
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                start_new_session=True, close_fds=True, env=env, cwd="/",
            )


_spools: dict[tuple[str, str, int, str], Spool] = {}
_spools_lock = threading.Lock()


def spool_for(url: str, facility: str, max_bytes: int, data: Path | None = None) -> Spool:
    """The spool of ``url`` in guard's data directory ``data`` (kept per process)."""
    key = (url, facility, max_bytes, str(data))
    with _spools_lock:
        s = _spools.get(key)
        if s is None:
            if len(_spools) > 64:
                _spools.clear()
            target = Target.parse(url)
            s = _spools[key] = Spool(target, facility, max_bytes, spool_dir(target, data))
        return s


def ship(
    settings: Any, records: Iterable[Mapping[str, Any]], data: Path | None = None
) -> str | None:
    """Queue ``records`` for ``settings.syslog`` (an :class:`guard.policy.valid.Audit`), in
    the spool under guard's data directory ``data`` (default: this user's).

    Never raises and never waits for the network: the reason when the records could not
    be queued (the caller may say so; the local audit log holds them either way).
    """
    url = getattr(settings, "syslog", None)
    if not url:
        return None
    try:
        recs = list(records)
        spool = spool_for(url, settings.facility, settings.spool_max_bytes, data)
        spool.append(b"".join(spool_line(r) for r in recs), len(recs))
        spool.ensure_shipper()
    except Exception as exc:
        return f"cannot queue audit records for {url}: {exc}"
    return None


# -- the shipper -----------------------------------------------------------------------


class Connection:
    """A connected socket to the target; ``send`` raises OSError when it is lost."""

    def __init__(self, target: Target) -> None:
        self.target = target
        if target.scheme == "unix":
            self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
            self.sock.settimeout(10)
            self.sock.connect(target.address)
        else:
            kind = socket.SOCK_STREAM if target.scheme == "tcp" else socket.SOCK_DGRAM
            info = socket.getaddrinfo(target.address, target.port, type=kind)[0]
            self.sock = socket.socket(info[0], kind)
            self.sock.settimeout(10)
            self.sock.connect(info[4])
            if kind == socket.SOCK_STREAM:
                self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
        self.sent = 0  # bytes handed to the kernel over this connection

    def send(self, frames: list[bytes]) -> None:
        if self.target.scheme == "tcp":
            data = b"".join(frames)
            self.sock.sendall(data)
            self.sent += len(data)
            return
        for f in frames:
            self.sock.send(f)

    def unacknowledged(self) -> int:
        """Bytes the peer has not acknowledged yet (0 for datagrams)."""
        if self.target.scheme != "tcp":
            return 0
        raw = fcntl.ioctl(self.sock.fileno(), SIOCOUTQ, b"\0\0\0\0")
        return int(struct.unpack("i", raw)[0])

    def alive(self) -> bool:
        """A TCP peer that closed its end shows as readable with nothing to read."""
        if self.target.scheme != "tcp":
            return True
        try:
            r, _, _ = select.select([self.sock], [], [], 0)
            if r and not self.sock.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT):
                return False
        except BlockingIOError:
            return True
        except OSError:
            return False
        return True

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.sock.close()


class Shipper:
    """Sends one spool, in order, and keeps its place (``sent``)."""

    def __init__(self, directory: Path) -> None:
        self.dir = directory
        lines = (directory / "target").read_text().splitlines()
        self.target = Target.parse(lines[0])
        self.facility = FACILITIES.get(lines[1] if len(lines) > 1 else "auth", 4)
        self.max_bytes = int(lines[2]) if len(lines) > 2 and lines[2].isdigit() else 0
        self.queue = os.open(directory / "queue",
                             os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
        self.cursor = self._load_cursor()
        self.conn: Connection | None = None
        self.pending: list[tuple[int, int]] = []  # (spool offset after, conn.sent after)
        self.read_at = self.cursor  # how far this connection has sent
        self.backoff = 0.05

    def _load_cursor(self) -> int:
        try:
            value = int((self.dir / "sent").read_text().strip() or "0")
        except (OSError, ValueError):
            value = 0
        size = os.fstat(self.queue).st_size
        return value if 0 <= value <= size else 0

    def _save_cursor(self, value: int) -> None:
        tmp = self.dir / ".sent.tmp"
        tmp.write_text(f"{value}\n")
        os.replace(tmp, self.dir / "sent")
        self.cursor = value

    def _drop_connection(self) -> None:
        if self.conn is not None:
            self.conn.close()
        self.conn = None
        self.pending = []
        self.read_at = self.cursor  # resend what was not acknowledged

    def _acknowledge(self) -> None:
        if self.conn is None or not self.pending:
            return
        try:
            acked = self.conn.sent - self.conn.unacknowledged()
        except OSError:
            return
        done = [p for p in self.pending if p[1] <= acked]
        if done:
            self.pending = self.pending[len(done):]
            self._save_cursor(done[-1][0])

    def _dropped_notice(self) -> None:
        path = self.dir / "dropped"
        fcntl.flock(self.queue, fcntl.LOCK_EX)
        try:
            try:
                n = path.stat().st_size
            except FileNotFoundError:
                return
            if not n:
                return

            record = stamp({"type": "notice", "source": "ship", "event": "not_shipped",
                            "message": f"{n} audit records were not shipped to"
                            f" {self.target}: the spool was full; they are in the local"
                            " audit logs of this machine", "count": n}, None)
            sign_notice(record, self.dir)
            line = spool_line(record)
            end = os.lseek(self.queue, 0, os.SEEK_END)
            if self.max_bytes and end + len(line) > self.max_bytes:
                return  # no room yet: said once the spool has room
            os.write(self.queue, line)
            os.truncate(path, 0)
        finally:
            fcntl.flock(self.queue, fcntl.LOCK_UN)

    def _compact(self) -> None:
        """Everything sent and acknowledged: empty the spool (``sent`` first, so a crash in
        between resends rather than skips)."""
        fcntl.flock(self.queue, fcntl.LOCK_EX)
        try:
            if os.fstat(self.queue).st_size == self.cursor and self.cursor:
                self._save_cursor(0)
                os.ftruncate(self.queue, 0)
                self.read_at = 0
                self.pending = []
                if self.conn is not None:
                    self.conn.sent = 0
        finally:
            fcntl.flock(self.queue, fcntl.LOCK_UN)

    def step(self) -> bool:
        """Send what is waiting; False when there was nothing to do."""
        self._dropped_notice()
        self._acknowledge()
        size = os.fstat(self.queue).st_size
        if self.read_at >= size:
            if not self.pending and self.cursor == size:
                self._compact()
            return bool(self.pending)
        data = os.pread(self.queue, min(BATCH, size - self.read_at), self.read_at)
        end = data.rfind(b"\n")
        if end < 0:
            return False  # a record still being written
        data = data[: end + 1]
        if self.conn is None:
            self.conn = Connection(self.target)
        frames = [frame(message(line, self.facility), self.target.scheme)
                  for line in data.split(b"\n") if line]
        self.conn.send(frames)
        self.read_at += len(data)
        if self.target.scheme == "tcp":
            self.pending.append((self.read_at, self.conn.sent))
        else:
            self._save_cursor(self.read_at)
        self.backoff = 0.05
        return True

    def run(self, idle: float = IDLE) -> int:
        watch = _Watch(self.dir / "queue")
        last = time.monotonic()
        try:
            while True:
                try:
                    busy = self.step()
                    if self.conn is not None and not self.conn.alive():
                        raise ConnectionResetError(errno.ECONNRESET, "the collector closed")
                except OSError:
                    self._drop_connection()
                    time.sleep(self.backoff)
                    self.backoff = min(self.backoff * 2, 5.0)
                    last = time.monotonic()
                    continue
                if busy:
                    last = time.monotonic()
                    if self.pending and self.read_at >= os.fstat(self.queue).st_size:
                        time.sleep(0.01)  # waiting for the peer's acknowledgement
                    continue
                if time.monotonic() - last > idle:
                    return 0
                watch.wait(1.0)
        finally:
            watch.close()
            self._drop_connection()


class _Watch:
    """Wakes the shipper when the spool grows (inotify; a short poll where it fails)."""

    def __init__(self, path: Path) -> None:
        self.fd = -1
        try:
            import ctypes

            libc = ctypes.CDLL(None, use_errno=True)
            fd = libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
            if fd >= 0 and libc.inotify_add_watch(fd, os.fsencode(path), 0x2 | 0x8) >= 0:
                self.fd = fd  # IN_MODIFY | IN_CLOSE_WRITE
            elif fd >= 0:
                os.close(fd)
        except (OSError, AttributeError):
            self.fd = -1

    def wait(self, timeout: float) -> None:
        if self.fd < 0:
            time.sleep(min(timeout, 0.05))
            return
        r, _, _ = select.select([self.fd], [], [], timeout)
        if r:
            with contextlib.suppress(BlockingIOError):
                os.read(self.fd, 65536)

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m guard.fleet.syslog SPOOL_DIR", file=sys.stderr)
        return 2
    directory = Path(argv[0])
    os.umask(0o077)
    lock = os.open(directory / "lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    deadline = time.monotonic() + 1.0  # a writer's brief check may hold it a moment
    while True:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            break
        except OSError:
            if time.monotonic() > deadline:
                return 0  # another shipper has this spool
            time.sleep(0.01)
    (directory / "shipper.pid").write_text(f"{os.getpid()}\n")

    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    return Shipper(directory).run()


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
