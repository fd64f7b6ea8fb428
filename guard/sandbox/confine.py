"""Run one command confined: the helper between a launcher and the command, and its API.

As the helper (stdlib only, nothing slow to import; it runs before every
confined shell command of a plan-mode agent, and under ``guard run``; the entry
point is the tiny :mod:`guard.sandbox.run_confined`)::

    python3 -E -s -S /path/to/guard/sandbox/run_confined.py \\
        --plans DIR --tmpdir DIR --devices [--write DIR]... -- bash -c 'COMMAND'

it, in this order: (with ``--go-fd``) waits for its caller's go, touching nothing
before it; makes sure the private temporary directory exists and is
its own; restricts itself with Landlock (:mod:`guard.sandbox.landlock`: writes
only beneath the roots, regular files only in a plan directory, no device
nodes anywhere); drops every capability and installs the seccomp filter
(:mod:`guard.sandbox.seccomp`); closes every fd >= 3; restores the default
signal mask, SIGPIPE and SIGXFSZ; points ``TMPDIR``/``TMP``/``TEMP`` at the
private directory; and ``exec``s the command. The command keeps the caller's
pid, cwd, environment, stdin/stdout/stderr and terminal, so its exit status
and output are the command's own. If any step fails, the command is **not**
started: exit status 126 and one line on stderr (fail closed).

As a module, :func:`wrap_command` gives a host the shell text to run instead
of a command (the ``allow_confined`` verdict), and :func:`helper_argv` the argv.
"""

from __future__ import annotations

import errno
import os
import stat
import sys

TYPE_CHECKING = False
if TYPE_CHECKING or __package__:
    from guard.sandbox import landlock, seccomp
else:  # imported by run_confined.py: the siblings alone, not the package (start-up cost)
    import landlock
    import seccomp

if TYPE_CHECKING:
    from collections.abc import Sequence
    from pathlib import Path
    from typing import Any

#: Terminal devices: writable, with device ioctls allowed (what a terminal program needs).
TERMINAL_DEVICES = ("/dev/tty", "/dev/pts", "/dev/ptmx")
#: Writable sinks every shell script assumes.
SINK_DEVICES = ("/dev/null",)
NOT_STARTED = 126
#: The helper's entry point, run by path.
HELPER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "run_confined.py")

_USAGE = (
    "usage: confine.py [--plans DIR]... [--write PATH]... [--ioctl PATH]... [--devices]"
    " [--tmpdir DIR] [--abi N (0: no Landlock)] [--no-scope-signals] [--status-fd FD]"
    " [--go-fd FD] [--announce PREFIX] -- COMMAND [ARGS...]"
)


class _Args:
    __slots__ = (
        "abi", "announce", "command", "go_fd", "ioctl", "plans", "scope", "status_fd", "tmpdir",
        "writable",
    )  # fmt: skip

    def __init__(self) -> None:
        self.writable: list[str] = []
        self.plans: list[str] = []
        self.ioctl: list[str] = []
        self.abi: int | None = None
        self.scope = True
        self.status_fd: int | None = None
        self.go_fd: int | None = None
        self.announce: str | None = None
        self.tmpdir: str | None = None
        self.command: list[str] = []


_VALUED = (
    "--write", "--plans", "--ioctl", "--abi", "--status-fd", "--go-fd", "--announce", "--tmpdir",
)  # fmt: skip


def parse(argv: Sequence[str]) -> _Args:
    args = _Args()
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg == "--":
            args.command = list(argv[i + 1 :])
            if not args.command:
                raise ValueError("no command given after '--'")
            return args
        if arg == "--no-scope-signals":
            args.scope = False
        elif arg == "--devices":
            args.writable += SINK_DEVICES
            for dev in TERMINAL_DEVICES:
                if os.path.exists(dev):
                    args.writable.append(dev)
                    args.ioctl.append(dev)
        elif arg in _VALUED and i + 1 < len(argv):
            value = argv[i + 1]
            i += 1
            if arg == "--write":
                args.writable.append(value)
            elif arg == "--plans":
                args.plans.append(value)
            elif arg == "--ioctl":
                args.ioctl.append(value)
            elif arg == "--abi":
                args.abi = int(value)
            elif arg == "--status-fd":
                args.status_fd = int(value)
            elif arg == "--go-fd":
                args.go_fd = int(value)
            elif arg == "--tmpdir":
                args.tmpdir = value
            else:
                args.announce = value
        else:
            raise ValueError(f"unexpected argument {arg!r}")
        i += 1
    raise ValueError("missing '--' before the command")


def private_tmpdir(path: str) -> str:
    """Create ``path`` (mode 0700) if missing; refuse it unless it is a real directory of
    ours that nobody else may write (a planted symlink would widen the writable roots)."""
    parent = os.path.dirname(path)
    for p in (parent, path):
        try:
            os.mkdir(p, 0o700)
        except FileExistsError:
            p = p  # checked below like a new one (contextlib would cost start-up time)
        st = os.lstat(p)
        if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid() or st.st_mode & 0o022:
            raise OSError(
                errno.EPERM,
                f"{p} is not a private directory of uid {os.geteuid()} (a symlink, another"
                " owner, or writable by others); remove it",
            )
    return path


