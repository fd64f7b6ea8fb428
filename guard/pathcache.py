"""A cache of canonical paths that is never stale: the kernel says when to forget it.

Canonicalizing costs four system calls per path (see :func:`guard.paths.canonicalize`),
most of a decision's time. A long-lived process (the hook daemon, the MCP proxy, a
benchmark) asks about the same few paths again and again, so it keeps the answers,
keyed by the path as written and the cwd it is relative to.

Why a kept answer is still the disk's answer at decision time
-------------------------------------------------------------
An answer is kept only when resolving it touched no symlink and no ``..`` (the
path, made absolute and with its ``.`` components dropped, *is* its real path) and
nothing under ``/proc`` or ``/dev``.
Such an answer can change only through a change of a directory entry on that path
(a component renamed, removed, replaced by a link, created where it was missing), of
the last component's own inode (its link count, its mode), or of the mount table.
Before the answer is computed, an inotify watch is put on every existing directory of
the path (entries created, deleted, moved; the directory itself moved or deleted; its
attributes) and on the last component itself (attributes, which include the link
count; moved; deleted); ``/proc/self/mountinfo`` reports mount-table changes. The
kernel queues those events inside the system call that makes the change, before it
returns, so a change finished before a decision is always visible to it.

Every look-up first asks (one ``epoll_wait`` with a zero timeout) whether anything
was reported; if so the whole cache is dropped and the path is resolved afresh. A
change that races with the look-up itself is no different from one that lands just
after an uncached decision. Watches are added *before* resolving, and a resolution
that started before a drop is not kept (a generation count), so no answer computed
from an older disk can be stored after the events that outdate it were consumed.

If anything about the machinery fails (no inotify, no watch left, an unexpected
error), nothing is kept and every path is resolved afresh: the cache only ever makes
a decision faster, never different. The confinement in ``guard run`` (Landlock)
remains the final check in confined runs; this reasoning is what keeps decisions
of analysis-only hosts exact.

The cache starts only after :data:`ACTIVATE_AFTER` resolutions in one process, so a
one-shot hook pays nothing for it; a forked child starts over (the inotify queue
would otherwise be shared with the parent, and one of them would miss events).
"""

from __future__ import annotations

import errno
import os
import select
import threading
from collections.abc import Callable
from typing import Any

#: resolutions in this process before the cache sets itself up
ACTIVATE_AFTER = 32
#: kept answers (and watches added) before everything is dropped and started over
LIMIT = 4096

_IN_ATTRIB = 0x00000004
_IN_MOVED_FROM = 0x00000040
_IN_MOVED_TO = 0x00000080
_IN_CREATE = 0x00000100
_IN_DELETE = 0x00000200
_IN_DELETE_SELF = 0x00000400
_IN_MOVE_SELF = 0x00000800
_IN_DONT_FOLLOW = 0x02000000
_IN_MASK_ADD = 0x20000000  # a second watch of an inode adds to its mask, never narrows it
_IN_NONBLOCK = os.O_NONBLOCK
_IN_CLOEXEC = os.O_CLOEXEC
_SELF = _IN_ATTRIB | _IN_DELETE_SELF | _IN_MOVE_SELF | _IN_DONT_FOLLOW | _IN_MASK_ADD
_DIR = _SELF | _IN_CREATE | _IN_DELETE | _IN_MOVED_FROM | _IN_MOVED_TO


class _Kernel:
    """The inotify instance, the mount table and the epoll set that watches both."""

    def __init__(self) -> None:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        self._add = libc.inotify_add_watch
        self._add.argtypes = (ctypes.c_int, ctypes.c_char_p, ctypes.c_uint32)
        self._add.restype = ctypes.c_int
        self._errno: Callable[[], int] = ctypes.get_errno
        fd = libc.inotify_init1(_IN_NONBLOCK | _IN_CLOEXEC)
        if fd < 0:
            raise OSError(ctypes.get_errno(), "inotify_init1")
        self.fd: int = fd
        self.mounts = -1
        self.epoll: select.epoll | None = None
        try:
            self.mounts = os.open("/proc/self/mountinfo", os.O_RDONLY | os.O_CLOEXEC)
            self.epoll = select.epoll()
            self.epoll.register(fd, select.EPOLLIN)
            self.epoll.register(self.mounts, select.EPOLLPRI | select.EPOLLERR)
            self.epoll.poll(0)  # consume a mount change reported before we started
        except BaseException:
            self.close()
            raise

    def watch(self, path: str, mask: int) -> int:
        """0 when watched, else the errno (ENOENT: the entry does not exist)."""
        if self._add(self.fd, os.fsencode(path), mask) >= 0:
            return 0
        return self._errno() or errno.EIO

    def changed(self) -> bool:
        assert self.epoll is not None
        return bool(self.epoll.poll(0))

    def drain(self) -> None:
        while True:
            try:
                if not os.read(self.fd, 65536):
                    return
            except BlockingIOError:
                return

    def close(self) -> None:
        if self.epoll is not None:
            self.epoll.close()
        for fd in (self.fd, self.mounts):
            if fd >= 0:
                os.close(fd)
        self.fd = self.mounts = -1


