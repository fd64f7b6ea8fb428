"""System state the kernel keeps outside the filesystem: a seccomp filter and a capability drop.

Landlock governs writes to files. A confined command running as root could
still change what Landlock does not cover: the hostname, the clock, mounts,
kernel modules, System V IPC objects that outlive it, device nodes, file
ownership, set-user-ID bits, extended attributes and ACLs, inode flags
(append-only, immutable). Two layers close that:

* :func:`drop_capabilities`: the bounding set emptied, the effective,
  permitted and inheritable sets cleared (``capset``), ambient capabilities
  cleared, and root's special treatment on exec turned off (securebits,
  locked). A root command keeps uid 0 but no privilege beyond a file owner's.
* :class:`Filter`: a seccomp BPF filter that makes the system-state
  syscalls in :data:`REFUSED` (and the argument forms in the checks below) fail
  with ``EPERM`` (xattrs, :data:`REFUSED_XATTRS`: ``EOPNOTSUPP``), refuses syscalls
  newer than the table with ``ENOSYS`` (a future syscall is never allowed by
  omission), and kills a process that enters through another syscall ABI (i386,
  x32), which would dodge the numbers.

The filter is assembled here from a per-architecture syscall table rather
than through libseccomp: it needs a "newer than the table" range check that
libseccomp cannot express in an allow-by-default filter, it keeps this helper
free of a shared library, and the numbers are cross-checked against
libseccomp's tables by the tests. Stdlib only; imports nothing slow, because
it runs before every confined command.
"""

from __future__ import annotations

import errno
import os

TYPE_CHECKING = False
if TYPE_CHECKING:
    import ctypes

    from guard.sandbox._ffi import libc as _lib
elif __package__:  # _ctypes alone: ``import ctypes`` costs the helper ~5 ms of CPU
    from guard.sandbox import _ffi as ctypes
    from guard.sandbox._ffi import libc as _lib
else:  # run by the helper as a sibling module, without the package
    import _ffi as ctypes
    from _ffi import libc as _lib
if TYPE_CHECKING:
    from collections.abc import Sequence

PR_SET_NO_NEW_PRIVS = 38
PR_SET_SECCOMP = 22
SECCOMP_MODE_FILTER = 2
PR_CAPBSET_DROP = 24
PR_SET_SECUREBITS = 28
PR_GET_SECUREBITS = 27
PR_CAP_AMBIENT = 47
PR_CAP_AMBIENT_CLEAR_ALL = 4
CAP_SETPCAP = 8
_CAP_VERSION_3 = 0x20080522
# SECBIT_NOROOT | _LOCKED, SECBIT_KEEP_CAPS_LOCKED, SECBIT_NO_CAP_AMBIENT_RAISE | _LOCKED:
# exec as uid 0 no longer grants capabilities, and nothing can undo that.
_SECUREBITS = 0x01 | 0x02 | 0x20 | 0x40 | 0x80

RET_ALLOW = 0x7FFF0000
RET_USER_NOTIF = 0x7FC00000
RET_KILL_PROCESS = 0x80000000
RET_ERRNO = 0x00050000


def ret_errno(err: int) -> int:
    return RET_ERRNO | err


EPERM, ENOSYS, EOPNOTSUPP = (ret_errno(e) for e in (errno.EPERM, errno.ENOSYS, errno.EOPNOTSUPP))

