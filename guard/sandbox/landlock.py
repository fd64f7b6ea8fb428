"""The kernel layer: Landlock through ctypes, with no policy logic in it.

It receives writable roots and applies them to the calling process. Everything
else (which roots, why) is the policy side's business
(:mod:`guard.sandbox.roots`); starting the command is :mod:`guard.sandbox.helper`'s.

What a restricted process may do, and what it may not:

* read and execute anywhere (read rights are not handled, so never refused);
* create, write, truncate, remove, rename, link, make directories, FIFOs,
  sockets and symlinks only beneath a writable root;
* in a plan directory (``plans=``), only regular files: create, write,
  truncate, rename, remove;
* never create a block or character device, anywhere (no root grants it);
* ``ioctl`` on devices only beneath a root granted ``ioctl`` (terminals);
* from ABI 6, send signals only to processes inside its own Landlock domain
  (it cannot kill the guard that supervises it), and ptrace only inside it;
  with ``scope_abstract_unix``, connect to abstract Unix sockets only of its own
  domain (a daemon outside listening on ``@name`` is out of reach).

Landlock does not cover chmod, chown, utime, setxattr, or file descriptors
opened before :func:`restrict_self`; :mod:`guard.sandbox.seccomp`, the
monitor and the helper's fd hygiene cover those.

Stdlib only, and nothing slow to import: it runs before every confined command.
This module holds the one Landlock ABI probe (:func:`abi_version`).
"""

from __future__ import annotations

import errno
import os
import stat

TYPE_CHECKING = False
if TYPE_CHECKING:
    import ctypes
elif __package__:  # _ctypes alone: ``import ctypes`` costs the helper ~5 ms of CPU
    from guard.sandbox import _ffi as ctypes
else:  # run by the helper as a sibling module, without the package
    import _ffi as ctypes
if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence
    from typing import Any

# Syscall numbers are shared by x86_64 and aarch64 (and most architectures
# that came after the unified syscall table).
_SYSCALLS: dict[str, tuple[int, int, int]] = {
    "x86_64": (444, 445, 446),
    "aarch64": (444, 445, 446),
    "arm64": (444, 445, 446),
    "riscv64": (444, 445, 446),
    "ppc64le": (444, 445, 446),
    "s390x": (444, 445, 446),
}

PR_SET_NO_NEW_PRIVS = 38
LANDLOCK_CREATE_RULESET_VERSION = 1 << 0
LANDLOCK_RULE_PATH_BENEATH = 1

# Filesystem access rights, with the ABI that introduced them.
EXECUTE = 1 << 0
WRITE_FILE = 1 << 1
READ_FILE = 1 << 2
READ_DIR = 1 << 3
REMOVE_DIR = 1 << 4
REMOVE_FILE = 1 << 5
MAKE_CHAR = 1 << 6
MAKE_DIR = 1 << 7
MAKE_REG = 1 << 8
MAKE_SOCK = 1 << 9
MAKE_FIFO = 1 << 10
MAKE_BLOCK = 1 << 11
MAKE_SYM = 1 << 12
REFER = 1 << 13  # ABI 2
TRUNCATE = 1 << 14  # ABI 3
IOCTL_DEV = 1 << 15  # ABI 5

SCOPE_ABSTRACT_UNIX_SOCKET = 1 << 0  # ABI 6
SCOPE_SIGNAL = 1 << 1  # ABI 6

RIGHT_NAMES: dict[int, str] = {
    READ_FILE: "read_file",
    WRITE_FILE: "write_file",
    REMOVE_DIR: "remove_dir",
    REMOVE_FILE: "remove_file",
    MAKE_CHAR: "make_char",
    MAKE_DIR: "make_dir",
    MAKE_REG: "make_reg",
    MAKE_SOCK: "make_sock",
    MAKE_FIFO: "make_fifo",
    MAKE_BLOCK: "make_block",
    MAKE_SYM: "make_sym",
    REFER: "refer",
    TRUNCATE: "truncate",
    IOCTL_DEV: "ioctl_dev",
}

