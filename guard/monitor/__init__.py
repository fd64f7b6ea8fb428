"""The plan-mode monitor: notice out-of-policy changes, report them, put things back.

``Monitor`` watches trees with watchdog's inotify observer, decides each change
with the agent's policy, appends violations to the audit log (:mod:`guard.audit`),
and with ``restore=True`` moves violating versions into quarantine and restores
the baseline taken when watching began.

Names are imported on first use (as in :mod:`guard.planning`).
"""

# Lazy imports: each name's module on first use: ``guard doctor`` and ``guard --version``
# ask only guard.monitor.fanotify which backend runs (start-up speed).

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
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

_WHERE = {
    "Baseline": "baseline",
    "DEFAULT_SIZE_CAP": "entries", "BaselineError": "entries", "Entry": "entries",
    "Sig": "entries",
    "Notice": "events", "Violation": "events", "default_roots": "events",
    "new_session_id": "events",
    "Item": "quarantine", "Quarantine": "quarantine", "QuarantineError": "quarantine",
    "get_item": "quarantine", "kept_stores": "quarantine", "list_items": "quarantine",
    "quarantine_root": "quarantine", "restore_item": "quarantine",
    "Monitor": "watcher",
}  # fmt: skip

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


def __getattr__(name: str) -> Any:
    where = _WHERE.get(name)
    if where is None:
        raise AttributeError(f"module 'guard.monitor' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"guard.monitor.{where}"), name)
    globals()[name] = value
    return value
