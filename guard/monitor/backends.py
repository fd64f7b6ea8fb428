"""Starting the monitor's watch: fanotify with a filesystem mark where the process may
(see :mod:`guard.monitor.fanotify`), watchdog's inotify observer otherwise; and the
writer of each fanotify event, remembered for the paths it names."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from watchdog.events import FileSystemEvent

from guard.monitor.attribution import ORIGINS_MAX, Origin
from guard.monitor.events import _Handler, _Observer
from guard.monitor.fanotify import Choice, FanotifyObserver, choose

if TYPE_CHECKING:
    from guard.monitor.watcher import Monitor


def start_observer(m: Monitor) -> None:
    """Choose the backend (the choice is the monitor's first notice) and start it."""
    m.backend = choose(m.roots, m.backend_wanted)
    if m.backend.backend == "fanotify":
        try:
            fan = FanotifyObserver(m.roots, m._on_fan_event, m._trouble, m.processes.origin)
        except OSError as exc:
            m.backend = Choice("inotify", f"fanotify failed: {exc.strerror or exc}")
        else:
            m._notice("backend", m.backend.line())
            m._flush()
            fan.start()
            m._observer = fan
            return
    m._notice("backend", m.backend.line())
    m._flush()
    try:
        obs = _Observer(m._trouble)
    except OSError as exc:
        m._degrade("watch-limit", f"cannot create an inotify instance: {exc.strerror}")
        return
    obs.start()
    m._observer = obs
    handler = _Handler(m)
    for root in m.roots:
        try:
            obs.schedule(handler, str(root), recursive=True)
        except OSError as exc:
            m._degrade(
                "watch-limit",
                f"cannot watch every directory under {root}: {exc.strerror or exc}"
                " (raise fs.inotify.max_user_watches)",
            )


def remember_origin(m: Monitor, ev: FileSystemEvent, origin: Origin) -> None:
    """The last writer of each path an event names (a violation found later names it)."""
    with m._lock:
        for p in (ev.src_path, ev.dest_path):
            if p:
                path = os.fsdecode(p)
                m._origins[path] = origin
                m._origins.move_to_end(path)
        while len(m._origins) > ORIGINS_MAX:
            m._origins.popitem(last=False)
