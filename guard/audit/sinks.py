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

from guard.audit import AuditError
from guard.audit.logfile import append, append_held, append_many, default_log_path
from guard.locking import LockTimeout
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
        """Append ``record``. A log that stays locked past guard's deadline raises
        AuditError (the verdict becomes a deny) after the record is kept, lock-free, in
        ``<log>.held`` (:func:`~guard.audit.logfile.append_held`)."""
        if self.path is None and roots is None:
            cwd = record.get("cwd")
            roots = Roots.discover(cwd if isinstance(cwd, str) and cwd else None)
        path = self.path if self.path is not None else default_log_path(roots or Roots.discover())
        # a dict is written as is: it gets the chain keys its shipped copy carries
        rec = record if isinstance(record, dict) else dict(record)
        try:
            append(rec, path)
        except AuditError as exc:
            _keep_aside(exc, path, [rec], "it", "the verdict is kept in {} and answered with"
                                                 " a deny")


    def write_many(self, records: list[dict[str, Any]], roots: Roots | None = None) -> None:
        """Append ``records``, in order, in one batch (one lock, one ``write(2)``): all of
        them are in the log or none is. A log that stays locked keeps each of them in
        ``<log>.held``, as :meth:`write` does."""
        if len(records) <= 1 or (self.path is None and roots is None):
            for record in records:
                self.write(record, roots)
            return
        path = self.path if self.path is not None else default_log_path(roots or Roots.discover())
        try:
            append_many(records, path)
        except AuditError as exc:
            _keep_aside(exc, path, records, "they", "the records are kept in {}")


def _keep_aside(
    exc: AuditError, path: Path, records: list[dict[str, Any]], they: str, kept: str
) -> None:
    """After a failed append: re-raise ``exc`` unless the log stayed locked past guard's
    deadline; then keep ``records`` lock-free in ``<log>.held`` and raise an AuditError
    saying where (``kept`` formatted with that file), or that ``they`` could not be kept."""
    if not isinstance(exc.__cause__, LockTimeout):
        raise exc
    try:
        for record in records:
            held = append_held(path, record, str(exc.__cause__))
    except OSError as err:
        raise AuditError(f"{exc}; nor could {they} be kept aside: {err}") from exc
    raise AuditError(f"{exc}; {kept.format(held)}") from exc


class MemorySink:
    """Keeps records in a list (tests, and front doors that show them later)."""

    def __init__(self) -> None:
        self.records: list[dict[str, Any]] = []

    def write(self, record: Mapping[str, Any], roots: Roots | None = None) -> None:
        self.records.append(dict(record))