# ioctl requests refused on any file: inode flags (append-only, immutable, ...), the
# extended inode attributes, fs-verity (makes a file read-only for good), and terminal
# input injection (TIOCSTI types into the terminal guard was started from; TIOCLINUX on
# a virtual console).
FS_IOC_SETFLAGS = 0x40086602
FS_IOC32_SETFLAGS = 0x40046602
FS_IOC_FSSETXATTR = 0x401C5820
FS_IOC_ENABLE_VERITY = 0x40806685
TIOCSTI = 0x5412
TIOCLINUX = 0x541C
# a terminal's line discipline (a different one turns the tty into a network or serial
# device driver) and where the console's output goes: no command needs either
TIOCSETD = 0x5423
TIOCCONS = 0x541D
REFUSED_IOCTLS = (
    FS_IOC_SETFLAGS,
    FS_IOC32_SETFLAGS,
    FS_IOC_FSSETXATTR,
    FS_IOC_ENABLE_VERITY,
    TIOCSTI,
    TIOCLINUX,
    TIOCSETD,
    TIOCCONS,
)
# personality(2) values a program may set (the common ones: Linux, 32-bit Linux, the
# 2.6-style uname, no address randomization for debuggers) or query.
ALLOWED_PERSONALITIES = (0x0, 0x8, 0x20000, 0x20008, 0x40000, 0xFFFFFFFF)
S_IFMT, S_IFCHR, S_IFBLK = 0o170000, 0o020000, 0o060000
SETID_BITS = 0o6000  # S_ISUID | S_ISGID
IPC_CREAT, IPC_PRIVATE = 0o1000, 0
O_CREAT = 0o100
# CLONE_NEWNS, NEWCGROUP, NEWUTS, NEWIPC, NEWUSER, NEWPID, NEWNET, NEWTIME
CLONE_NEW_NAMESPACES = 0x00020000 | 0x02000000 | 0x04000000 | 0x08000000
CLONE_NEW_NAMESPACES |= 0x10000000 | 0x20000000 | 0x40000000 | 0x00000080

# name: (x86_64 number, aarch64 number or None where the syscall does not exist).
NUMBERS: dict[str, tuple[int, int | None]] = {
    "sethostname": (170, 161),
    "setdomainname": (171, 162),
    "settimeofday": (164, 170),
    "clock_settime": (227, 112),
    "clock_adjtime": (305, 266),
    "adjtimex": (159, 171),
    "mount": (165, 40),
    "umount2": (166, 39),
    "pivot_root": (155, 41),
    "chroot": (161, 51),
    "open_tree": (428, 428),
    "move_mount": (429, 429),
    "fsopen": (430, 430),
    "fsconfig": (431, 431),
    "fsmount": (432, 432),
    "fspick": (433, 433),
    "mount_setattr": (442, 442),
    "open_tree_attr": (467, 467),
    "init_module": (175, 105),
    "finit_module": (313, 273),
    "delete_module": (176, 106),
    "kexec_load": (246, 104),
    "kexec_file_load": (320, 294),
    "swapon": (167, 224),
    "swapoff": (168, 225),
    "reboot": (169, 142),
    "acct": (163, 89),
    "quotactl": (179, 60),
    "quotactl_fd": (443, 443),
    "bpf": (321, 280),
    "perf_event_open": (298, 241),
    "keyctl": (250, 219),
    "add_key": (248, 217),
    "request_key": (249, 218),
    "iopl": (172, None),
    "ioperm": (173, None),
    "vhangup": (153, 58),
    "open_by_handle_at": (304, 265),
    "setns": (308, 268),
    "chown": (92, None),
    "fchown": (93, 55),
    "lchown": (94, None),
    "fchownat": (260, 54),
    "setxattr": (188, 5),
    "lsetxattr": (189, 6),
    "fsetxattr": (190, 7),
    "removexattr": (197, 14),
    "lremovexattr": (198, 15),
    "fremovexattr": (199, 16),
    "setxattrat": (463, 463),
    "removexattrat": (466, 466),
    "file_setattr": (469, 469),
    # refused with ENOSYS, so that the C library falls back to what the filter can see
    "clone3": (435, 435),
    "openat2": (437, 437),
    "io_uring_setup": (425, 425),
    # checked by argument
    "unshare": (272, 97),
    "clone": (56, 220),
    "shmget": (29, 194),
    "semget": (64, 190),
    "msgget": (68, 186),
    "mq_open": (240, 180),
    "personality": (135, 92),
    "mknod": (133, None),
    "mknodat": (259, 33),
    "chmod": (90, None),
    "fchmod": (91, 52),
    "fchmodat": (268, 53),
    "fchmodat2": (452, 452),
    "open": (2, None),
    "creat": (85, None),
    "openat": (257, 56),
    "ioctl": (16, 29),
    # the walls around other processes and local IPC (``walls=True``)
    "ptrace": (101, 117),
    "process_vm_readv": (310, 270),
    "process_vm_writev": (311, 271),
    "kcmp": (312, 272),
    "pidfd_getfd": (438, 438),
    "process_madvise": (440, 440),
    "io_uring_enter": (426, 426),
    "io_uring_register": (427, 427),
    "socket": (41, 198),
    "prlimit64": (302, 261),
    "setpriority": (141, 140),
    "ioprio_set": (251, 30),
    "sched_setattr": (314, 274),
    "sched_setscheduler": (144, 119),
    "sched_setparam": (142, 118),
    "sched_setaffinity": (203, 122),
    "migrate_pages": (256, 238),
    "move_pages": (279, 239),
    "mq_unlink": (241, 181),
    # handed to guard's supervisor (``supervised``, :mod:`guard.sandbox.attrs`)
    "utime": (132, None),
    "utimes": (235, None),
    "utimensat": (280, 88),
    "futimesat": (261, None),
    "userfaultfd": (323, 282),
}
#: Syscalls numbered above this are newer than the table: refused with ENOSYS.
HIGHEST_KNOWN = 469

