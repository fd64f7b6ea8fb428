"""One change decided: compared with the path's last consistent state, then with the policy.

Functions of a :class:`Monitor` (its shared state is ``m.state``, see
guard/monitor/shared.py). Every change, from an event or a scan, goes
through :func:`change`: under the monitor's lock it reads the path's signature
(:func:`path_sig`), skips what is as it was, waits for a written file to settle,
decides the effect with the agent's policy and records the violation; the audit
log and callbacks are written after the lock is released. Guard's own state and
git's loose objects that back the baseline are handled apart. Not here: what is
done about a violation (restoring.py), where changes come from (intake.py,
scan.py), writing the records (:meth:`Monitor.flush`).
"""

from __future__ import annotations

import os
import stat
import time
from typing import TYPE_CHECKING, Any

from guard.audit import logfile
from guard.effects import Effect, EffectKind
from guard.monitor.attribution import NO_ORIGIN
from guard.monitor.entries import BaselineError, Sig
from guard.monitor.events import _WRITING_EVENTS, Violation, _is_under, _Pending
from guard.monitor.fsops import dir_meta
from guard.monitor.restoring import act, rel
from guard.monitor.restoring import touched as objects_touched

if TYPE_CHECKING:
    from guard.monitor.shared import MonitorState
    from guard.monitor.view import MonitorView

_MISSING = object()


def path_sig(m: MonitorView, path: str) -> Sig | None:
    """The path's signature, reached without following symlinks (directories: with meta)."""
    try:
        st = m.anchor.lstat(path)
    except OSError:
        return None
    if st is None:
        return None
    meta = ""
    if stat.S_ISDIR(st.st_mode):
        try:
            fd = m.anchor.dir(path)
        except OSError:
            return Sig.of(st)
        try:
            meta = dir_meta(fd)
        finally:
            os.close(fd)
    return Sig.of(st, meta)


def _in_quarantined(state: MonitorState, path: str) -> bool:
    p = path
    while p and p != "/":
        if p in state.quarantined:
            return True
        p = os.path.dirname(p)
    return False


def change(
    m: MonitorView,
    path: str,
    kind: EffectKind,
    event: str,
    detail: str = "",
    *,
    force: bool = False,
    adopted: bool = False,
) -> Violation | None:
    """Decide one change and act on it. Logging and callbacks run after the lock is released."""
    if path in m.index_paths:
        return m.index_change(m.index_paths[path], event)
    if m.objects and m.state.ready.is_set() and objects_touched(m, path):
        return None  # an object file as git wrote it (put back by the monitor)
    if path.startswith(m.objects_prefixes):
        return _object_change(m, path, kind, event)
    with m.lock:
        cur = path_sig(m, path)  # under the lock: our own restores are complete or not begun
        if cur is None and _shut(m, path):
            # not absent: a directory on its way is shut (the agent changed its mode, which
            # its own event puts back). Neither decided nor marked: the next scan sees it
            m.wake(f"{path}: a directory on its way is shut")
            return None
        v = _change_locked(m, path, kind, event, detail, cur, force=force, adopted=adopted)
    m.flush()
    return v


def _shut(m: MonitorView, path: str) -> bool:
    try:
        m.anchor.lstat(path)
    except PermissionError:
        return True
    except OSError:
        pass
    return False


