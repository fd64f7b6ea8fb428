"""Only the command's own terminal in a confined command's view.

Called by :func:`guard.sandbox.namespaces.enter_inner` in pid 1 of the namespaces,
before the command starts: :func:`own_terminal` finds the terminal the command has
(its controlling terminal, else a terminal on fds 0-2), and :func:`private_terminals`
mounts a new devpts instance on ``/dev/pts`` (the host's pseudo-terminals, the user's
other shells and tmux panes, are not in it), leads ``/dev/ptmx`` to it, shows the own
terminal alone on ``/dev/console`` and covers every other console and serial line.
What it stops: reading what is typed into another terminal, changing its mode, its
settings (``TCSETS``, ``VINTR``), making it exclusive (``TIOCEXCL``) or changing its
line discipline: the command cannot open another terminal at all.

Stdlib only, nothing slow to import; no policy logic.
"""

from __future__ import annotations

import os
import stat

TYPE_CHECKING = False
if TYPE_CHECKING:
    import ctypes
    from collections.abc import Sequence
    from typing import Any
elif __package__:  # _ctypes alone: ``import ctypes`` costs the helper ~5 ms of CPU
    from guard.sandbox import _ffi as ctypes
else:  # run by the helper as a sibling module, without the package
    import _ffi as ctypes

MS_NOSUID, MS_NOEXEC, MS_BIND = 0x2, 0x8, 0x1000

#: Character-device majors of terminals a command could read or reconfigure: virtual
#: consoles and serial lines (4), their screens (vcs, 7), USB and ARM serial lines.
TTY_MAJORS = (4, 7, 166, 188, 204)
PTS_MAJORS = range(136, 144)
DEVPTS_OPTIONS = b"newinstance,ptmxmode=0666,mode=0620"


def own_terminal() -> str | None:
    """The terminal this process may keep: its controlling terminal when that is a
    pseudo-terminal whose node is ``/dev/pts/N`` (checked by its device number), else the
    first of fds 0-2 that is a terminal (``/proc/self/fd/N``, the open file itself); None
    when it has none. Only this one stays in the view (:func:`private_terminals`)."""
    try:
        with open("/proc/self/stat", "rb") as f:
            tty_nr = int(f.read().rsplit(b")", 1)[1].split()[4])
    except (OSError, ValueError, IndexError):
        tty_nr = 0
    if tty_nr:
        major = (tty_nr >> 8) & 0xFFF
        minor = (tty_nr & 0xFF) | ((tty_nr >> 12) & 0xFFF00)
        if major in PTS_MAJORS:
            path = f"/dev/pts/{(major - PTS_MAJORS[0]) * 256 + minor}"
            try:
                st = os.stat(path)
                if stat.S_ISCHR(st.st_mode) and st.st_rdev == os.makedev(major, minor):
                    return path
            except OSError:
                pass
    for fd in (0, 1, 2):
        try:
            st = os.fstat(fd)
        except OSError:
            continue
        if stat.S_ISCHR(st.st_mode) and os.isatty(fd):
            try:
                path = os.readlink(f"/proc/self/fd/{fd}")
                if path.startswith("/dev/") and os.stat(path).st_rdev == st.st_rdev:
                    return path
            except OSError:
                pass
            return f"/proc/self/fd/{fd}"  # in another devpts instance: the open file itself
    return None


def is_terminal(st: os.stat_result) -> bool:
    """A terminal device node: a pseudo-terminal, a console, a serial line or its screen
    (``/dev/tty`` and ``/dev/ptmx`` aside: they lead to the process's own)."""
    if not stat.S_ISCHR(st.st_mode):
        return False
    major = os.major(st.st_rdev)
    return major in TTY_MAJORS or major in PTS_MAJORS or (major == 5 and st.st_rdev not in (
        os.makedev(5, 0), os.makedev(5, 2)))  # fmt: skip


def readable_roots(own: str | None, hidden: Sequence[str] = ()) -> list[str]:
    """Without namespaces (the fallback), what Landlock lets the command read when it
    handles reading: every entry of ``/`` but ``/dev``, every entry of ``/dev`` but the
    terminals and ``/dev/pts``, and ``own`` (the command's own terminal, a ``/dev`` path).
    What is left out are the other terminals: the user's other shells and tmux panes
    cannot be read, nor opened for their settings (a terminal ioctl needs an open file).
    Each of ``hidden`` (guard's state, which the namespaces cover) is left out too: no
    file of it can be opened, so none can be read (the audit key) or locked."""
    roots: list[str] = []
    for base, skip in (("/", ("dev",)), ("/dev", ("pts",))):
        roots += _entries(base, skip, terminals=True)
    if own is not None and own.startswith("/dev/"):
        roots.append(own)
    for path in hidden:
        roots = _around(roots, os.path.realpath(path))
    return roots