#: Refused outright, with EPERM: they change system state or file metadata that no
#: Landlock rule governs, or they would undo the confinement.
REFUSED = (
    "sethostname", "setdomainname", "settimeofday", "clock_settime", "clock_adjtime",
    "adjtimex", "mount", "umount2", "pivot_root", "chroot", "open_tree", "move_mount",
    "fsopen", "fsconfig", "fsmount", "fspick", "mount_setattr", "open_tree_attr",
    "init_module", "finit_module", "delete_module", "kexec_load", "kexec_file_load",
    "swapon", "swapoff", "reboot", "acct", "quotactl", "quotactl_fd", "bpf",
    "perf_event_open", "keyctl", "add_key", "request_key", "iopl", "ioperm", "vhangup",
    "open_by_handle_at", "setns", "chown", "fchown", "lchown", "fchownat", "file_setattr",
)  # fmt: skip
#: Refused with EOPNOTSUPP (no xattrs here): ``cp -p``, ``install -m`` fall back to chmod.
REFUSED_XATTRS = ("setxattr", "lsetxattr", "fsetxattr", "removexattr", "lremovexattr",
                  "fremovexattr", "setxattrat", "removexattrat")  # fmt: skip
#: Refused with ENOSYS: their arguments are out of the filter's sight (a struct in
#: memory, or a ring of operations); C libraries fall back to the plain syscalls.
UNSUPPORTED = ("clone3", "openat2", "io_uring_setup")
#: Refused with EPERM when the walls are up: reaching into another process (its memory,
#: its descriptors, comparing its kernel objects, tracing it).
REFUSED_WALLS = (
    "ptrace", "process_vm_readv", "process_vm_writev", "kcmp", "pidfd_getfd", "process_madvise",
)  # fmt: skip
#: Refused with ENOSYS when the walls are up: io_uring runs operations (connect, open,
#: send...) out of the filter's sight; libraries fall back to plain syscalls.
UNSUPPORTED_WALLS = ("io_uring_enter", "io_uring_register")
#: Refused with EPERM when the walls are up: POSIX message queues by name. In the
#: namespaces the command's IPC namespace holds none; in the fallback they are the host's
#: (``mq_open`` of another program's queue, ``mq_unlink`` of it). Creating one is refused
#: anyway (``O_CREAT``).
REFUSED_MQUEUE = ("mq_open", "mq_unlink")
#: With ``supervised``, to guard's supervisor (:mod:`guard.sandbox.attrs`), as the chmod
#: family once set-id bits are refused; userfaultfd refused (a page whose faults the
#: command handles could hold the supervisor's read of its memory).
SUPERVISED_TIMES = ("utime", "utimes", "utimensat", "futimesat")
REFUSED_SUPERVISED = ("userfaultfd",)
AF_UNIX, AF_INET, AF_INET6, AF_NETLINK = 1, 2, 10, 16
NETLINK_ROUTE = 0
#: socket(AF_INET, SOCK_PACKET, ...) is the obsolete spelling of a packet socket: the
#: kernel makes it an AF_PACKET one (raw frames of every interface in sight)
SOCK_PACKET, SOCK_TYPE_MASK = 10, 0xF
#: The socket families a command may make with the walls up: the Internet ones (in the
#: namespaces they reach the command's own loopback and guard's egress proxy only) and
#: netlink's routing family (read-only without CAP_NET_ADMIN: ``ip addr``, getaddrinfo's
#: AI_ADDRCONFIG). Every other family (vsock, packet, alg, bluetooth, can, xdp, ...) is
#: refused: its endpoints are not in the network namespace.
INET_FAMILIES = (AF_INET, AF_INET6)
PRIO_PROCESS = 0
IOPRIO_WHO_PROCESS = 1

