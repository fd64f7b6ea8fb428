"""The first wall: Linux namespaces and a read-only view of the filesystem, through ctypes.

The confinement helper (:mod:`guard.sandbox.helper`) calls these in two processes:

* :func:`enter_outer` in its **outer** process, which stays in the host's
  network, mount and PID namespaces (it runs the egress proxy and waits for the
  command): a new PID namespace for its children and, when it is not root, a
  new user namespace first that maps its own uid and gid to themselves (root
  needs none and gets none).
* :func:`enter_inner` in **pid 1** of that PID namespace (the helper's init):
  new mount, network and IPC namespaces; every mount private and read-only
  (``mount_setattr`` over the whole tree), with fresh writable binds of the
  writable roots only (cloned before the tree turned read-only, attached by
  descriptor so that a symlink swapped in cannot redirect them); a ``/proc``
  of the new PID namespace (read-only: other processes are not there); the
  loopback interface up, and no other interface.

What that stops: writes, chmod, chown, utime, xattrs and truncate anywhere but
the writable roots (``EROFS``, whatever the uid); every network but the
namespace's own loopback (and the listener :func:`listen_loopback` hands to
the outer process for guard's egress proxy); System V IPC objects and POSIX
message queues of the host; abstract Unix sockets of the host (they belong to
the network namespace); seeing, signalling or changing the limits of any
process outside (they are not in the PID namespace). Every process left in the
namespace dies with its pid 1.

Stdlib only, nothing slow to import (it runs before every confined command);
no policy logic. :func:`unavailable` is the probe, run in a throwaway child
(:class:`Probe`: started early, read later).
"""

# Lazy imports: select and time only to bound the
# probe's wait: `guard run` start-up speed.

from __future__ import annotations

import errno
import os
import stat

TYPE_CHECKING = False
if TYPE_CHECKING:
    import ctypes

    from guard.sandbox import terminals as terminals_mod
    from guard.sandbox._ffi import libc as _lib
    from guard.sandbox._ffi import syscall as _syscall
elif __package__:  # _ctypes alone: ``import ctypes`` costs the helper ~5 ms of CPU
    from guard.sandbox import _ffi as ctypes
    from guard.sandbox import terminals as terminals_mod
    from guard.sandbox._ffi import libc as _lib
    from guard.sandbox._ffi import syscall as _syscall
else:  # run by the helper as a sibling module, without the package
    import _ffi as ctypes
    import terminals as terminals_mod
    from _ffi import libc as _lib
    from _ffi import syscall as _syscall
if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence
    from typing import NoReturn

CLONE_NEWNS = 0x00020000
CLONE_NEWIPC = 0x08000000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000

MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 0x1, 0x2, 0x4, 0x8
MS_BIND, MS_REC, MS_PRIVATE = 0x1000, 0x4000, 0x40000
MOUNT_ATTR_RDONLY, MOUNT_ATTR_NOSUID = 0x1, 0x2
AT_FDCWD, AT_EMPTY_PATH, AT_RECURSIVE = -100, 0x1000, 0x8000
OPEN_TREE_CLONE = 1
MOVE_MOUNT_F_EMPTY_PATH, MOVE_MOUNT_T_EMPTY_PATH = 0x4, 0x40
PR_SET_PDEATHSIG = 1
SIOCGIFFLAGS, SIOCSIFFLAGS, IFF_UP = 0x8913, 0x8914, 0x1
AF_INET, SOCK_DGRAM, SOCK_CLOEXEC = 2, 2, 0o2000000

# The new mount API's syscall numbers are shared by every architecture guard has a
# seccomp table for (the unified numbering).
NR_OPEN_TREE, NR_MOVE_MOUNT, NR_MOUNT_SETATTR = 428, 429, 442

#: What :func:`enter_inner` unshares (the outer process adds PID, and USER when not root).
INNER_FLAGS = CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWIPC
#: The walls, by the names a policy's ``[agents.NAME.sandbox] require`` uses.
WALLS = ("network", "ipc", "processes", "metadata")


class NamespaceError(OSError):
    """A namespace or mount step failed; the message names the step and the cause."""


class _MountAttr(ctypes.Structure):
    _fields_ = (
        ("attr_set", ctypes.c_uint64),
        ("attr_clr", ctypes.c_uint64),
        ("propagation", ctypes.c_uint64),
        ("userns_fd", ctypes.c_uint64),
    )


def _check(res: int, what: str) -> int:
    if res < 0:
        err = ctypes.get_errno()
        raise NamespaceError(err, f"{what}: {os.strerror(err)}")
    return res