def _change_locked(
    m: MonitorView, path: str, kind: EffectKind, event: str, detail: str, cur: Sig | None,
    *, force: bool, adopted: bool,
) -> Violation | None:
    if path.startswith(m.state_prefixes) or path in m.ignored_tops:
        return _state_change(m, path, kind, event, detail)
    if m.ignored(path):
        return None
    known = m.state.known.get(path, _MISSING)
    pend = m.state.pending.get(path)
    if pend is not None and not force:
        # a file waiting to settle: note what the writer did, act later
        pend.writing = event in _WRITING_EVENTS or (
            pend.writing and event != "closed-after-write")
        pend.since = time.monotonic()
        return None
    if cur is not None and known == cur and not adopted:
        # as it was at the last consistent point (e.g. our own restore)
        m.state.dirty.discard((path, EffectKind.WRITE))
        m.state.dirty.discard((path, EffectKind.DELETE))
        return None
    if cur is None and known in (None, _MISSING) and _in_quarantined(m.state, path):
        return None  # the rest of a change already quarantined
    if cur is not None:
        m.state.quarantined.discard(path)
    if (
        kind is EffectKind.WRITE
        and path in m.plan_ancestors
        and known in (None, _MISSING)
        and (cur is None or cur.kind == "dir")
    ):
        # creating the directories that hold the plan file: their new state
        # is the consistent one from now on (a later chmod is a change)
        if cur is not None:
            m.state.known[path] = cur
        return None
    key = (path, kind)
    if key in m.state.dirty and not force:
        return None
    if cur is not None and cur.kind == "other" and _is_under(path, m.plans):
        rule, reason = ("monitor:special-file",
                        "a FIFO, socket or device in the plan directory (plans are files)")
    else:
        decision = m.guard.decide(m.agent, [Effect(kind, path, detail=event)])
        if decision.allowed:
            return None
        rule, reason = decision.rule, decision.reason
    if (m.restore and not force and not m.state.stopping and kind is EffectKind.WRITE
            and cur is not None and cur.kind == "file" and not adopted):
        now = time.monotonic()
        m.state.pending[path] = _Pending(event, detail, now, now, cur,
                                    writing=event in _WRITING_EVENTS)
        m.state.pending_cv.notify_all()
        return None
    if adopted:  # reported, not acted on, and not a reason to skip the next change
        action = "reported: the baseline holds the version found when it read the path"
    elif m.restore:
        m.state.dirty.add(key)
        action = act(m, path, kind, cur, event, rule, reason)
    else:
        m.state.dirty.add(key)
        action = "reported (watching without --restore)"
    v = Violation(
        timestamp=logfile.now_iso(),
        session=m.session,
        agent=m.agent,
        event=event,
        path=path,
        rule=rule,
        reason=reason,
        action_taken=action,
        effect=kind.value,
        detail=detail,
        **_origin_fields(m, path, event),
    )
    m.violations.append(v)
    m.state.outbox.append(v)
    return v


def _state_change(
    m: MonitorView, path: str, kind: EffectKind, event: str, detail: str
) -> Violation | None:
    """A change to guard's own state: never quarantined, restored or decided by the
    agent's policy. Other guard processes write there; a writer inside the guarded
    process tree (fanotify names it) is tampering, reported once per path."""
    origin = m.state.origins.get(path)
    if origin is None or origin.in_guarded_tree is not True or path in m.state.tampered:
        return None
    m.state.tampered.add(path)
    v = Violation(
        timestamp=logfile.now_iso(), session=m.session, agent=m.agent,
        event="tampering:" + event, path=path, rule="monitor:guard-state",
        reason="guard's own state (sessions, quarantine, audit log, baseline store)"
               " changed by the guarded process tree",
        action_taken="reported: guard's own state is never quarantined or restored;"
                     " check it (guard session list, guard quarantine list)",
        effect=kind.value, detail=detail, **origin.fields(),
    )
    m.violations.append(v)
    m.state.outbox.append(v)
    return v


def _object_change(m: MonitorView, path: str, kind: EffectKind, event: str) -> Violation | None:
    """A loose object in ``.git/objects`` changed. Objects are content-addressed and
    never rewritten by git, so a change to one that holds the baseline of a file is
    an attack on the restore: the files it backs are copied into the store now (when
    they still hold the blob), and the change is decided like any write."""
    rest = path.split("/objects/", 1)[1]
    blob = rest.replace("/", "")
    if not m.state.ready.is_set() or len(rest) not in (41, 65) or rest[2:3] != "/":
        return None
    if event in ("attrib", "reconcile:attrib"):
        return None  # git "freshens" an object it would write again with utime(2)
    with m.lock:
        files = list(m.state.baseline_blobs.get(blob, ()))
        if not files or (path, kind) in m.state.dirty:
            return None
    assert m.baseline is not None
    kept: list[str] = []
    for f in files:  # outside the lock: reads the file
        try:
            if m.baseline.secure(f):
                kept.append(rel(m, f))
        except (OSError, BaselineError):
            pass
    decision = m.guard.decide(m.agent, [Effect(kind, path, detail=event)])
    if decision.allowed:
        return None
    names = ", ".join(rel(m, f) for f in files[:5]) + (" ..." if len(files) > 5 else "")
    action = (f"reported; the baseline of {', '.join(kept)} is now a verified copy"
              if kept else "reported; restores of these files verify the object and"
              " refuse what it no longer holds")
    with m.lock:
        m.state.dirty.add((path, kind))
        v = Violation(
            timestamp=logfile.now_iso(), session=m.session, agent=m.agent,
            event=event, path=path, rule=decision.rule, reason=decision.reason,
            action_taken=action, effect=kind.value,
            detail=f"the git object holding the baseline of {names}",
            **_origin_fields(m, path, event),
        )
        m.violations.append(v)
        m.state.outbox.append(v)
    m.flush()
    return v


def _origin_fields(m: MonitorView, path: str, event: str) -> dict[str, Any]:
    """The writer of the event behind a violation (fanotify); a scan cannot know it."""
    origin = None if event.startswith("reconcile:") else m.state.origins.get(path)
    return origin.fields() if origin is not None else dict(NO_ORIGIN)
