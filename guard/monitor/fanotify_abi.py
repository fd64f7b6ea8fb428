"""The kernel's fanotify interface as guard uses it: the flags and mask bits of
linux/fanotify.h, the event record's layout and its info records (:func:`records`), and
the libc calls (through ctypes)."""

from __future__ import annotations

import ctypes
import os
import struct
from typing import NamedTuple

# fanotify_init flags (linux/fanotify.h)
FAN_CLOEXEC = 0x1
FAN_NONBLOCK = 0x2
FAN_CLASS_NOTIF = 0x0
FAN_REPORT_FID = 0x200
FAN_REPORT_DIR_FID = 0x400
FAN_REPORT_NAME = 0x800
FAN_REPORT_TARGET_FID = 0x1000
FAN_REPORT_DFID_NAME_TARGET = FAN_REPORT_DIR_FID | FAN_REPORT_NAME | FAN_REPORT_FID | (
    FAN_REPORT_TARGET_FID)
# event mask bits
FAN_MODIFY = 0x2
FAN_ATTRIB = 0x4
FAN_CLOSE_WRITE = 0x8
FAN_CREATE = 0x100
FAN_DELETE = 0x200
FAN_Q_OVERFLOW = 0x4000
FAN_RENAME = 0x10000000
FAN_ONDIR = 0x40000000
MASK = FAN_MODIFY | FAN_ATTRIB | FAN_CLOSE_WRITE | FAN_CREATE | FAN_DELETE | FAN_RENAME | FAN_ONDIR
# fanotify_mark flags
FAN_MARK_ADD = 0x1
FAN_MARK_FLUSH = 0x80
FAN_MARK_FILESYSTEM = 0x100
# info record types
FID, DFID_NAME, DFID, OLD_DFID_NAME, NEW_DFID_NAME = 1, 2, 3, 10, 12
METADATA = struct.Struct("=IBBHQii")
METADATA_VERSION = 3
AT_FDCWD = -100
CAP_SYS_ADMIN = 21

# the C library this process already links (as guard/sandbox does): ctypes.util.find_library
# would run ``ldconfig -p`` on every start of the monitor
libc = ctypes.CDLL(None, use_errno=True)
libc.fanotify_init.argtypes = [ctypes.c_uint, ctypes.c_uint]
libc.fanotify_init.restype = ctypes.c_int
libc.fanotify_mark.argtypes = [ctypes.c_int, ctypes.c_uint, ctypes.c_uint64, ctypes.c_int,
                                ctypes.c_char_p]
libc.fanotify_mark.restype = ctypes.c_int
libc.open_by_handle_at.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int]
libc.open_by_handle_at.restype = ctypes.c_int
libc.name_to_handle_at.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_char_p,
                                    ctypes.POINTER(ctypes.c_int), ctypes.c_int]
libc.name_to_handle_at.restype = ctypes.c_int
MAX_HANDLE_SZ = 128
libc.statfs.argtypes = [ctypes.c_char_p, ctypes.c_char_p]
libc.statfs.restype = ctypes.c_int


class Record(NamedTuple):
    """One info record of an event: a file or directory handle, and for a directory
    handle with a name, the entry's name."""

    kind: int
    fsid: bytes
    handle: bytes  # handle_type (4 bytes) + f_handle: the cache key within a file system
    name: str


_HEAD = struct.Struct("=BBH").unpack_from
_HLEN = struct.Struct("=I").unpack_from
_HANDLES = frozenset((FID, DFID_NAME, DFID, OLD_DFID_NAME, NEW_DFID_NAME))
_NAMED = frozenset((DFID_NAME, OLD_DFID_NAME, NEW_DFID_NAME))
_new = tuple.__new__


def records(buf: bytes, start: int, end: int) -> list[Record]:
    """The handle records of the event at ``buf[start:end]`` (after its metadata); the
    reader calls it for every event of the file system, so it builds plain tuples."""
    out: list[Record] = []
    p = start
    while p + 4 <= end:
        kind, _, length = _HEAD(buf, p)
        if length < 4 or p + length > end:
            break
        if kind in _HANDLES:
            (hbytes,) = _HLEN(buf, p + 12)
            name = ""
            if kind in _NAMED:
                raw = buf[p + 20 + hbytes : p + length]
                name = os.fsdecode(raw.split(b"\0", 1)[0])
            out.append(_new(Record, (kind, buf[p + 4 : p + 12], buf[p + 16 : p + 20 + hbytes],
                                     name)))
        p += length
    return out
