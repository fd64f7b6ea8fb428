"""The monitor's scans: reconciliation against the last consistent state, changes made
while the baseline ran, and git's staging area. Functions of a :class:`Monitor`."""

from __future__ import annotations

import contextlib
import os
import time
from typing import TYPE_CHECKING

from guard import audit
from guard.effects import Effect, EffectKind, GuardError
from guard.monitor.baseline import Sig, walk
from guard.monitor.events import Violation
from guard.monitor.gitindex import quarantine_index, read_index, staged, write_index

if TYPE_CHECKING:
    from guard.monitor.watcher import Monitor

_MISSING = object()


def reconcile(m: Monitor, reason: str) -> list[Violation]:
    """Scan the trees against the last consistent state (stat, then hash).

    Returns the violations the scan found.

    A path whose lstat signature is unchanged is unchanged; a file whose
    signature moved is hashed to tell a content change from an attribute
    change. Every difference is decided like an event.
    """
    if m.baseline is None:
        raise GuardError("the monitor has not been started")
    baseline = m.baseline
    with m._recon_lock:
        t0 = time.perf_counter()
        before = len(m.violations)
        seen: set[str] = set()
        changed = 0
        for path, st, meta, _, _ in walk(m.roots, m._ignored):
            seen.add(path)
            cur = Sig.of(st, meta)
            with m._lock:
                known = m._known.get(path, _MISSING)
            if known == cur:
                continue
            changed += 1
            if not isinstance(known, Sig):
                event = "created"
            else:
                event = "modified"
                entry = baseline.get(path)
                if cur.kind == known.kind == "file" and entry is not None:
                    with contextlib.suppress(OSError):
                        if baseline.same_content(entry, path):
                            event = "attrib"
                elif cur.kind == known.kind:
                    event = "attrib"
            m._change(path, EffectKind.WRITE, f"reconcile:{event}")
        with m._lock:
            gone = [p for p, s in m._known.items() if s is not None and p not in seen]
        for path in gone:
            if m.anchor.lstat(path) is not None:
                continue
            changed += 1
            m._change(path, EffectKind.DELETE, "reconcile:deleted")
        for g in m._git_dirs:
            m._index_change(g, "reconcile:modified")
        new = m.violations[before:]
        m.reconciliations += 1
        took = time.perf_counter() - t0
        if reason not in ("periodic", "settle") or new:
            m._notice(
                "reconcile",
                f"reconciliation ({reason}) scanned {len(seen):,} paths in {took:.2f} s:"
                f" {changed} differ from the last consistent state, {len(new)} new violations",
            )
        m._flush()
        return new



def during_baseline(m: Monitor, early: dict[str, str]) -> None:
    """Changes made while the baseline was taken: never adopted silently.

    A change after a path's capture differs from the baseline and is handled
    like any event. One before the capture (the baseline already holds the
    new version) is reported as ``during-baseline``; a file created then is
    not treated as an original (with --restore it goes to quarantine).
    """
    assert m.baseline is not None
    bl = m.baseline
    for path, why in bl.changed.items():
        early.setdefault(path, f"modified ({why})")
    for path, event in sorted(early.items()):
        if m._ignored(path) or path in m._plan_ancestors:
            continue
        cur = m._sig(path)
        with m._lock:
            known = m._known.get(path, _MISSING)
        if cur != known:
            kind = EffectKind.DELETE if cur is None else EffectKind.WRITE
            m._change(path, kind, event)
            continue
        if cur is None:
            continue  # created and removed again while the baseline ran: nothing left
        created = event.startswith(("created", "moved-to"))
        if created and bl.entries.get(path) is not None and cur.kind != "dir":
            with m._lock:
                del bl.entries[path]
                m._known.pop(path, None)
            m._change(path, EffectKind.WRITE, "during-baseline:created", force=True)
        else:
            m._change(path, EffectKind.WRITE, "during-baseline:" + event.split(" ")[0],
                         detail="the version before this change was never read",
                         adopted=True)



def index_change(m: Monitor, git_dir: str, event: str) -> Violation | None:
    """``.git/index`` changed: a violation only when what is staged changed."""
    data = read_index(git_dir)
    digest = staged(data, os.path.dirname(git_dir), m.store)
    path = git_dir + "/index"
    with m._lock:
        if digest == m._index_known.get(git_dir):
            return None
        decision = m.guard.decide(m.agent, [Effect(EffectKind.WRITE, path,
                                                         detail=event)])
        if decision.allowed:
            m._index_known[git_dir] = digest
            return None
        action = "reported (watching without --restore)"
        if m.restore:
            action = _restore_index(m, git_dir, data, decision.rule, decision.reason)
        else:
            m._index_known[git_dir] = digest  # once per change of what is staged
        v = Violation(audit.now_iso(), m.session, m.agent, event, path,
                      decision.rule, decision.reason, action, "write",
                      "what is staged changed (git update-index / git add)")
        m.violations.append(v)
        m._outbox.append(v)
    m._flush()
    return v

def _restore_index(m: Monitor, git_dir: str, data: bytes | None, rule: str, reason: str) -> str:
    base, digest = m._index_base.get(git_dir, (None, ""))
    done: list[str] = []
    try:
        if data is not None:
            meta = {"agent": m.agent, "event": "index", "rule": rule, "reason": reason,
                    "effect": "write", "in_baseline": base is not None}
            item = quarantine_index(m.quarantine, git_dir + "/index",
                                    m._rel(git_dir + "/index"), data, meta)
            done.append(f"copied to quarantine {item}")
        if base is None:
            return "; ".join([*done, "no index at start: left as it is"])
        write_index(git_dir, base)
        m._index_known[git_dir] = digest
        done.append("index restored from the baseline copy")
    except (OSError, GuardError) as exc:
        done.append(f"restore failed: {exc}")
        m._notice("error", f"{git_dir}/index: restore failed: {exc}")
    return "; ".join(done)

