"""A cache of canonical paths that is never stale: the kernel says when to forget it.

Canonicalizing costs four system calls per path (see :func:`guard.paths.canonicalize`),
most of a decision's time. A long-lived process (the hook daemon, the MCP proxy, a
benchmark) asks about the same few paths again and again, so it keeps the answers,
keyed by the path as written and the cwd it is relative to.

Why a kept answer is still the disk's answer at decision time
-------------------------------------------------------------
An answer is kept only when resolving it touched no symlink and no ``..`` (the
path, made absolute and with its ``.`` components dropped, *is* its real path),
nothing under ``/proc`` or ``/dev``, and no mount whose filesystem type is not in
:data:`LOCAL_TYPES` (see "Local filesystems only" below).
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
# Lazy imports: ctypes only when the native walker is used: hook start-up speed.

from an older disk can be stored after the events that outdate it were consumed.

Local filesystems only
----------------------
inotify reports the changes made through this kernel's VFS, whatever the process or
mount namespace. A change that bypasses it is never reported: on NFS, CIFS/SMB, 9p,
FUSE (sshfs, ...), virtiofs, ceph and other network, cluster or userspace
filesystems, another host, the server or the FUSE daemon can replace a directory by
a symlink and no watch fires. So a path is kept only if every mount on its way (each
mount whose mount point is ``/``, the path itself or one of its ancestors, hidden or
not) has a type in :data:`LOCAL_TYPES`; a type not listed, whatever it is, keeps
nothing. The types come from ``/proc/self/mountinfo`` (a bind mount shows the type
of what it binds), parsed once per mount-table change, which is already watched.
``overlay`` is listed: everything done through the overlay mount is reported on its
own inodes, and changing its layers behind its back is unsupported by the kernel
(undefined behaviour); without it no container's root would be cached. ``zfs`` is
not: ``zfs rollback`` and ``zfs receive`` change a mounted dataset in place without
any inotify report, and both can be delegated to unprivileged users.

Watches are shared: inotify watches count against the user's
``fs.inotify.max_user_watches``, which guard's own monitor (one watch per directory
of a worktree) and the user's editors need too. The cache never holds more than
:func:`watch_budget` watches, ``min(MAX_WATCHES, max_user_watches // 16)``; when a
path would take it over, everything is dropped (its inotify instance closed, which
frees all its watches) and it starts over.

If anything about the machinery fails (no inotify, no watch left, an unexpected
error), nothing is kept and every path is resolved afresh: the cache only ever makes
a decision faster, never different. The confinement in ``guard run`` (Landlock)
remains the final check in confined runs; this reasoning is what keeps decisions
of analysis-only hosts exact.

The cache starts only after :data:`ACTIVATE_AFTER` resolutions in one process, so a
one-shot hook pays nothing for it (a long-lived process may start it at once,
:meth:`PathCache.activate`), and keeps a path from the second time it is asked
about, so paths asked about once pay no watches; a forked child starts over (the inotify queue
would otherwise be shared with the parent, and one of them would miss events).
"""

from __future__ import annotations

