"""The monitor: watch the trees with inotify, decide every change, report and restore.

Holds :class:`Monitor`: its configuration (the state its threads and the helpers in
the other modules share is a :class:`~guard.monitor.shared.MonitorState`,
``Monitor.state``), its life cycle (start, stop, the watch lock),
its threads, waiting for a consistent state (:meth:`Monitor.sync`,
:meth:`Monitor.settle`) and its output (the audit log and the callbacks).

Threads: watchdog's inotify reader and dispatcher (events reach
:meth:`Monitor.on_fs_event`, see intake.py), one reconciler (periodic scans, and
the scan that follows an inotify overflow or watch-limit error) and one settler
(acts on written files once their writer is done). Every change, from an event or
a scan, goes through :meth:`Monitor.change` (changes.py): it compares the path
with its last consistent state, decides the effect with the policy, and acts once
per violation (restoring.py) under one lock; the audit log and callbacks are
written after the lock is released, and nothing done under it can block (files
are never opened unless they are regular files, by descriptor, see
:mod:`guard.monitor.fsops`). Not here: the backends (backends.py, fanotify.py),
the baseline (baseline.py, phases.py), the scans (scan.py).
"""

# Lazy imports: the syslog shipper, only when the policy ships audit records (guard run's
# start-up).

from __future__ import annotations

import contextlib
import os
import re
import sys
import threading
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

from guard.audit import logfile
from guard.audit.sinks import AuditLog, AuditSink
from guard.effects import EffectKind, GuardError
from guard.fleet.records import stamp
from guard.monitor.attribution import Origin, Processes
from guard.monitor.backends import start_observer
from guard.monitor.barrier import Barrier
from guard.monitor.barrier import settle as barrier_settle
from guard.monitor.barrier import sync as barrier_sync
from guard.monitor.baseline import Baseline
from guard.monitor.changes import change, path_sig
from guard.monitor.entries import DEFAULT_SIZE_CAP, Progress, Sig
from guard.monitor.events import (
    Notice,
    Violation,
    _is_under,
    _Sink,
    default_roots,
    join_within,
    new_session_id,
    plan_ancestors,
)
from guard.monitor.fanotify import FanotifyObserver
from guard.monitor.fanotify_group import Choice
from guard.monitor.fsops import Anchor, identity
from guard.monitor.heldstore import make_undumpable
from guard.monitor.identity import check_roots
from guard.monitor.intake import lost_event, on_fan_event, on_fs_event, trouble
from guard.monitor.ownstate import WatchLock, state_paths
from guard.monitor.quarantine import Quarantine, quarantine_root
from guard.monitor.restoring import rel
from guard.monitor.scan import begin_baseline, drain_pending, index_change
from guard.monitor.scan import reconcile as _reconcile
from guard.monitor.shared import MonitorState

if TYPE_CHECKING:
    from guard.decide import Guard
    from guard.monitor.events import AnyEvent
    from guard.monitor.objsnap import ObjectSnapshot

__all__ = ["Monitor"]

# watchdog warns when its own directory-creation race re-registers a watch; harmless noise
warnings.filterwarnings("ignore", category=RuntimeWarning, module=r"watchdog\.")

_SESSION_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,79}$")
#: the reconciliation interval used when inotify cannot watch everything
DEGRADED_INTERVAL = 5.0
#: how long a stop waits for the baseline, for its last sync, for the watch and for the
#: monitor's own threads (each): past it, it names what is stuck and goes on
STOP_WAIT = 30.0