# Architectures: (AUDIT_ARCH value of the native ABI, whether x32 numbers share it).
_ARCHES: dict[str, tuple[int, bool]] = {
    "x86_64": (0xC000003E, True),
    "aarch64": (0xC00000B7, False),
}

# BPF opcodes
_LD_W_ABS, _JEQ_K, _JGT_K, _JGE_K, _JSET_K, _AND_K, _RET_K = (
    0x20, 0x15, 0x25, 0x35, 0x45, 0x54, 0x06,
)  # fmt: skip
_NR, _ARCH = 0, 4


def _arg(i: int) -> int:
    """Offset of the low 32 bits of syscall argument ``i`` (little-endian machines)."""
    return 16 + 8 * i


def machine() -> str:
    m = os.uname().machine
    return "aarch64" if m == "arm64" else m


def supported() -> bool:
    """Whether this machine has a syscall table here (else the filter cannot be built)."""
    return os.uname().sysname == "Linux" and machine() in _ARCHES


Insn = tuple[int, int, int, int]


def _refuse_if_set(arg: int, mask: int, otherwise: int = RET_ALLOW) -> list[Insn]:
    """A block (entered on a matching syscall number): EPERM when ``arg & mask``, else
    ``otherwise``."""
    return [
        (_LD_W_ABS, 0, 0, _arg(arg)),
        (_JSET_K, 0, 1, mask),
        (_RET_K, 0, 0, EPERM),
        (_RET_K, 0, 0, otherwise),
    ]


def _refuse_values(arg: int, values: Sequence[int], *, mask: int = 0xFFFFFFFF) -> list[Insn]:
    """EPERM when ``arg & mask`` is one of ``values``."""
    block: list[Insn] = [(_LD_W_ABS, 0, 0, _arg(arg))]
    if mask != 0xFFFFFFFF:
        block.append((_AND_K, 0, 0, mask))
    n = len(values)
    for i, v in enumerate(values):
        block.append((_JEQ_K, n - i, 0, v))  # to the EPERM after the ALLOW
    return [*block, (_RET_K, 0, 0, RET_ALLOW), (_RET_K, 0, 0, EPERM)]


def _allow_values(arg: int, values: Sequence[int]) -> list[Insn]:
    """EPERM unless ``arg`` is one of ``values``."""
    block: list[Insn] = [(_LD_W_ABS, 0, 0, _arg(arg))]
    n = len(values)
    for i, v in enumerate(values):
        block.append((_JEQ_K, n - i, 0, v))
    return [*block, (_RET_K, 0, 0, EPERM), (_RET_K, 0, 0, RET_ALLOW)]


def _mknod_block(mode_arg: int) -> list[Insn]:
    """mknod: EPERM for block and character devices and for set-id bits; FIFOs,
    sockets and regular files pass (Landlock decides where)."""
    return [
        (_LD_W_ABS, 0, 0, _arg(mode_arg)),
        (_JSET_K, 4, 0, SETID_BITS),
        (_AND_K, 0, 0, S_IFMT),
        (_JEQ_K, 2, 0, S_IFCHR),
        (_JEQ_K, 1, 0, S_IFBLK),
        (_RET_K, 0, 0, RET_ALLOW),
        (_RET_K, 0, 0, EPERM),
    ]


def _allow_only(pairs: Sequence[tuple[int, int]]) -> list[Insn]:
    """EPERM unless every ``(arg, value)`` holds (low 32 bits of the argument)."""
    block: list[Insn] = []
    n = len(pairs)
    for i, (arg, value) in enumerate(pairs):
        # to the EPERM at the end: past the remaining (load, jump) pairs and the ALLOW
        block += [(_LD_W_ABS, 0, 0, _arg(arg)), (_JEQ_K, 0, 2 * (n - i - 1) + 1, value)]
    return [*block, (_RET_K, 0, 0, RET_ALLOW), (_RET_K, 0, 0, EPERM)]


