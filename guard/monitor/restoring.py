"""What the monitor does about a violation when it restores: the violating version
goes into quarantine and the baseline is put back. Nothing is ever deleted.

Functions of a :class:`Monitor`, called under its lock once a change was decided
a violation (changes.py). A path the baseline did not hold is moved into
quarantine; a changed one is moved there and the baseline's version put back (a
removed directory with the entries it held); a directory that is still one gets
its mode, owner and attributes back. A restore that fails or is refused is a
notice, and the path is not left dirty (a later change is acted on again). Not
here: deciding whether a change is a violation (changes.py), the quarantine store
itself (quarantine.py), the baseline's copies and their checks (baseline.py).

The monitor's shared state is ``m.state`` (:mod:`guard.monitor.shared`).

Git's object database is put back from its snapshot (:mod:`guard.monitor.objsnap`),
taken with the baseline's second phase: a file the snapshot holds that is gone or no
longer verifies is restored (a damaged version goes into quarantine first), one
violation per repair. An event under ``.git/objects`` wakes the reconciler, which
repairs in one batch (``rm -rf .git/objects`` is thousands of events). A tracked
file's blob is read from the snapshot when the repository's object is gone or changed
(the agent may be deleting it at that moment); one in neither repairs at once and
tries again, and is tried again by the next scans (``BLOB_ATTEMPTS`` in all).
"""

# Lazy imports: the object database's snapshot (objsnap) when the baseline's second phase
# takes it, after guard run's command has started.

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from guard.audit import logfile
from guard.effects import Effect, EffectKind, GuardError
from guard.monitor.attribution import NO_ORIGIN
from guard.monitor.entries import BaselineError, BlobUnavailable, Sig, SourceChanged
from guard.monitor.events import Violation, _is_under
from guard.monitor.fsops import Unsafe

if TYPE_CHECKING:
    from guard.monitor.view import MonitorView

#: restores of a path whose git blob is unavailable, before it is left missing
BLOB_ATTEMPTS = 5


def rel(m: MonitorView, path: str) -> str:
    for root in sorted(m.roots, key=lambda p: -len(str(p))):
        if _is_under(path, str(root)) and path != str(root):
            return os.path.relpath(path, root)
    return path.lstrip("/")


def quarantine_path(m: MonitorView, path: str, meta: dict[str, Any]) -> str:
    try:
        slot, dest = m.quarantine.plan(rel(m, path))
    finally:
        notes, m.quarantine.notes = m.quarantine.notes, []
        for note in notes:
            m.notify("tampering", f"quarantine: {note}")
    m.state.own_moves.add((path, str(dest)))
    item = m.quarantine.finish(slot, dest, path, rel(m, path), meta)
    return item.id


def act(
    m: MonitorView, path: str, kind: EffectKind, cur: Sig | None, event: str, rule: str, reason: str
) -> str:
    """Quarantine the violating version and put the baseline back. Never deletes."""
    assert m.baseline is not None
    entry = m.baseline.get(path)
    meta = {"agent": m.agent, "event": event, "rule": rule, "reason": reason,
            "effect": kind.value, "in_baseline": entry is not None}
    done: list[str] = []
    try:
        if cur is not None:
            if entry is None:
                item = quarantine_path(m, path, meta)
                m.state.quarantined.add(path)
                m.state.known[path] = None
                m.state.dirty.discard((path, kind))
                return f"moved to quarantine {item}"
            if not entry.restorable:
                return f"left in place: cannot restore it afterwards ({entry.unrestorable})"
            if entry.sig.kind == "dir" and cur.kind == "dir":
                new = m.baseline.reset_attrs(path)
                m.state.known[path] = new
                m.state.dirty.discard((path, kind))
                return "directory mode, owner and attributes restored from the baseline"
            item = quarantine_path(m, path, meta)
            done.append(f"moved to quarantine {item}")
        elif entry is None:
            # absent, as when watching began: not dirty, so a version made there later
            # is acted on (it is not the one reported here)
            m.state.dirty.discard((path, kind))
            return "nothing to restore (the path did not exist when watching began)"
        try:
            restored = _restore_tree(m, path)
        except BlobUnavailable:
            # gone from the object database and its snapshot: put the database back
            # from the snapshot (the blob may be in a pack of it), then again
            if not repair(m, "restore:object-missing", retry=True):
                raise
            restored = _restore_tree(m, path)
        done.append(restored)
        m.state.unavailable.pop(path, None)
        m.state.dirty.discard((path, kind))
        return "; ".join(done)
    except Unsafe as exc:
        msg = f"refused: {exc.strerror or exc} (left as it is; nothing outside is touched)"
        m.notify("error", f"{path}: {msg}")
        return "; ".join([*done, msg])
    except (OSError, BaselineError, GuardError) as exc:
        m.restore_failures += 1  # the baseline store is kept (see stop)
        msg = str(exc) if isinstance(exc, SourceChanged) else f"restore failed: {exc}"
        again = isinstance(exc, (FileNotFoundError, PermissionError))
        if isinstance(exc, BlobUnavailable):
            # the object database may still be being put back (or its snapshot taken):
            # the next scans try again, a bounded number of times
            tries = m.state.unavailable[path] = m.state.unavailable.get(path, 0) + 1
            again = tries < BLOB_ATTEMPTS
            if not again:  # a later change of the path starts again
                del m.state.unavailable[path]
            msg += (f" (attempt {tries} of {BLOB_ATTEMPTS}; "
                    + ("tried again at the next scan)" if again else
                       "not tried again unless the path changes)"))
        m.notify("error", f"{path}: {msg}")
        # never left dirty: a later write is reported (and acted on) again. A path
        # left absent is compared with "absent"; what appeared meanwhile (a restore
        # refused with EEXIST) still differs from the baseline, so its event acts.
        # Unless a directory on its way was gone or shut (the tree was being removed
        # around it, or a parent's mode is put back after it), or its blob may come
        # back: the next scan finds it missing and puts it back
        if m.sig(path) is None and not again:
            m.state.known[path] = None
        m.state.dirty.discard((path, kind))
        return "; ".join([*done, msg])


