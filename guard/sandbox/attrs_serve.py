"""What guard's supervisor does with a confined command's ``chmod`` and ``utime`` calls.

:mod:`guard.sandbox.attrs` installs the filter that hands every call of the chmod and
utime families to the supervisor and starts its thread; the thread loads this module
when the first call waits (a command that never makes one never pays for it) and
serves every call from then on: :meth:`Supervisor.serve` reads the path (and the
times) from the command's memory once, resolves them as the command would (from its
cwd or directory descriptor, under its root, no ``/proc`` magic link but
``/proc/self/fd/N``), holds the file by an ``O_PATH`` descriptor, refuses with
``EPERM`` when it is the plan directory itself (or, in the fallback, a terminal other
than the command's own), and otherwise makes the change itself on that descriptor
with the command's rights, and answers with its result.

Stdlib only, nothing slow to import.
"""

from __future__ import annotations

import errno
import os
import stat

TYPE_CHECKING = False
if TYPE_CHECKING:
    import ctypes

    from guard.sandbox import seccomp, terminals
    from guard.sandbox._ffi import libc as _lib
    from guard.sandbox._ffi import syscall
elif __package__:  # _ctypes alone: ``import ctypes`` costs the helper ~5 ms of CPU
    from guard.sandbox import _ffi as ctypes
    from guard.sandbox import seccomp, terminals
    from guard.sandbox._ffi import libc as _lib
    from guard.sandbox._ffi import syscall
else:  # run by the helper as a sibling module, without the package
    import _ffi as ctypes
    import seccomp
    import terminals
    from _ffi import libc as _lib
    from _ffi import syscall

#: name: (x86_64 number, aarch64 number or None where the syscall does not exist)
SYSCALLS: dict[str, tuple[int, int | None]] = {
    name: seccomp.NUMBERS[name] for name in ("chmod", "fchmod", "fchmodat", "fchmodat2",
                                             *seccomp.SUPERVISED_TIMES)
}  # fmt: skip
_OPENAT2 = 437
NOTIF_RECV = 0xC0502100  # SECCOMP_IOCTL_NOTIF_RECV: _IOWR('!', 0, struct seccomp_notif)
NOTIF_SEND = 0xC0182101  # SECCOMP_IOCTL_NOTIF_SEND: _IOWR('!', 1, struct seccomp_notif_resp)
NOTIF_ID_VALID = 0x40082102  # SECCOMP_IOCTL_NOTIF_ID_VALID: _IOW('!', 2, __u64)
AT_FDCWD = -100
AT_SYMLINK_NOFOLLOW, AT_EMPTY_PATH = 0x100, 0x1000
RESOLVE_NO_MAGICLINKS = 0x02
CLONE_FS = 0x200
POLLIN, POLLHUP = 0x1, 0x10
PATH_MAX = 4096
_PROC_SELF_FD = (b"/proc/self/fd/", b"/proc/thread-self/fd/")


class _Data(ctypes.Structure):
    _fields_ = (
        ("nr", ctypes.c_int32),
        ("arch", ctypes.c_uint32),
        ("ip", ctypes.c_uint64),
        ("args", ctypes.c_uint64 * 6),
    )


class _Notif(ctypes.Structure):
    _fields_ = (
        ("id", ctypes.c_uint64),
        ("pid", ctypes.c_uint32),
        ("flags", ctypes.c_uint32),
        ("data", _Data),
    )


class _Resp(ctypes.Structure):
    _fields_ = (
        ("id", ctypes.c_uint64),
        ("val", ctypes.c_long),
        ("error", ctypes.c_int32),
        ("flags", ctypes.c_uint32),
    )


class _OpenHow(ctypes.Structure):
    _fields_ = (("flags", ctypes.c_uint64), ("mode", ctypes.c_uint64), ("resolve", ctypes.c_uint64))


def _syscall(nr: int, *args: object) -> int:
    res = syscall(nr, *args)
    if res < 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))
    return res


