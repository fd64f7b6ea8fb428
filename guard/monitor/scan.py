"""The monitor's scans: reconciliation against the last consistent state, changes made
while the baseline ran, and git's staging area. Functions of a :class:`Monitor` (its
shared state is ``m.state``, see guard/monitor/shared.py)."""

from __future__ import annotations

import contextlib
import os
import threading
import time
from typing import TYPE_CHECKING

from guard.audit import logfile
from guard.effects import Effect, EffectKind, GuardError
from guard.monitor import phases
from guard.monitor.baseline import Baseline
from guard.monitor.entries import Sig
from guard.monitor.events import SETTLE_MAX, SETTLE_OPEN_QUIET, SETTLE_QUIET, Violation
from guard.monitor.gitindex import quarantine_index, read_index, staged, write_index
from guard.monitor.restoring import repair, take_snapshots
from guard.monitor.treeread import differences

if TYPE_CHECKING:
    from guard.monitor.view import MonitorView

_MISSING = object()
#: how long a scan waits for the events queued before its differences are decided
SYNC_WAIT = 30.0


def reconcile(m: MonitorView, reason: str) -> list[Violation]:
    """Scan the trees against the last consistent state (stat, then hash).

    Returns the violations the scan found.

    A path whose lstat signature is unchanged is unchanged; a file whose
    signature moved is hashed to tell a content change from an attribute
    change. Every difference is decided like an event, once the events queued
    meanwhile are handled (:meth:`Monitor.sync`): a change made while the scan ran
    (a scan woken by another process's lost events on a busy file system, say) is
    reported by its own event, with its name and its writer, not as ``reconcile:*``.
    """
    if m.baseline is None:
        raise GuardError("the monitor has not been started")
    m.baseline_done.wait()
    baseline = m.baseline
    with m.state.recon_lock:
        t0 = time.perf_counter()
        before = len(m.violations)
        changed = 0
        with m.lock:
            # compared without the lock; differences are read again under it
            snapshot = dict(m.state.known)
        unseen = dict(snapshot)  # the walk pops each path it sees
        m.check_roots()
        repair(m, f"reconcile:{reason}")  # git's object database first: blobs restore from it
        found: list[tuple[str, str]] = []
        # a directory the agent shut (chmod 0600) is seen, not what is in it: its mode
        # is put back, and the next scan sees inside
        diffs, walked = differences(m.roots, m.ignored, m.anchor, unseen, shut_ok=True)
        for path, cur in diffs:
            with m.lock:
                known = m.state.known.get(path, _MISSING)
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
            found.append((path, event))
        with m.lock:
            now = m.state.known
            if len(now) == len(snapshot):  # no path became known since (none is ever
                # dropped from ``known``): the unseen are the snapshot's paths not walked
                gone = [p for p in unseen if now.get(p) is not None]
            else:
                walked_new = {p for p, _ in diffs if p not in snapshot}
                gone = [p for p, s in now.items() if s is not None and (
                    p in unseen if p in snapshot else p not in walked_new)]
        gone = [p for p in gone if _gone(m, p)]
        changed += len(gone)
        if found or gone:
            m.sync(SYNC_WAIT)  # each change the scan saw made its event before the marker
        for path, event in found:
            m.change(path, EffectKind.WRITE, f"reconcile:{event}")  # unless handled since
        for path in gone:
            m.change(path, EffectKind.DELETE, "reconcile:deleted")
        for g in m.git_dirs:
            m.index_change(g, "reconcile:modified")
        new = m.violations[before:]
        m.reconciliations += 1
        took = time.perf_counter() - t0
        if reason not in ("periodic", "settle") or new:
            m.notify(
                "reconcile",
                f"reconciliation ({reason}) scanned {walked:,} paths in {took:.3f} s:"
                f" {changed} differ from the last consistent state, {len(new)} new violations",
            )
        m.flush()
        return new



def _gone(m: MonitorView, path: str) -> bool:
    """Whether ``path`` is gone; not known (False) while a directory on its way is shut."""
    try:
        return m.anchor.lstat(path) is None
    except PermissionError:
        return False