def _prlimit_block() -> list[Insn]:
    """prlimit64(pid, resource, new, old): EPERM when it would set (``new`` not NULL) the
    limits of another process (``pid`` not 0); reading any, or setting its own, passes."""
    return [
        (_LD_W_ABS, 0, 0, _arg(0)),
        (_JEQ_K, 4, 0, 0),  # pid 0: this process
        (_LD_W_ABS, 0, 0, _arg(2)),
        (_JSET_K, 3, 0, 0xFFFFFFFF),
        (_LD_W_ABS, 0, 0, _arg(2) + 4),  # the pointer's high half
        (_JSET_K, 1, 0, 0xFFFFFFFF),
        (_RET_K, 0, 0, RET_ALLOW),
        (_RET_K, 0, 0, EPERM),
    ]


def _ipc_create_block(flag_arg: int) -> list[Insn]:
    """shmget/semget/msgget: EPERM when it could create (IPC_PRIVATE or IPC_CREAT);
    getting an existing object passes."""
    return [
        (_LD_W_ABS, 0, 0, _arg(0)),
        (_JEQ_K, 3, 0, IPC_PRIVATE),
        (_LD_W_ABS, 0, 0, _arg(flag_arg)),
        (_JSET_K, 1, 0, IPC_CREAT),
        (_RET_K, 0, 0, RET_ALLOW),
        (_RET_K, 0, 0, EPERM),
    ]


def _checks(
    walls: bool = False, unix_sockets: bool = True, supervised: bool = False
) -> dict[str, list[Insn]]:
    """Argument checks, per syscall name: a block that returns."""
    chmod = RET_USER_NOTIF if supervised else RET_ALLOW
    checks = {
        "unshare": _refuse_if_set(0, CLONE_NEW_NAMESPACES),
        "clone": _refuse_if_set(0, CLONE_NEW_NAMESPACES),
        "shmget": _ipc_create_block(2),
        "semget": _ipc_create_block(2),
        "msgget": _ipc_create_block(1),
        "mq_open": _refuse_if_set(1, O_CREAT),
        "personality": _allow_values(0, ALLOWED_PERSONALITIES),
        "mknod": _mknod_block(1),
        "mknodat": _mknod_block(2),
        "chmod": _refuse_if_set(1, SETID_BITS, chmod),
        "fchmod": _refuse_if_set(1, SETID_BITS, chmod),
        "fchmodat": _refuse_if_set(2, SETID_BITS, chmod),
        "fchmodat2": _refuse_if_set(2, SETID_BITS, chmod),
        "open": _refuse_if_set(2, SETID_BITS),
        "creat": _refuse_if_set(1, SETID_BITS),
        "openat": _refuse_if_set(3, SETID_BITS),
        "ioctl": _refuse_values(1, REFUSED_IOCTLS),
    }
    if supervised:  # guard's supervisor decides and performs them (:mod:`guard.sandbox.attrs`)
        for name in SUPERVISED_TIMES:
            checks[name] = [(_RET_K, 0, 0, RET_USER_NOTIF)]
    if walls:
        # another process's limits, priority, I/O priority or scheduling: only this one's
        # (pid 0). In guard's PID namespace no other process is visible; this holds
        # without one too (the fallback) and against whatever shares the namespace.
        checks["prlimit64"] = _prlimit_block()
        checks["setpriority"] = _allow_only([(0, PRIO_PROCESS), (1, 0)])
        checks["ioprio_set"] = _allow_only([(0, IOPRIO_WHO_PROCESS), (1, 0)])
        for name in ("sched_setattr", "sched_setscheduler", "sched_setparam", "sched_setaffinity",
                     "migrate_pages", "move_pages"):  # fmt: skip
            checks[name] = _allow_only([(0, 0)])
        # a Unix socket reaches a daemon that acts for the command (docker, tmux, an IDE,
        # an ssh-agent): only where it may (socketpair(2) is another syscall and stays
        # allowed); every family not listed is refused
        checks["socket"] = _socket_block(unix_sockets)
    return checks