def _entries(base: str, skip: Sequence[str], *, terminals: bool = False) -> list[str]:
    """The entries of ``base`` but ``skip``, links (a link's target is read through its
    own root) and, with ``terminals``, terminals; none when it cannot be listed."""
    try:
        entries = list(os.scandir(base))
    except OSError:
        return []
    out = []
    for entry in entries:
        if entry.name in skip:
            continue
        try:
            st = entry.stat(follow_symlinks=False)
        except OSError:
            continue
        if stat.S_ISLNK(st.st_mode) or (terminals and is_terminal(st)):
            continue
        out.append(entry.path)
    return out


def _around(roots: list[str], target: str) -> list[str]:
    """``roots`` with ``target`` (a resolved path) and what lies under it left out: a root
    that holds it gives way to every entry of each directory on the way down but the one
    leading there (made later, an entry there is not readable: it is left out too)."""
    out = []
    for root in roots:
        if root == target:
            continue
        if not target.startswith(root.rstrip("/") + "/"):
            out.append(root)
            continue
        here = root
        for name in os.path.relpath(target, root).split("/"):
            out += _entries(here, (name,))
            here = os.path.join(here, name)
    return out


def private_terminals(own: str | None) -> str | None:
    """Only the command's own terminal in this mount namespace: a new devpts instance on
    ``/dev/pts`` (the pseudo-terminals the command opens itself live there; the host's,
    the user's other shells and tmux panes, are not in it) with ``/dev/ptmx`` leading to
    it, ``own`` (:func:`own_terminal`) bound on ``/dev/console`` (how bubblewrap shows
    it; ``ttyname`` finds it there) or ``/dev/null`` there when it has none, and every
    other console or serial line the command could open covered by ``/dev/null``.
    Returns the path the own terminal has in the view, or None."""
    pin = None
    own_rdev = -1
    if own is not None:
        try:
            pin = os.open(own, os.O_PATH | os.O_CLOEXEC)
            own_rdev = os.fstat(pin).st_rdev
        except OSError:
            pin = None
    try:
        if _is_kind("/dev/pts", stat.S_IFDIR):
            _mount(b"devpts", b"/dev/pts", b"devpts", MS_NOSUID | MS_NOEXEC,
                   "mounting a private /dev/pts", DEVPTS_OPTIONS)  # fmt: skip
            if _is_kind("/dev/ptmx", stat.S_IFCHR):
                _mount(b"/dev/pts/ptmx", b"/dev/ptmx", None, MS_BIND, "binding /dev/ptmx")
        shown = None
        if _is_kind("/dev/console", stat.S_IFCHR):
            source = b"/dev/null" if pin is None else os.fsencode(f"/proc/self/fd/{pin}")
            _mount(source, b"/dev/console", None, MS_BIND, "binding the terminal on /dev/console")
            shown = "/dev/console" if pin is not None else None
        _cover_terminals(own_rdev)
        return shown
    finally:
        if pin is not None:
            os.close(pin)


def _is_kind(path: str, kind: int) -> bool:
    try:
        return stat.S_IFMT(os.lstat(path).st_mode) == kind
    except OSError:
        return False


def _cover_terminals(own_rdev: int) -> None:
    """``/dev/null`` over each console and serial line in ``/dev`` this process could open
    (its own terminal aside)."""
    try:
        entries = list(os.scandir("/dev"))
    except OSError:
        return
    euid = os.geteuid()
    for entry in entries:
        try:
            st = entry.stat(follow_symlinks=False)
        except OSError:
            continue
        if (
            not stat.S_ISCHR(st.st_mode)
            or os.major(st.st_rdev) not in TTY_MAJORS
            or st.st_rdev == own_rdev
            or not _may_open(entry.path, st, euid)
        ):
            continue
        _mount(b"/dev/null", os.fsencode(entry.path), None, MS_BIND, f"covering {entry.path}")


def _may_open(path: str, st: os.stat_result, euid: int) -> bool:
    """Whether this process could open the node at ``path`` for reading or writing. Root
    (outside a user namespace) can open every one; a node whose group and other bits are
    all clear opens for its owner alone (an ACL's named entries are bounded by the group
    bits, its mask), so without being its owner that needs no call; else access(2)."""
    if euid == 0:
        return True
    if st.st_mode & 0o066 == 0 and st.st_uid != euid:
        return False
    return os.access(path, os.R_OK) or os.access(path, os.W_OK)


_mount_fn: Any = None


def _mount(
    source: bytes, target: bytes, fstype: bytes | None, flags: int, what: str,
    data: bytes | None = None,
) -> None:
    global _mount_fn
    if _mount_fn is None:  # one lookup for the dozens of mounts of a view
        _mount_fn = ctypes.CDLL(None, use_errno=True).mount
    if int(_mount_fn(source, target, fstype, ctypes.c_ulong(flags), data)) < 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")