def begin_baseline(m: MonitorView, t0: float) -> None:
    """Phase 1 of the baseline (the caller's command waits for it), then phase 2 on a
    thread of its own (``m.background``) or at once. See :mod:`guard.monitor.phases`."""
    try:
        for g in m.git_dirs:
            m.state.index_base[g] = (read_index(g), "")
        worktree = m.guard.roots.worktree
        data = m.state.index_base.get(str(worktree) + "/.git", (None, ""))[0] if worktree else None
        m.baseline = phases.prepare(
            Baseline, m.roots, store=m.store, worktree=worktree, ignore=m.ignored,
            size_cap=m.size_cap, progress=m.progress, index_data=data,
        )
    except BaseException:
        m.stop_observer()
        m.anchor.close()
        m.wait_closed()
        raise
    # what changed while phase 1 ran (before the command started) keeps the old rule
    m.sync()
    with m.lock:
        m.baseline.pre_early = set(m.state.early)
        m.state.lost_at_phase1 = m.events_lost
    if m.background and m.baseline.status is not None:
        m.state.baseline_thread = threading.Thread(
            target=finish_baseline, args=(m, t0), daemon=True, name="guard-baseline")
        m.state.baseline_thread.start()
    else:
        try:
            finish_baseline(m, t0)
        except BaseException:
            m.stop_observer()
            m.anchor.close()
            m.wait_closed()
            raise


def _early_paths(m: MonitorView) -> set[str]:
    m.sync()
    with m.lock:
        return set(m.state.early)


def finish_baseline(m: MonitorView, t0: float) -> None:
    """Phase 2, then the changes made meanwhile, then the reconciler and settler.

    Phase 2 runs at the process's own priority. A lower one (``SCHED_IDLE``, a nice
    value) would hold the interpreter's lock at it: on a busy machine every other
    thread, the stop included, then waits for a thread the scheduler seldom runs, and
    an unprivileged process can never raise it back (``RLIMIT_NICE``)."""
    bl = m.baseline
    assert bl is not None
    try:
        try:
            phases.complete(bl, lambda: _early_paths(m),
                            lambda: m.events_lost > m.state.lost_at_phase1)
            for g in m.git_dirs:
                data = m.state.index_base[g][0]
                digest = staged(data, os.path.dirname(g), m.store)
                m.state.index_base[g] = (data, digest)
                m.state.index_known[g] = digest
            take_snapshots(m)
        except Exception as exc:
            if not m.background:
                raise
            m.notify("error", f"the baseline could not be completed: {exc}; changes are"
                              " still reported, restores may fail")
        # every event generated while the baseline ran is now recorded in state.early
        m.sync()
        with m.lock:
            m.state.known = {p: e.sig for p, e in bl.entries.items()}
            for e in bl.entries.values():
                if e.blob is not None and e.copy is None:
                    m.state.baseline_blobs.setdefault(e.blob, []).append(e.path)
            early, m.state.early = m.state.early, {}
        m.startup_seconds = time.perf_counter() - t0
        m.state.ready.set()
        m.notify(
            "start",
            f"watching {', '.join(map(str, m.roots))} as agent {m.agent!r}"
            f" ({'restore' if m.restore else 'report only'});"
            f" baseline: {bl.stats.summary()}; start-up {m.startup_seconds:.2f} s",
        )
        _not_restorable(m, bl)
        m.flush()
        during_baseline(m, early)
        for g in m.git_dirs:
            if read_index(g) != m.state.index_base[g][0]:
                m.index_change(g, "modified")
        for target, name in ((m.reconcile_loop, "guard-reconcile"),
                             (m.settle_loop, "guard-settle")):
            t = threading.Thread(target=target, daemon=True, name=name)
            t.start()
            m.state.threads.append(t)
    finally:
        m.baseline_done.set()


def _not_restorable(m: MonitorView, bl: Baseline) -> None:
    if bl.held is not None and bl.held.refused:
        m.notify("not-held", f"{bl.held.refused} baseline copies are over the held store's"
                             f" limit of {bl.held.limit:,} bytes: they are kept on disk only"
                             " (checked by SHA-256; an agent of this user can destroy them)")
    over = bl.over_cap()
    if over:
        names = ", ".join(e.path for e in over[:5]) + (" ..." if len(over) > 5 else "")
        m.notify(
            "not-restorable",
            f"{len(over)} files are over the size cap and not in git: a change to them is"
            f" reported but cannot be undone: {names}",
        )
    if bl.status is not None and bl.status.ignored:
        tops = sorted(p for p in bl.status.ignored if not m.ignored(p))
        if tops:
            names = ", ".join(m.rel(p) for p in tops[:8]) + (" ..." if len(tops) > 8 else "")
            m.notify(
                "not-restorable",
                f"{len(tops)} paths ignored by git are never copied: a change in them is"
                f" reported but cannot be undone: {names}",
            )