def _restore_tree(m: MonitorView, path: str) -> str:
    assert m.baseline is not None
    entry = m.baseline.get(path)
    assert entry is not None
    m.state.known[path] = m.baseline.restore(path)
    source = (
        "the baseline copy (SHA-256 checked)" if entry.copy
        else f"git blob {entry.blob[:12]} (its id checked)" if entry.blob
        else "the baseline"
    )
    if entry.sig.kind != "dir":
        return f"restored from {source}"
    count = 0
    for child in m.baseline.under(path):
        if m.anchor.lstat(child.path) is None and child.restorable:
            m.state.known[child.path] = m.baseline.restore(child.path)
            count += 1
    return f"directory restored with {count} entries from the baseline"


def take_snapshots(m: MonitorView) -> None:
    """Snapshot each watched repository's ``.git/objects`` into the baseline store."""
    from guard.monitor.objsnap import ObjectSnapshot

    for i, root in enumerate(m.roots):
        g = str(root / ".git")
        if not os.path.isdir(os.path.join(g, "objects")):
            continue
        try:
            snap = ObjectSnapshot.take(g, m.store / "git-objects" / str(i))
        except OSError as exc:
            m.notify("error", f"{g}/objects: no snapshot ({exc}); a deleted object"
                              " database cannot be restored")
            continue
        m.objects[g] = snap
        if m.baseline is not None:  # a tracked file's blob is read from it when git's is gone
            m.baseline.snapshots = m.objects
        # information, unless some files could not be kept (a warning, as other limits)
        m.notify("not-restorable" if snap.skipped else "objects",
                 f"{g}/objects: {snap.summary()}; restores verify each file by its object id"
                 " or checksum")


def touched(m: MonitorView, path: str) -> bool:
    """An event at or under a snapshotted ``.git/objects``: wake the reconciler when a
    file the snapshot holds is gone or changed there. True when ``path`` is such a file
    and holds what git wrote (the monitor's own restore): nothing to report."""
    for g, snap in m.objects.items():
        objs = g + "/objects"
        if path == objs or path.startswith(objs + "/"):
            under = "" if path == objs else path[len(objs) + 1:]
            snap.retry(under)  # changed again: what could not be put back is tried again
            bad = snap.damaged(m.anchor, under)
            if m.restore and bad:
                m.wake("git objects changed")
            return under in snap.files and not bad
    return False


def repair(m: MonitorView, event: str, *, retry: bool = False) -> list[Violation]:
    """Put back every snapshotted file of ``.git/objects`` that is gone or damaged
    (``retry``: those that could not be put back before too)."""
    found: list[Violation] = []
    if not m.restore:
        return found
    for g, snap in list(m.objects.items()):
        objs = g + "/objects"
        with m.lock:
            if retry:
                snap.refused.clear()
            bad = snap.damaged(m.anchor)
            if not bad:
                continue
            decision = m.guard.decide(m.agent, [Effect(EffectKind.WRITE, objs, detail=event)])
            if decision.allowed:
                continue
            meta = {"agent": m.agent, "event": event, "rule": decision.rule,
                    "reason": decision.reason, "effect": "write", "in_baseline": True}
            done, kept, failed = 0, 0, []
            for rel in bad:
                live = objs + "/" + rel
                if not snap.intact(rel):  # the damaged version stays where it is
                    failed.append(f"{rel}: original unavailable: its snapshot no longer"
                                  " holds what git wrote")
                    snap.refuse(rel, m.anchor)
                    continue
                try:
                    if m.anchor.lstat(live) is not None:
                        quarantine_path(m, live, meta)
                        kept += 1
                    for attempt in range(5):  # outlast an `rm -rf` still running
                        try:
                            snap.restore(rel, m.anchor)
                            break
                        except FileNotFoundError:
                            if attempt == 4:
                                raise
                    done += 1
                except (OSError, GuardError) as exc:
                    failed.append(f"{rel}: {exc}")
                    snap.refuse(rel, m.anchor)
            action = f"{done} files restored from the object database snapshot (each verified" \
                     " by its object id or checksum)"
            if kept:
                action += f"; {kept} damaged versions moved to quarantine"
            if failed:
                m.restore_failures += 1
                action += f"; {len(failed)} failed: " + "; ".join(failed[:3])
                m.notify("error", f"{objs}: {len(failed)} restores failed: {failed[0]}")
            found.append(Violation(
                timestamp=logfile.now_iso(), session=m.session, agent=m.agent, event=event,
                path=objs, rule=decision.rule, reason=decision.reason, action_taken=action,
                effect="write", detail=f"{len(bad)} files of git's object database gone or"
                                       " changed", **dict(NO_ORIGIN)))
            m.report(found[-1])
    return found