_WRITE_ABI1 = (
    WRITE_FILE
    | REMOVE_DIR
    | REMOVE_FILE
    | MAKE_CHAR
    | MAKE_DIR
    | MAKE_REG
    | MAKE_SOCK
    | MAKE_FIFO
    | MAKE_BLOCK
    | MAKE_SYM
)
#: Handled, and granted to no root: a device node the command makes could reach a
#: disk below the filesystem (and every Landlock rule).
DEVICE_RIGHTS = MAKE_CHAR | MAKE_BLOCK
#: What a plan directory grants: regular files only (no directory, FIFO, socket,
#: device or symlink may appear there).
REGULAR_FILE_RIGHTS = WRITE_FILE | REMOVE_FILE | MAKE_REG | REFER | TRUNCATE
# Rights that make sense on a rule for a single (non-directory) file.
_FILE_RIGHTS = EXECUTE | WRITE_FILE | READ_FILE | TRUNCATE | IOCTL_DEV


class LandlockError(OSError):
    """Landlock is missing or refused the ruleset; the message says which and why."""


def handled_rights(abi: int) -> int:
    """The write-side rights guard handles for a kernel of this ABI (every one it knows)."""
    if abi < 1:
        return 0
    rights = _WRITE_ABI1
    if abi >= 2:
        rights |= REFER
    if abi >= 3:
        rights |= TRUNCATE
    if abi >= 5:
        rights |= IOCTL_DEV
    return rights


def right_names(rights: int) -> list[str]:
    return [name for bit, name in RIGHT_NAMES.items() if rights & bit]


class _RulesetAttr(ctypes.Structure):
    _fields_ = (
        ("handled_access_fs", ctypes.c_uint64),
        ("handled_access_net", ctypes.c_uint64),
        ("scoped", ctypes.c_uint64),
    )