def _path(p: str) -> bytes:
    return os.fsencode(p)


def unshare(flags: int, what: str) -> None:
    _check(int(_lib().unshare(ctypes.c_int(flags))), f"unshare ({what})")


def enter_outer() -> bool:
    """A new PID namespace for the children of this process (and, unless root, a new user
    namespace mapping the caller's uid and gid to themselves, entered first). This
    process keeps its network, mount and PID namespaces. True when a user namespace was
    made. Must be called while single-threaded."""
    user = enter_user()
    enter_pid()
    return user


def enter_user() -> bool:
    """Unless root: a new user namespace mapping the caller's uid and gid to themselves
    (it gains nothing outside). True when one was made. Single-threaded callers only."""
    uid, gid = os.geteuid(), os.getegid()
    if uid == 0:
        return False
    unshare(CLONE_NEWUSER, "user namespace")
    for name, text in (
        ("setgroups", "deny"),
        ("uid_map", f"{uid} {uid} 1\n"),
        ("gid_map", f"{gid} {gid} 1\n"),
    ):
        fd = os.open(f"/proc/self/{name}", os.O_WRONLY | os.O_CLOEXEC)
        try:
            os.write(fd, text.encode())
        except OSError as exc:
            raise NamespaceError(
                exc.errno, f"writing /proc/self/{name}: {exc.strerror}"
            ) from None
        finally:
            os.close(fd)
    return True


def enter_pid() -> None:
    """A new PID namespace for the children of this thread: the next one it forks is its
    pid 1. This thread can no longer start threads (the kernel refuses a thread whose PID
    namespace is not its process's): start them before."""
    unshare(CLONE_NEWPID, "PID namespace")


def die_with_parent(life_fd: int) -> bool:
    """SIGKILL this process when its parent dies; False when the parent is already gone
    (its end of the ``life_fd`` pipe is closed), which the caller must treat as a stop."""
    _check(int(_lib().prctl(PR_SET_PDEATHSIG, 9, 0, 0, 0)), "prctl(PR_SET_PDEATHSIG)")
    os.set_blocking(life_fd, False)
    try:
        return os.read(life_fd, 1) != b""
    except BlockingIOError:
        return True  # still open: the parent lives, and from now on its death kills us


def _open_tree(fd: int, what: str) -> int:
    flags = OPEN_TREE_CLONE | os.O_CLOEXEC | AT_EMPTY_PATH | AT_RECURSIVE
    return _check(
        _syscall(NR_OPEN_TREE, ctypes.c_int(fd), b"", ctypes.c_uint32(flags)),
        f"cloning the mount of {what}",
    )


def _move_mount(tree: int, fd: int, what: str) -> None:
    flags = MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH
    _check(
        _syscall(NR_MOVE_MOUNT, ctypes.c_int(tree), b"", ctypes.c_int(fd), b"",
                 ctypes.c_uint32(flags)),
        f"mounting the writable view of {what}",
    )  # fmt: skip


def _read_only_everywhere() -> None:
    attr = _MountAttr(attr_set=MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID)
    _check(
        _syscall(NR_MOUNT_SETATTR, ctypes.c_int(AT_FDCWD), b"/", ctypes.c_uint32(AT_RECURSIVE),
                 ctypes.byref(attr), ctypes.c_size_t(32)),
        "making every mount read-only (mount_setattr)",
    )  # fmt: skip


def _mount(
    source: bytes | None, target: bytes, fstype: bytes | None, flags: int, what: str
) -> None:
    _check(int(_lib().mount(source, target, fstype, ctypes.c_ulong(flags), None)), what)


