"""The audit log: one JSON object per line, appended atomically.

The log lives under guard's data directory (``<data>/audit/<project key>.jsonl``),
which every shipped agent is denied writing. Writers are the monitor and the
hook adapters, possibly several processes at once, so each record is written
with a single ``write(2)`` on a descriptor opened with ``O_APPEND`` while an
exclusive ``flock`` is held: records never interleave and a reader never sees
half a line from a live writer.

Every front door writes through one :class:`AuditSink` (the hook runner, ``guard
check --audit-log``, the MCP proxy, the monitor), and every record shares one
envelope: ``ts``, ``type`` (``verdict``, ``violation``, ``notice``), ``source``
(``hook``, ``check``, ``mcp``, ``monitor``). A verdict record is made by
:meth:`guard.gate.Verdict.record`, so a hook's and a proxy's decisions read the
same.
"""

from __future__ import annotations

import fcntl
import json
import os
from collections.abc import Iterator, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

from guard.effects import GuardError
from guard.paths import Roots, project_key

AUDIT_SUBDIR = "audit"


class AuditError(GuardError):
    """The audit log cannot be written or read."""


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
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def encode(record: dict[str, Any]) -> bytes:
    """One record as one line of UTF-8 JSON (newlines inside values are escaped by JSON)."""
    try:
        line = json.dumps(record, ensure_ascii=False, sort_keys=True, default=str)
    except (TypeError, ValueError) as exc:
        raise AuditError(f"audit record cannot be encoded as JSON: {exc}") from exc
    return line.encode("utf-8", "surrogateescape") + b"\n"


def append(record: dict[str, Any], path: Path | None = None, roots: Roots | None = None) -> Path:
    """Append ``record`` to the audit log at ``path`` (default: the project's log).

    Adds ``ts`` when the record has none. Returns the log's path. Raises
    :class:`AuditError` with the path and the cause when the log cannot be
    written; a record is either wholly in the log or not at all.
    """
    if path is None:
        path = default_log_path(roots if roots is not None else Roots.discover())
    if "ts" not in record:
        record = {"ts": now_iso(), **record}
    data = encode(record)
    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC
    try:
        try:
            fd = os.open(path, flags, 0o600)
        except FileNotFoundError:
            path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            fd = os.open(path, flags, 0o600)
    except OSError as exc:
        raise AuditError(f"cannot open audit log {path}: {exc.strerror or exc}") from exc
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        try:
            written = os.write(fd, data)
            # A short write on a regular file means the disk is full; finish the
            # line under the lock so the log stays one record per line.
            while written < len(data):
                n = os.write(fd, data[written:])
                if n == 0:
                    raise OSError("short write")
                written += n
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    except OSError as exc:
        raise AuditError(f"cannot append to audit log {path}: {exc.strerror or exc}") from exc
    finally:
        os.close(fd)
    return path


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
        append(dict(record), self.path, roots=roots)


class MemorySink:
    """Keeps records in a list (tests, and front doors that show them later)."""

    def __init__(self) -> None:
        self.records: list[dict[str, Any]] = []

    def write(self, record: Mapping[str, Any], roots: Roots | None = None) -> None:
        self.records.append(dict(record))


def read(path: Path) -> Iterator[dict[str, Any]]:
    """The records of a log, in order. A malformed line is an error naming its line number."""
    try:
        handle = path.open("rb")
    except FileNotFoundError:
        return
    except OSError as exc:
        raise AuditError(f"cannot read audit log {path}: {exc.strerror or exc}") from exc
    with handle:
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
