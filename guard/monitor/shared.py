"""The monitor's shared, mutable state: one object, owned by the monitor as ``m.state``.

A :class:`Monitor <guard.monitor.watcher.Monitor>` makes one :class:`MonitorState`
and hands itself to the functions in the package's other modules (intake.py,
changes.py, restoring.py, scan.py, identity.py, barrier.py, backends.py), which
read and change these fields, and call the monitor's public methods: what they use of
the monitor is listed in :class:`guard.monitor.view.MonitorView`, so that none of them
imports the monitor's module. Every field
whose comment says "under ``lock``" is read and written only with ``lock`` held.
What does not change once the monitor is made (its roots, the paths it ignores,
its configuration) is a public field of the monitor itself.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from guard.effects import EffectKind
from guard.monitor.attribution import Origin
from guard.monitor.entries import Sig
from guard.monitor.events import Notice, Violation, _Pending
from guard.monitor.fanotify import FanotifyObserver

if TYPE_CHECKING:
    from guard.monitor.inotify import _Observer  # loaded only when inotify is used

__all__ = ["MonitorState"]


@dataclass(eq=False)
class MonitorState:
    """What the monitor's threads share: its locks, its view of the trees, its wake-ups."""

    #: every change is decided and acted on under it (re-entrant: helpers take it too)
    lock: threading.RLock = field(default_factory=threading.RLock)
    #: one reconciliation scan at a time
    recon_lock: threading.Lock = field(default_factory=threading.Lock)
    #: one check of the roots at a time (identity.py)
    roots_lock: threading.Lock = field(default_factory=threading.Lock)
    #: records waiting to be written by the next flush, in order (under ``lock``)
    outbox: list[Violation | Notice] = field(default_factory=list)
    #: path -> its signature at the last consistent point, None when absent (under ``lock``)
    known: dict[str, Sig | None] = field(default_factory=dict)
    #: (path, effect) already reported and not yet consistent again (under ``lock``)
    dirty: set[tuple[str, EffectKind]] = field(default_factory=set)
    #: paths moved into quarantine that were not in the baseline (under ``lock``)
    quarantined: set[str] = field(default_factory=set)
    #: path -> restores its git blob was missing for (under ``lock``)
    unavailable: dict[str, int] = field(default_factory=dict)
    #: (source, destination) of the monitor's own moves into quarantine (under ``lock``)
    own_moves: set[tuple[str, str]] = field(default_factory=set)
    #: written files waiting to settle before they are acted on (under ``lock``)
    pending: dict[str, _Pending] = field(default_factory=dict)
    #: notified whenever ``pending`` shrinks or grows; built on ``lock``
    pending_cv: threading.Condition = field(init=False)
    #: path -> first event while the baseline was taken (under ``lock``)
    early: dict[str, str] = field(default_factory=dict)
    #: path -> its last writer, as fanotify named it, oldest first (under ``lock``)
    origins: OrderedDict[str, Origin] = field(default_factory=OrderedDict)
    #: guard's own state paths already reported as tampered with (under ``lock``)
    tampered: set[str] = field(default_factory=set)
    #: set once the baseline is taken and ``known`` holds it
    ready: threading.Event = field(default_factory=threading.Event)
    #: set when the monitor stops: every loop and wait ends
    stop: threading.Event = field(default_factory=threading.Event)
    #: the final drain and scan run: nothing waits to settle any more
    stopping: bool = False
    #: wakes the reconciler before its interval is up
    wake: threading.Event = field(default_factory=threading.Event)
    #: why the reconciler was woken (the next scan's notice names it)
    wake_reason: str = "periodic"
    #: the running backend (None before the start and once stopped)
    observer: _Observer | FanotifyObserver | None = None
    #: the reconciler and the settler, once the baseline is taken
    threads: list[threading.Thread] = field(default_factory=list)
    #: the thread finishing the baseline in the background (phases.py), if any
    baseline_thread: threading.Thread | None = None
    #: ``events_lost`` when phase 1 of the baseline ended
    lost_at_phase1: int = 0
    #: .git -> its index at the start and the digest of what it staged
    index_base: dict[str, tuple[bytes | None, str]] = field(default_factory=dict)
    #: .git -> the digest of what its index stages at the last consistent point (under ``lock``)
    index_known: dict[str, str] = field(default_factory=dict)
    #: blob id -> the baselined files whose restore reads it (filled once ready)
    baseline_blobs: dict[str, list[str]] = field(default_factory=dict)
    #: root -> (device, inode) of the tree the monitor watches there
    root_ids: dict[str, tuple[int, int]] = field(default_factory=dict)
    #: root -> what was last reported about it (a swap or a removal), reported once
    root_reported: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.pending_cv = threading.Condition(self.lock)
