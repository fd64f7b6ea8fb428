"""Where a front door's records go: the :class:`AuditSink` interface and its two sinks.

Every front door writes through one :class:`AuditSink` (the hook runner, ``guard
check --audit-log``, the MCP proxy, the monitor): :class:`AuditLog` appends to the
audit log, :class:`MemorySink` keeps records in a list.

This module holds the interface and the sinks. It does not build records (a verdict
record is made only by :meth:`guard.gate.Gate.record`), write the file
(:mod:`guard.audit.logfile`) or batch writes off the caller's path
(:mod:`guard.audit.buffered`).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol

from guard.audit.logfile import append
from guard.paths import Roots


class AuditSink(Protocol):
    """Where a front door's records go. ``roots`` are those the decision was made against.

    ``write`` raises :class:`~guard.audit.AuditError` when the record cannot be kept; the gate
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
