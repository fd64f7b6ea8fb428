"""The monitor: watch the trees with inotify, decide every change, report and restore.

Threads: watchdog's inotify reader and dispatcher (events reach
:meth:`Monitor._on_fs_event`), and one reconciler (periodic scans, and the
scan that follows an inotify overflow or watch-limit error). Every change,
from an event or a scan, goes through :meth:`Monitor._change` under one lock,
which compares the path with its last consistent state, decides the effect
with the policy, and acts once per violation.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import secrets
import sys
import threading
import time
import warnings
from collections.abc import Callable
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

from watchdog.events import (
    DirAttribEvent,
    DirCreatedEvent,
    DirDeletedEvent,
    DirMovedEvent,
    FileAttribEvent,
    FileClosedEvent,
    FileCreatedEvent,
    FileDeletedEvent,
    FileModifiedEvent,
    FileMovedEvent,
    FileSystemEvent,
    FileSystemEventHandler,
)
from watchdog.observers.api import BaseObserver
from watchdog.observers.inotify import InotifyFullEmitter
from watchdog.observers.inotify_c import InotifyEvent, InotifyFD, Mask, Watch

from guard import audit
from guard.effects import Effect, EffectKind, GuardError
from guard.monitor.baseline import DEFAULT_SIZE_CAP, Baseline, BaselineError, Progress, Sig, walk
from guard.monitor.quarantine import Quarantine, quarantine_root

if TYPE_CHECKING:
    from guard.decide import Guard

# watchdog warns when its own directory-creation race re-registers a watch; harmless noise
warnings.filterwarnings("ignore", category=RuntimeWarning, module=r"watchdog\.")

_SESSION_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,79}$")
_MISSING = object()
#: the reconciliation interval used when inotify cannot watch everything
DEGRADED_INTERVAL = 5.0


@dataclass(frozen=True, slots=True)
class Violation:
    """A change the agent's policy does not allow, and what the monitor did about it."""

    timestamp: str
    session: str
    agent: str
    event: str  # created | modified | closed-after-write | attrib | deleted | moved-from | ...
    path: str
    rule: str
    reason: str
    action_taken: str
    effect: str = "write"  # the effect the event maps to: write | delete
    detail: str = ""  # e.g. the other end of a move

    def to_json(self) -> dict[str, Any]:
        return {"type": "violation", "source": "monitor", **asdict(self)}


@dataclass(frozen=True, slots=True)
class Notice:
    """Something the user must know that is not a violation (overflow, scan result, error)."""

    timestamp: str
    session: str
    event: str
    message: str

    def to_json(self) -> dict[str, Any]:
        return {"type": "notice", "source": "monitor", **asdict(self)}


def new_session_id() -> str:
    return datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ") + "-" + secrets.token_hex(3)


class _FD(InotifyFD):
    """watchdog's inotify reader, telling us about overflows and watch errors.

    watchdog 7 handles ``IN_Q_OVERFLOW`` itself (it rebuilds its watches) and
    only logs it; a watch-limit error while adding a new directory's watch
    would end its reader thread. Here both reach the monitor instead.
    """

    def __init__(self, trouble: Callable[[str, str], None]) -> None:
        super().__init__()
        self._trouble = trouble

    def handle_event(self, event: InotifyEvent) -> None:
        try:
            super().handle_event(event)
        except OSError as exc:
            kind = "watch-limit" if exc.errno in (errno.ENOSPC, errno.EMFILE) else "watch-error"
            self._trouble(kind, f"inotify could not add a watch: {exc.strerror or exc}")
            return
        if event.is_queue_overflow:
            self._trouble("overflow", "the kernel's inotify queue overflowed: events were lost")


    def _get_or_create_watch(self, path: bytes, mask: Mask) -> Watch:
        # watchdog swallows errors on subdirectories (they may vanish while being
        # walked); a watch limit is not such a case: the directory stays unwatched.
        try:
            return super()._get_or_create_watch(path, mask)
        except OSError as exc:
            if exc.errno in (errno.ENOSPC, errno.EMFILE):
                self._trouble(
                    "watch-limit",
                    f"inotify could not watch {os.fsdecode(path)}: {exc.strerror or exc}"
                    " (raise fs.inotify.max_user_watches)",
                )
            raise


