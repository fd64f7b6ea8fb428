"""Waiting for a consistent state: the sync marker and the settle loop.

:func:`sync` proves that every event generated before it was handled: it creates and
removes a marker file and waits for the marker's own event, since the kernel keeps
events in order. The marker goes where the watch sees it:

* inotify watches inodes: the marker is created through the barrier directory (this
  session's quarantine directory) held open since the watches were added, so it lands
  in the watched tree even while another directory stands at the root's path. When the
  tree at the root's path is not the one the watches cover (a recreated worktree: its
  watches went with the removed tree), there is no marker to wait for and ``sync``
  returns False at once; the caller's reconciliation scan stands in.
* fanotify marks the whole file system and names events by path: the marker is created
  at the barrier directory's path.

No wait is open-ended: besides the caller's timeout, ``sync`` gives up once no event at
all has been handled for :data:`IDLE` seconds while its marker is still unseen, and a
timeout is a notice (``sync-timeout``), never silent.
"""

from __future__ import annotations

import os
import re
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from guard.monitor.fsops import identity

if TYPE_CHECKING:
    from guard.monitor.events import Violation
    from guard.monitor.fanotify_group import Choice
    from guard.monitor.shared import MonitorState

__all__ = ["IDLE", "Barrier", "Syncable", "settle", "sync"]

#: how long ``sync`` waits for its marker while no event at all is being handled
IDLE = 10.0


class Barrier:
    """The marker's directory, its descriptor (inotify) and what was seen of the markers."""

    def __init__(self, directory: str | None, roots: list[Path]) -> None:
        #: the directory the markers are created in (None: outside the watched trees)
        self.directory = directory
        #: the root holding it, and the identity of the tree its watches cover
        self.root = next((str(r) for r in roots if directory is not None
                          and (directory + "/").startswith(str(r).rstrip("/") + "/")), None)
        self.watched: tuple[int, int] | None = None
        #: the directory held open (inotify): where the watched tree's marker goes
        self.fd: int | None = None
        self._token = os.urandom(6).hex()  # no other process's file is taken for a marker
        self._name = re.compile(rf"^\.sync-{self._token}-(\d+)$")
        self.seq = 0
        self.done = 0
        self.seen = threading.Condition()
        #: events handled, and events being handled now (the wait's progress)
        self.handled = 0
        self.active = 0

    def hold(self, fd: int) -> None:
        """The barrier directory's descriptor, opened once the watches were added."""
        self.close()
        self.fd = fd
        if self.root is not None:
            try:
                self.watched = identity(Path(self.root))
            except OSError:
                self.watched = None

    def unwatched(self) -> None:
        """The tree at the root's path is not the one the watches cover (recreated)."""
        self.close()
        self.watched = None

    def close(self) -> None:
        fd, self.fd = self.fd, None
        if fd is not None:
            os.close(fd)

    def marker(self, seq: int) -> str:
        return f".sync-{self._token}-{seq}"

    def is_marker(self, path: str) -> bool:
        """Is ``path`` (a created file) a marker of this monitor's? Then it is counted."""
        found = self._name.match(os.path.basename(path))
        if found is None:
            return False
        with self.seen:
            self.done = max(self.done, int(found.group(1)))
            self.seen.notify_all()
        return True

    def covered(self, inotify: bool) -> bool:
        """Can a marker be seen? (inotify: the tree at the root's path is the watched one)"""
        if self.directory is None:
            return False
        if not inotify:
            return True
        if self.fd is None or self.root is None or self.watched is None:
            return False
        try:
            return identity(Path(self.root)) == self.watched
        except OSError:
            return False


class Syncable(Protocol):
    """What :func:`sync` and :func:`settle` use of a Monitor (a part of
    :class:`guard.monitor.view.MonitorView`, described here because that view
    names :class:`Barrier`)."""

    barrier: Barrier
    state: MonitorState
    backend: Choice | None

    def notify(self, event: str, message: str) -> None: ...
    def flush(self) -> None: ...
    def check_roots(self) -> list[Violation]: ...
    def reconcile(self, reason: str = ...) -> list[Violation]: ...


def sync(m: Syncable, timeout: float) -> bool:
    """See :meth:`Monitor.sync`."""
    b, obs = m.barrier, m.state.observer
    if obs is None or m.state.stop.is_set() or b.directory is None:
        return False
    inotify = m.backend is None or m.backend.backend != "fanotify"
    if not b.covered(inotify):
        return False  # no watch sees the tree at the path: the caller's scan stands in
    with b.seen:
        b.seq += 1
        seq = b.seq
    name = b.marker(seq)
    try:
        if inotify and b.fd is not None:
            fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
                         | os.O_CLOEXEC, 0o600, dir_fd=b.fd)
            os.close(fd)
            os.unlink(name, dir_fd=b.fd)
        else:
            path = os.path.join(b.directory, name)
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
                         | os.O_CLOEXEC, 0o600)
            os.close(fd)
            os.unlink(path)
    except OSError:
        return False
    start = last = time.monotonic()
    deadline = start + timeout
    progress = (b.handled, b.active)
    why = ""
    with b.seen:
        while b.done < seq:
            now = time.monotonic()
            if (b.handled, b.active) != progress or b.active:
                progress, last = (b.handled, b.active), now
            if m.state.stop.is_set() or not obs.is_alive():
                return False
            if now >= deadline or now - last >= IDLE:
                why = (f"within {timeout:g} s" if now >= deadline else
                       f"after {IDLE:g} s without any event handled")
                break
            b.seen.wait(min(deadline - now, IDLE - (now - last), 0.25))
    if not why:
        return True
    m.notify("sync-timeout", f"the sync marker's event was not seen {why} ({now - start:.1f} s"
                             " waited): events may still be queued; a reconciliation scan"
                             " stands in")
    m.flush()
    return False


def settle(m: Syncable, timeout: float) -> bool:
    """See :meth:`Monitor.settle`."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:  # a swapped or removed worktree is dealt with before anything is compared
            m.check_roots()
        except Exception as exc:
            m.notify("error", f"checking the roots failed: {exc}")
        sync(m, max(0.1, deadline - time.monotonic()))
        with m.state.pending_cv:
            while m.state.pending and time.monotonic() < deadline:
                m.state.pending_cv.wait(0.2)
        if m.reconcile("settle") or m.state.pending:
            continue
        m.flush()
        return True
    return False
