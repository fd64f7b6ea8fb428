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
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from guard.effects import EffectKind, GuardError
from guard.monitor.entries import BaselineError, Sig, SourceChanged
from guard.monitor.events import _is_under
from guard.monitor.fsops import Unsafe

if TYPE_CHECKING:
    from guard.monitor.watcher import Monitor


def rel(m: Monitor, path: str) -> str:
    for root in sorted(m.roots, key=lambda p: -len(str(p))):
        if _is_under(path, str(root)) and path != str(root):
            return os.path.relpath(path, root)
    return path.lstrip("/")


def _quarantine(m: Monitor, path: str, meta: dict[str, Any]) -> str:
    try:
        slot, dest = m.quarantine.plan(rel(m, path))
    finally:
        notes, m.quarantine.notes = m.quarantine.notes, []
        for note in notes:
            m._notice("tampering", f"quarantine: {note}")
    m._own_moves.add((path, str(dest)))
    item = m.quarantine.finish(slot, dest, path, rel(m, path), meta)
    return item.id


def act(
    m: Monitor, path: str, kind: EffectKind, cur: Sig | None, event: str, rule: str, reason: str
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
                item = _quarantine(m, path, meta)
                m._quarantined.add(path)
                m._known[path] = None
                m._dirty.discard((path, kind))
                return f"moved to quarantine {item}"
            if not entry.restorable:
                return f"left in place: cannot restore it afterwards ({entry.unrestorable})"
            if entry.sig.kind == "dir" and cur.kind == "dir":
                new = m.baseline.reset_attrs(path)
                m._known[path] = new
                m._dirty.discard((path, kind))
                return "directory mode, owner and attributes restored from the baseline"
            item = _quarantine(m, path, meta)
            done.append(f"moved to quarantine {item}")
        elif entry is None:
            return "nothing to restore (the path did not exist when watching began)"
        restored = _restore_tree(m, path)
        done.append(restored)
        m._dirty.discard((path, kind))
        return "; ".join(done)
    except Unsafe as exc:
        msg = f"refused: {exc.strerror or exc} (left as it is; nothing outside is touched)"
        m._notice("error", f"{path}: {msg}")
        return "; ".join([*done, msg])
    except (OSError, BaselineError, GuardError) as exc:
        m.restore_failures += 1  # the baseline store is kept (see stop)
        msg = str(exc) if isinstance(exc, SourceChanged) else f"restore failed: {exc}"
        m._notice("error", f"{path}: {msg}")
        # never left dirty: a later write is reported (and acted on) again. A path
        # left absent is compared with "absent"; what appeared meanwhile (a restore
        # refused with EEXIST) still differs from the baseline, so its event acts
        if m._sig(path) is None:
            m._known[path] = None
        m._dirty.discard((path, kind))
        return "; ".join([*done, msg])


def _restore_tree(m: Monitor, path: str) -> str:
    assert m.baseline is not None
    entry = m.baseline.get(path)
    assert entry is not None
    m._known[path] = m.baseline.restore(path)
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
            m._known[child.path] = m.baseline.restore(child.path)
            count += 1
    return f"directory restored with {count} entries from the baseline"
