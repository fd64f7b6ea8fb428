"""Starting the monitor's watch: fanotify with a filesystem mark where the process may
(see :mod:`guard.monitor.fanotify`), watchdog's inotify observer otherwise; and the
writer of each fanotify event, remembered for the paths it names.

inotify needs one watch per directory. When ``fs.inotify.max_user_watches`` runs out
while the watches are first added, the monitor refuses to start (a
:class:`~guard.effects.GuardError` naming the limit and both fixes) as soon as the
kernel says so: it never watches part of the tree and carries on."""

# Lazy imports: watchdog's observer (guard.monitor.inotify) only when inotify watches (a
# monitor on fanotify starts without it: guard run's start-up).

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from guard.effects import GuardError
from guard.monitor.attribution import ORIGINS_MAX, Origin
from guard.monitor.fanotify import FanotifyObserver
from guard.monitor.fanotify_group import CHOSEN, Choice, before_probe, why_unavailable

if TYPE_CHECKING:
    from guard.monitor.events import AnyEvent
    from guard.monitor.inotify import WatchLimit
    from guard.monitor.shared import MonitorState
    from guard.monitor.view import MonitorView

#: the per-user watch limit, and a user namespace's own (both apply)
WATCH_LIMITS = (("fs.inotify.max_user_watches", Path("/proc/sys/fs/inotify/max_user_watches")),
                ("user.max_inotify_watches", Path("/proc/sys/user/max_inotify_watches")))


def start_observer(m: MonitorView) -> None:
    """Choose the backend (the choice is the monitor's first notice) and start it."""
    # no probing group first: the monitor's own group is the probe (see before_probe)
    ruled_out = before_probe(m.backend_wanted)
    m.backend = ruled_out if ruled_out is not None else CHOSEN
    if ruled_out is None:
        try:
            fan = FanotifyObserver(m.roots, m.on_fan_event, m.trouble, m.processes.origin,
                                   m.lost_event)
        except OSError as exc:
            where = str(exc.filename or (m.roots[0] if m.roots else "/"))
            m.backend = Choice("inotify", why_unavailable(exc, where))
        else:
            m.notify("backend", m.backend.line())
            m.flush()
            m.state.observer = fan  # before its reader runs: its first report names fanotify
            fan.start()
            return
    m.notify("backend", m.backend.line())
    m.flush()
    from guard.monitor.inotify import WANTED_EVENTS, WatchLimit, _Handler, _Observer

    try:
        obs = _Observer(m.trouble)
    except OSError as exc:
        m.degrade("watch-limit", f"cannot create an inotify instance: {exc.strerror}")
        return
    obs.start()
    m.state.observer = obs
    handler = _Handler(m)
    obs.inotify_fd.starting = True
    try:
        for root in m.roots:
            try:
                obs.schedule(handler, str(root), recursive=True, event_filter=WANTED_EVENTS)
            except WatchLimit as exc:
                m.stop_observer()  # closing the inotify instance frees its watches
                raise GuardError(watch_limit_message(root, exc)) from None
            except OSError as exc:
                m.degrade(
                    "watch-limit",
                    f"cannot watch every directory under {root}: {exc.strerror or exc}"
                    " (raise fs.inotify.max_user_watches)",
                )
    finally:
        obs.inotify_fd.starting = False


def watch_limit_message(root: Path, exc: WatchLimit) -> str:
    """The refusal when inotify cannot watch every directory: the limit, and both fixes."""
    limits: list[str] = []
    seen: set[int] = set()
    for name, path in WATCH_LIMITS:
        try:
            value = int(path.read_text())
        except (OSError, ValueError):
            continue
        if value < 2**31 - 1 and value not in seen:  # a namespace's own: unlimited unless set
            limits.append(f"{name} = {value:,}")
            seen.add(value)
    return (
        f"inotify cannot watch every directory under {root}: it needs one watch per"
        f" directory and the limit ({'; '.join(limits) or 'unknown'}) ran out after"
        f" {exc.added:,} watches (at {exc.path}). Run guard as root (or with CAP_SYS_ADMIN) to use"
        " fanotify, whose one mark covers any tree, or raise the limit above the number"
        f" of directories (find {root} -type d | wc -l) plus what other programs of this"
        " user watch: sudo sysctl fs.inotify.max_user_watches=N"
    )


def remember_origin(state: MonitorState, ev: AnyEvent, origin: Origin) -> None:
    """The last writer of each path an event names (a violation found later names it)."""
    with state.lock:
        for p in (ev.src_path, ev.dest_path):
            if p:
                path = os.fsdecode(p)
                state.origins[path] = origin
                state.origins.move_to_end(path)
        while len(state.origins) > ORIGINS_MAX:
            state.origins.popitem(last=False)