def remove_private_tmpdir(path: Path) -> bool:
    """Remove the private ``$TMPDIR`` a confined command ran with once it is done; False
    when the command left files in it (it is kept: the caller says where)."""
    try:
        path.rmdir()
    except FileNotFoundError:
        return True
    except OSError:
        return False
    return True


def plan_directory(path: str) -> str:
    """Create the plan directory ``path`` (canonical, absolute) and its missing parents
    before the restriction, so that the kernel can grant it: plan mode may create exactly
    that directory (``mkdir -p .openoxide/plans`` is allowed), and a rule needs an existing
    path. Nothing is created through a symlink: the deepest existing ancestor must be its
    own real path, and each created component must be a real directory."""
    path = os.path.abspath(path)
    missing: list[str] = []
    probe = path
    while not os.path.lexists(probe):
        missing.append(os.path.basename(probe))
        probe = os.path.dirname(probe)
    if os.path.realpath(probe) != probe or not stat.S_ISDIR(os.lstat(probe).st_mode):
        raise OSError(
            errno.EPERM,
            f"{probe} is not a real directory (a symlink or a file); the plan directory {path}"
            " must be reached through real directories only",
        )
    for name in reversed(missing):
        probe = os.path.join(probe, name)
        try:
            os.mkdir(probe, 0o755)
        except FileExistsError:
            probe = probe  # checked below like a new one (contextlib costs start-up time)
        if not stat.S_ISDIR(os.lstat(probe).st_mode):
            raise OSError(errno.EPERM, f"{probe} is not a real directory; refusing {path}")
    return path


def _report(status_fd: int | None, payload: dict[str, object]) -> None:
    if status_fd is None:
        return
    import json

    data = (json.dumps(payload) + "\n").encode()
    while data:
        n = os.write(status_fd, data)
        data = data[n:]


def read_status(fd: int) -> list[dict[str, Any]]:
    """The helper's status reports (:func:`_report`), read from ``fd`` until it execs the
    command or exits. A line that is not a JSON object is skipped: a caller that then
    finds no confirmation of the restriction refuses to go on."""
    import json

    chunks = []
    while data := os.read(fd, 65536):
        chunks.append(data)
    out: list[dict[str, Any]] = []
    for line in b"".join(chunks).decode("utf-8", "replace").splitlines():
        try:
            report = json.loads(line)
        except ValueError:
            continue
        if isinstance(report, dict):
            out.append(report)
    return out


def _fail(args: _Args, stage: str, exc: BaseException) -> int:
    _report(args.status_fd, {"ok": False, "stage": stage, "error": str(exc)})
    if args.status_fd is None:
        print(f"guard confine: {exc}; the command was NOT started", file=sys.stderr)
    return NOT_STARTED


def main(argv: Sequence[str] | None = None) -> int:
    try:
        args = parse(sys.argv[1:] if argv is None else argv)
    except ValueError as exc:
        print(f"guard confine: {exc}\n{_USAGE}", file=sys.stderr)
        return 2
    if args.go_fd is not None and not _await_go(args.go_fd):
        return NOT_STARTED  # the caller gave up (its monitor did not start): nothing done
    env = os.environ
    try:
        args.plans = [plan_directory(p) for p in args.plans]
    except OSError as exc:
        return _fail(args, "plans", exc)
    if args.tmpdir is not None:
        try:
            tmp = private_tmpdir(args.tmpdir)
        except OSError as exc:
            return _fail(args, "tmpdir", exc)
        args.writable.append(tmp)
        env["TMPDIR"] = env["TMP"] = env["TEMP"] = tmp
    enforcement: landlock.Enforcement | None = None
    if args.abi != 0:
        try:
            enforcement = landlock.restrict_self(
                args.writable, args.ioctl, plans=args.plans, abi=args.abi, scope_signals=args.scope
            )
        except OSError as exc:
            return _fail(args, "landlock", exc)
    hardening = []
    try:
        if seccomp.drop_capabilities():
            hardening.append("capabilities")
        seccomp.install_filter()
        hardening.append("seccomp")
    except OSError as exc:
        return _fail(args, "seccomp", exc)
    if enforcement is None:
        # Explicitly without Landlock (guard run --allow-unconfined on a kernel without it).
        _report(args.status_fd, {"ok": True, "stage": "unconfined", "hardening": hardening})
    else:
        enforcement.hardening = hardening
        report = enforcement.to_json()
        _report(args.status_fd, {"ok": True, "stage": "restricted", "enforcement": report})
        if args.announce is not None:
            # Said here, before exec, so that it comes before anything the command prints.
            for line in landlock.summary_lines(report):
                print(f"{args.announce}{line}", file=sys.stderr, flush=True)
    return _exec(args)