import errno
import os
import re
import select
import struct
import threading
from collections.abc import Callable

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (guard run's start)
if TYPE_CHECKING:
    from typing import Any

#: resolutions in this process before the cache sets itself up
ACTIVATE_AFTER = 32
#: kept answers before everything is dropped and started over
LIMIT = 4096
#: the most inotify watches the cache holds (and at most 1/16 of max_user_watches)
MAX_WATCHES = 1024
#: filesystem types whose every change passes through this kernel's VFS, so inotify
#: reports it; see the module docstring for overlay (listed) and zfs (not listed);
#: rootfs is the kernel's initial ramfs/tmpfs, at times listed (hidden) under ``/``
LOCAL_TYPES = frozenset(
    {"ext2", "ext3", "ext4", "xfs", "btrfs", "f2fs", "tmpfs", "ramfs", "rootfs", "overlay"}
)

_IN_ATTRIB = 0x00000004
_IN_MOVED_FROM = 0x00000040
_IN_MOVED_TO = 0x00000080
_IN_CREATE = 0x00000100
_IN_DELETE = 0x00000200
_IN_DELETE_SELF = 0x00000400
_IN_MOVE_SELF = 0x00000800
_IN_DONT_FOLLOW = 0x02000000
_IN_MASK_ADD = 0x20000000  # a second watch of an inode adds to its mask, never narrows it
_IN_IGNORED = 0x00008000
_IN_Q_OVERFLOW = 0x00004000
_IN_NONBLOCK = os.O_NONBLOCK
_IN_CLOEXEC = os.O_CLOEXEC
_SELF = _IN_ATTRIB | _IN_DELETE_SELF | _IN_MOVE_SELF | _IN_DONT_FOLLOW | _IN_MASK_ADD
_DIR = _SELF | _IN_CREATE | _IN_DELETE | _IN_MOVED_FROM | _IN_MOVED_TO
_EVENT = struct.Struct("iIII")  # struct inotify_event without its name


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
        """The watch descriptor (>= 0), or minus the errno (-ENOENT: no such entry)."""
        wd: int = self._add(self.fd, os.fsencode(path), mask)
        if wd >= 0:
            return wd
        return -(self._errno() or errno.EIO)

    def changes(self) -> tuple[bool, list[tuple[int, int, str]]]:
        """(whether the mount table changed, the inotify events queued: wd, mask, name)."""
        assert self.epoll is not None
        ready = self.epoll.poll(0)
        if not ready:
            return False, []
        mounts = any(fd == self.mounts for fd, _ in ready)
        events: list[tuple[int, int, str]] = []
        while True:
            try:
                data = os.read(self.fd, 65536)
            except BlockingIOError:
                break
            if not data:
                break
            i = 0
            while i + 16 <= len(data):
                wd, mask, _cookie, size = _EVENT.unpack_from(data, i)
                name = data[i + 16 : i + 16 + size].split(b"\0", 1)[0]
                events.append((wd, mask, os.fsdecode(name)))
                i += 16 + size
        return mounts, events

    def close(self) -> None:
        if self.epoll is not None:
            self.epoll.close()
        for fd in (self.fd, self.mounts):
            if fd >= 0:
                os.close(fd)
        self.fd = self.mounts = -1


def watch_budget() -> int:
    """The most watches the cache may hold: a small share of the user's limit, so the
    monitor and the user's editors never run out because of it."""
    try:
        with open("/proc/sys/fs/inotify/max_user_watches", "rb") as f:
            limit = int(f.read().strip())
    except (OSError, ValueError):
        limit = 8192  # the kernel's historical default
    return max(0, min(MAX_WATCHES, limit // 16))


_OCTAL = re.compile(rb"\\([0-7]{3})")


def foreign_mounts(mountinfo: bytes) -> frozenset[str]:
    """The mount points in ``mountinfo`` (the text of ``/proc/PID/mountinfo``) whose
    filesystem type is not in :data:`LOCAL_TYPES`. A line that cannot be read makes
    ``/`` foreign (nothing is kept): what it mounts is unknown."""
    foreign: set[str] = set()
    for line in mountinfo.splitlines():
        if not line.strip():
            continue
        fields = line.split(b" ")
        try:
            sep = fields.index(b"-", 6)  # after the optional fields
            point, fstype = fields[4], fields[sep + 1]
        except (ValueError, IndexError):
            return frozenset({"/"})
        if not point.startswith(b"/"):
            return frozenset({"/"})
        if os.fsdecode(fstype) not in LOCAL_TYPES:
            # mountinfo writes space, tab, newline and backslash as \ooo
            point = _OCTAL.sub(lambda m: bytes([int(m.group(1), 8) & 0xFF]), point)
            foreign.add(os.path.normpath(os.fsdecode(point)))
    return frozenset(foreign)


def on_foreign_mount(norm: str, foreign: frozenset[str]) -> bool:
    """Whether a mount in ``foreign`` lies on the way of ``norm`` (absolute,
    normalized): at ``/``, at ``norm`` itself or at one of its ancestors."""
    if not foreign:
        return False
    if "/" in foreign or norm in foreign:
        return True
    i = norm.find("/", 1)
    while i > 0:
        if norm[:i] in foreign:
            return True
        i = norm.find("/", i + 1)
    return False


def _read_foreign() -> frozenset[str]:
    try:
        with open("/proc/self/mountinfo", "rb") as f:
            return foreign_mounts(f.read())
    except OSError:
        return frozenset({"/"})


class _Node:
    """One path component: the answers kept for exactly this path, whether it is
    watched as a directory, and the components below it."""

    __slots__ = ("keys", "kids", "watched")

    def __init__(self) -> None:
        self.kids: dict[str, _Node] = {}
        self.keys: list[tuple[str, str]] = []
        self.watched = False


class PathCache:
    """Canonical answers by ``(path, cwd)``, valid until the kernel reports a change.

    A reported change drops exactly the answers it can alter: an entry created,
    removed or renamed as NAME in a watched directory D (or its attributes changed)
    drops every answer for ``D/NAME`` and below it; a watched inode moved, deleted or
    changed itself drops everything at and below each path it was watched as; a
    mount-table change or a lost event (queue overflow) drops everything.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._entries: dict[tuple[str, str], Any] = {}
        self._root = _Node()
        self._paths: dict[int, set[str]] = {}  # watch descriptor -> paths watched as
        self._seen: set[tuple[str, str]] = set()
        self._kernel: _Kernel | None = None
        self._gen = 0
        self._budget = 0
        self._foreign: frozenset[str] | None = None  # per mount-table generation
        self._calls = 0
        self.enabled = True
        self._failed = False

    # the fast path -----------------------------------------------------------

    def get(self, key: tuple[str, str]) -> Any:
        """The kept answer for ``key`` (None: none), after applying the reported changes."""
        if not self._entries:
            return None
        with self._lock:
            k = self._kernel
            if k is None:
                return None
            mounts, events = k.changes()
            if mounts or events:
                self._apply(mounts, events)
            return self._entries.get(key)

    def activate(self) -> None:
        """Set the cache up now instead of after :data:`ACTIVATE_AFTER` resolutions: for a
        long-lived process (the MCP proxy), so that none of its calls pays for the set-up
        (:func:`guard.paths.warm_path_cache` takes the first watches up front too)."""
        if not self.enabled or self._failed:
            return
        self._calls = max(self._calls, ACTIVATE_AFTER)
        with self._lock:
            self._start()

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
        if key not in self._seen:  # kept from its second resolution on: a path asked
            if len(self._seen) >= 4 * LIMIT:  # about once pays no watch for it
                self._seen.clear()
            self._seen.add(key)
            return None
        with self._lock:
            k = self._kernel
            if k is None:
                return None
            mounts, events = k.changes()  # a mount table read before a reported
            if mounts or events:  # mount change is not used
                self._apply(mounts, events)
            foreign = self._foreign
            if foreign is None:
                foreign = self._foreign = _read_foreign()
            if on_foreign_mount(norm, foreign):
                return None  # changes there may never be reported
            names = norm.split("/")[1:] if norm != "/" else []
            if len(self._paths) + len(names) + 2 > self._budget:  # one per live wd
                self._restart()  # frees every watch of the cache
                if len(names) + 2 > self._budget:
                    return None
            k = self._kernel
            if k is None:
                return None
            gen = self._gen
            # "/", "/w", "/w/a", ... (every directory above the last component), then it
            node = self._root
            path = ""
            for i in range(len(names) + 1):
                if not node.watched:
                    wd = k.watch(path or "/", _DIR)
                    if wd == -errno.ENOENT:
                        return gen  # missing from here on: its creation is reported
                    if wd < 0:
                        return None  # not watchable (permissions, no watch left): not kept
                    self._paths.setdefault(wd, set()).add(path or "/")
                    node.watched = True
                if i == len(names):
                    return gen  # norm itself is a directory watched as such
                if i == len(names) - 1:
                    break
                path += "/" + names[i]
                node = node.kids.setdefault(names[i], _Node())
            wd = k.watch(norm, _SELF)
            if wd >= 0:
                self._paths.setdefault(wd, set()).add(norm)
            elif wd != -errno.ENOENT:
                return None
            return gen

    def store(self, key: tuple[str, str], gen: int, answer: Any) -> None:
        norm: str = answer.real
        with self._lock:
            if gen != self._gen or self._kernel is None:
                return  # changes were applied while it was resolved: it may be older
            if len(self._entries) >= LIMIT:
                self._restart()
                return
            node = self._root
            for name in norm.split("/")[1:] if norm != "/" else []:
                node = node.kids.setdefault(name, _Node())
            node.keys.append(key)
            self._entries[key] = answer

    # housekeeping (under the lock) -------------------------------------------

    def _apply(self, mounts: bool, events: list[tuple[int, int, str]]) -> None:
        """Drop what the reported changes can alter; no resolution begun before them
        may be stored afterwards (the generation)."""
        self._gen += 1
        if mounts:
            self._foreign = None  # read the mount table again
        if mounts or any(wd < 0 or mask & _IN_Q_OVERFLOW for wd, mask, _ in events):
            self._clear()
            return
        for wd, mask, name in events:
            for path in self._paths.get(wd, ()):
                self._forget(path + "/" + name if name else path)
            if mask & _IN_IGNORED:
                self._paths.pop(wd, None)

    def _forget(self, path: str) -> None:
        """Drop every answer at or below ``path`` and the watched marks there."""
        parent = self._root
        names = [n for n in path.split("/") if n]
        if not names:
            self._clear()
            return
        for name in names[:-1]:
            nxt = parent.kids.get(name)
            if nxt is None:
                return
            parent = nxt
        node = parent.kids.pop(names[-1], None)
        todo = [node] if node is not None else []
        while todo:
            n = todo.pop()
            for key in n.keys:
                self._entries.pop(key, None)
            todo.extend(n.kids.values())

    def _clear(self) -> None:
        self._entries.clear()
        self._root = _Node()

    def _start(self) -> bool:
        if self._kernel is not None:
            return True
        try:
            self._kernel = _Kernel()
        except (OSError, AttributeError, ValueError):
            self._failed = True  # no inotify here: resolve every path afresh
            return False
        self._budget = watch_budget()
        self._foreign = None  # the mount table, read after the kernel watches it
        return True

    def _restart(self) -> None:
        self._clear()
        self._paths.clear()
        if self._kernel is not None:
            self._kernel.close()
            self._kernel = None
        self._gen += 1
        self._start()

    def reset(self) -> None:
        """Forget everything and the kernel objects (after a fork: they are the parent's)."""
        self._lock = threading.Lock()
        self._entries = {}
        self._root = _Node()
        self._paths = {}
        self._seen = set()
        if self._kernel is not None:
            self._kernel.close()
            self._kernel = None
        self._gen += 1
        self._foreign = None
        self._calls = 0
        self._failed = False


CACHE = PathCache()
os.register_at_fork(after_in_child=CACHE.reset)