class _Observer(BaseObserver):
    def __init__(self, trouble: Callable[[str, str], None]) -> None:
        self._inotify_fd = _FD(trouble)
        self._inotify_fd.start()
        super().__init__(InotifyFullEmitter, timeout=0.2, inotify_fd=self._inotify_fd)

    def on_thread_stop(self) -> None:
        super().on_thread_stop()
        self._inotify_fd.stop()
        self._inotify_fd.join()


class _Handler(FileSystemEventHandler):
    def __init__(self, monitor: Monitor) -> None:
        self.monitor = monitor

    def dispatch(self, event: FileSystemEvent) -> None:
        self.monitor._on_fs_event(event)


def default_roots(guard: Guard) -> list[Path]:
    """The worktree (or, without one, the current directory) and an outside plan directory."""
    r = guard.roots
    base = r.worktree if r.worktree is not None else Path(os.path.realpath(os.getcwd()))
    out = [base]
    if not _is_under(str(r.plans), str(base)):
        out.append(r.plans)
    return out


def _is_under(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


class Monitor:
    """Watch ``roots`` while ``agent`` works; every change its policy does not allow is a violation.

    ``start()`` takes the baseline (``progress`` is told how far it got) and
    starts the inotify observer; ``stop()`` stops it after a last
    reconciliation. With ``restore=True`` violating versions are moved into
    quarantine and the baseline is put back. Violations are appended to the
    audit log and passed to ``on_violation``; notices (overflow, scans,
    errors) to ``on_notice``.
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
        sink: audit.AuditSink | None = None,
    ) -> None:
        guard.agent(agent)  # an unknown agent is a GuardError naming the known ones
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
        self.restore = restore
        self.on_violation = on_violation
        self.on_notice = on_notice
        if reconcile_interval is not None and reconcile_interval <= 0:
            raise GuardError("reconcile interval must be a positive number of seconds")
        self.reconcile_interval = reconcile_interval
        self.size_cap = size_cap
        self.progress = progress
        self.final_reconcile = final_reconcile
        self.audit_path = audit_path if audit_path is not None else audit.default_log_path(r)
        self.sink: audit.AuditSink = sink if sink is not None else audit.AuditLog(self.audit_path)
        self.quarantine = Quarantine(quarantine_root(r), self.session)
        self.store = r.data / "monitor" / audit.project_of(r) / self.session

        self.violations: list[Violation] = []
        self.notices: list[Notice] = []
        self.overflows = 0
        self.watch_errors = 0
        self.reconciliations = 0
        self.startup_seconds = 0.0
        self.baseline: Baseline | None = None
        self.degraded = False

        self._lock = threading.RLock()
        self._recon_lock = threading.Lock()
        self._known: dict[str, Sig | None] = {}
        self._dirty: set[tuple[str, EffectKind]] = set()
        self._quarantined: set[str] = set()
        self._own_moves: set[tuple[str, str]] = set()
        self._ready = threading.Event()
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._wake_reason = "periodic"
        self._observer: _Observer | None = None
        self._reconciler: threading.Thread | None = None
        self._started = False

        self._git_dirs = [str(root / ".git") for root in self.roots if (root / ".git").is_dir()]
        self._plan_ancestors = self._ancestors(str(r.plans))
        self._ignored_exact = {
            str(self.quarantine.root),
            str(self.quarantine.root / ".gitignore"),
            str(self.audit_path),
        }

    # -- what is not watched -------------------------------------------------

    def _ancestors(self, path: str) -> set[str]:
        """The plan directory and its ancestors inside the watched roots (created to hold plans)."""
        out: set[str] = set()
        p = path
        while any(_is_under(p, str(root)) and p != str(root) for root in self.roots):
            out.add(p)
            p = os.path.dirname(p)
        return out

    def _ignored(self, path: str) -> bool:
        """The monitor's own files and git's object/index churn (see docs/monitor.md)."""
        if path in self._ignored_exact:
            return True
        if _is_under(path, str(self.quarantine.session_dir)) or _is_under(path, str(self.store)):
            return True
        for g in self._git_dirs:
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
        self._started = True
        t0 = time.perf_counter()
        self._start_observer()
        try:
            self.baseline = Baseline.take(
                self.roots,
                store=self.store,
                worktree=self.guard.roots.worktree,
                ignore=self._ignored,
                size_cap=self.size_cap,
                progress=self.progress,
            )
        except BaseException:
            self._stop_observer()
            raise
        with self._lock:
            self._known = {p: e.sig for p, e in self.baseline.entries.items()}
        self.startup_seconds = time.perf_counter() - t0
        self._ready.set()
        self._notice(
            "start",
            f"watching {', '.join(map(str, self.roots))} as agent {self.agent!r}"
            f" ({'restore' if self.restore else 'report only'});"
            f" baseline: {self.baseline.stats.summary()}; start-up {self.startup_seconds:.2f} s",
        )
        self._reconciler = threading.Thread(target=self._reconcile_loop, daemon=True,
                                            name="guard-reconcile")
        self._reconciler.start()
        return self

    def _start_observer(self) -> None:
        try:
            obs = _Observer(self._trouble)
        except OSError as exc:
            self._degrade("watch-limit", f"cannot create an inotify instance: {exc.strerror}")
            return
        obs.start()
        self._observer = obs
        handler = _Handler(self)
        for root in self.roots:
            try:
                obs.schedule(handler, str(root), recursive=True)
            except OSError as exc:
                self._degrade(
                    "watch-limit",
                    f"cannot watch every directory under {root}: {exc.strerror or exc}"
                    " (raise fs.inotify.max_user_watches)",
                )

    def _degrade(self, event: str, message: str) -> None:
        self.watch_errors += 1
        self.degraded = True
        if self.reconcile_interval is None or self.reconcile_interval > DEGRADED_INTERVAL:
            self.reconcile_interval = DEGRADED_INTERVAL
        self._notice(
            event,
            f"{message}; falling back to a reconciliation scan against the baseline every"
            f" {self.reconcile_interval:g} s",
        )

    def _stop_observer(self) -> None:
        obs, self._observer = self._observer, None
        if obs is not None:
            obs.stop()
            obs.join()

    def stop(self) -> None:
        if not self._started or self._stop.is_set():
            return
        self._stop.set()
        self._wake.set()
        self._ready.set()
        self._stop_observer()
        if self._reconciler is not None:
            self._reconciler.join()
        if self.final_reconcile and self.baseline is not None:
            self.reconcile("final")
        self._notice(
            "stop",
            f"stopped: {len(self.violations)} violations, {self.overflows} overflows,"
            f" {self.reconciliations} reconciliations",
        )
        if self.baseline is not None:
            self.baseline.discard()

    def __enter__(self) -> Monitor:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    # -- inotify ---------------------------------------------------------------

    def _trouble(self, kind: str, message: str) -> None:
        """Called on watchdog's reader thread: note it, wake the reconciler at once."""
        if kind == "overflow":
            self.overflows += 1
            self._notice(
                "inotify-overflow",
                f"{message}; running a reconciliation scan against the baseline",
            )
            self._wake_reason = "after inotify overflow"
        else:
            self._degrade(kind, message)
            self._wake_reason = f"after {kind}"
        self._wake.set()

    def _on_fs_event(self, ev: FileSystemEvent) -> None:
        self._ready.wait()
        if self._stop.is_set():
            return
        try:
            src = os.fsdecode(ev.src_path)
            if isinstance(ev, FileMovedEvent | DirMovedEvent):
                dest = os.fsdecode(ev.dest_path)
                if src and dest and self._own_move(src, dest):
                    return
                if src:
                    self._change(src, EffectKind.DELETE, "moved-from", f"to {dest or 'outside'}")
                if dest:
                    self._change(dest, EffectKind.WRITE, "moved-to", f"from {src or 'outside'}")
            elif isinstance(ev, FileCreatedEvent | DirCreatedEvent):
                self._change(src, EffectKind.WRITE, "created")
            elif isinstance(ev, FileModifiedEvent):
                self._change(src, EffectKind.WRITE, "modified")
            elif isinstance(ev, FileClosedEvent):
                self._change(src, EffectKind.WRITE, "closed-after-write")
            elif isinstance(ev, FileAttribEvent | DirAttribEvent):
                self._change(src, EffectKind.WRITE, "attrib")
            elif isinstance(ev, FileDeletedEvent | DirDeletedEvent):
                self._change(src, EffectKind.DELETE, "deleted")
            # DirModifiedEvent is watchdog's echo of a child's event; opens and
            # read-only closes change nothing.
        except Exception as exc:  # keep watching whatever one event did
            self._notice("error", f"while handling {ev!r}: {type(exc).__name__}: {exc}")

    def _own_move(self, src: str, dest: str) -> bool:
        with self._lock:
            while src and dest and src != "/":
                if (src, dest) in self._own_moves:
                    return True
                src, dest = os.path.dirname(src), os.path.dirname(dest)
            return False

    # -- deciding and acting ---------------------------------------------------

    def _in_quarantined(self, path: str) -> bool:
        p = path
        while p and p != "/":
            if p in self._quarantined:
                return True
            p = os.path.dirname(p)
        return False

    def _change(
        self, path: str, kind: EffectKind, event: str, detail: str = ""
    ) -> Violation | None:
        with self._lock:
            if self._ignored(path):
                return None
            cur = Sig.lstat(path)
            known = self._known.get(path, _MISSING)
            if cur is not None and known == cur:
                # as it was at the last consistent point (e.g. our own restore)
                self._dirty.discard((path, EffectKind.WRITE))
                self._dirty.discard((path, EffectKind.DELETE))
                return None
            if cur is None and known in (None, _MISSING) and self._in_quarantined(path):
                return None  # the rest of a change already quarantined
            if cur is not None:
                self._quarantined.discard(path)
            if (
                kind is EffectKind.WRITE
                and path in self._plan_ancestors
                and known in (None, _MISSING)
                and (cur is None or cur.kind == "dir")
            ):
                # creating the directories that hold the plan file: their new state
                # is the consistent one from now on (a later chmod is a change)
                if cur is not None:
                    self._known[path] = cur
                return None
            key = (path, kind)
            if key in self._dirty:
                return None
            decision = self.guard.decide(self.agent, [Effect(kind, path, detail=event)])
            if decision.allowed:
                return None
            self._dirty.add(key)
            if self.restore:
                action = self._act(path, kind, cur, event, decision.rule, decision.reason)
            else:
                action = "reported (watching without --restore)"
            v = Violation(
                timestamp=audit.now_iso(),
                session=self.session,
                agent=self.agent,
                event=event,
                path=path,
                rule=decision.rule,
                reason=decision.reason,
                action_taken=action,
                effect=kind.value,
                detail=detail,
            )
            self.violations.append(v)
            self._log(v.to_json())
            if self.on_violation is not None:
                self.on_violation(v)
            return v

    def _rel(self, path: str) -> str:
        for root in sorted(self.roots, key=lambda p: -len(str(p))):
            if _is_under(path, str(root)) and path != str(root):
                return os.path.relpath(path, root)
        return path.lstrip("/")

    def _quarantine(self, path: str, meta: dict[str, Any]) -> str:
        slot, dest = self.quarantine.plan(self._rel(path))
        self._own_moves.add((path, str(dest)))
        item = self.quarantine.finish(slot, dest, path, self._rel(path), meta)
        return item.id

    def _act(
        self, path: str, kind: EffectKind, cur: Sig | None, event: str, rule: str, reason: str
    ) -> str:
        """Quarantine the violating version and put the baseline back. Never deletes."""
        assert self.baseline is not None
        entry = self.baseline.get(path)
        meta = {"agent": self.agent, "event": event, "rule": rule, "reason": reason,
                "effect": kind.value, "in_baseline": entry is not None}
        done: list[str] = []
        try:
            if cur is not None:
                if entry is None:
                    item = self._quarantine(path, meta)
                    self._quarantined.add(path)
                    self._known[path] = None
                    self._dirty.discard((path, kind))
                    return f"moved to quarantine {item}"
                if not entry.restorable:
                    return f"left in place: cannot restore it afterwards ({entry.unrestorable})"
                if entry.sig.kind == "dir" and cur.kind == "dir":
                    new = self.baseline.reset_attrs(path)
                    self._known[path] = new
                    self._dirty.discard((path, kind))
                    return "directory mode and owner restored from the baseline"
                item = self._quarantine(path, meta)
                done.append(f"moved to quarantine {item}")
            elif entry is None:
                return "nothing to restore (the path did not exist when watching began)"
            restored = self._restore_tree(path)
            done.append(restored)
            self._dirty.discard((path, kind))
            return "; ".join(done)
        except (OSError, BaselineError, GuardError) as exc:
            msg = f"restore failed: {exc}"
            self._notice("error", f"{path}: {msg}")
            return "; ".join([*done, msg])

    def _restore_tree(self, path: str) -> str:
        assert self.baseline is not None
        entry = self.baseline.get(path)
        assert entry is not None
        self._known[path] = self.baseline.restore(path)
        source = (
            f"git blob {entry.blob[:12]}" if entry.blob else "the baseline copy" if entry.copy
            else "the baseline"
        )
        if entry.sig.kind != "dir":
            return f"restored from {source}"
        count = 0
        for child in self.baseline.under(path):
            if not os.path.lexists(child.path) and child.restorable:
                self._known[child.path] = self.baseline.restore(child.path)
                count += 1
        return f"directory restored with {count} entries from the baseline"

    # -- reconciliation ----------------------------------------------------------

    def _reconcile_loop(self) -> None:
        while not self._stop.is_set():
            self._wake.wait(timeout=self.reconcile_interval)
            if self._stop.is_set():
                return
            reason, self._wake_reason = self._wake_reason, "periodic"
            self._wake.clear()
            try:
                self.reconcile(reason)
            except Exception as exc:
                self._notice("error", f"reconciliation failed: {type(exc).__name__}: {exc}")

    def reconcile(self, reason: str = "requested") -> list[Violation]:
        """Scan the trees against the last consistent state (stat, then hash).

        Returns the violations the scan found.

        A path whose lstat signature is unchanged is unchanged; a file whose
        signature moved is hashed to tell a content change from an attribute
        change. Every difference is decided like an event.
        """
        if self.baseline is None:
            raise GuardError("the monitor has not been started")
        baseline = self.baseline
        with self._recon_lock:
            t0 = time.perf_counter()
            before = len(self.violations)
            seen: set[str] = set()
            changed = 0
            for path, st in walk(self.roots, self._ignored):
                seen.add(path)
                cur = Sig.of(st)
                with self._lock:
                    known = self._known.get(path, _MISSING)
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
                self._change(path, EffectKind.WRITE, f"reconcile:{event}")
            with self._lock:
                gone = [p for p, s in self._known.items() if s is not None and p not in seen]
            for path in gone:
                if os.path.lexists(path):
                    continue
                changed += 1
                self._change(path, EffectKind.DELETE, "reconcile:deleted")
            new = self.violations[before:]
            self.reconciliations += 1
            took = time.perf_counter() - t0
            if reason != "periodic" or new:
                self._notice(
                    "reconcile",
                    f"reconciliation ({reason}) scanned {len(seen):,} paths in {took:.2f} s:"
                    f" {changed} differ from the last consistent state, {len(new)} new violations",
                )
            return new

    # -- output ------------------------------------------------------------------

    def _notice(self, event: str, message: str) -> None:
        n = Notice(audit.now_iso(), self.session, event, message)
        self.notices.append(n)
        self._log(n.to_json())
        if self.on_notice is not None:
            with contextlib.suppress(Exception):
                self.on_notice(n)

    def _log(self, record: dict[str, Any]) -> None:
        try:
            self.sink.write(record, self.guard.roots)
        except GuardError as exc:
            # never silent: the record is still in memory and on stderr
            print(f"guard: monitor: {exc}", file=sys.stderr)
