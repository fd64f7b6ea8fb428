"""Writing audit records off the caller's path: :class:`BufferedWriter`.

The MCP proxy queues each record and goes on; a thread writes the queue in ordered
batches and a second one fsyncs the files written, so one fsync covers many batches.

This module holds the writer's queue, threads and guarantees (what a kill or a crash
can lose). It does not know what an item is or how it is written: the owner's
``persist`` callable does that (the MCP proxy's writes through
:class:`guard.audit.logfile.Appender`).
"""

from __future__ import annotations

import atexit
import contextlib
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Generic, TypeVar

from guard.audit import AuditError
from guard.audit.logfile import fsync_file

T = TypeVar("T")

#: Seconds a written batch may wait for its fsync, so that one fsync covers many batches.
SYNC_INTERVAL = 0.05

#: Writes a batch of items; per item None (written) or why it could not be, and the
#: files to fsync.
PersistBatch = Callable[[list[T]], tuple[list[str | None], set[Path]]]


class BufferedWriter(Generic[T]):
    """Writes records off the caller's path, in order, in batches, and never drops one.

    :meth:`submit` numbers each item (1, 2, ...) and returns at once. A thread
    hands everything queued since its last batch to ``persist``, which writes
    it (one ``write(2)`` per file); :attr:`written` is then the number of the
    last item of the batch. An owner that has a moment anyway may instead write
    the queue itself with :meth:`drain` (no hand-off between threads, no wake-up):
    the MCP proxy does, once it has forwarded the call, while the server works.
    Batches are written one at a time and in order, whoever writes them.
    A second thread fsyncs the files written, at most
    every :data:`SYNC_INTERVAL` seconds, so one fsync covers every batch of
    that interval.

    What this guarantees, and what a caller must do for it:

    * a killed process (SIGKILL included) loses only the items not yet
      :attr:`written`: a caller that must not act on an unrecorded item waits
      for it (:meth:`ready`, :meth:`flush`) — the MCP proxy forwards no answer
      of a checked call before the call's record is written;
    * a crash of the machine (power loss) can also lose what was written but
      not yet synced: at most the last :data:`SYNC_INTERVAL` seconds plus the
      time the fsync took;
    * :meth:`close` (called by the owner on shutdown, on SIGTERM/SIGINT, and
      registered with :mod:`atexit`) writes and syncs everything before it
      returns;
    * an item that could not be written (a full disk) is reported by
      :meth:`failure`, and :attr:`broken` stays set until a batch succeeds;
      the owner then writes the next item with :meth:`write_now` (on its own
      path, so that it can refuse the call when that write fails too).
    """

    def __init__(
        self,
        persist: PersistBatch[T],
        *,
        log: Callable[[str], None] | None = None,
        sync_interval: float = SYNC_INTERVAL,
    ) -> None:
        self._persist = persist
        self._log = log or (lambda _text: None)
        self.sync_interval = sync_interval
        self._cond = threading.Condition()
        self._queue: list[tuple[int, T]] = []
        self._persisting = threading.Lock()  # one batch at a time, taken and written in order
        self.submitted = 0
        self.written = 0
        self.broken: str | None = None
        self._failures: dict[int, str] = {}
        self._flushing = 0  # callers waiting in flush()
        self._notify: Callable[[], None] | None = None
        self._notify_at: int | None = None
        self._thread: threading.Thread | None = None
        self._closing = False
        self._dirty: set[Path] = set()
        self._sync_cond = threading.Condition()
        self._sync_stop = False
        self._stopping = threading.Event()
        self._syncer: threading.Thread | None = None

    # -- the owner's side ------------------------------------------------------------------

    def start(self, notify: Callable[[], None] | None = None) -> None:
        """Start the threads; ``notify`` is called (from the thread that wrote it) when an item
        a :meth:`ready` call asked about is written."""
        self._notify = notify
        self._thread = threading.Thread(target=self._run, name="guard-audit-writer", daemon=True)
        self._syncer = threading.Thread(target=self._sync_run, name="guard-audit-sync", daemon=True)
        self._thread.start()
        self._syncer.start()
        atexit.register(self.close)

    def submit(self, item: T, *, wake: bool = True) -> int:
        """Queue ``item``; its number. Without a running thread it is written now.

        ``wake=False`` leaves the writer asleep until :meth:`kick` (or the next
        :meth:`ready`, :meth:`flush` or :meth:`close`): a caller that has something more
        urgent to do first (forward the call) kicks it after that, so that the writer does
        not take the interpreter lock from it in between.
        """
        if self._thread is None:
            return self.write_now(item)
        with self._cond:
            self.submitted += 1
            seq = self.submitted
            self._queue.append((seq, item))
            if wake:
                self._cond.notify()
        return seq

    def kick(self) -> None:
        """Wake the writer for the items queued with ``wake=False``."""
        with self._cond:
            if self._queue:
                self._cond.notify()

    def write_now(self, item: T) -> int:
        """Write ``item`` before returning (after everything queued before it); its number.

        Raises :class:`AuditError` when it cannot be written.
        """
        with self._persisting:  # after the batch under way, with everything queued before
            with self._cond:
                self.submitted += 1
                seq = self.submitted
                batch, self._queue = self._queue, []
            batch.append((seq, item))
            errors = self._write_batch(batch)
        if errors[-1] is not None:
            raise AuditError(errors[-1])
        return seq

    def drain(self) -> None:
        """Write everything queued, now, on the caller's thread (no hand-off to the writer
        thread): for an owner whose loop has a moment while it waits anyway (the MCP proxy,
        once it has forwarded the call, writes while the server works)."""
        with self._persisting:
            with self._cond:
                batch, self._queue = self._queue, []
            if batch:
                self._write_batch(batch)

    @contextlib.contextmanager
    def persisting(self) -> Iterator[None]:
        """Hold off every batch for the block (e.g. to close files ``persist`` keeps open)."""
        with self._persisting:
            yield

    def ready(self, seq: int) -> bool:
        """True when item ``seq`` is written (or failed); else ``notify`` is called once it is."""
        with self._cond:
            if self.written >= seq:
                return True
            if self._notify_at is None or seq < self._notify_at:
                self._notify_at = seq
            if self._queue:
                self._cond.notify()
            return False

    def failure(self, seq: int) -> str | None:
        """Why item ``seq`` could not be written; None when it was (or is not yet known)."""
        with self._cond:
            return self._failures.get(seq)

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until everything submitted so far is written; False on timeout."""
        with self._cond:
            target = self.submitted
            self._flushing += 1
            try:
                self._cond.notify_all()
                return self._cond.wait_for(lambda: self.written >= target, timeout)
            finally:
                self._flushing -= 1

    def close(self, timeout: float = 30.0) -> bool:
        """Write and sync everything queued, stop the threads; False when items are left.

        Idempotent; safe from an atexit hook or a signal handler's shutdown path.
        """
        thread, syncer = self._thread, self._syncer
        with self._cond:
            self._closing = True
            self._cond.notify_all()
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)
        self._stopping.set()
        with self._sync_cond:
            self._sync_stop = True
            self._sync_cond.notify_all()
        if syncer is not None and syncer is not threading.current_thread():
            syncer.join(timeout)
        self._sync_dirty()  # whatever the syncer had not reached
        with contextlib.suppress(Exception):
            atexit.unregister(self.close)
        with self._cond:
            left = self.submitted - self.written
        if left:
            self._log(f"audit log: {left} records not yet written")
        return left == 0

    # -- the threads -----------------------------------------------------------------------

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._queue and not self._closing:
                    self._cond.wait()
                if not self._queue:
                    return  # closing, and everything is written
            self.drain()

    def _write_batch(self, batch: list[tuple[int, T]]) -> list[str | None]:
        """Persist ``batch`` (the caller holds ``_persisting`` and took it from the queue
        under it, so batches are written in the order of their numbers)."""
        try:
            errors, dirty = self._persist([item for _, item in batch])
        except Exception as exc:  # a bug in persist: every item of the batch failed
            errors, dirty = [f"{type(exc).__name__}: {exc}"] * len(batch), set()
        wake = False
        with self._cond:
            for (seq, _), err in zip(batch, errors, strict=True):
                if err is not None:
                    if len(self._failures) >= 10000:
                        self._failures.pop(next(iter(self._failures)))
                    self._failures[seq] = err
            self.broken = next((e for e in reversed(errors) if e is not None), None)
            self.written = max(self.written, batch[-1][0])
            if self._notify_at is not None and self.written >= self._notify_at:
                self._notify_at = None
                wake = True
            if self._flushing:  # else nobody waits for it: wake no thread for nothing
                self._cond.notify_all()
        if dirty:
            with self._sync_cond:
                self._dirty |= dirty
                self._sync_cond.notify()
        if wake and self._notify is not None:
            try:
                self._notify()
            except Exception as exc:  # e.g. the owner's event loop is already closed
                self._log(f"audit log: cannot wake the owner: {exc}")
        return errors

    def _sync_run(self) -> None:
        while True:
            with self._sync_cond:
                while not self._dirty and not self._sync_stop:
                    self._sync_cond.wait()
                if self._sync_stop:
                    return  # close() syncs what is left
            self._stopping.wait(self.sync_interval)  # let more batches come: one fsync
            self._sync_dirty()

    def _sync_dirty(self) -> None:
        with self._sync_cond:
            paths, self._dirty = self._dirty, set()
        for path in sorted(paths):
            try:
                fsync_file(path)
            except OSError as exc:
                self._log(f"audit log: cannot sync {path}: {exc.strerror or exc}")