def _socket_block(unix_sockets: bool) -> list[Insn]:
    """socket(family, type, protocol): allowed for :data:`INET_FAMILIES` (but ``AF_INET``
    with ``SOCK_PACKET``, which the kernel makes a packet socket), for ``AF_NETLINK`` with
    ``NETLINK_ROUTE`` and, with ``unix_sockets``, for ``AF_UNIX`` (else EPERM);
    EAFNOSUPPORT for every other family."""
    return [
        (_LD_W_ABS, 0, 0, _arg(0)),
        (_JEQ_K, 9, 0, AF_INET6),  # to the ALLOW
        (_JEQ_K, 0, 3, AF_INET),
        (_LD_W_ABS, 0, 0, _arg(1)),  # its type, without SOCK_NONBLOCK and SOCK_CLOEXEC
        (_AND_K, 0, 0, SOCK_TYPE_MASK),
        (_JEQ_K, 6, 5, SOCK_PACKET),  # to EAFNOSUPPORT, else to the ALLOW
        (_JEQ_K, 0, 1, AF_UNIX),
        (_RET_K, 0, 0, RET_ALLOW if unix_sockets else EPERM),
        (_JEQ_K, 0, 3, AF_NETLINK),  # to EAFNOSUPPORT
        (_LD_W_ABS, 0, 0, _arg(2)),
        (_JEQ_K, 0, 1, NETLINK_ROUTE),
        (_RET_K, 0, 0, RET_ALLOW),
        (_RET_K, 0, 0, ret_errno(errno.EAFNOSUPPORT)),
    ]


def program(
    arch: str | None = None, *, walls: bool = False, unix_sockets: bool = True,
    supervised: bool = False,
) -> list[Insn]:
    """The BPF program for ``arch`` (default: this machine), as (code, jt, jf, k).

    ``walls``: also refuse reaching into other processes (:data:`REFUSED_WALLS`,
    io_uring, their limits, scheduling, CPU affinity and memory placement), POSIX
    message queues, sockets of any family but :data:`INET_FAMILIES` and netlink's
    routing one and, unless ``unix_sockets``, Unix sockets. ``supervised``: the chmod and
    utime families go to guard's supervisor (a seccomp user notification), userfaultfd is
    refused."""
    arch = arch or machine()
    if arch not in _ARCHES:
        raise OSError(errno.ENOSYS, f"guard has no syscall table for {arch}")
    audit_arch, x32 = _ARCHES[arch]
    col = 0 if arch == "x86_64" else 1
    prog: list[Insn] = [
        (_LD_W_ABS, 0, 0, _ARCH),
        (_JEQ_K, 1, 0, audit_arch),
        (_RET_K, 0, 0, RET_KILL_PROCESS),  # another syscall ABI (i386, arm32)
        (_LD_W_ABS, 0, 0, _NR),
    ]
    if x32:
        prog += [(_JGE_K, 0, 1, 0x40000000), (_RET_K, 0, 0, RET_KILL_PROCESS)]
    prog += [(_JGT_K, 0, 1, HIGHEST_KNOWN), (_RET_K, 0, 0, ENOSYS)]
    refused = [*((n, EPERM) for n in REFUSED), *((n, EOPNOTSUPP) for n in REFUSED_XATTRS),
               *((n, ENOSYS) for n in UNSUPPORTED)]  # fmt: skip
    if walls:
        refused += [*((n, EPERM) for n in (*REFUSED_WALLS, *REFUSED_MQUEUE)),
                    *((n, ENOSYS) for n in UNSUPPORTED_WALLS)]  # fmt: skip
    if supervised:
        refused += [(n, EPERM) for n in REFUSED_SUPERVISED]
    for name, action in refused:
        nr = NUMBERS[name][col]
        if nr is not None:
            prog += [(_JEQ_K, 0, 1, nr), (_RET_K, 0, 0, action)]
    for name, block in _checks(walls, unix_sockets, supervised).items():
        nr = NUMBERS[name][col]
        if nr is not None:
            prog += [(_JEQ_K, 0, len(block), nr), *block]
    prog.append((_RET_K, 0, 0, RET_ALLOW))
    return prog


class _SockFprog(ctypes.Structure):
    _fields_ = (("len", ctypes.c_ushort), ("filter", ctypes.c_void_p))


