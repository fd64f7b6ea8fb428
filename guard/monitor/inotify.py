"""The inotify backend's plumbing: watchdog's observer, adding its watches with one
``scandir`` per directory and telling the monitor about overflows and watch errors.

Loaded only when the monitor watches with inotify (:func:`guard.monitor.backends.start_observer`):
with fanotify none of watchdog's observer machinery is needed."""

from __future__ import annotations

import errno
import os
from collections.abc import Callable
from typing import TYPE_CHECKING

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
from watchdog.observers.inotify import InotifyFullEmitter, InotifyWatchGroup
from watchdog.observers.inotify_c import InotifyEvent, InotifyFD, Mask, Watch

if TYPE_CHECKING:
    from guard.monitor.events import _Sink


class _FD(InotifyFD):
    """watchdog's inotify reader, telling us about overflows and watch errors.

    watchdog 7 handles ``IN_Q_OVERFLOW`` itself (it rebuilds its watches) and
    only logs it; a watch-limit error while adding a new directory's watch
    would end its reader thread. Here both reach the monitor instead.
    """

    def __init__(self, trouble: Callable[[str, str], None]) -> None:
        super().__init__()
        self._trouble = trouble
        #: while the first watches are added: the watch limit ends that at once
        #: (:class:`WatchLimit`) instead of leaving the rest of the tree unwatched
        self.starting = False

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
            if exc.errno == errno.ENOSPC and self.starting:
                raise WatchLimit(os.fsdecode(path), len(self._watch_for_wd)) from exc
            if exc.errno in (errno.ENOSPC, errno.EMFILE):
                self._trouble(
                    "watch-limit",
                    f"inotify could not watch {os.fsdecode(path)}: {exc.strerror or exc}"
                    " (raise fs.inotify.max_user_watches)",
                )
            raise


class WatchLimit(Exception):
    """inotify ran out of watches (``fs.inotify.max_user_watches``) while the first
    watches were added. Not an OSError: watchdog skips those for subdirectories."""

    def __init__(self, path: str, added: int) -> None:
        super().__init__(path, added)
        self.path = path
        self.added = added


#: the events the monitor acts on. Without a filter watchdog asks inotify for opens,
#: reads and read-only closes as well: adding the watches (which opens every directory)
#: then floods the queue, and each overflow makes watchdog walk the tree again.
WANTED_EVENTS: list[type[FileSystemEvent]] = [
    FileCreatedEvent, DirCreatedEvent, FileModifiedEvent, FileClosedEvent,
    FileAttribEvent, DirAttribEvent, FileDeletedEvent, DirDeletedEvent,
    FileMovedEvent, DirMovedEvent,
]


class _WatchGroup(InotifyWatchGroup):
    """watchdog's watch group, adding the watches of a tree with one ``scandir`` per
    directory: watchdog's ``os.walk`` also builds the list of every file name and
    ``lstat``s every directory again (1.4x as long on a 1,000,000-file tree: 15.6 s
    against 11.1 s). Same order (a directory is watched before it is listed), same
    rule for symlinks."""

    def _add_all_callbacks(self, path: bytes) -> None:
        is_dir = os.path.isdir(path)
        self._add_callback(path)
        if not (is_dir and self.is_recursive):
            return
        stack = [path]
        while stack:
            top = stack.pop()
            try:
                with os.scandir(top) as it:
                    for entry in it:
                        if entry.is_dir(follow_symlinks=self.follow_symlink):
                            self._add_callback(entry.path)
                            stack.append(entry.path)
            except OSError:
                continue  # gone or unreadable meanwhile, as watchdog's walk skips it


class _Emitter(InotifyFullEmitter):
    def on_thread_start(self) -> None:
        self._inotify = _WatchGroup(
            self._inotify_fd,
            os.fsencode(self.watch.path),
            is_recursive=self.watch.is_recursive,
            event_mask=self.get_event_mask_from_filter(),
            follow_symlink=self.watch.follow_symlink,
        )


class _Observer(BaseObserver):
    def __init__(self, trouble: Callable[[str, str], None]) -> None:
        #: the inotify reader every emitter shares (backends.py sets its ``starting``)
        self.inotify_fd = _FD(trouble)
        self.inotify_fd.start()
        super().__init__(_Emitter, timeout=0.2, inotify_fd=self.inotify_fd)

    def on_thread_stop(self) -> None:
        super().on_thread_stop()
        self.inotify_fd.stop()
        self.inotify_fd.join()


class _Handler(FileSystemEventHandler):
    def __init__(self, monitor: _Sink) -> None:
        self.monitor = monitor

    def dispatch(self, event: FileSystemEvent) -> None:
        self.monitor.on_fs_event(event)