def _await_go(fd: int) -> bool:
    """Wait for the caller's go (one byte ``g`` on ``fd``), started early so that this
    interpreter's start-up overlaps the caller's (``guard run`` starts its monitor
    meanwhile). Nothing is created, restricted or run before it; EOF or anything else
    is a no: the command is not started."""
    byte = b""
    while True:
        try:
            byte = os.read(fd, 1)
        except InterruptedError:
            continue
        except OSError:
            pass
        break
    try:  # noqa: SIM105 (contextlib would cost start-up time)
        os.close(fd)
    except OSError:
        pass
    return byte == b"g"


def _exec(args: _Args) -> int:
    # Nothing opened before the restriction may reach the command, except the status
    # pipe, which closes on exec (and reports an exec failure).
    keep = (args.status_fd,) if args.status_fd is not None else ()
    landlock.close_fds_from(3, keep=keep)
    if args.status_fd is not None:
        os.set_inheritable(args.status_fd, False)
    seccomp.reset_signals()
    command = args.command
    try:
        os.execvp(command[0], command)
    except OSError as exc:
        code = 127 if exc.errno in (errno.ENOENT, errno.ENOTDIR) else NOT_STARTED
        msg = f"cannot run {command[0]!r}: {exc.strerror}"
        _report(args.status_fd, {"ok": False, "stage": "exec", "error": msg})
        if args.status_fd is None:
            print(f"guard confine: {msg}", file=sys.stderr)
        return code
    return 0  # pragma: no cover - execvp does not return


# ---------------------------------------------------------------------------
# The API for hosts and for guard run (runs in guard's process, not the helper's).


def available() -> str:
    """Why commands cannot be confined on this machine, or "" when they can."""
    if landlock.abi_version() < 1:
        return landlock.unavailable_reason() or "Landlock is not available"
    if not seccomp.supported():
        return f"guard has no seccomp syscall table for {seccomp.machine()}"
    return ""


def helper_argv(
    command: Sequence[str],
    *,
    plans: Sequence[str] = (),
    writable: Sequence[str] = (),
    ioctl: Sequence[str] = (),
    devices: bool = True,
    tmpdir: str | None = None,
    python: str | None = None,
    extra: Sequence[str] = (),
) -> list[str]:
    """The argv that runs ``command`` under this helper."""
    argv = [python or sys.executable, "-E", "-s", "-S", HELPER]
    for p in plans:
        argv += ["--plans", p]
    for w in writable:
        argv += ["--write", w]
    for d in ioctl:
        argv += ["--ioctl", d]
    if devices:
        argv.append("--devices")
    if tmpdir is not None:
        argv += ["--tmpdir", tmpdir]
    return [*argv, *extra, "--", *command]


def default_tmpdir(plans: str) -> str:
    """The private temporary directory of confined commands for one plan directory:
    ``<system tmp>/guard-confined-<uid>/<hash of the plan directory>``, kept between
    commands (like /tmp) but apart from everything else."""
    import hashlib
    import tempfile

    key = hashlib.sha256(os.path.realpath(plans).encode("utf-8", "surrogateescape")).hexdigest()
    base = os.path.join(tempfile.gettempdir(), f"guard-confined-{os.geteuid()}")
    return os.path.join(base, key[:16])


def wrap_command(
    command: str,
    *,
    writable: Sequence[str] = (),
    cwd: str,
    plans: Sequence[str] = (),
    tmpdir: str | None = None,
    shell: Sequence[str] = (),
    python: str | None = None,
) -> str:
    """The shell text a host runs instead of ``command`` so that it runs confined.

    ``plans``: plan directories (regular files only); ``writable``: other
    directories that stay writable (absolute, or relative to ``cwd``). A private
    temporary directory (:func:`default_tmpdir` of the first plan directory
    unless ``tmpdir`` is given), ``/dev/null`` and the terminal are writable too.
    ``shell``: the argv prefix that runs the text (default: ``bash -c``). The
    inner shell receives exactly ``command`` as one argument; every word is
    single-quoted. Raises ValueError for a command the kernel cannot pass on
    (a NUL character).
    """
    import shlex
    import shutil

    if "\0" in command:
        raise ValueError("the command contains a NUL character; no program can receive it")
    roots_plans = [os.path.join(cwd, p) for p in plans]
    roots = [os.path.join(cwd, w) for w in writable]
    if tmpdir is None and roots_plans:
        tmpdir = default_tmpdir(roots_plans[0])
    if not shell:
        shell = (shutil.which("bash") or "/bin/bash", "-c")
    argv = helper_argv(
        [*shell, command], plans=roots_plans, writable=roots, tmpdir=tmpdir, python=python
    )
    return " ".join(shlex.quote(a) for a in argv)