def _pinned(path: str, kinds: int) -> int | None:
    """An O_PATH descriptor of ``path`` (never through a symlink at its end) when its type
    is in ``kinds`` (stat.S_IFDIR and the like, or-ed); None when it is missing or of
    another type."""
    try:
        fd = os.open(path, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as exc:
        if exc.errno in (errno.ENOENT, errno.ENOTDIR, errno.EACCES, errno.ELOOP):
            return None
        raise NamespaceError(exc.errno, f"opening {path}: {exc.strerror}") from None
    kind = stat.S_IFMT(os.fstat(fd).st_mode)
    if kinds & kind != kind or kind == 0:
        os.close(fd)
        return None
    return fd


def enter_inner(
    writable: Iterable[str] = (),
    *,
    mask_sockets: Iterable[str] = (),
    proc: bool = True,
    tmpfs: str | None = None,
    hide: Iterable[str] = (),
    terminals: bool = False,
) -> tuple[list[str], str | None]:
    """In pid 1 of the new PID namespace: new mount, network and IPC namespaces, the
    read-only view with ``writable`` (directories and regular files; other kinds, such as
    ``/dev/null`` and terminals, stay writable on a read-only mount) bound writable,
    each of ``mask_sockets`` (pathname sockets, with the kind checked) covered with
    ``/dev/null`` so that nothing can connect to it, ``/proc`` of this PID namespace, a
    new empty tmpfs (mode 0700) on the directory ``tmpfs`` when given (the private
    TMPDIR: it exists nowhere else and ends with the namespace), and the loopback
    interface up. Each of ``hide`` (guard's audit key directory) is covered: a directory
    by an empty read-only tmpfs, a file by ``/dev/null``, so that nothing in the view can
    read what is there. With ``terminals``, only this process's own terminal is in the
    view (:mod:`guard.sandbox.terminals`). Returns the writable roots that were missing
    (skipped), and where the own terminal is in the view (or None)."""
    own = terminals_mod.own_terminal() if terminals else None
    unshare(INNER_FLAGS, "mount, network and IPC namespaces")
    _mount(None, b"/", None, MS_REC | MS_PRIVATE, "making every mount private")
    skipped: list[str] = []
    views: list[tuple[int, int, str]] = []
    try:
        for path in dict.fromkeys(writable):
            fd = _pinned(path, stat.S_IFDIR | stat.S_IFREG)
            if fd is None:
                if not os.path.exists(path):
                    skipped.append(path)
                continue
            try:
                views.append((fd, _open_tree(fd, path), path))
            except BaseException:
                os.close(fd)
                raise
        _read_only_everywhere()
        for fd, tree, path in views:
            _move_mount(tree, fd, path)
    finally:
        for fd, tree, _ in views:
            os.close(tree)
            os.close(fd)
    for path in mask_sockets:
        fd = _pinned(path, stat.S_IFSOCK)
        if fd is None:
            continue
        try:
            _mount(b"/dev/null", _path(f"/proc/self/fd/{fd}"), None, MS_BIND,
                   f"covering the socket {path}")  # fmt: skip
        finally:
            os.close(fd)
    empty: str | None = None
    for path in hide:
        empty = _cover(path, empty)
    shown = terminals_mod.private_terminals(own) if terminals else None
    if tmpfs is not None:
        fd = _pinned(tmpfs, stat.S_IFDIR)
        if fd is None:
            raise NamespaceError(errno.ENOENT, f"no directory {tmpfs} for the private TMPDIR")
        try:
            _check(
                int(_lib().mount(b"tmpfs", _path(f"/proc/self/fd/{fd}"), b"tmpfs",
                                 ctypes.c_ulong(MS_NOSUID | MS_NODEV), b"mode=0700")),
                f"mounting a private tmpfs on {tmpfs}",
            )  # fmt: skip
        finally:
            os.close(fd)
    if proc:
        _mount(b"proc", b"/proc", b"proc", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC,
               "mounting /proc for the new PID namespace")  # fmt: skip
    _reenter_cwd()
    loopback_up()
    return skipped, shown


def _cover(path: str, empty: str | None = None) -> str | None:
    """Cover ``path`` in this mount namespace: a directory by an empty read-only tmpfs
    (mode 0), a file by ``/dev/null``; nothing when it is missing. ``empty``: a directory
    covered so already, whose tmpfs is bound here instead of a new one (one superblock for
    all of them: each costs its making and its teardown). Returns the directory covered
    so (``empty``, or ``path`` when it got the first tmpfs)."""
    fd = _pinned(path, stat.S_IFDIR | stat.S_IFREG)
    if fd is None:
        return empty
    try:
        target = _path(f"/proc/self/fd/{fd}")
        if not stat.S_ISDIR(os.fstat(fd).st_mode):
            _mount(b"/dev/null", target, None, MS_BIND, f"covering {path}")
        elif empty is not None:
            _mount(_path(empty), target, None, MS_BIND, f"covering {path}")
        else:
            _check(
                int(_lib().mount(b"tmpfs", target, b"tmpfs",
                                 ctypes.c_ulong(MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC),
                                 b"mode=0,size=4k")),
                f"covering {path}",
            )  # fmt: skip
            return path
    finally:
        os.close(fd)
    return empty


def _reenter_cwd() -> None:
    """Look the working directory up again, so that a writable bind mounted over it (or
    over a directory above it) is the one it is in."""
    try:  # noqa: SIM105 (contextlib would cost start-up time)
        os.chdir(os.getcwd())
    except OSError:
        pass


def loopback_up() -> None:
    """Bring ``lo`` up in this (new) network namespace: 127.0.0.1 and ::1 work, and
    nothing else exists."""
    fd = _check(int(_lib().socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0)), "socket for lo")
    try:
        req = (ctypes.c_uint8 * 40)(*b"lo")  # struct ifreq: the name, then the flags
        ioctl = _lib().ioctl
        _check(int(ioctl(fd, ctypes.c_ulong(SIOCGIFFLAGS), ctypes.byref(req))), "reading lo")
        req[16] |= IFF_UP
        _check(int(ioctl(fd, ctypes.c_ulong(SIOCSIFFLAGS), ctypes.byref(req))), "bringing lo up")
    finally:
        os.close(fd)


