"""Making a fanotify group for the monitor: open it, mark a file system, say why not.

Holds the calls the monitor's fanotify backend makes its group with: whether this
process has ``CAP_SYS_ADMIN`` (:func:`has_cap_sys_admin`), a new group reporting
directory handles and names (:func:`open_group`), a filesystem mark
(:func:`mark_filesystem`), a path's file system id as events carry it
(:func:`filesystem_id`), and what a refusal by the kernel means
(:func:`why_unavailable`). It does not hold the choice of a backend nor the observer
that reads the group (:mod:`guard.monitor.fanotify`), nor the kernel's constants and
the libc calls themselves (:mod:`guard.monitor.fanotify_abi`).
"""

from __future__ import annotations

import ctypes
import errno
import os

from guard.monitor.fanotify_abi import (
    AT_FDCWD,
    CAP_SYS_ADMIN,
    FAN_CLASS_NOTIF,
    FAN_CLOEXEC,
    FAN_MARK_ADD,
    FAN_MARK_FILESYSTEM,
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