def packed(insns: Sequence[Insn]) -> bytes:
    """The program as the kernel reads it: each ``struct sock_filter`` (u16 code, u8 jt, u8
    jf, u32 k) is one 64-bit little-endian word on these machines (no object per insn)."""
    return b"".join([(c | jt << 16 | jf << 24 | k << 32).to_bytes(8, "little")
                     for c, jt, jf, k in insns])  # fmt: skip


class _CapHeader(ctypes.Structure):
    _fields_ = (("version", ctypes.c_uint32), ("pid", ctypes.c_int))


class _CapData(ctypes.Structure):
    _fields_ = (
        ("effective", ctypes.c_uint32),
        ("permitted", ctypes.c_uint32),
        ("inheritable", ctypes.c_uint32),
    )


def _prctl(option: int, arg2: int = 0, what: str = "") -> int:
    zero = ctypes.c_ulong(0)
    res = int(_lib().prctl(ctypes.c_int(option), ctypes.c_ulong(arg2), zero, zero, zero))
    if res < 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what or f'prctl({option})'} failed: {os.strerror(err)}")
    return res


def set_no_new_privs() -> None:
    _prctl(PR_SET_NO_NEW_PRIVS, 1, "prctl(PR_SET_NO_NEW_PRIVS)")


class Filter:
    """The filter, assembled and ready for the kernel: built before a fork so that the
    child (the namespace's pid 1) only installs it."""

    __slots__ = ("fprog", "insns", "supervised", "unix_sockets", "walls")

    def __init__(
        self, *, walls: bool = False, unix_sockets: bool = True, supervised: bool = False
    ) -> None:
        self.walls, self.unix_sockets, self.supervised = walls, unix_sockets, supervised
        code = packed(program(walls=walls, unix_sockets=unix_sockets, supervised=supervised))
        self.insns = (ctypes.c_uint64 * (len(code) // 8)).from_buffer_copy(code)
        self.fprog = _SockFprog(len(code) // 8, ctypes.addressof(self.insns))

    def install(self) -> None:
        """Install it for this process and every process it starts. Irreversible. Sets
        no_new_privs first (required); OSError when the kernel refuses the filter. A
        ``supervised`` one goes through :func:`guard.sandbox.attrs.install` instead."""
        set_no_new_privs()
        if _lib().prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(self.fprog), 0, 0) != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"cannot install the seccomp filter: {os.strerror(err)}")


def _capget() -> tuple[int, int, int]:
    """(effective, permitted, inheritable) of this thread, 64-bit masks."""
    hdr = _CapHeader(_CAP_VERSION_3, 0)
    data = (_CapData * 2)()
    if _lib().capget(ctypes.byref(hdr), data) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"capget failed: {os.strerror(err)}")
    return (
        data[0].effective | data[1].effective << 32,
        data[0].permitted | data[1].permitted << 32,
        data[0].inheritable | data[1].inheritable << 32,
    )


def _last_cap() -> int:
    try:
        with open("/proc/sys/kernel/cap_last_cap", "rb") as f:
            return int(f.read().strip())
    except (OSError, ValueError):
        return 63


def drop_capabilities() -> bool:
    """Give up every capability for good; True when there were any to drop.

    A process without CAP_SETPCAP cannot shrink its bounding set, but it then
    holds no capability either, and no_new_privs (set here) keeps exec from
    granting any. Raises OSError when a step fails while privileged.
    """
    effective, permitted, _ = _capget()
    privileged = bool(effective & (1 << CAP_SETPCAP))
    if privileged:
        current = _prctl(PR_GET_SECUREBITS, 0, "prctl(PR_GET_SECUREBITS)")
        if current & _SECUREBITS != _SECUREBITS:
            _prctl(PR_SET_SECUREBITS, current | _SECUREBITS, "prctl(PR_SET_SECUREBITS)")
        for cap in range(_last_cap() + 1):
            _prctl(PR_CAPBSET_DROP, cap, f"dropping capability {cap} from the bounding set")
    _lib().prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)  # EINVAL on old kernels
    hdr = _CapHeader(_CAP_VERSION_3, 0)
    data = (_CapData * 2)()
    if _lib().capset(ctypes.byref(hdr), data) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"capset (dropping all capabilities) failed: {os.strerror(err)}")
    set_no_new_privs()
    left = _capget()
    if any(left):
        raise OSError(errno.EPERM, f"capabilities are still held after capset: {left}")
    return bool(permitted)
