"""The kernel layer: Landlock through ctypes, with no policy logic in it.

It receives writable roots and applies them to the calling process. Everything
else (which roots, why) is the runner's business (:mod:`guard.sandbox.runner`).

What a restricted process may do, and what it may not:

* read and execute anywhere (read rights are not handled, so never refused);
* create, write, truncate, remove, rename, link, make devices/fifos/sockets/
  symlinks only beneath a writable root;
* ``ioctl`` on devices only beneath a root granted ``ioctl`` (terminals);
* from ABI 6, send signals only to processes inside its own Landlock domain
  (it cannot kill the guard that supervises it).

Landlock does not cover chmod, chown, utime, setxattr, or file descriptors
opened before :func:`restrict_self`; the monitor and the runner's fd hygiene
cover those.

The module imports only the standard library so that it can also run as a
tiny, fast helper between the runner and the confined command::

    python -E -s -S /path/to/guard/sandbox/landlock.py \\
        --write DIR --write-file /dev/null --ioctl /dev/pts --status-fd 5 -- CMD ARGS...

The helper restricts itself, closes every fd >= 3, restores the default
signal mask, and ``execvp``s the command.
"""

from __future__ import annotations

import ctypes
import errno
import json
import os
import platform
import signal
import stat
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
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

SCOPE_SIGNAL = 1 << 1  # ABI 6

RIGHT_NAMES: dict[int, str] = {
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
    if sys.platform != "linux":
        return None
    return _SYSCALLS.get(platform.machine())


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
    if sys.platform != "linux":
        return f"Landlock is a Linux feature; this is {sys.platform}"
    nums = _numbers()
    if nums is None:
        return f"guard does not know the Landlock syscall numbers on {platform.machine()}"
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
            f"this kernel ({platform.release()}) was built without Landlock"
            " (CONFIG_SECURITY_LANDLOCK)"
        )
    if err == errno.EOPNOTSUPP:
        return (
            f"Landlock is built into this kernel ({platform.release()}) but disabled at boot;"
            " add 'landlock' to the lsm= kernel parameter"
        )
    return f"the Landlock probe failed: {os.strerror(err)}"


@dataclass(frozen=True, slots=True)
class Rule:
    """Allow ``rights`` beneath ``path`` (a directory) or on ``path`` (a file)."""

    path: str
    rights: int
    why: str = ""


@dataclass(slots=True)
class Enforcement:
    """What :func:`restrict_self` put in place, for the user."""

    abi: int
    handled: int
    scoped_signals: bool
    rules: list[Rule] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)
    tiocsti_blocked: bool = False

    def to_json(self) -> dict[str, object]:
        return {
            "abi": self.abi,
            "handled": right_names(self.handled),
            "scoped_signals": self.scoped_signals,
            "rules": [
                {"path": r.path, "rights": right_names(r.rights), "why": r.why} for r in self.rules
            ],
            "skipped": [{"path": p, "why": w} for p, w in self.skipped],
            "tiocsti_blocked": self.tiocsti_blocked,
        }


def summary_lines(report: dict[str, Any]) -> list[str]:
    """What an :meth:`Enforcement.to_json` report means, in a line or few, for people."""
    rights = ", ".join(report.get("handled", []))
    extra = "; signals to outside processes blocked" if report.get("scoped_signals") else ""
    if report.get("tiocsti_blocked"):
        extra += "; terminal input injection (TIOCSTI) blocked"
    lines = [f"Landlock ABI {report.get('abi')} enforced ({rights}){extra}"]
    for skipped in report.get("skipped", []):
        lines.append(f"not granted (missing): {skipped['path']}: {skipped['why']}")
    return lines