class _SockaddrIn(ctypes.Structure):
    _fields_ = (
        ("family", ctypes.c_uint16),
        ("port", ctypes.c_uint16),  # network byte order
        ("addr", ctypes.c_uint32),  # network byte order
        ("zero", ctypes.c_uint64),
    )


class _IoVec(ctypes.Structure):
    _fields_ = (("base", ctypes.c_void_p), ("len", ctypes.c_size_t))


class _MsgHdr(ctypes.Structure):
    _fields_ = (
        ("name", ctypes.c_void_p),
        ("namelen", ctypes.c_uint32),
        ("iov", ctypes.c_void_p),
        ("iovlen", ctypes.c_size_t),
        ("control", ctypes.c_void_p),
        ("controllen", ctypes.c_size_t),
        ("flags", ctypes.c_int),
    )


SOCK_STREAM, SOL_SOCKET, SO_REUSEADDR, SCM_RIGHTS = 1, 1, 2, 1
MSG_CMSG_CLOEXEC = 0x40000000


def listen_loopback(port: int) -> int:
    """A TCP listener on 127.0.0.1:``port`` in this network namespace (its descriptor).
    Through libc: ``_socket`` would cost the helper's pid 1 its import."""
    lib = _lib()
    fd = _check(int(lib.socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)), "socket")
    try:
        one = ctypes.c_int(1)
        _check(int(lib.setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, ctypes.byref(one), 4)),
               "setsockopt(SO_REUSEADDR)")  # fmt: skip
        # network byte order, read back as the (little-endian) machine's integers
        addr = _SockaddrIn(AF_INET, int.from_bytes(port.to_bytes(2, "big"), "little"),
                           int.from_bytes(bytes((127, 0, 0, 1)), "little"), 0)  # fmt: skip
        _check(int(lib.bind(fd, ctypes.byref(addr), 16)), f"bind 127.0.0.1:{port}")
        _check(int(lib.listen(fd, 128)), f"listen on 127.0.0.1:{port}")
    except BaseException:
        os.close(fd)
        raise
    return fd


def socket_pair() -> tuple[int, int]:
    """A connected pair of Unix stream sockets (close-on-exec), through libc."""
    fds = (ctypes.c_int * 2)()
    _check(int(_lib().socketpair(1, SOCK_STREAM | SOCK_CLOEXEC, 0, ctypes.byref(fds))),
           "socketpair")  # fmt: skip
    return fds[0], fds[1]


def send_fd(channel: int, fd: int) -> None:
    """Send ``fd`` over the Unix socket ``channel`` (SCM_RIGHTS), with one byte."""
    data = (ctypes.c_uint8 * 1)(ord("L"))
    iov = _IoVec(ctypes.addressof(data), 1)
    control = (ctypes.c_uint8 * 24)()  # CMSG_SPACE(sizeof(int)): len, level, type, the fd
    control[0:8] = list((20).to_bytes(8, "little"))  # CMSG_LEN(sizeof(int))
    control[8:12] = list(SOL_SOCKET.to_bytes(4, "little"))
    control[12:16] = list(SCM_RIGHTS.to_bytes(4, "little"))
    control[16:20] = list(fd.to_bytes(4, "little"))
    msg = _MsgHdr(None, 0, ctypes.addressof(iov), 1, ctypes.addressof(control), 24, 0)
    sendmsg = _lib().sendmsg
    sendmsg.restype = ctypes.c_long
    if int(sendmsg(channel, ctypes.byref(msg), 0)) != 1:
        err = ctypes.get_errno()
        raise NamespaceError(err, f"handing the listener out: {os.strerror(err)}")


