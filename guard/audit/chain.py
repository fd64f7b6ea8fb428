"""The audit chain: the installation's key and the format of a chained line.

Every record is chained (:func:`chain_lines`, checked by :func:`guard.audit.verify.verify`
and ``guard audit verify``): under the log's lock, the writer appends to each line
``"chain_seq": N, "chain": MAC`` as its last two keys, where ``N`` counts the records
of the log (1, 2, ..., across rotations) and ``MAC`` is the HMAC-SHA256, under the
installation's key (:func:`load_key`, ``<data>/keys/audit.key``, 0600), of ``N``, the
previous record's MAC and the record's own bytes (every other key of the line: the
verdict and the fleet envelope alike). The chain continues from the log's last
record (read back under the lock; an appender that wrote it remembers it). A record
without the key cannot be added, edited, removed or moved without the check
naming its line; what the chain does not prove is said in SECURITY.md. A writer gives
each record it wrote (the dict) the chain keys, plus ``chain_prev`` (the MAC it
continues from) and ``chain_log`` (the log's name), so that the copy shipped through
syslog can be checked on its own at the collector (:func:`guard.audit.verify.verify_shipped`).

This module holds the key (where it lives, making and reading it) and the chain's
format (the MAC of a line, adding the chain keys to lines, reading them back from
one line). It does not touch a log file (locking, rotation, finding the head:
:mod:`guard.audit.logfile`) and does not check a log (:mod:`guard.audit.verify`).
"""

from __future__ import annotations

import json
import os
import re
import stat
from collections.abc import Mapping
from pathlib import Path

from guard.audit import AuditError
from guard.paths import data_dir
from guard.sha import hmac_sha256

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (guard run's start)
if TYPE_CHECKING:
    from typing import Any

KEY_SUBDIR = "keys"
KEY_NAME = "audit.key"
KEY_BYTES = 32
#: the keys the writer adds to every line of an audit log, last
CHAIN_KEYS = ("chain_seq", "chain")
#: the chain keys a shipped record carries (:func:`guard.audit.logfile.append_records`): the
#: local line's two, the MAC it continues from, and the log's file name (one chain per log:
#: per user and project)
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
    # HMAC-SHA256 on the interpreter's SHA-256 (guard/sha.py): a record written before a
    # command starts (the monitor's first notices) loads no OpenSSL binding
    return hmac_sha256(key, b"%d\n%s\n%s" % (seq, prev, body)).hex().encode()


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


#: The key of a shipper's notice (a record made by the shipper, in no local log, so not
#: chained) that carries its MAC under the installation's key: :func:`notice_mac`.
NOTICE_MAC = "notice_mac"


def notice_mac(key: bytes, record: Mapping[str, Any]) -> str:
    """The MAC of a shipper's notice: HMAC-SHA256 under ``key`` of the record's canonical
    bytes without :data:`NOTICE_MAC` (sorted keys, as the audit log writes records)."""
    rest = {k: v for k, v in record.items() if k != NOTICE_MAC}
    body = json.dumps(rest, ensure_ascii=False, sort_keys=True, default=str)
    return hmac_sha256(key, b"notice\n" + body.encode("utf-8", "surrogateescape")).hex()


def _chain_of(line: bytes) -> tuple[int, bytes, bytes] | None:
    """(number, MAC, the bytes the MAC covers) of a chained line, None when it has none."""
    m = _CHAIN.search(line)
    if m is None:
        return None
    return int(m.group(1)), m.group(2), line[: m.start()] + b"}"