class Supervisor:
    """What the supervisor refuses: the plan directories (device and inode) and, with
    ``terminals`` (the fallback), every terminal but the one of device ``own_rdev``."""

    __slots__ = (
        "by_number", "chroot", "entered", "fchmodat2", "own_rdev", "plans", "proc",
        "terminals", "utimensat",
    )  # fmt: skip

    def __init__(
        self, plans: list[tuple[int, int]], *, terminals: bool, own_rdev: int | None,
        chroot: bool, machine: str,
    ) -> None:  # fmt: skip
        self.plans = set(plans)
        self.terminals = terminals
        self.own_rdev = own_rdev
        self.chroot = chroot
        self.entered = False
        self.proc = -1
        col = 0 if machine == "x86_64" else 1
        self.by_number = {n: k for k, v in SYSCALLS.items() if (n := v[col]) is not None}
        self.fchmodat2 = SYSCALLS["fchmodat2"][0]  # the same number everywhere
        self.utimensat = int(SYSCALLS["utimensat"][col] or 0)

    def _enter(self, pid: int) -> None:
        """In the supervising thread, on the first notification: the caller's root as this
        thread's own with ``chroot`` (the namespaces: an absolute path, a symlink or
        ``..`` then resolves in the command's view, never in guard's; the command cannot
        chroot), then every capability of this thread given up: it acts with no more
        rights than the command (mount flags, ownership and modes decide as for it)."""
        lib = _lib()
        if self.chroot:
            root = os.open(f"{pid}/root", os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC,
                           dir_fd=self.proc)  # fmt: skip
            try:
                if lib.unshare(CLONE_FS) != 0 or lib.fchdir(root) != 0 or lib.chroot(b".") != 0:
                    err = ctypes.get_errno()
                    raise OSError(err, f"entering the command's root: {os.strerror(err)}")
            finally:
                os.close(root)
        header = (ctypes.c_uint32 * 2)(0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3, this thread
        data = (ctypes.c_uint32 * 6)()
        if lib.capset(ctypes.byref(header), ctypes.byref(data)) != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"giving up the supervisor's capabilities: {os.strerror(err)}")
        self.entered = True

    def serve(self, listener: int) -> None:
        """Answer every notification on ``listener`` until it fails; closes it (every call
        still to come then fails with ``ENOSYS``)."""
        try:
            self.proc = os.open("/proc", os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
            ioctl = _lib().ioctl
            resp = _Resp()
            while True:
                notif = _Notif()  # zeroed, as the kernel requires
                if ioctl(listener, ctypes.c_ulong(NOTIF_RECV), ctypes.byref(notif)) != 0:
                    err = ctypes.get_errno()
                    if err == errno.EINTR or (err == errno.ENOENT and not _orphaned(listener)):
                        continue  # the caller died meanwhile; others may still call
                    return  # the filter has no process left (ENOENT at once from now on)
                if not self.entered:
                    try:
                        self._enter(int(notif.pid))
                    except OSError as exc:  # the service ends: every such call fails
                        os.write(2, f"guard confine: chmod and utime refused: {exc}\n".encode())
                        return
                try:
                    error = self.handle(listener, notif)
                except OSError as exc:
                    error = exc.errno or errno.EPERM
                except Exception:  # fail closed: refused, never allowed
                    error = errno.EPERM
                if error is None:
                    continue  # the caller is gone
                resp.id, resp.val, resp.error, resp.flags = notif.id, 0, -error if error else 0, 0
                ioctl(listener, ctypes.c_ulong(NOTIF_SEND), ctypes.byref(resp))
        finally:
            os.close(listener)
            if self.proc >= 0:
                os.close(self.proc)

    def handle(self, listener: int, notif: _Notif) -> int | None:
        """Decide and perform one call: 0 or the errno to answer, None when the caller is
        gone (nothing done)."""
        name = self.by_number.get(notif.data.nr)
        a = [int(x) for x in notif.data.args]
        pid = int(notif.pid)
        fd_op = name == "fchmod" or (name == "utimensat" and a[1] == 0)
        dirfd, path_at, flags = AT_FDCWD, 0, 0
        if name in ("chmod", "utime", "utimes"):
            path_at = a[0]
        elif name in ("fchmodat", "fchmodat2", "utimensat", "futimesat"):
            dirfd, path_at = _int(a[0]), a[1]
            flags = a[3] & 0xFFFFFFFF if name in ("fchmodat2", "utimensat") else 0
        elif name != "fchmod":
            return errno.ENOSYS
        if flags & ~(AT_SYMLINK_NOFOLLOW | AT_EMPTY_PATH):
            return errno.EINVAL
        mem = os.open(f"{pid}/mem", os.O_RDONLY | os.O_CLOEXEC, dir_fd=self.proc)
        held: list[int] = []
        try:
            path = None if fd_op else _read_path(mem, path_at)
            times = self._times(mem, name, a)
            if fd_op:
                fd = _int(a[0])
                if fd < 0:
                    return errno.EBADF
                target = self._open_proc(pid, f"fd/{fd}", held)
            else:
                assert path is not None
                target = self._resolve(pid, dirfd, path, flags, held)
            if not _valid(listener, notif.id):
                return None  # checked after every lookup in /proc: the pid was the caller's
            st = os.fstat(target)
            if (st.st_dev, st.st_ino) in self.plans:
                return errno.EPERM
            if self.terminals and terminals.is_terminal(st) and st.st_rdev != self.own_rdev:
                return errno.EPERM
            if name in ("chmod", "fchmod", "fchmodat", "fchmodat2"):
                if stat.S_ISLNK(st.st_mode):
                    return errno.EOPNOTSUPP
                mode = (a[1] if name in ("chmod", "fchmod") else a[2]) & 0o7777
                _syscall(self.fchmodat2, ctypes.c_int(target), b"",
                         ctypes.c_uint32(mode), ctypes.c_int(AT_EMPTY_PATH))  # fmt: skip
            else:
                _syscall(self.utimensat, ctypes.c_int(target), b"", times,
                         ctypes.c_int(AT_EMPTY_PATH))  # fmt: skip
            return 0
        finally:
            for fd in held:
                os.close(fd)
            os.close(mem)

    def _open_proc(self, pid: int, what: str, held: list[int]) -> int:
        fd = os.open(f"{pid}/{what}", os.O_PATH | os.O_CLOEXEC, dir_fd=self.proc)
        held.append(fd)
        return fd

    def _resolve(self, pid: int, dirfd: int, path: bytes, flags: int, held: list[int]) -> int:
        """The file ``path`` names for the caller, held by an ``O_PATH`` descriptor."""
        if path == b"":
            if not flags & AT_EMPTY_PATH:
                raise OSError(errno.ENOENT, "empty path")
            return self._open_proc(pid, "cwd" if dirfd == AT_FDCWD else f"fd/{dirfd}", held)
        for prefix in _PROC_SELF_FD:  # how C libraries chmod a descriptor opened O_PATH
            number = path[len(prefix) :]
            if path.startswith(prefix) and number.isdigit() and len(number) < 10:
                return self._open_proc(pid, f"fd/{int(number)}", held)
        if path.startswith(b"/"):
            base = AT_FDCWD  # this thread's root is the caller's
        elif dirfd == AT_FDCWD:
            base = self._open_proc(pid, "cwd", held)
        elif dirfd < 0:
            raise OSError(errno.EBADF, "bad descriptor")
        else:
            base = self._open_proc(pid, f"fd/{dirfd}", held)
        how = _OpenHow(os.O_PATH | os.O_CLOEXEC | (os.O_NOFOLLOW if flags & AT_SYMLINK_NOFOLLOW
                       else 0), 0, RESOLVE_NO_MAGICLINKS)  # fmt: skip
        fd = _syscall(_OPENAT2, ctypes.c_int(base), path, ctypes.byref(how),
                      ctypes.c_size_t(24))  # fmt: skip
        held.append(fd)
        return fd

    @staticmethod
    def _times(mem: int, name: str | None, a: list[int]) -> object:
        """The times to set, as ``struct timespec[2]`` (None: now)."""
        at = {"utime": a[1], "utimes": a[1], "futimesat": a[2], "utimensat": a[2]}.get(name or "")
        if not at:
            return None
        size = 16 if name == "utime" else 32
        raw = os.pread(mem, size, at)
        if len(raw) != size:
            raise OSError(errno.EFAULT, "bad address")
        words = [int.from_bytes(raw[i : i + 8], "little", signed=True) for i in range(0, size, 8)]
        if name == "utime":
            words = [words[0], 0, words[1], 0]
        elif name in ("utimes", "futimesat"):
            for i in (1, 3):
                if not 0 <= words[i] < 1_000_000:
                    raise OSError(errno.EINVAL, "bad microseconds")
                words[i] *= 1000
        return (ctypes.c_long * 4)(*words)


def _int(value: int) -> int:
    """A syscall's ``int`` argument from its 64-bit register."""
    value &= 0xFFFFFFFF
    return value - (1 << 32) if value & 0x80000000 else value


def _orphaned(listener: int) -> bool:
    """Whether no process uses the filter any more (the listener hangs up)."""
    pollfd = (ctypes.c_int * 2)(listener, POLLIN)  # struct pollfd: fd, events, revents
    if int(_lib().poll(ctypes.byref(pollfd), ctypes.c_ulong(1), ctypes.c_int(0))) < 0:
        return True
    return bool((pollfd[1] >> 16) & POLLHUP)


def _valid(listener: int, notif_id: int) -> bool:
    ident = ctypes.c_uint64(notif_id)
    return int(_lib().ioctl(listener, ctypes.c_ulong(NOTIF_ID_VALID), ctypes.byref(ident))) == 0


def _read_path(mem: int, at: int) -> bytes:
    """A NUL-terminated path from the caller's memory, read once, page by page."""
    if at == 0:
        raise OSError(errno.EFAULT, "bad address")
    out = b""
    while len(out) < PATH_MAX:
        chunk = 4096 - (at + len(out)) % 4096
        try:
            data = os.pread(mem, chunk, at + len(out))
        except OSError as exc:
            raise OSError(errno.EFAULT, "bad address") from exc
        if not data:
            raise OSError(errno.EFAULT, "bad address")
        end = data.find(b"\0")
        if end >= 0:
            return out + data[:end]
        out += data
    raise OSError(errno.ENAMETOOLONG, "path too long")