def _add_rule(sys_add: ctypes._CFunctionType, add_nr: int, ruleset_fd: int, rule: Rule) -> None:
    fd = os.open(rule.path, os.O_PATH | os.O_CLOEXEC)
    try:
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
    abi: int | None = None,
    scope_signals: bool = True,
) -> Enforcement:
    """Confine the calling process (and every process it starts) for good.

    ``writable``: directories (everything beneath them) or single files that
    stay writable. ``ioctl``: directories or device files where device ioctls
    stay allowed (terminals). Paths that do not exist are skipped and
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
    scoped = SCOPE_SIGNAL if (scope_signals and abi >= 6) else 0
    enforcement = Enforcement(abi=abi, handled=handled, scoped_signals=bool(scoped))

    rules: dict[str, int] = {}
    for path in writable:
        rules[path] = rules.get(path, 0) | handled
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


# ---------------------------------------------------------------------------
# Terminal injection: a tiny seccomp filter, because Landlock cannot help.
#
# TIOCSTI pushes bytes into a terminal's input queue: a confined process could
# type "rm -rf ~<Enter>" into the shell that started guard, on the terminal it
# inherited before the restriction. TIOCLINUX can do the same on a virtual
# console. The filter makes both ioctls fail with EPERM; nothing else changes.

PR_SET_SECCOMP = 22
SECCOMP_MODE_FILTER = 2
TIOCSTI = 0x5412
TIOCLINUX = 0x541C
_RET_ALLOW = 0x7FFF0000
_RET_EPERM = 0x00050000 | errno.EPERM
_LD_W_ABS, _JEQ_K, _RET_K = 0x20, 0x15, 0x06
# (audit arch, ioctl syscall numbers) per architecture guard knows.
_IOCTL_NRS: dict[str, list[tuple[int, tuple[int, ...]]]] = {
    # native x86_64 and x32 (0x40000000 | 514), then i386 compat
    "x86_64": [(0xC000003E, (16, 0x40000000 | 514)), (0x40000003, (54,))],
    # native aarch64, then arm compat
    "aarch64": [(0xC00000B7, (29,)), (0x40000028, (54,))],
}


class _SockFilter(ctypes.Structure):
    _fields_ = (
        ("code", ctypes.c_uint16),
        ("jt", ctypes.c_uint8),
        ("jf", ctypes.c_uint8),
        ("k", ctypes.c_uint32),
    )


class _SockFprog(ctypes.Structure):
    _fields_ = (("len", ctypes.c_ushort), ("filter", ctypes.POINTER(_SockFilter)))


def _tiocsti_program(machine: str) -> list[tuple[int, int, int, int]]:
    """The BPF program, as (code, jt, jf, k); jumps resolved from labels."""
    arches = _IOCTL_NRS[machine]
    # Layout: [ld arch] then per arch [jeq arch ? next : skip], [ld nr], [jeq nr...],
    # shared CHECK block, ALLOW, DENY.
    prog: list[tuple[int | str, object, object, int]] = [(_LD_W_ABS, 0, 0, 4)]
    for i, (arch, nrs) in enumerate(arches):
        nxt = f"arch{i + 1}" if i + 1 < len(arches) else "allow"
        prog.append((_JEQ_K, 0, nxt, arch))
        prog.append((_LD_W_ABS, 0, 0, 0))
        for j, nr in enumerate(nrs):
            last = j == len(nrs) - 1
            prog.append((_JEQ_K, "check", "allow" if last else 0, nr))
        if i + 1 < len(arches):
            prog.append(("label", f"arch{i + 1}", 0, 0))
            prog.append((_LD_W_ABS, 0, 0, 4))
    prog.append(("label", "check", 0, 0))
    prog.append((_LD_W_ABS, 0, 0, 24))  # low 32 bits of args[1], the ioctl request
    prog.append((_JEQ_K, "deny", 0, TIOCSTI))
    prog.append((_JEQ_K, "deny", "allow", TIOCLINUX))
    prog.append(("label", "allow", 0, 0))
    prog.append((_RET_K, 0, 0, _RET_ALLOW))
    prog.append(("label", "deny", 0, 0))
    prog.append((_RET_K, 0, 0, _RET_EPERM))

    labels: dict[str, int] = {}
    code: list[tuple[int | str, object, object, int]] = []
    for ins in prog:
        if ins[0] == "label":
            labels[str(ins[1])] = len(code)
        else:
            code.append(ins)
    out: list[tuple[int, int, int, int]] = []
    for pc, (op, jt, jf, k) in enumerate(code):

        def rel(target: object, pc: int = pc) -> int:
            if isinstance(target, int):
                return target
            return labels[str(target)] - (pc + 1)

        out.append((int(op), rel(jt), rel(jf), k))
    return out


def tiocsti_filter_supported() -> bool:
    """Whether :func:`deny_terminal_injection` has a syscall table for this machine."""
    machine = platform.machine()
    machine = "aarch64" if machine == "arm64" else machine
    return sys.platform == "linux" and machine in _IOCTL_NRS


def deny_terminal_injection() -> bool:
    """Make TIOCSTI and TIOCLINUX fail with EPERM for this process and its children.

    Returns False (and changes nothing) on an architecture guard has no table
    for. Needs no_new_privs, which :func:`restrict_self` sets. Irreversible.
    """
    if not tiocsti_filter_supported():
        return False
    machine = "aarch64" if platform.machine() == "arm64" else platform.machine()
    if _libc is None:
        _syscall()
    assert _libc is not None
    if _libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        err = ctypes.get_errno()
        raise LandlockError(err, f"prctl(PR_SET_NO_NEW_PRIVS) failed: {os.strerror(err)}")
    program = _tiocsti_program(machine)
    filters = (_SockFilter * len(program))(*[_SockFilter(*ins) for ins in program])
    fprog = _SockFprog(len(program), filters)
    if _libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(fprog), 0, 0) != 0:
        err = ctypes.get_errno()
        raise LandlockError(err, f"cannot install the TIOCSTI filter: {os.strerror(err)}")
    return True



def close_fds_from(first: int = 3, keep: Sequence[int] = ()) -> None:
    """Close every file descriptor >= ``first`` except ``keep``."""
    limit = os.sysconf("SC_OPEN_MAX") if hasattr(os, "sysconf") else 1 << 20
    start = first
    for fd in sorted(k for k in keep if k >= first):
        os.closerange(start, fd)
        start = fd + 1
    os.closerange(start, max(limit, start))


# ---------------------------------------------------------------------------
# The helper: restrict, close fds, exec.


def _usage() -> str:
    return (
        "usage: landlock.py [--write PATH]... [--ioctl PATH]... [--abi N (0: no Landlock)]"
        " [--no-scope-signals] [--status-fd FD] [--announce PREFIX] -- COMMAND [ARGS...]"
    )


@dataclass(slots=True)
class _Args:
    writable: list[str] = field(default_factory=list)
    ioctl: list[str] = field(default_factory=list)
    abi: int | None = None
    scope: bool = True
    status_fd: int | None = None
    announce: str | None = None
    command: list[str] = field(default_factory=list)


def _parse(argv: list[str]) -> _Args:
    args = _Args()
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg == "--":
            args.command = argv[i + 1 :]
            return args
        if arg == "--no-scope-signals":
            args.scope = False
            i += 1
            continue
        if arg in ("--write", "--ioctl", "--abi", "--status-fd", "--announce") and i + 1 < len(
            argv
        ):
            value = argv[i + 1]
            if arg == "--write":
                args.writable.append(value)
            elif arg == "--ioctl":
                args.ioctl.append(value)
            elif arg == "--abi":
                args.abi = int(value)
            elif arg == "--status-fd":
                args.status_fd = int(value)
            else:
                args.announce = value
            i += 2
            continue
        raise ValueError(f"unexpected argument {arg!r}")
    raise ValueError("missing '--' before the command")


def _report(status_fd: int | None, payload: dict[str, object]) -> None:
    if status_fd is None:
        return
    data = (json.dumps(payload) + "\n").encode()
    while data:
        n = os.write(status_fd, data)
        data = data[n:]


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    try:
        parsed = _parse(args)
    except ValueError as exc:
        print(f"guard sandbox: {exc}\n{_usage()}", file=sys.stderr)
        return 2
    writable, ioctl, abi, status_fd, command = (
        parsed.writable,
        parsed.ioctl,
        parsed.abi,
        parsed.status_fd,
        parsed.command,
    )
    if not command:
        print(f"guard sandbox: no command given\n{_usage()}", file=sys.stderr)
        return 2
    if abi == 0:
        # Explicitly unconfined (guard run --allow-unconfined on a kernel
        # without Landlock): the terminal filter, fd and signal hygiene only.
        try:
            tiocsti = deny_terminal_injection()
        except (LandlockError, OSError):
            tiocsti = False
        _report(status_fd, {"ok": True, "stage": "unconfined", "tiocsti_blocked": tiocsti})
    else:
        try:
            enforcement = restrict_self(writable, ioctl, abi=abi, scope_signals=parsed.scope)
        except (LandlockError, OSError) as exc:
            _report(status_fd, {"ok": False, "stage": "landlock", "error": str(exc)})
            if status_fd is None:
                print(f"guard sandbox: {exc}; the command was NOT started", file=sys.stderr)
            return 126
        try:
            enforcement.tiocsti_blocked = deny_terminal_injection()
        except (LandlockError, OSError) as exc:
            _report(status_fd, {"ok": False, "stage": "seccomp", "error": str(exc)})
            if status_fd is None:
                print(f"guard sandbox: {exc}; the command was NOT started", file=sys.stderr)
            return 126
        report = enforcement.to_json()
        _report(status_fd, {"ok": True, "stage": "restricted", "enforcement": report})
        if parsed.announce is not None:
            # Said here, before exec, so that it comes before anything the command prints.
            for line in summary_lines(report):
                print(f"{parsed.announce}{line}", file=sys.stderr, flush=True)
    # Nothing opened before the restriction may reach the command, except the
    # status pipe, which closes on exec (and reports an exec failure).
    close_fds_from(3, keep=(status_fd,) if status_fd is not None else ())
    if status_fd is not None:
        os.set_inheritable(status_fd, False)
    signal.pthread_sigmask(signal.SIG_SETMASK, set())
    # Python ignores SIGPIPE and SIGXFSZ; the command expects the defaults.
    for sig in (signal.SIGPIPE, signal.SIGXFSZ):
        signal.signal(sig, signal.SIG_DFL)
    try:
        os.execvp(command[0], command)
    except OSError as exc:
        code = 127 if exc.errno in (errno.ENOENT, errno.ENOTDIR) else 126
        _report(
            status_fd,
            {"ok": False, "stage": "exec", "error": f"cannot run {command[0]!r}: {exc.strerror}"},
        )
        if status_fd is None:
            print(f"guard sandbox: cannot run {command[0]!r}: {exc.strerror}", file=sys.stderr)
        return code
    return 0  # pragma: no cover - execvp does not return


if __name__ == "__main__":
    sys.exit(main())
