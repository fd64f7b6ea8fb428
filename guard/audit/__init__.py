"""The audit log and its HMAC chain, in five modules (read in this order):

- :mod:`guard.audit.chain`: the installation's audit key and the chain format (the
  ``chain_seq``/``chain`` keys a writer adds to each line, and their MAC);
- :mod:`guard.audit.logfile`: the log file: where it lives, one record per line,
  appended under a lock, rotated by size, read back;
- :mod:`guard.audit.sinks`: where a front door's records go (:class:`~guard.audit.sinks.AuditSink`,
  the log, a list);
- :mod:`guard.audit.buffered`: writing records off the caller's path, in ordered batches
  (the MCP proxy);
- :mod:`guard.audit.verify`: checking the chain of a log and of shipped records (``guard
  audit verify``); it only reads.

Every front door writes through one :class:`~guard.audit.sinks.AuditSink` (the hook runner,
``guard check --audit-log``, the MCP proxy, the monitor), and every record shares one
envelope: ``ts``, ``type`` (``verdict``, ``violation``, ``notice``), ``source``
(``hook``, ``check``, ``mcp``, ``monitor``). A verdict record is made by
:meth:`guard.gate.Gate.record` (only there), so a hook's and a proxy's decisions read the
same.

This module holds only :class:`AuditError`, which all of them raise. It re-exports
nothing: import each name from the module that holds it.
"""

from __future__ import annotations

from guard.effects import GuardError


class AuditError(GuardError):
    """The audit log cannot be written or read."""