class PathCache:
    """Canonical answers by ``(path, cwd)``, valid until the kernel reports a change."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._entries: dict[tuple[str, str], Any] = {}
        self._watched: set[str] = set()
        self._kernel: _Kernel | None = None
        self._gen = 0
        self._watches = 0
        self._calls = 0
        self.enabled = True
        self._failed = False

    # the fast path -----------------------------------------------------------

    def get(self, key: tuple[str, str]) -> Any:
        """The kept answer for ``key``, or None. Drops everything when anything changed."""
        if not self._entries:
            return None
        with self._lock:
            k = self._kernel
            if k is None:
                return None
            if k.changed():
                self._drop(k)
                return None
            return self._entries.get(key)

    # the slow path -----------------------------------------------------------

    def prepare(self, key: tuple[str, str], norm: str) -> int | None:
        """Watch every directory of ``norm`` (absolute, normalized) and its last component,
        before it is resolved; the generation to hand to :meth:`store`, or None when the
        answer is not to be kept."""
        if not self.enabled or self._failed:
            return None
        if self._kernel is None:
            self._calls += 1
            if self._calls < ACTIVATE_AFTER:
                return None
            with self._lock:
                if not self._start():
                    return None
        if norm.startswith(("/proc/", "/dev/")) or norm in ("/proc", "/dev"):
            return None
        gen = self._gen
        k = self._kernel
        if k is None:
            return None
        # "/", "/w", "/w/a", ... (every directory above the last component), then it
        ends = [i for i, c in enumerate(norm) if c == "/"]
        for i, end in enumerate(ends):
            last = i == len(ends) - 1 and end == len(norm) - 1  # norm is "/"
            d = norm[:end] or "/"
            if d in self._watched:
                continue
            err = k.watch(d, _DIR)
            self._watches += 1
            if err == errno.ENOENT:
                return gen  # missing from here on: its creation in the parent is reported
            if err:
                return None  # not watchable (permissions, no watch left): not kept
            self._watched.add(d)
            if last:
                return gen
        err = k.watch(norm, _SELF)
        self._watches += 1
        if err and err != errno.ENOENT:
            return None
        return gen

    def store(self, key: tuple[str, str], gen: int, answer: Any) -> None:
        with self._lock:
            if gen != self._gen or self._kernel is None:
                return  # the disk may have changed while it was resolved
            if len(self._entries) >= LIMIT or self._watches >= 4 * LIMIT:
                self._restart()
                return
            self._entries[key] = answer

    # housekeeping (under the lock) -------------------------------------------

    def _start(self) -> bool:
        if self._kernel is not None:
            return True
        try:
            self._kernel = _Kernel()
        except (OSError, AttributeError, ValueError):
            self._failed = True  # no inotify here: resolve every path afresh
            return False
        return True

    def _drop(self, k: _Kernel) -> None:
        """Forget everything; consume the events that said so, then bump the generation
        so that no resolution begun before the events can be stored."""
        self._entries.clear()
        self._watched.clear()
        k.drain()
        if self._watches >= 4 * LIMIT:
            self._restart()
        self._gen += 1

    def _restart(self) -> None:
        self._entries.clear()
        self._watched.clear()
        if self._kernel is not None:
            self._kernel.close()
            self._kernel = None
        self._watches = 0
        self._gen += 1
        self._start()

    def reset(self) -> None:
        """Forget everything and the kernel objects (after a fork: they are the parent's)."""
        self._lock = threading.Lock()
        self._entries = {}
        self._watched = set()
        if self._kernel is not None:
            self._kernel.close()
            self._kernel = None
        self._gen += 1
        self._watches = 0
        self._calls = 0
        self._failed = False


CACHE = PathCache()
os.register_at_fork(after_in_child=CACHE.reset)