class Monitor(_Sink):
    """Watch ``roots`` while ``agent`` works; every change its policy does not allow is a violation.

    ``start()`` takes the baseline (``progress`` is told how far it got) and
    starts the inotify observer; ``stop()`` stops it after a last
    reconciliation. With ``restore=True`` violating versions are moved into
    quarantine and the baseline is put back; a written file is acted on once it
    has settled (closed after writing, or unchanged for a while), so what is
    quarantined is the whole version. Violations are appended to the audit log
    and passed to ``on_violation``; notices (overflow, scans, errors) to
    ``on_notice``. :meth:`settle` waits until everything seen so far is handled.
    """

    def __init__(
        self,
        guard: Guard,
        agent: str,
        roots: list[Path] | None = None,
        *,
        restore: bool = False,
        session: str | None = None,
        on_violation: Callable[[Violation], None] | None = None,
        reconcile_interval: float | None = 30.0,
        audit_path: Path | None = None,
        size_cap: int = DEFAULT_SIZE_CAP,
        progress: Progress | None = None,
        on_notice: Callable[[Notice], None] | None = None,
        final_reconcile: bool = True,
        sink: AuditSink | None = None,
        background: bool = False,
        backend: str = "auto",
    ) -> None:
        guard.agent(agent)  # an unknown agent is a GuardError naming the known ones
        if backend not in ("auto", "fanotify", "inotify"):
            raise GuardError(f"monitor backend {backend!r}: use auto, fanotify or inotify")
        self.session = session or new_session_id()
        if not _SESSION_RE.match(self.session):
            raise GuardError(
                f"session id {self.session!r}: use letters, digits, '.', '_' or '-' (1-80 chars)"
            )
        self.guard = guard
        self.agent = agent
        r = guard.roots
        chosen = roots if roots is not None else default_roots(guard)
        self.roots: list[Path] = []
        for root in chosen:
            real = Path(os.path.realpath(root))
            if real == r.plans and not real.exists():
                real.mkdir(parents=True, exist_ok=True)
            if not real.is_dir():
                raise GuardError(f"cannot watch {root}: not a directory")
            self.roots.append(real)
        #: what the monitor's threads and helpers share (guard/monitor/shared.py); the
        #: roots' (device, inode) when the monitor was made: the trees it watches
        self.state = MonitorState(
            root_ids={str(root): identity(root) for root in self.roots})
        self._stuck: list[str] = []  # threads a stop could not wait for (stop())
        self.restore = restore
        self.on_violation = on_violation
        self.on_notice = on_notice
        if reconcile_interval is not None and reconcile_interval <= 0:
            raise GuardError("reconcile interval must be a positive number of seconds")
        self.reconcile_interval = reconcile_interval
        self.size_cap = size_cap
        self.progress = progress
        self.final_reconcile = final_reconcile
        self.audit_path = audit_path if audit_path is not None else logfile.default_log_path(r)
        self.sink: AuditSink = sink if sink is not None else AuditLog(self.audit_path)
        self.anchor = Anchor([str(root) for root in self.roots])
        self.quarantine = Quarantine(quarantine_root(r), self.session, self.anchor)
        self.store = r.data / "monitor" / logfile.project_of(r) / self.session

        self.violations: list[Violation] = []
        #: restores that failed (then the baseline store is kept when stopping)
        self.restore_failures = 0
        self.notices: list[Notice] = []
        self.overflows = 0
        #: overflows, and every event fanotify could not name (its directory walk was
        #: running; the event may be another process's, elsewhere on the file system)
        self.events_lost = 0
        self.watch_errors = 0
        self.reconciliations = 0
        self.startup_seconds = 0.0
        self.baseline: Baseline | None = None
        self.degraded = False

        #: the lock every change is decided and acted on under (helpers take it too)
        self.lock = self.state.lock
        #: .git -> the snapshot of its object database (guard/monitor/objsnap.py)
        self.objects: dict[str, ObjectSnapshot] = {}
        self._out_lock = threading.Lock()
        #: set once inotify watches every root (before the baseline is taken)
        self.watching = threading.Event()
        self._closing: FanotifyObserver | None = None
        #: ``auto`` (fanotify when root, else inotify), ``fanotify`` or ``inotify``
        self.backend_wanted = backend
        self.backend: Choice | None = None
        #: who wrote what (fanotify only): pid, executable, inside the guarded tree
        self.processes = Processes()
        self._started = False
        #: finish the baseline while the command runs (see guard/monitor/phases.py)
        self.background = background
        #: set once the whole baseline is taken (and early changes handled)
        self.baseline_done = threading.Event()

        #: the watched repositories' .git directories
        self.git_dirs = [str(root / ".git") for root in self.roots if (root / ".git").is_dir()]
        #: each repository's .git/index -> its .git (compared by what it stages)
        self.index_paths = {g + "/index": g for g in self.git_dirs}
        #: the prefixes of git's object databases (a change under one: changes.py)
        self.objects_prefixes = tuple(g + "/objects/" for g in self.git_dirs)
        #: the plan directory, and it and its ancestors inside the roots
        self.plans = str(r.plans)
        self.plan_ancestors = plan_ancestors(str(r.plans), self.roots)
        self._ignored_exact = {str(self.quarantine.root), str(self.quarantine.root / ".gitignore"),
                               str(self.audit_path)}
        #: guard's own state (sessions, quarantine, audit, stores): never a violation
        self.state_paths = state_paths(r, self.quarantine.root)
        #: what is under guard's own state (changes.py: reported only when tampered with)
        self.state_prefixes = tuple(p.rstrip("/") + "/" for p in self.state_paths)
        self._watch_lock = WatchLock(r.data, self.roots, self.session)
        own = (str(self.quarantine.session_dir), str(self.store), *self.state_paths)
        #: guard's own top directories and files: never decided by the agent's policy
        self.ignored_tops = frozenset(own)
        #: every ignored path that is not in the sets above starts with one of these
        self._ignored_prefixes = tuple(p.rstrip("/") + "/" for p in own) + tuple(
            g + "/" for g in self.git_dirs)
        sd = str(self.quarantine.session_dir)
        #: sync's marker directory (barrier.py): the session's quarantine, when watched
        self.barrier = Barrier(sd if any(_is_under(sd, str(r)) for r in self.roots) else None,
                               self.roots)

    def ignored(self, path: str) -> bool:
        """The monitor's own files and git's object churn (see docs/monitor.md).

        ``.git/index`` is compared by its staged entries, not walked or hashed.
        """
        if path in self._ignored_exact or path in self.ignored_tops:
            return True
        if self.baseline is not None and path in self.baseline.temp_names:
            return True
        if not path.startswith(self._ignored_prefixes):
            return False  # the walks ask for every path: most are answered here
        if _is_under(path, str(self.quarantine.session_dir)) or _is_under(path, str(self.store)):
            return True
        if path.startswith(self.state_prefixes):
            return True
        for g in self.git_dirs:
            if path.startswith(g + "/"):
                rest = path[len(g) + 1 :]
                if rest in ("index", "index.lock") or rest == "objects" or rest.startswith(
                    "objects/"
                ):
                    return True
        return False

    # -- life cycle ----------------------------------------------------------

    def start(self) -> Monitor:
        if self._started:
            raise GuardError("this monitor was already started")
        t0 = time.perf_counter()
        self.claim()
        self._started = True
        try:
            self._start(t0)
        except BaseException:
            self._watch_lock.release()
            raise
        return self

    def claim(self) -> None:
        """Take the tree's watch lock (one monitor per tree, see ownstate.py); a
        :class:`GuardError` names the monitor holding it. ``start`` claims it too."""
        if not self._watch_lock.held:
            self._watch_lock.acquire(logfile.now_iso())

    def _start(self, t0: float) -> None:
        why = make_undumpable()  # the held baseline copies: this process's alone
        if why:
            self._notice("error", f"cannot make the monitor non-dumpable ({why}): another"
                                  " process of this user could open its baseline copies")
        if self.barrier.directory is not None:
            try:
                self.barrier.hold(self.quarantine.session_fd())
            except OSError as exc:
                self.barrier.directory = None
                self._notice("error", f"cannot create {self.quarantine.session_dir}: {exc}")
        self._start_observer()
        self._await_watches()
        begin_baseline(self, t0)  # the command may start once this returns

    def set_guarded_process(self, pid: int) -> None:
        """The root of the guarded process tree (``guard run``'s supervised child): a
        violation says whether its writer descends from it (fanotify only)."""
        self.processes.set_guarded(pid)

    def _start_observer(self) -> None:
        start_observer(self)

    def _await_watches(self) -> None:
        """watchdog adds its watches on the emitters' threads: wait until they are in place,
        so that every change after this point is seen (the marker event proves it)."""
        obs = self.state.observer
        if obs is not None and not isinstance(obs, FanotifyObserver):  # a mark: in place
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline and not all(
                getattr(em, "_inotify", None) is not None for em in obs.emitters
            ):
                time.sleep(0.005)
            self.sync(30)
        self.watching.set()

    def degrade(self, event: str, message: str) -> None:
        self.watch_errors += 1
        self.degraded = True
        if self.reconcile_interval is None or self.reconcile_interval > DEGRADED_INTERVAL:
            self.reconcile_interval = DEGRADED_INTERVAL
        self._notice(
            event,
            f"{message}; falling back to a reconciliation scan against the baseline every"
            f" {self.reconcile_interval:g} s",
        )

    def stop_observer(self) -> list[str]:
        """Stop the backend (no more events) within :data:`STOP_WAIT`: the threads still
        running, described; fanotify's descriptor closes in the background."""
        obs, self.state.observer = self.state.observer, None
        if obs is None:
            return []
        obs.stop()
        if not isinstance(obs, FanotifyObserver):
            return join_within(STOP_WAIT, [obs])
        obs.join(STOP_WAIT / 3)  # its reader, walker and dispatcher in turn
        self._closing = obs  # its descriptor closes while stop() goes on
        return [] if not obs.is_alive() else join_within(0, [
            t for t in threading.enumerate() if t.name.startswith("guard-fanotify")])

    def wait_closed(self) -> None:
        """Wait until the watch is closed (fanotify closes its descriptor on a thread)."""
        obs, self._closing = self._closing, None
        if obs is not None:
            obs.closed()

    def stop(self) -> None:
        if not self._started or self.state.stop.is_set():
            return
        # every wait is bounded; a thread still running is named, and nothing relies on it
        stuck: list[str] = []
        if self.state.baseline_thread is not None:  # early changes are handled first
            stuck += join_within(STOP_WAIT, [self.state.baseline_thread])
        # events already queued are handled as events (their name, who made them), not
        # left to the final reconciliation, which sees only that something changed
        if not stuck:
            self.sync(STOP_WAIT)
        # no event is handled after the sync: fanotify's marks go now, so that the kernel
        # frees them while the final reconciliation runs (FanotifyObserver.unmark)
        if isinstance(obs := self.state.observer, FanotifyObserver):
            obs.unmark()
        self.state.stop.set()
        self.state.wake.set()
        self.state.ready.set()
        with self.state.pending_cv:
            self.state.pending_cv.notify_all()
        stuck += self.stop_observer()
        stuck += join_within(STOP_WAIT, self.state.threads)
        self.state.stopping = True  # from here on nothing waits to settle
        if stuck:
            self._stuck = stuck
            self._notice("error", f"the monitor's threads did not stop within"
                                  f" {STOP_WAIT:g} s: {'; '.join(stuck)}. No final"
                                  " reconciliation ran and files still being written were"
                                  " not acted on: what changed after the last event handled"
                                  " is not reported")
        else:
            self._drain_pending(everything=True)
            if self.final_reconcile and self.baseline is not None:
                self.reconcile("final")
        self._notice(
            "stop",
            f"stopped: {len(self.violations)} violations, {self.overflows} overflows,"
            f" {self.reconciliations} reconciliations",
        )
        if self.baseline is not None and (self.restore_failures or self.state.root_reported
                                          or self._stuck):
            # what could not be put back may exist nowhere else: never deleted then
            self.baseline.close()
            why = (f"{self.restore_failures} restores failed" if self.restore_failures
                   else "the monitor did not stop cleanly" if self._stuck
                   else "the watched tree is not back in place")
            self._notice("error", f"{why}; the baseline store is kept at {self.store}"
                                  " (guard quarantine list shows it; delete it by hand once"
                                  " what you need is back)")
        elif self.baseline is not None:
            self.baseline.discard()
        self.flush()
        self.anchor.close()
        self.wait_closed()
        self.barrier.close()
        if self.barrier.directory is not None:
            with contextlib.suppress(OSError):
                os.rmdir(self.barrier.directory)  # only when empty: nothing was quarantined
        self._watch_lock.release()

    def __enter__(self) -> Monitor:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    # -- waiting for a consistent state -----------------------------------------

    def sync(self, timeout: float = 60.0) -> bool:
        """Wait until every event generated before this call has been handled.

        A marker file is created and removed in this session's quarantine directory
        (inside the watched worktree; with inotify through its descriptor, held in
        the watched tree); events keep their order, so once the marker's event is
        handled, every earlier one was. Returns False at once when no watch can see
        a marker (quarantine outside the watched trees, no observer, a recreated tree
        inotify does not watch), and on a timeout: ``timeout``, or no event handled
        for :data:`guard.monitor.barrier.IDLE` seconds (a ``sync-timeout`` notice).
        """
        return barrier_sync(self, timeout)

    def settle(self, timeout: float = 120.0) -> bool:
        """Wait until the monitor has handled everything: the roots, events, settling
        files, a clean scan. Returns True once a reconciliation scan, run after the
        roots were checked, every earlier event was handled and no file was waiting
        to settle, finds nothing new."""
        return barrier_settle(self, timeout)

    # -- what the observers hand over (intake.py) -------------------------------

    def trouble(self, kind: str, message: str) -> None:
        """An observer's trouble (overflow, lost events, a watch error): see intake.py."""
        trouble(self, kind, message)

    def lost_event(self) -> None:
        """Events were lost (an overflow, or one fanotify could not name): count it."""
        lost_event(self)

    def on_fan_event(self, ev: AnyEvent, origin: Origin) -> None:
        """A fanotify event and its writer (intake.py)."""
        on_fan_event(self, ev, origin)

    def on_fs_event(self, ev: AnyEvent) -> None:
        """An event from either backend: the entry point of every change it names (intake.py)."""
        on_fs_event(self, ev)

    # -- deciding and acting (changes.py, restoring.py) ---------------------------

    def sig(self, path: str) -> Sig | None:
        """``path``'s signature now, None when absent (changes.py)."""
        return path_sig(self, path)

    def change(
        self,
        path: str,
        kind: EffectKind,
        event: str,
        detail: str = "",
        *,
        force: bool = False,
        adopted: bool = False,
    ) -> Violation | None:
        """Decide one change and act on it (changes.py); records are written after."""
        return change(self, path, kind, event, detail, force=force, adopted=adopted)

    def rel(self, path: str) -> str:
        """``path`` relative to the innermost root holding it (restoring.py)."""
        return rel(self, path)

    # -- settling ----------------------------------------------------------------

    def check_roots(self) -> list[Violation]:
        """Is each root path still the tree watched? If not, a violation (identity.py)."""
        return check_roots(self)

    def settle_loop(self) -> None:
        """The settler's thread: checks the roots and acts on written files once settled."""
        next_check = 0.0
        while not self.state.stop.is_set():
            if time.monotonic() >= next_check:  # two lstat calls per root and second
                next_check = time.monotonic() + 0.5
                try:
                    self.check_roots()
                except Exception as exc:
                    self._notice("error", f"checking the roots failed: {exc}")
                    self.flush()
            with self.state.pending_cv:
                if not self.state.pending:
                    self.state.pending_cv.wait(0.5)
                    continue
            try:
                self._drain_pending()
            except Exception as exc:
                self._notice("error", f"settling failed: {type(exc).__name__}: {exc}")
                self.flush()
            self.state.stop.wait(0.05)

    def _drain_pending(self, *, everything: bool = False) -> None:
        drain_pending(self, everything=everything)

    # -- git's index ---------------------------------------------------------------

    def index_change(self, git_dir: str, event: str) -> Violation | None:
        """``.git/index`` changed: a violation only when what it stages changed (scan.py)."""
        return index_change(self, git_dir, event)

    # -- reconciliation ----------------------------------------------------------

    def reconcile_loop(self) -> None:
        """The reconciler's thread: a scan every interval, or when woken."""
        while not self.state.stop.is_set():
            self.state.wake.wait(timeout=self.reconcile_interval)
            if self.state.stop.is_set():
                return
            reason, self.state.wake_reason = self.state.wake_reason, "periodic"
            self.state.wake.clear()
            try:
                # events already queued are handled first: their reports name the event
                # and, with fanotify, the writer, which the scan cannot know
                self.sync(30)
                self.reconcile(reason)
            except Exception as exc:
                self._notice("error", f"reconciliation failed: {type(exc).__name__}: {exc}")
                self.flush()

    def reconcile(self, reason: str = "requested") -> list[Violation]:
        """Scan the trees against the last consistent state (stat, then hash).

        Returns the violations the scan found. A path whose lstat signature is
        unchanged is unchanged; a file whose signature moved is hashed to tell a
        content change from an attribute change. Every difference is decided like
        an event; ``.git/index`` is compared by what it stages.
        """
        return _reconcile(self, reason)

    # -- output ------------------------------------------------------------------

    def wake(self, reason: str) -> None:
        """Run a reconciliation now (on the reconciler's thread)."""
        self.state.wake_reason = reason
        self.state.wake.set()

    def report(self, v: Violation) -> None:  # written by the next flush (never locked)
        with self.lock:
            self.violations.append(v)
            self.state.outbox.append(v)

    def notify(self, event: str, message: str) -> None:
        self._notice(event, message)

    def expect_baseline(self, root: str) -> None:
        """``root`` was recreated: each baseline path under it is compared with it again."""
        if self.baseline is not None:
            with self.lock:
                for p, e in self.baseline.entries.items():
                    if _is_under(p, root):
                        self.state.known[p] = e.sig
                self.state.dirty.clear()

    def _notice(self, event: str, message: str) -> None:
        n = Notice(logfile.now_iso(), self.session, event, message)
        with self.lock:
            self.notices.append(n)
            self.state.outbox.append(n)

    def flush(self) -> None:
        """Write queued records and call the callbacks, in order, never under the main lock."""
        with self._out_lock:
            with self.lock:
                out, self.state.outbox = self.state.outbox, []
            if out:  # logged first, in one batch: the log has them before anyone is told
                self._log([rec.to_json() for rec in out])
            for rec in out:
                cb = self.on_violation if isinstance(rec, Violation) else self.on_notice
                if cb is not None:
                    if isinstance(rec, Violation):
                        cb(rec)  # type: ignore[arg-type]
                    else:
                        with contextlib.suppress(Exception):
                            cb(rec)  # type: ignore[arg-type]

    def _log(self, records: list[dict[str, Any]]) -> None:
        for record in records:
            stamp(record, self.guard, session=self.session)
        try:
            write_many = getattr(self.sink, "write_many", None)
            if write_many is not None:
                write_many(records, self.guard.roots)
            else:
                for record in records:
                    self.sink.write(record, self.guard.roots)
            settings = self.guard.audit_settings
            if settings.syslog:  # the shipper (sockets, its spool) loads only when asked for
                from guard.fleet.syslog import ship

                ship(settings, records, self.guard.roots.data)  # never waits
        except GuardError as exc:
            # never silent: the record is still in memory and on stderr
            print(f"guard: monitor: {exc}", file=sys.stderr)

