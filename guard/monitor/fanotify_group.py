"""Making a fanotify group for the monitor: open it, mark a file system, say why not.

Holds the calls the monitor's fanotify backend makes its group with: whether this
process has ``CAP_SYS_ADMIN`` (:func:`has_cap_sys_admin`), a new group reporting
directory handles and names (:func:`open_group`), a filesystem mark
(:func:`mark_filesystem`), a path's file system id as events carry it
(:func:`filesystem_id`), and what a refusal by the kernel means
(:func:`why_unavailable`), and the choice of a backend (:func:`choose`, which probes
with a group of its own, for ``guard doctor``; :func:`before_probe`, what rules
fanotify out before any group is made, for the monitor, whose own group is its probe;
:class:`Choice`). It does not hold the observer that reads the group
(:mod:`guard.monitor.fanotify`), nor the kernel's constants and the libc calls
themselves (:mod:`guard.monitor.fanotify_abi`).
"""

from __future__ import annotations

import ctypes
import errno
import os
from pathlib import Path
from typing import NamedTuple

from guard.monitor.fanotify_abi import (
    AT_FDCWD,
    CAP_SYS_ADMIN,
    FAN_CLASS_NOTIF,
    FAN_CLOEXEC,
    FAN_MARK_ADD,
    FAN_MARK_FILESYSTEM,
    FAN_MARK_FLUSH,
    FAN_NONBLOCK,
    FAN_REPORT_DFID_NAME_TARGET,
    MASK,
    libc,
)


def _oserror(what: str) -> OSError:
    e = ctypes.get_errno()
    return OSError(e, f"{what}: {os.strerror(e)}")


def has_cap_sys_admin() -> bool:
    """Is CAP_SYS_ADMIN in this process's effective set?"""
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith("CapEff:"):
                    return bool(int(line.split()[1], 16) >> CAP_SYS_ADMIN & 1)
    except (OSError, ValueError):
        pass
    return False


def filesystem_id(path: str) -> bytes:
    """The file system id of ``path`` as fanotify reports it (statfs ``f_fsid``)."""
    buf = ctypes.create_string_buffer(256)
    if libc.statfs(os.fsencode(path), buf) != 0:
        raise _oserror(f"statfs {path}")
    off = 7 * ctypes.sizeof(ctypes.c_long)  # f_type .. f_ffree, then f_fsid
    return buf.raw[off : off + 8]


def open_group() -> int:
    """A new fanotify group (non-blocking, close-on-exec) reporting directory handles
    and names; OSError as the kernel refused it."""
    fd = libc.fanotify_init(FAN_CLASS_NOTIF | FAN_CLOEXEC | FAN_NONBLOCK
                             | FAN_REPORT_DFID_NAME_TARGET, os.O_RDONLY | os.O_LARGEFILE)
    if fd < 0:
        raise _oserror("fanotify_init")
    return int(fd)


def mark_filesystem(fd: int, path: str) -> None:
    """Mark the whole file system of ``path`` in the group ``fd`` for the monitor's events."""
    if libc.fanotify_mark(fd, FAN_MARK_ADD | FAN_MARK_FILESYSTEM, MASK, AT_FDCWD,
                           os.fsencode(path)) != 0:
        raise _oserror(f"fanotify_mark {path}")


def unmark_filesystems(fd: int) -> None:
    """Remove every filesystem mark of the group ``fd``: no event is queued from now on;
    those queued already can still be read. The kernel frees the marks on a worker of its
    own once an SRCU grace period has passed (milliseconds), which closing the group
    would otherwise wait for. OSError as the kernel refused."""
    if libc.fanotify_mark(fd, FAN_MARK_FLUSH | FAN_MARK_FILESYSTEM, 0, AT_FDCWD, None) != 0:
        raise _oserror("fanotify_mark FAN_MARK_FLUSH")


def why_unavailable(exc: OSError, path: str) -> str:
    """What the kernel's refusal ``exc`` (to make a group, or to mark ``path``) means."""
    if exc.errno == errno.EPERM:
        return "no CAP_SYS_ADMIN (a filesystem mark needs it; run as root to use fanotify)"
    if exc.errno == errno.EINVAL:
        return ("the kernel lacks FAN_REPORT_DFID_NAME, FAN_REPORT_TARGET_FID or FAN_RENAME"
                " (Linux 5.17 or later)")
    if exc.errno in (errno.ENODEV, errno.EOPNOTSUPP, errno.EXDEV, errno.ENOSYS):
        return f"the file system of {path} cannot report file handles to fanotify"
    return f"fanotify is unavailable: {exc.strerror or exc}"


class Choice(NamedTuple):
    """Which backend the monitor uses, and why (one line for ``guard doctor`` and the log)."""

    backend: str  # "fanotify" | "inotify"
    why: str

    def line(self) -> str:
        name = "fanotify (filesystem mark)" if self.backend == "fanotify" else "inotify (watchdog)"
        return f"monitor backend: {name}: {self.why}"


def choose(roots: list[Path], wanted: str = "auto") -> Choice:
    """Probe: can a fanotify group with the needed flags mark the file systems of ``roots``?

    ``wanted``: ``auto`` (fanotify when possible), ``inotify`` or ``fanotify``
    (the latter falls back, saying why, when the probe fails). The environment
    variable ``GUARD_MONITOR_BACKEND`` sets the default.
    """
    ruled_out = before_probe(wanted)
    if ruled_out is not None:
        return ruled_out
    try:
        fd = open_group()
    except OSError as exc:
        return Choice("inotify", why_unavailable(exc, str(roots[0]) if roots else "/"))
    try:
        for root in roots:
            try:
                mark_filesystem(fd, str(root))
            except OSError as exc:
                return Choice("inotify", why_unavailable(exc, str(root)))
    finally:
        os.close(fd)  # waits for the kernel's SRCU grace period: the monitor never probes
    return CHOSEN


#: the choice when the group could be made and mark every root
CHOSEN = Choice("fanotify", "CAP_SYS_ADMIN and a kernel with FAN_REPORT_DFID_NAME_TARGET;"
                " one mark per file system, events carry the writer's pid")


def before_probe(wanted: str = "auto") -> Choice | None:
    """What rules fanotify out before a group is made (the variable, the wish, no
    ``CAP_SYS_ADMIN``), or None: try it. The monitor then makes its own group at once
    (:class:`FanotifyObserver`) instead of probing with a second one, whose release
    waits for the kernel's SRCU grace period (about 10 ms) before the command starts."""
    if wanted == "auto":
        wanted = os.environ.get("GUARD_MONITOR_BACKEND", "auto").strip().lower() or "auto"
    if wanted == "inotify":
        return Choice("inotify", "chosen explicitly (GUARD_MONITOR_BACKEND or --backend)")
    if wanted not in ("auto", "fanotify"):
        return Choice("inotify", f"unknown backend {wanted!r} (auto, fanotify, inotify)")
    if not has_cap_sys_admin():
        return Choice("inotify", "no CAP_SYS_ADMIN (fanotify's filesystem mark needs it)")
    return None