class _PathBeneathAttr(ctypes.Structure):
    _pack_ = 1
    _fields_ = (("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32))


_libc: ctypes.CDLL | None = None


def _syscall() -> ctypes._CFunctionType:
    global _libc
    if _libc is None:
        _libc = ctypes.CDLL(None, use_errno=True)
    fn: ctypes._CFunctionType = _libc.syscall  # type: ignore[assignment]
    fn.restype = ctypes.c_long
    return fn


def _numbers() -> tuple[int, int, int] | None:
    uname = os.uname()
    if uname.sysname != "Linux":
        return None
    return _SYSCALLS.get(uname.machine)


def abi_version() -> int:
    """The kernel's Landlock ABI version, or 0 when Landlock is unavailable.

    0 covers: not Linux, an unknown architecture, a kernel without Landlock
    (ENOSYS), and Landlock built in but disabled at boot (EOPNOTSUPP).
    """
    nums = _numbers()
    if nums is None:
        return 0
    res = _syscall()(
        ctypes.c_long(nums[0]),
        None,
        ctypes.c_size_t(0),
        ctypes.c_uint32(LANDLOCK_CREATE_RULESET_VERSION),
    )
    if res < 0:
        return 0
    return int(res)


def unavailable_reason() -> str:
    """Why :func:`abi_version` is 0, for messages."""
    uname = os.uname()
    if uname.sysname != "Linux":
        return f"Landlock is a Linux feature; this is {uname.sysname}"
    nums = _numbers()
    if nums is None:
        return f"guard does not know the Landlock syscall numbers on {uname.machine}"
    res = _syscall()(
        ctypes.c_long(nums[0]),
        None,
        ctypes.c_size_t(0),
        ctypes.c_uint32(LANDLOCK_CREATE_RULESET_VERSION),
    )
    if res >= 0:
        return ""
    err = ctypes.get_errno()
    if err == errno.ENOSYS:
        return (
            f"this kernel ({uname.release}) was built without Landlock (CONFIG_SECURITY_LANDLOCK)"
        )
    if err == errno.EOPNOTSUPP:
        return (
            f"Landlock is built into this kernel ({uname.release}) but disabled at boot;"
            " add 'landlock' to the lsm= kernel parameter"
        )
    return f"the Landlock probe failed: {os.strerror(err)}"


class Rule:
    """Allow ``rights`` beneath ``path`` (a directory) or on ``path`` (a file)."""

    __slots__ = ("path", "rights", "why")

    def __init__(self, path: str, rights: int, why: str = "") -> None:
        self.path, self.rights, self.why = path, rights, why

    def __repr__(self) -> str:
        return f"Rule({self.path!r}, {right_names(self.rights)})"


class Enforcement:
    """What :func:`restrict_self` put in place, for the user."""

    __slots__ = (
        "abi", "handled", "hardening", "namespaces", "rules", "scoped_abstract_unix",
        "scoped_signals", "skipped",
    )  # fmt: skip

    def __init__(
        self, abi: int, handled: int, scoped_signals: bool, scoped_abstract_unix: bool = False
    ) -> None:
        self.abi, self.handled, self.scoped_signals = abi, handled, scoped_signals
        self.scoped_abstract_unix = scoped_abstract_unix
        self.rules: list[Rule] = []
        self.skipped: list[tuple[str, str]] = []
        #: what the confinement helper added: "seccomp", "capabilities", "walls", ...
        self.hardening: list[str] = []
        #: the namespaces the command runs in ("user", "mount", ...), [] without
        self.namespaces: list[str] = []

    def to_json(self) -> dict[str, object]:
        return {
            "abi": self.abi,
            "handled": right_names(self.handled),
            "scoped_signals": self.scoped_signals,
            "scoped_abstract_unix": self.scoped_abstract_unix,
            "namespaces": list(self.namespaces),
            "rules": [
                {"path": r.path, "rights": right_names(r.rights), "why": r.why} for r in self.rules
            ],
            "skipped": [{"path": p, "why": w} for p, w in self.skipped],
            "hardening": list(self.hardening),
            "tiocsti_blocked": "seccomp" in self.hardening,
        }


def summary_lines(report: dict[str, Any]) -> list[str]:
    """What an :meth:`Enforcement.to_json` report means, in a line or few, for people."""
    rights = ", ".join(report.get("handled", []))
    extra = "; signals to outside processes blocked" if report.get("scoped_signals") else ""
    if report.get("scoped_abstract_unix"):
        extra += "; abstract Unix sockets outside unreachable"
    hardening = report.get("hardening") or []
    if "seccomp" in hardening:
        extra += (
            "; system-state syscalls (hostname, clock, mounts, modules, IPC, devices, ownership,"
            " set-id bits, xattrs, inode flags, TIOCSTI) refused by seccomp"
        )
    if "walls" in hardening:
        extra += (
            "; ptrace, process_vm_*, kcmp, pidfd_getfd, io_uring and other processes' limits,"
            " scheduling, affinity and memory placement refused"
        )
        extra += (
            "; socket families but inet, inet6, unix and netlink-route refused"
            "; POSIX message queues refused"
        )
        if "listed-sockets-refused" in hardening:
            extra += (
                "; Unix sockets refused, the policy's listed ones too: without namespaces"
                " nothing covers the other sockets (socketpair works)"
            )
        elif "unix-sockets" not in hardening:
            extra += "; Unix sockets refused (socketpair works)"
    if "own-terminal" in hardening:
        extra += "; no terminal but the command's own can be read or written"
    if "metadata-supervised" in hardening:
        extra += "; chmod and utime checked by guard (never the plan directory itself)"
    if "capabilities" in hardening:
        extra += "; all capabilities dropped"
    lines = [f"Landlock ABI {report.get('abi')} enforced ({rights}){extra}"]
    spaces = report.get("namespaces") or []
    if spaces:
        lines.insert(
            0,
            f"namespaces: {', '.join(spaces)}: everything read-only but the writable roots;"
            " network: loopback only (and guard's egress proxy where given); its own /proc,"
            " processes, IPC and pseudo-terminals (no terminal but its own)",
        )
    for skipped in report.get("skipped", []):
        lines.append(f"not granted (missing): {skipped['path']}: {skipped['why']}")
    return lines


def _add_rule(sys_add: ctypes._CFunctionType, add_nr: int, ruleset_fd: int, rule: Rule) -> None:
    # O_NOFOLLOW: roots arrive resolved; a symlink swapped in since is refused, never followed.
    fd = os.open(rule.path, os.O_PATH | os.O_CLOEXEC | os.O_NOFOLLOW)
    try:
        if stat.S_ISLNK(os.fstat(fd).st_mode):
            raise LandlockError(
                errno.ELOOP, f"{rule.path} is a symlink; a writable root must be a real path"
            )
        attr = _PathBeneathAttr(allowed_access=rule.rights, parent_fd=fd)
        res = sys_add(
            ctypes.c_long(add_nr),
            ctypes.c_int(ruleset_fd),
            ctypes.c_int(LANDLOCK_RULE_PATH_BENEATH),
            ctypes.byref(attr),
            ctypes.c_uint32(0),
        )
        if res < 0:
            err = ctypes.get_errno()
            raise LandlockError(
                err, f"Landlock refused the rule for {rule.path}: {os.strerror(err)}"
            )
    finally:
        os.close(fd)


def restrict_self(
    writable: Iterable[str] = (),
    ioctl: Iterable[str] = (),
    *,
    plans: Iterable[str] = (),
    abi: int | None = None,
    scope_signals: bool = True,
    scope_abstract_unix: bool = False,
    readable: Sequence[str] | None = None,
) -> Enforcement:
    """Confine the calling process (and every process it starts) for good.

    ``writable``: directories (everything beneath them) or single files that
    stay writable (every write right but device creation). ``plans``: directories
    where only regular files may be created, written, renamed and removed.
    ``ioctl``: directories or device files where device ioctls stay allowed
    (terminals). ``readable``: when given, reading files is handled too and allowed
    only beneath these paths (and the writable roots); missing ones and symlinks among
    them are left out, and they are not listed in the report (the fallback's view of
    everything but the other terminals, :func:`guard.sandbox.terminals.readable_roots`).
    Paths that do not exist are skipped and
    reported in :attr:`Enforcement.skipped` — never silently widened.
    Sets ``PR_SET_NO_NEW_PRIVS``. Raises :class:`LandlockError` when the
    kernel has no Landlock or refuses the ruleset; the process is then
    unchanged except for no_new_privs.
    """
    nums = _numbers()
    kabi = abi_version()
    if abi is None:
        abi = kabi
    if nums is None or kabi < 1 or abi < 1:
        raise LandlockError(errno.ENOSYS, unavailable_reason() or "Landlock ABI 0 requested")
    abi = min(abi, kabi)
    create_nr, add_nr, restrict_nr = nums
    handled = handled_rights(abi)
    if readable is not None:
        handled |= READ_FILE
    scoped = SCOPE_SIGNAL if (scope_signals and abi >= 6) else 0
    if scope_abstract_unix and abi >= 6:
        scoped |= SCOPE_ABSTRACT_UNIX_SOCKET
    enforcement = Enforcement(
        abi=abi,
        handled=handled,
        scoped_signals=bool(scoped & SCOPE_SIGNAL),
        scoped_abstract_unix=bool(scoped & SCOPE_ABSTRACT_UNIX_SOCKET),
    )

    rules: dict[str, int] = {}
    for path in writable:
        rules[path] = rules.get(path, 0) | (handled & ~DEVICE_RIGHTS)
    for path in plans:
        rules[path] = rules.get(path, 0) | (handled & REGULAR_FILE_RIGHTS)
    for path in ioctl:
        rules[path] = rules.get(path, 0) | (handled & IOCTL_DEV)

    sc = _syscall()
    attr = _RulesetAttr(handled_access_fs=handled, handled_access_net=0, scoped=scoped)
    size = 8 if abi < 4 else (16 if abi < 6 else 24)
    ruleset_fd = int(
        sc(ctypes.c_long(create_nr), ctypes.byref(attr), ctypes.c_size_t(size), ctypes.c_uint32(0))
    )
    if ruleset_fd < 0:
        err = ctypes.get_errno()
        raise LandlockError(
            err, f"cannot create a Landlock ruleset (ABI {abi}): {os.strerror(err)}"
        )
    try:
        for path, rights in rules.items():
            if rights == 0:
                continue
            try:
                st = os.stat(path)
            except OSError as exc:
                enforcement.skipped.append((path, exc.strerror or str(exc)))
                continue
            if not stat.S_ISDIR(st.st_mode):
                rights &= _FILE_RIGHTS
            rule = Rule(path, rights)
            _add_rule(sc, add_nr, ruleset_fd, rule)
            enforcement.rules.append(rule)
        for path in readable or ():
            try:
                st = os.lstat(path)
            except OSError:
                continue
            if stat.S_ISLNK(st.st_mode):
                continue
            _add_rule(sc, add_nr, ruleset_fd, Rule(path, READ_FILE))
        if _libc is None:  # pragma: no cover - _syscall() set it
            raise LandlockError(errno.EINVAL, "libc not loaded")
        if _libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            err = ctypes.get_errno()
            raise LandlockError(err, f"prctl(PR_SET_NO_NEW_PRIVS) failed: {os.strerror(err)}")
        res = sc(ctypes.c_long(restrict_nr), ctypes.c_int(ruleset_fd), ctypes.c_uint32(0))
        if res < 0:
            err = ctypes.get_errno()
            raise LandlockError(err, f"landlock_restrict_self failed: {os.strerror(err)}")
    finally:
        os.close(ruleset_fd)
    return enforcement


def close_fds_from(first: int = 3, keep: Sequence[int] = ()) -> None:
    """Close every file descriptor >= ``first`` except ``keep``."""
    limit = os.sysconf("SC_OPEN_MAX") if hasattr(os, "sysconf") else 1 << 20
    start = first
    for fd in sorted(k for k in keep if k >= first):
        os.closerange(start, fd)
        start = fd + 1
    os.closerange(start, max(limit, start))


_CLOSE_RANGE, _CLOSE_RANGE_CLOEXEC = 436, 4  # the unified syscall number (Linux 5.11+)


SIG_SETMASK, SIG_DFL, SIGPIPE, SIGXFSZ = 2, 0, 13, 25


def reset_signals() -> None:
    """Before exec: an empty signal mask, and SIGPIPE and SIGXFSZ back to their defaults
    (Python ignores both; the command expects the defaults). Through libc rather than
    the signal module, whose import costs more than the rest of the helper."""
    _syscall()  # loads the C library
    assert _libc is not None
    empty = (ctypes.c_ulong * 16)()  # a zeroed sigset_t (1024 bits)
    if _libc.pthread_sigmask(SIG_SETMASK, ctypes.byref(empty), None) != 0:
        raise OSError(errno.EINVAL, "cannot reset the signal mask")
    handler = _libc.signal
    handler.restype = ctypes.c_void_p
    for sig in (SIGPIPE, SIGXFSZ):
        handler(sig, ctypes.c_void_p(SIG_DFL))


def cloexec_from(first: int = 3) -> None:
    """Mark every file descriptor >= ``first`` close-on-exec (one ``close_range`` call;
    on older kernels, each descriptor listed in ``/proc/self/fd``)."""
    if _syscall()(
        ctypes.c_long(_CLOSE_RANGE), ctypes.c_uint32(first), ctypes.c_uint32(0xFFFFFFFF),
        ctypes.c_uint32(_CLOSE_RANGE_CLOEXEC),
    ) == 0:  # fmt: skip
        return
    for name in os.listdir("/proc/self/fd"):
        fd = int(name)
        if fd >= first:
            try:  # noqa: SIM105 (contextlib would cost start-up time)
                os.set_inheritable(fd, False)
            except OSError:
                pass  # the listing's own descriptor, closed already
