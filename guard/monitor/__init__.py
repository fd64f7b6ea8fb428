"""The plan-mode monitor: notice out-of-policy changes, report them, put things back.

``Monitor`` watches trees with watchdog's inotify observer, decides each change
with the agent's policy, appends violations to the audit log (:mod:`guard.audit`),
and with ``restore=True`` moves violating versions into quarantine and restores
the baseline taken when watching began.
"""

from guard.monitor.baseline import Baseline
from guard.monitor.entries import DEFAULT_SIZE_CAP, BaselineError, Entry, Sig
from guard.monitor.events import Notice, Violation, default_roots, new_session_id
from guard.monitor.quarantine import (
    Item,
    Quarantine,
    QuarantineError,
    get_item,
    kept_stores,
    list_items,
    quarantine_root,
    restore_item,
)
from guard.monitor.watcher import Monitor

__all__ = [
    "DEFAULT_SIZE_CAP",
    "Baseline",
    "BaselineError",
    "Entry",
    "Item",
    "Monitor",
    "Notice",
    "Quarantine",
    "QuarantineError",
    "Sig",
    "Violation",
    "default_roots",
    "get_item",
    "kept_stores",
    "list_items",
    "new_session_id",
    "quarantine_root",
    "restore_item",
]