def during_baseline(m: MonitorView, early: dict[str, str]) -> None:
    """Changes made while the baseline was taken: never adopted silently.

    Each path that changed during the baseline (an inotify event before the
    baseline finished, or an identity that moved between listing and reading)
    is reported as ``during-baseline:<event>``: the baseline may already hold
    the changed version, and the version before it was never read. If the path
    has changed again since its capture, that change is then handled like any
    event (with --restore: quarantined, the captured version restored).

    A path whose baseline is its state from before the change is not that case:
    its change is handled like any event, and ``--restore`` undoes it. That is a
    path in ``Baseline.exact`` (its state before the command started), and a path
    whose first event came after phase 2's walk had ended and that was not read
    again since (the walk read it before the change).
    """
    bl = m.baseline
    assert bl is not None
    for path, why in bl.changed.items():
        early.setdefault(path, f"modified ({why})")
    for path, event in sorted(early.items()):
        if m.ignored(path) or path in m.plan_ancestors:
            continue
        cur = m.sig(path)
        after_walk = (bl.walk_early is not None and path not in bl.walk_early
                      and path not in bl.reread)
        if ((path in bl.exact or after_walk) and path not in bl.pre_early
                and path not in bl.changed):
            m.change(path, EffectKind.DELETE if cur is None else EffectKind.WRITE,
                     event.split(" ")[0])
            continue
        with m.lock:
            known = m.state.known.get(path, _MISSING)
            in_baseline = path in bl.entries
        gone = cur is None and not in_baseline
        kind = EffectKind.DELETE if gone else EffectKind.WRITE
        detail = ("deleted before the baseline could read it" if gone
                  else "the version before this change was never read")
        m.change(path, kind, "during-baseline:" + event.split(" ")[0], detail, force=True,
                 adopted=True)
        if cur != known and not gone:
            m.change(path, EffectKind.DELETE if cur is None else EffectKind.WRITE, event)


def index_change(m: MonitorView, git_dir: str, event: str) -> Violation | None:
    """``.git/index`` changed: a violation only when what is staged changed."""
    data = read_index(git_dir)
    base, base_digest = m.state.index_base.get(git_dir, (None, ""))
    if data is not None and data == base and base_digest:
        digest = base_digest  # the very bytes of the start: the same staged entries
    else:
        digest = staged(data, os.path.dirname(git_dir), m.store)
    path = git_dir + "/index"
    with m.lock:
        if digest == m.state.index_known.get(git_dir):
            return None
        decision = m.guard.decide(m.agent, [Effect(EffectKind.WRITE, path,
                                                         detail=event)])
        if decision.allowed:
            m.state.index_known[git_dir] = digest
            return None
        action = "reported (watching without --restore)"
        if m.restore:
            action = _restore_index(m, git_dir, data, decision.rule, decision.reason)
        else:
            m.state.index_known[git_dir] = digest  # once per change of what is staged
        v = Violation(logfile.now_iso(), m.session, m.agent, event, path,
                      decision.rule, decision.reason, action, "write",
                      "what is staged changed (git update-index / git add)")
        m.violations.append(v)
        m.state.outbox.append(v)
    m.flush()
    return v

def _restore_index(m: MonitorView, git_dir: str, data: bytes | None, rule: str, reason: str) -> str:
    base, digest = m.state.index_base.get(git_dir, (None, ""))
    done: list[str] = []
    try:
        if data is not None:
            meta = {"agent": m.agent, "event": "index", "rule": rule, "reason": reason,
                    "effect": "write", "in_baseline": base is not None}
            item = quarantine_index(m.quarantine, git_dir + "/index",
                                    m.rel(git_dir + "/index"), data, meta)
            done.append(f"copied to quarantine {item}")
        if base is None:
            return "; ".join([*done, "no index at start: left as it is"])
        write_index(git_dir, base)
        m.state.index_known[git_dir] = digest
        done.append("index restored from the baseline copy")
    except (OSError, GuardError) as exc:
        done.append(f"restore failed: {exc}")
        m.notify("error", f"{git_dir}/index: restore failed: {exc}")
    return "; ".join(done)


def drain_pending(m: MonitorView, *, everything: bool = False) -> None:
    """Act on every pending file that has settled (all of them with ``everything``)."""
    with m.lock:
        paths = list(m.state.pending)
    for path in paths:
        cur = m.sig(path)
        now = time.monotonic()
        with m.lock:
            p = m.state.pending.get(path)
            if p is None:
                continue
            if cur != p.sig and cur is not None and not everything:
                p.sig, p.since = cur, now
                continue
            quiet = SETTLE_OPEN_QUIET if p.writing else SETTLE_QUIET
            due = (everything or cur is None or now - p.since >= quiet
                   or now - p.first >= SETTLE_MAX)
            if not due:
                continue
            del m.state.pending[path]
            m.state.pending_cv.notify_all()
        detail = p.detail
        if p.writing and cur is not None and not everything and now - p.first >= SETTLE_MAX:
            detail = (detail + "; " if detail else "") + "still open for writing"
        m.change(path, EffectKind.WRITE, p.event, detail, force=True)
