"""What the monitor's helpers use of a :class:`~guard.monitor.watcher.Monitor`.

The functions in intake.py, changes.py, restoring.py, scan.py, identity.py and
backends.py take the monitor as ``m`` and use its shared state (``m.state``, a
:class:`~guard.monitor.shared.MonitorState`), its public fields and its public
methods. :class:`MonitorView` lists exactly those, so that the helpers need not import
the module that imports them; the type checker proves that ``Monitor`` has every one
of them wherever the monitor hands itself to a helper. :class:`Syncable` (barrier.py)
is the part that :func:`~guard.monitor.barrier.sync` and
:func:`~guard.monitor.barrier.settle` use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from guard.monitor.barrier import Syncable

if TYPE_CHECKING:
    import threading
    from pathlib import Path

    from guard.decide import Guard
    from guard.effects import EffectKind
    from guard.monitor.attribution import Origin, Processes
    from guard.monitor.baseline import Baseline
    from guard.monitor.entries import Progress, Sig
    from guard.monitor.events import AnyEvent, Violation
    from guard.monitor.fsops import Anchor
    from guard.monitor.objsnap import ObjectSnapshot
    from guard.monitor.quarantine import Quarantine

__all__ = ["MonitorView"]


class MonitorView(Syncable, Protocol):
    """A monitor as its helpers see it (see the module's docstring)."""

    # what the monitor was made with, and what it derived from that
    guard: Guard
    agent: str
    session: str
    roots: list[Path]
    restore: bool
    size_cap: int
    progress: Progress | None
    background: bool
    backend_wanted: str
    store: Path
    anchor: Anchor
    quarantine: Quarantine
    processes: Processes
    lock: threading.RLock
    plans: str
    plan_ancestors: set[str]
    git_dirs: list[str]
    index_paths: dict[str, str]
    objects_prefixes: tuple[str, ...]
    state_prefixes: tuple[str, ...]
    ignored_tops: frozenset[str]
    # what it found and counted so far
    baseline: Baseline | None
    baseline_done: threading.Event
    objects: dict[str, ObjectSnapshot]
    violations: list[Violation]
    restore_failures: int
    overflows: int
    events_lost: int
    reconciliations: int
    startup_seconds: float

    def ignored(self, path: str) -> bool: ...
    def sig(self, path: str) -> Sig | None: ...
    def rel(self, path: str) -> str: ...
    def change(
        self,
        path: str,
        kind: EffectKind,
        event: str,
        detail: str = ...,
        *,
        force: bool = ...,
        adopted: bool = ...,
    ) -> Violation | None: ...
    def index_change(self, git_dir: str, event: str) -> Violation | None: ...
    def sync(self, timeout: float = ...) -> bool: ...
    def wake(self, reason: str) -> None: ...
    def report(self, v: Violation) -> None: ...
    def expect_baseline(self, root: str) -> None: ...
    def degrade(self, event: str, message: str) -> None: ...
    def trouble(self, kind: str, message: str) -> None: ...
    def lost_event(self) -> None: ...
    def on_fan_event(self, ev: AnyEvent, origin: Origin) -> None: ...
    def on_fs_event(self, ev: AnyEvent) -> None: ...
    def settle_loop(self) -> None: ...
    def reconcile_loop(self) -> None: ...
    def wait_closed(self) -> None: ...
    def stop_observer(self) -> list[str]: ...