def receive_fd(channel: int) -> int | None:
    """The descriptor sent over ``channel`` by :func:`send_fd` (close-on-exec), or None
    at end of file (the sender exited first). Through libc: the ``_socket`` module costs
    the helper more than the call."""
    data = (ctypes.c_uint8 * 1)()
    iov = _IoVec(ctypes.addressof(data), 1)
    control = (ctypes.c_uint8 * 24)()  # room for one descriptor: a second one is dropped
    msg = _MsgHdr(None, 0, ctypes.addressof(iov), 1, ctypes.addressof(control), 24, 0)
    recvmsg = _lib().recvmsg
    recvmsg.restype = ctypes.c_long
    while True:
        got = int(recvmsg(channel, ctypes.byref(msg), MSG_CMSG_CLOEXEC))
        if got >= 0 or ctypes.get_errno() != errno.EINTR:
            break
    header = bytes(control[:16])
    fd = int.from_bytes(bytes(control[16:20]), "little")
    carried = (
        msg.controllen >= 20
        and int.from_bytes(header[:8], "little") == 20
        and int.from_bytes(header[8:12], "little") == SOL_SOCKET
        and int.from_bytes(header[12:16], "little") == SCM_RIGHTS
    )
    if got != 1 or not carried:
        if carried:
            os.close(fd)
        return None
    return fd


def listening_sockets() -> list[str]:
    """The pathname Unix sockets bound in this network namespace (``/proc/net/unix``),
    to be covered when the command may create Unix sockets at all."""
    try:
        with open("/proc/net/unix", "rb") as f:
            lines = f.read().splitlines()[1:]
    except OSError:
        return []
    out = []
    for line in lines:
        fields = line.split(None, 7)
        if len(fields) == 8 and fields[7].startswith(b"/"):
            out.append(os.fsdecode(fields[7]))
    return out


def unavailable(writable: Sequence[str] = ()) -> str:
    """Why namespaces cannot be made here ("" when they can): tried for real in a
    throwaway child and grandchild (the same calls the helper makes). Forks: call it
    from a single-threaded process (the helper's ``--probe``)."""
    return Probe(writable).result()


class Probe:
    """:func:`unavailable`, started now (the child forked at once) and read later with
    :meth:`result`, so that the caller's own start-up runs meanwhile (``guard run``).
    Forks: make it while single-threaded."""

    def __init__(self, writable: Sequence[str] = ()) -> None:
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:  # pragma: no cover - child
            os.close(r)
            _probe_child(w, writable)
        os.close(w)
        self._pid, self._r = pid, r
        self._why: str | None = None

    def result(self, timeout: float = 8.0) -> str:
        """Why namespaces cannot be made ("" when they can); waits for the child once, for
        at most ``timeout`` seconds (it runs on the hook path: past that the child is
        killed and namespaces count as unavailable, said as such)."""
        if self._why is None:
            import select
            import time

            chunks = []
            end = time.monotonic() + timeout
            while True:
                left = end - time.monotonic()
                if left <= 0 or not select.select([self._r], [], [], left)[0]:
                    os.close(self._r)
                    try:
                        os.kill(self._pid, 9)
                        os.waitpid(self._pid, 0)
                    except (ChildProcessError, ProcessLookupError):
                        pass
                    self._why = f"the namespace probe did not answer within {timeout:g} s"
                    return self._why
                data = os.read(self._r, 4096)
                if not data:
                    break
                chunks.append(data)
            os.close(self._r)
            try:  # noqa: SIM105 (contextlib would cost the helper's start-up)
                os.waitpid(self._pid, 0)
            except ChildProcessError:  # reaped by someone else: its answer is read already
                pass
            why = b"".join(chunks).decode(errors="replace").strip()
            self._why = explain(why) if why else ""
        return self._why


def _probe_child(w: int, writable: Sequence[str]) -> NoReturn:  # pragma: no cover - child
    why = ""
    try:
        enter_outer()
        inner = os.fork()
        if inner == 0:
            try:
                enter_inner(writable)
                os._exit(0)
            except OSError as exc:
                os.write(w, str(exc).encode(errors="replace"))
                os._exit(1)
            except BaseException:
                os._exit(2)
        _, status = os.waitpid(inner, 0)
        if os.waitstatus_to_exitcode(status) == 2:
            why = "the probe failed inside the PID namespace"
    except OSError as exc:
        why = str(exc)
    except BaseException as exc:  # the reason is all that matters
        why = f"{type(exc).__name__}: {exc}"
    if why:
        os.write(w, why.encode(errors="replace"))
    os._exit(0)


def explain(why: str) -> str:
    """A probe failure with the usual cause and fix appended."""
    if "unshare" in why and ("Operation not permitted" in why or "No space left" in why):
        return (
            f"{why} (unprivileged user namespaces are off here: sysctl"
            " user.max_user_namespaces, kernel.unprivileged_userns_clone, or an AppArmor or"
            " container policy)"
        )
    return why
