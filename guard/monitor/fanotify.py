"""The monitor's fanotify backend: one filesystem mark covers any tree, and events name the writer.

inotify needs one watch per directory (set-up time and kernel memory grow with the
tree, and ``fs.inotify.max_user_watches`` caps it); fanotify with a filesystem
mark (``FAN_MARK_FILESYSTEM``) watches a whole file system with one mark, and
every event carries the pid of the process that caused it. It needs
``CAP_SYS_ADMIN`` and a kernel with ``FAN_REPORT_DFID_NAME``, ``FAN_REPORT_TARGET_FID``
and ``FAN_RENAME`` (Linux 5.17); :func:`choose` probes for both and otherwise
says why the monitor uses watchdog's inotify observer instead.

This module holds the observer (:class:`FanotifyObserver`): reading the group,
naming the directories of its events, the directory walk, and the events it hands
on. It does not hold making and marking the group, nor the choice of a backend
(:mod:`guard.monitor.fanotify_group`), nor the kernel's constants
(:mod:`guard.monitor.fanotify_abi`).

Events arrive as (directory file handle, name) pairs. A directory handle is
resolved to a path with ``open_by_handle_at`` against a descriptor on the same
mount, then ``readlink`` of ``/proc/self/fd/N``; results are cached, and new
directories enter the cache from their own create events (the event carries the
new directory's handle), so events inside a directory that is gone by the time
they are read still resolve. Events outside the watched roots are dropped. Each
event becomes an :class:`~guard.monitor.events.FsEvent` with the fields of the watchdog
event the inotify backend would have produced (watchdog itself is not loaded), so the
monitor has one code path for both.

The observer is watching once the mark is placed: the walk that caches the handle
of every directory already there runs on a thread of its own (a 1,000,000-file
tree takes it a minute). Until it ends, an event inside a directory removed
before the walk reached it cannot be named. Nor can it be told from an event in a
directory another process removed anywhere else on the same file system (the mark
sees them all, and a removed directory's handle names nothing): both are lost
events, one kind. Each is counted in :attr:`FanotifyObserver.lost` and passed to
``on_lost`` as it is read (the monitor's baseline needs the exact count: see
:mod:`guard.monitor.phases`); ``trouble("lost", ...)`` tells the monitor at the
first one and, if more came, once more when the walk ends: the monitor then scans
against its baseline, as after a queue overflow. An overflow empties the cache (a
directory may have moved unseen) and walks again.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import queue
import select
import struct
import threading
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path
from typing import Any

from guard.monitor.events import FsEvent
from guard.monitor.fanotify_abi import (
    AT_FDCWD,
    DFID_NAME,
    FAN_ATTRIB,
    FAN_CLOSE_WRITE,
    FAN_CREATE,
    FAN_DELETE,
    FAN_MODIFY,
    FAN_ONDIR,
    FAN_Q_OVERFLOW,
    FAN_RENAME,
    FID,
    MAX_HANDLE_SZ,
    METADATA,
    METADATA_VERSION,
    NEW_DFID_NAME,
    OLD_DFID_NAME,
    Record,
    libc,
    records,
)
from guard.monitor.fanotify_group import (  # Choice and choose: named here too
    Choice as Choice,
)
from guard.monitor.fanotify_group import (
    choose as choose,
)
from guard.monitor.fanotify_group import (
    filesystem_id,
    mark_filesystem,
    open_group,
    unmark_filesystems,
)

#: directory handles remembered (a path string each); beyond this the oldest are dropped
CACHE_MAX = 400_000
#: bytes one read takes from the group at most
READ_SIZE = 1 << 18
#: after a read that did not fill the buffer, the reader lets events gather this long: the
#: mark sees the whole file system, and a wake-up, poll and read per event cost several
#: times what handling it does (events still arrive in order; a sync waits this much more)
GATHER = 0.001


Emit = Callable[[FsEvent, Any], None]


class FanotifyObserver:
    """Reads a fanotify group on its own thread and hands events to a second one, which
    calls ``emit(event, describe(pid))`` for events under the roots (in order), and
    ``trouble("overflow", message)`` on ``FAN_Q_OVERFLOW`` (``trouble("lost", message)``
    for events the directory walk could not name yet, see the module's docstring;
    ``on_lost()`` for each one of them, on the reader thread, before any later event
    is handed on).

    ``describe`` runs on the reader thread, as soon as the event is read, so a
    short-lived writer is still there to be described as often as possible.
    Same life cycle as watchdog's observer (``start``, ``stop``, ``join``);
    ``emitters`` is empty: the marks are in place once the constructor returns.
    ``start`` also starts the directory walk (see the module's docstring);
    :attr:`walked` is set when it has ended, and nothing waits for it.
    """

    emitters: tuple[()] = ()

    def __init__(
        self,
        roots: list[Path],
        emit: Emit,
        trouble: Callable[[str, str], None],
        describe: Callable[[int], Any] = int,
        on_lost: Callable[[], None] | None = None,
    ) -> None:
        self.roots = [str(r) for r in roots]
        self._under = tuple(r + "/" for r in self.roots)  # _inside, asked of every event
        self._emit = emit
        self._on_lost = on_lost
        self._describe = describe
        self._queue: queue.SimpleQueue[tuple[FsEvent, Any] | None] = queue.SimpleQueue()
        self._dispatcher = threading.Thread(target=self._dispatch, daemon=True,
                                            name="guard-fanotify-dispatch")
        self._trouble = trouble
        self._mounts: dict[bytes, int] = {}
        self._cache: OrderedDict[tuple[bytes, bytes], str] = OrderedDict()
        self._cache_lock = threading.Lock()  # the reader and the walk share the cache
        self.unresolved = 0
        self.events = 0
        #: events whose directory could not be named while a walk ran (see the module)
        self.lost = 0
        self._walk_lost = 0  # ... during the current walk, and how many were told of
        self._walk_told = 0
        #: set when the directory walk has ended (or was never needed: stopped)
        self.walked = threading.Event()
        self._walking = True  # under _cache_lock: a walk is running or about to
        self._walk_again = False
        self._walk_more: list[str] = []  # directories moved in while walking
        self._fd = open_group()
        self._wake_r, self._wake_w = os.pipe2(os.O_CLOEXEC | os.O_NONBLOCK)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="guard-fanotify")
        self.paused = threading.Lock()  # tests hold it to let the kernel queue fill up
        self._closer: threading.Thread | None = None
        root = ""
        try:
            for root in self.roots:
                fsid = filesystem_id(root)
                if fsid not in self._mounts:
                    self._mounts[fsid] = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
                    mark_filesystem(self._fd, root)
            self._fsids = [filesystem_id(root) for root in self.roots]
        except OSError as exc:
            self._close()
            if exc.filename is None and root:
                exc.filename = root  # the root refused (why_unavailable names its file system)
            raise
        self._walker = threading.Thread(target=self._walk, daemon=True,
                                        name="guard-fanotify-walk")

    # -- the directory walk --------------------------------------------------------

    def _walk(self) -> None:
        """Cache the handle of every directory under the roots (the mark is already in
        place): an event read after its directory was removed (``rm -rf``) still resolves.
        Directories only, one ``name_to_handle_at`` each; files are never opened. Starts
        over after an overflow; ends the walking state, then tells of lost events."""
        buf = ctypes.create_string_buffer(8 + MAX_HANDLE_SZ)
        mount_id = ctypes.c_int()
        lost = told = 0
        try:
            while not self._stop.is_set():
                with self._cache_lock:
                    self._walk_again = False
                stack = list(zip(self.roots, self._fsids, strict=True))
                while not self._stop.is_set() and not self._walk_again:
                    if not stack:
                        with self._cache_lock:
                            if self._walk_again:
                                break
                            more, self._walk_more = self._walk_more, []
                            if not more:
                                self._walking = False  # every directory there was is cached
                                lost, told = self._walk_lost, self._walk_told
                                self._walk_told = lost
                                break
                        stack.extend((d, self._fsid_of(d)) for d in more)
                        continue
                    d, fsid = stack.pop()
                    self._walk_one(d, fsid, buf, mount_id, stack)
                if self._walking:
                    continue  # stopped, or starting over
                if lost > told and not self._stop.is_set():
                    self._trouble("lost", f"fanotify: {lost} events named a directory removed"
                                  " before the directory walk reached it: their paths are"
                                  " unknown (the walk has ended; no more are lost this way)")
                return
        finally:
            self.walked.set()

    def _fsid_of(self, path: str) -> bytes:
        """The file system id of the root ``path`` is under (the one it was moved into)."""
        best = max((r for r in self.roots if path == r or path.startswith(r + "/")),
                   key=len, default=self.roots[0])
        return self._fsids[self.roots.index(best)]

    def _walk_one(self, d: str, fsid: bytes, buf: Any, mount_id: Any,
                  stack: list[tuple[str, bytes]]) -> None:
        struct.pack_into("=I", buf, 0, MAX_HANDLE_SZ)
        if libc.name_to_handle_at(AT_FDCWD, os.fsencode(d), buf,
                                   ctypes.byref(mount_id), 0) == 0:
            (hbytes,) = struct.unpack_from("=I", buf, 0)
            key = (fsid, buf.raw[4 : 8 + hbytes])
            with self._cache_lock:
                # a path learned from an event is newer than the walk's: keep it; a
                # rename since the handle was taken is handled by its own event
                if key not in self._cache:
                    self._remember_locked(key, d)
        try:
            with os.scandir(d) as it:
                for e in it:
                    if e.is_dir(follow_symlinks=False):
                        stack.append((e.path, fsid))
        except OSError:
            pass

    def start(self) -> None:
        self._thread.start()
        self._dispatcher.start()
        self._walker.start()

    def stop(self) -> None:
        self._stop.set()
        with contextlib.suppress(OSError):
            os.write(self._wake_w, b"x")

    def unmark(self) -> bool:
        """Remove the marks (no event is queued from now on; those queued already are still
        read), so that the kernel frees them while the caller goes on: the close in
        :meth:`join` then finds nothing to wait for. False when the kernel refused (the
        close removes them then)."""
        if self._fd < 0:
            return False
        try:
            unmark_filesystems(self._fd)
        except OSError:
            return False
        return True

    def is_alive(self) -> bool:
        """Whether events are still read and handed on (as for watchdog's observers)."""
        return self._thread.is_alive() and self._dispatcher.is_alive()

    def join(self, timeout: float | None = None) -> None:
        if self._thread.is_alive():
            self._thread.join(timeout)
        if self._walker.is_alive():
            self._walker.join(timeout)
        self._queue.put(None)
        if self._dispatcher.is_alive():
            self._dispatcher.join(timeout)
        self._close()

    def _dispatch(self) -> None:
        while True:
            item = self._queue.get()
            if item is None or self._stop.is_set():
                return
            self._emit(*item)

    def _close(self) -> None:
        for fd in [self._wake_r, self._wake_w, *self._mounts.values()]:
            with contextlib.suppress(OSError):
                os.close(fd)
        fan, self._fd = self._fd, -1
        self._mounts = {}
        if fan >= 0:
            # Releasing a fanotify group waits for the kernel's SRCU grace period (tens of
            # ms): on a thread of its own, so that what the caller does next (the final
            # reconciliation) runs meanwhile. closed() waits for that thread.
            self._closer = threading.Thread(target=_close_quietly, args=(fan,), daemon=True,
                                            name="guard-fanotify-close")
            self._closer.start()

    def closed(self) -> None:
        """Wait until the fanotify descriptor is closed (its marks gone) after join()."""
        if self._closer is not None:
            self._closer.join(10.0)  # bounded: the stop goes on, the release finishes alone

    # -- reading -----------------------------------------------------------------

    def _run(self) -> None:
        poll = select.poll()
        poll.register(self._fd, select.POLLIN)
        poll.register(self._wake_r, select.POLLIN)
        while not self._stop.is_set():
            try:
                ready = poll.poll(500)
            except InterruptedError:
                continue
            if self._stop.is_set():
                return
            if not ready:
                continue
            with self.paused:
                try:
                    buf = os.read(self._fd, READ_SIZE)
                except BlockingIOError:
                    continue
                except OSError as exc:
                    self._trouble("watch-error", f"fanotify read failed: {exc.strerror or exc}")
                    return
            self._handle(buf)
            if len(buf) < READ_SIZE // 2:
                self._stop.wait(GATHER)

    def _handle(self, buf: bytes) -> None:
        off = 0
        while off + METADATA.size <= len(buf):
            event_len, vers, _, meta_len, mask, fd, pid = METADATA.unpack_from(buf, off)
            if event_len < METADATA.size or vers != METADATA_VERSION:
                self._trouble("watch-error", f"fanotify: unexpected event format {vers}")
                return
            if fd >= 0:  # never with file handles; close it if one came anyway
                with contextlib.suppress(OSError):
                    os.close(fd)
            try:
                if mask & FAN_Q_OVERFLOW:
                    self._rewalk()  # a directory may have moved unseen
                    self._trouble("overflow",
                                  "the kernel's fanotify queue overflowed: events were lost")
                else:
                    self.events += 1
                    recs = records(buf, off + meta_len, off + event_len)
                    self._event(mask, pid, recs)
            except Exception as exc:  # one bad event must not end the reader
                self._trouble("event-error", f"fanotify event: {type(exc).__name__}: {exc}")
            off += event_len

    # -- paths ---------------------------------------------------------------------

    def _rewalk(self) -> None:
        """Forget every cached directory and walk again (after an overflow)."""
        with self._cache_lock:
            self._cache.clear()
            self._walk_more = []
            self._walk_lost = self._walk_told = 0
            if self._walking:
                self._walk_again = True  # the running walk starts over
                return
            if self._stop.is_set():
                return
            self._walking = True
            self.walked.clear()
        self._walker = threading.Thread(target=self._walk, daemon=True,
                                        name="guard-fanotify-walk")
        self._walker.start()

    def _dir(self, rec: Record) -> str | None:
        key = (rec.fsid, rec.handle)
        with self._cache_lock:
            hit = self._cache.get(key)
            if hit is not None:
                self._cache.move_to_end(key)
                return hit
        if rec.fsid not in self._mounts:
            return None
        path = self._where(key)
        if path is None:
            self.unresolved += 1
            self._lost()
            return None
        if path.endswith(" (deleted)") or not path.startswith("/"):
            self._lost()
            return None
        self._remember(key, path)
        return path

    def _where(self, key: tuple[bytes, bytes]) -> str | None:
        """Where the directory of a handle is now (``readlink``), or None (gone)."""
        fh = struct.pack("=I", len(key[1]) - 4) + key[1]
        fd = libc.open_by_handle_at(self._mounts[key[0]], fh, os.O_PATH | os.O_CLOEXEC)
        if fd < 0:
            return None
        try:
            return os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            return None
        finally:
            os.close(fd)

    def _lost(self) -> None:
        """A directory of our file systems could not be named: while the walk runs, it
        may have been under a root (its handle was not cached yet), or anywhere else on
        the file system; nothing tells which, so it counts as lost either way."""
        with self._cache_lock:
            if not self._walking:
                return  # every directory there was is cached: this one was elsewhere
            self.lost += 1
            self._walk_lost += 1
            first = self._walk_told == 0
            if first:
                self._walk_told = self._walk_lost
        if self._on_lost is not None:
            self._on_lost()  # every one: the baseline asks whether any came since phase 1
        if first:
            self._trouble("lost", "fanotify: an event named a directory that was removed"
                          " before the directory walk reached it (under the watched"
                          " trees or elsewhere on the file system: a removed directory"
                          " cannot be told apart): its path is unknown")

    def _remember(self, key: tuple[bytes, bytes], path: str) -> None:
        with self._cache_lock:
            self._remember_locked(key, path)

    def _remember_locked(self, key: tuple[bytes, bytes], path: str) -> None:
        self._cache[key] = path
        self._cache.move_to_end(key)
        if len(self._cache) > CACHE_MAX:
            self._cache.popitem(last=False)

    def _moved_dir(self, old: str | None, new: str | None) -> None:
        """A directory moved: cached paths at or under its old name now live under the
        new one (or are forgotten, moved outside what we can name); while walking, the
        walk also covers the new place (it may have listed the old name already). A
        directory still there is named where it is now: an entry cached after a later
        move (a swapped-in tree read at its new name) is not moved again by this one."""
        with self._cache_lock:
            if old is not None:
                prefix = old + "/"
                stale = [(k, v) for k, v in self._cache.items()
                         if v == old or v.startswith(prefix)]
                for key, v in stale:
                    now = self._where(key)
                    if now is not None and now.startswith("/") and not now.endswith(
                            " (deleted)"):
                        self._cache[key] = now
                    elif new is None:
                        del self._cache[key]
                    else:
                        self._cache[key] = new + v[len(old):]
            if new is not None and self._walking and self._inside(new):
                self._walk_more.append(new)

    def _path(self, rec: Record | None) -> str | None:
        if rec is None:
            return None
        d = self._dir(rec)
        if d is None:
            return None
        if rec.name in ("", "."):
            return d
        return d.rstrip("/") + "/" + rec.name if d != "/" else "/" + rec.name

    def _inside(self, path: str | None) -> bool:
        if path is None:
            return False
        return path.startswith(self._under) or path in self.roots

    # -- events ------------------------------------------------------------------------

    def _event(self, mask: int, pid: int, recs: list[Record]) -> None:
        is_dir = bool(mask & FAN_ONDIR)
        by_kind = {r.kind: r for r in reversed(recs)}  # the first of each kind
        child = by_kind.get(FID)
        if mask & FAN_RENAME:
            old = self._path(by_kind.get(OLD_DFID_NAME))
            new = self._path(by_kind.get(NEW_DFID_NAME))
            if is_dir:
                self._moved_dir(old, new)
            if is_dir and child is not None and new is not None:
                self._remember((child.fsid, child.handle), new)
            self._moved(old if old is not None and self._inside(old) else "",
                        new if new is not None and self._inside(new) else "", is_dir, pid)
            mask &= ~FAN_RENAME
            if not mask & ~FAN_ONDIR:
                return
        path = self._path(by_kind.get(DFID_NAME))
        if path is None or not self._inside(path):
            return
        if is_dir and child is not None and mask & FAN_CREATE:
            self._remember((child.fsid, child.handle), path)
        events = self._events(mask, path, is_dir)
        if events:
            info = self._describe(pid)
            for ev in events:
                self._queue.put((ev, info))

    @staticmethod
    def _events(mask: int, path: str, is_dir: bool) -> list[FsEvent]:
        out: list[FsEvent] = []
        created: FsEvent | None = None
        deleted: FsEvent | None = None
        if mask & FAN_CREATE:
            created = FsEvent("created", path, "", is_dir)
        if mask & FAN_DELETE:
            deleted = FsEvent("deleted", path, "", is_dir)
        if created is not None and deleted is not None and os.path.lexists(path):
            out.append(deleted)  # merged in the queue: the order is lost; the path exists
            deleted = None       # now, so it was deleted, then created again
        if created is not None:
            out.append(created)
        if mask & FAN_MODIFY and not is_dir:
            out.append(FsEvent("modified", path))
        if mask & FAN_ATTRIB:
            out.append(FsEvent("attrib", path, "", is_dir))
        if mask & FAN_CLOSE_WRITE and not is_dir:
            out.append(FsEvent("closed", path))
        if deleted is not None:
            out.append(deleted)
        return out

    def _moved(self, src: str, dest: str, is_dir: bool, pid: int) -> None:
        """As watchdog's full inotify emitter: the move, then one per entry moved with a
        directory (or created, for a directory moved in from outside)."""
        if not src and not dest:
            return
        info = self._describe(pid)
        put = self._queue.put
        put((FsEvent("moved", src, dest, is_dir), info))
        if not is_dir or not dest:
            return
        for top, dirs, files in os.walk(dest):
            for name in dirs + files:
                d = os.path.join(top, name)
                is_sub_dir = name in dirs
                if src:
                    s = src + d[len(dest):]
                    put((FsEvent("moved", s, d, is_sub_dir), info))
                else:
                    put((FsEvent("created", d, "", is_sub_dir), info))


def _close_quietly(fd: int) -> None:
    with contextlib.suppress(OSError):
        os.close(fd)
