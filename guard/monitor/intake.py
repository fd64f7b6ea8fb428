"""What the observers hand to a :class:`Monitor`: their events and their trouble.

Functions of a Monitor, called on the observers' threads (watchdog's inotify
dispatcher, or fanotify's reader). An event is the marker of :meth:`Monitor.sync`,
a path changed while the baseline is taken (remembered until it is done), one of
the monitor's own moves into quarantine, or a change passed to
:meth:`Monitor.change`. Trouble (an overflow, lost events, a watch that could not
be added) is noted and wakes the reconciler. Not here: deciding a change and acting
on it (changes.py, restoring.py), choosing and starting the backend (backends.py),
the scans (scan.py).

The monitor's shared state is ``m.state`` (:mod:`guard.monitor.shared`).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from guard.effects import EffectKind
from guard.monitor.attribution import Origin
from guard.monitor.backends import remember_origin
from guard.monitor.events import CHANGES, early_names

if TYPE_CHECKING:
    from guard.monitor.events import AnyEvent
    from guard.monitor.shared import MonitorState
    from guard.monitor.view import MonitorView


def trouble(m: MonitorView, kind: str, message: str) -> None:
    """Called on watchdog's reader thread: note it, wake the reconciler at once."""
    if kind in ("overflow", "lost"):
        which = m.backend.backend if m.backend is not None else "inotify"
        if kind == "overflow":
            m.overflows += 1
            lost_event(m)
        # "lost" is told once per walk; lost_event has counted each such event
        m.notify(
            f"{which}-{kind}",
            f"{message}; running a reconciliation scan against the baseline",
        )
        what = "overflow" if kind == "overflow" else "lost events"
        m.state.wake_reason = f"after {which} {what}"
    else:
        m.degrade(kind, message)
        m.state.wake_reason = f"after {kind}"
    m.state.wake.set()
    m.flush()


def lost_event(m: MonitorView) -> None:
    """Events were lost (an overflow, or one event fanotify could not name): counted
    each time, on the reader thread, before any later event is handled. The
    baseline's walk trusts no event since phase 1 once this moved (phases.py)."""
    with m.lock:
        m.events_lost += 1


def on_fan_event(m: MonitorView, ev: AnyEvent, origin: Origin) -> None:
    remember_origin(m.state, ev, origin)
    m.on_fs_event(ev)


def on_fs_event(m: MonitorView, ev: AnyEvent) -> None:
    src = os.fsdecode(ev.src_path)
    b = m.barrier
    if ev.event_type == "created" and not ev.is_directory and b.is_marker(src):
        return  # named wherever the watch names it: a moved root's events keep its path
    b.active += 1  # sync's wait sees the handling go on (barrier.py)
    try:
        _handle(m, ev, src)
    finally:
        b.active -= 1
        b.handled += 1


def _handle(m: MonitorView, ev: AnyEvent, src: str) -> None:
    if m.state.stop.is_set():
        return
    try:
        if not m.state.ready.is_set():
            _record_early(m.state, ev)
            return
        if ev.event_type == "moved":
            dest = os.fsdecode(ev.dest_path)
            if src and dest and _own_move(m.state, src, dest):
                return
            if src:
                m.change(src, EffectKind.DELETE, "moved-from", f"to {dest or 'outside'}")
            if dest:
                m.change(dest, EffectKind.WRITE, "moved-to", f"from {src or 'outside'}")
        else:
            change = CHANGES.get((ev.event_type, ev.is_directory))
            if change is not None:  # see CHANGES for the events that change nothing
                m.change(src, change[0], change[1])
    except Exception as exc:  # keep watching whatever one event did
        m.notify("error", f"while handling {ev!r}: {type(exc).__name__}: {exc}")
    m.flush()


def _record_early(state: MonitorState, ev: AnyEvent) -> None:
    """While the baseline runs: remember which paths changed (first event wins)."""
    names = early_names(ev)
    with state.lock:
        for p, what in names:
            if p:
                state.early.setdefault(p, what)


def _own_move(state: MonitorState, src: str, dest: str) -> bool:
    with state.lock:
        while src and dest and src != "/":
            if (src, dest) in state.own_moves:
                return True
            src, dest = os.path.dirname(src), os.path.dirname(dest)
        return False
