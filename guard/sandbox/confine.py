"""Run one command confined: the helper between a launcher and the command, and its API.

As the helper (stdlib only, nothing slow to import; it runs before every
confined shell command of a plan-mode agent, under ``guard run`` and around the
confined MCP server; the entry point is the tiny :mod:`guard.sandbox.run_confined`)::

    python3 -E -s -S /path/to/guard/sandbox/run_confined.py \\
        --plans DIR --private-tmp --devices --namespaces --walls [--write DIR]... \\
        -- bash -c 'COMMAND'

it, in this order: (with ``--go-fd``) waits for its caller's go, touching nothing
before it; checks the plan directory (:func:`check_plan_directory`: only regular
files whose every link is in it, else it refuses, naming the file); makes the
private temporary directory (``--private-tmp``: fresh, at an unpredictable
path, removed afterwards); then starts the command in one of two ways.

With ``--namespaces`` (:mod:`guard.sandbox.namespaces`), this process (the
*outer* one) stays in the host's network, mount and PID namespaces; it makes a
PID namespace (and, unless root, a user namespace) and forks **pid 1** of it,
which makes new mount, network and IPC namespaces, turns every mount read-only
but the writable roots, mounts its own ``/proc`` and (``--private-tmp``) a tmpfs
for ``$TMPDIR``, brings the loopback up, makes a listener on 127.0.0.1 for guard's
egress proxy and hands it out over a socket pair (``--listen PORT --egress-fd FD``
to a caller that serves it; ``--egress SPEC``: to this process, which serves it
from a thread started before the PID namespace), restricts itself (Landlock,
capability drop, seccomp: the second wall), starts the command and waits: it
forwards the signals the outer process passes on, reaps orphans, and when the
command ends it ends, so the kernel ends every process left in the namespace.
Without ``--namespaces`` (the fallback where the kernel cannot make them) the
outer process forks the command, which restricts itself and execs.

Either way the outer process forwards the signals it is sent (not those a
terminal sends the whole foreground group: the command gets its own), waits,
removes the private temporary directory, and exits as the command did: with
its exit status, or killed by the same signal. The command keeps the caller's
cwd, environment, stdin/stdout/stderr, terminal and process group. Before exec
it closes every fd >= 3, restores the default signal mask, SIGPIPE and SIGXFSZ,
and points ``TMPDIR``/``TMP``/``TEMP`` at the private directory. If any step
fails, the command is **not** started: exit status 126 and one line on stderr
(fail closed), or a JSON report on ``--status-fd``.

As a module, :func:`wrap_command` gives a host the shell text to run instead
of a command (the ``allow_confined`` verdict), :func:`helper_argv` the argv,
and :func:`walls` what this machine can enforce.
"""

from __future__ import annotations

import errno
import os
import stat
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    import ctypes

    from guard.sandbox import landlock, namespaces, seccomp
elif __package__:
    from guard.sandbox import _ffi as ctypes
    from guard.sandbox import landlock, namespaces, seccomp
else:  # imported by run_confined.py: the siblings alone, not the package (start-up cost)
    import _ffi as ctypes
    import landlock
    import namespaces
    import seccomp
if TYPE_CHECKING:  # the C module under it is all the helper imports (``signal`` costs ~9 ms)
    import signal as _signal
else:
    import _signal

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
#: Prefix of the private temporary directories ``--private-tmp`` makes.
TMP_PREFIX = "guard-confined-"

# Signals forwarded to the command (by the outer process, and by pid 1 inside).
FORWARDED = (
    _signal.SIGINT, _signal.SIGTERM, _signal.SIGHUP, _signal.SIGQUIT, _signal.SIGUSR1,
    _signal.SIGUSR2, _signal.SIGWINCH, _signal.SIGALRM,
)  # fmt: skip
_WATCHED = (*FORWARDED, _signal.SIGCHLD)
SI_KERNEL, SI_QUEUE = 0x80, -1

_USAGE = (
    "usage: confine.py [--plans DIR]... [--write PATH]... [--ioctl PATH]... [--devices]"
    " [--tmpdir DIR | --private-tmp] [--namespaces] [--walls] [--socket PATH]..."
    " [--listen PORT --egress-fd FD | --egress SPEC] [--abi N (0: no Landlock)] [--hide PATH]..."
    " [--no-scope-signals]"
    " [--status-fd FD] [--go-fd FD] [--announce PREFIX] -- COMMAND [ARGS...]\n"
    "       confine.py --probe"
)


class _Args:
    __slots__ = (
        "abi", "announce", "command", "command_missing", "egress", "egress_fd", "filter",
        "go_fd", "hide", "ioctl", "listen", "namespaces", "plans", "private_tmp", "scope",
        "sockets", "status_fd", "tmpdir", "walls", "writable",
    )  # fmt: skip

    def __init__(self) -> None:
        self.writable: list[str] = []
        self.plans: list[str] = []
        self.ioctl: list[str] = []
        self.sockets: list[str] = []
        self.hide: list[str] = []  # covered in the namespaces' view (guard's audit key)
        self.abi: int | None = None
        self.scope = True
        self.status_fd: int | None = None
        self.go_fd: int | None = None
        self.egress_fd: int | None = None
        self.egress: str | None = None
        self.listen: int | None = None
        self.announce: str | None = None
        self.tmpdir: str | None = None
        self.private_tmp = False
        self.namespaces = False
        self.walls = False
        self.command: list[str] = []
        self.command_missing = False
        #: the seccomp filter, assembled before pid 1 is forked (so that it only installs it)
        self.filter: seccomp.Filter | None = None


_VALUED = (
    "--write", "--plans", "--ioctl", "--abi", "--status-fd", "--go-fd", "--announce", "--tmpdir",
    "--socket", "--listen", "--egress-fd", "--egress", "--hide",
)  # fmt: skip
_FLAGS = {
    "--no-scope-signals": "scope", "--private-tmp": "private_tmp", "--namespaces": "namespaces",
    "--walls": "walls",
}  # fmt: skip


def parse(argv: Sequence[str]) -> _Args:
    args = _Args()
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg == "--":
            args.command = list(argv[i + 1 :])
            if not args.command:
                raise ValueError("no command given after '--'")
            if args.egress is not None and (args.listen is not None or args.egress_fd is not None):
                raise ValueError("--egress serves the listener here: not with --listen/--egress-fd")
            if args.listen is not None and args.egress_fd is None:
                raise ValueError("--listen needs --egress-fd (where the listener goes)")
            if (args.listen is not None or args.egress is not None) and not args.namespaces:
                raise ValueError("an egress listener needs --namespaces (a network to listen in)")
            return args
        if arg in _FLAGS:
            setattr(args, _FLAGS[arg], arg != "--no-scope-signals")
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
            elif arg == "--socket":
                args.sockets.append(value)
            elif arg == "--hide":
                args.hide.append(value)
            elif arg == "--tmpdir":
                args.tmpdir = value
            elif arg == "--announce":
                args.announce = value
            elif arg == "--egress":
                args.egress = value
            else:
                number = int(value)
                if arg == "--abi":
                    args.abi = number
                elif arg == "--status-fd":
                    args.status_fd = number
                elif arg == "--go-fd":
                    args.go_fd = number
                elif arg == "--egress-fd":
                    args.egress_fd = number
                else:
                    args.listen = number
        else:
            raise ValueError(f"unexpected argument {arg!r}")
        i += 1
    raise ValueError("missing '--' before the command")


# ---------------------------------------------------------------------------
# Directories the command writes: checked or made before anything starts.


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


def fresh_tmpdir(base: str | None = None) -> str:
    """A new, empty directory (mode 0700) at an unpredictable path under ``base`` (default:
    ``$TMPDIR`` when it is an absolute directory, else ``/tmp``): nothing can have been
    planted in it (a hard link to a project file, a FIFO), and it is never reused."""
    if base is None:
        base = os.environ.get("TMPDIR") or "/tmp"
        if not os.path.isabs(base) or not os.path.isdir(base):
            base = "/tmp"
    for _ in range(16):
        path = os.path.join(base, TMP_PREFIX + os.urandom(9).hex())
        try:
            os.mkdir(path, 0o700)
        except FileExistsError:
            continue
        return os.path.realpath(path)
    raise OSError(errno.EEXIST, f"cannot make a fresh private directory in {base}")


def remove_tree(path: str) -> bool:
    """Remove ``path`` and everything in it, never following a symlink (each directory is
    pinned with O_NOFOLLOW and emptied through its descriptor; modes the command set are
    undone first). True when it is gone."""
    try:
        os.rmdir(path)
        return True
    except FileNotFoundError:
        return True
    except OSError:
        pass
    try:
        fd = _open_dir(path, None)
        try:
            _empty(fd, 0)
        finally:
            os.close(fd)
        os.rmdir(path)
    except OSError:
        return False
    return True


def _open_dir(name: str, dir_fd: int | None) -> int:
    """Open the directory ``name`` for listing, never through a symlink, after giving it
    mode 0700 (the command may have taken its owner's rights away)."""
    flags = os.O_CLOEXEC | os.O_NOFOLLOW | os.O_DIRECTORY
    pin = os.open(name, os.O_PATH | flags, dir_fd=dir_fd)
    try:
        os.chmod(f"/proc/self/fd/{pin}", 0o700)
        return os.open(".", os.O_RDONLY | flags, dir_fd=pin)
    finally:
        os.close(pin)


def _empty(fd: int, depth: int) -> None:
    if depth > 256:
        raise OSError(errno.ELOOP, "directories nested too deep to remove")
    with os.scandir(fd) as listing:
        entries = [(e.name, e.is_dir(follow_symlinks=False)) for e in listing]
    for name, is_dir in entries:
        if is_dir:
            sub = _open_dir(name, fd)
            try:
                _empty(sub, depth + 1)
            finally:
                os.close(sub)
            os.rmdir(name, dir_fd=fd)
        else:
            os.unlink(name, dir_fd=fd)


def remove_private_tmpdir(path: Path) -> bool:
    """Remove the private ``$TMPDIR`` a confined command ran with once it is done, whatever
    it left there (symlinks are removed, never followed); False when that failed (the
    caller says where it is)."""
    return remove_tree(str(path))


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


_KINDS = {
    stat.S_IFDIR: "a directory", stat.S_IFLNK: "a symlink", stat.S_IFIFO: "a FIFO",
    stat.S_IFSOCK: "a socket", stat.S_IFCHR: "a character device", stat.S_IFBLK: "a block device",
}  # fmt: skip


def check_plan_directory(path: str) -> None:
    """Refuse (OSError naming the file) anything in the plan directory that could lead a
    confined command out of it: any entry but a regular file (a symlink, a FIFO a process
    outside reads, a socket, a device, a directory), and a regular file with a hard link
    outside the plan directory (planted while building: writing it would write the other
    name, ``src/app.py``). Links between two names inside it are fine."""
    links: dict[tuple[int, int], list[str]] = {}
    nlink: dict[tuple[int, int], int] = {}
    with os.scandir(path) as entries:
        for entry in entries:
            st = entry.stat(follow_symlinks=False)
            if not stat.S_ISREG(st.st_mode):
                kind = _KINDS.get(stat.S_IFMT(st.st_mode), "not a regular file")
                raise OSError(
                    errno.EPERM,
                    f"{entry.path} is {kind}; only regular plan files may be in the plan"
                    " directory while a command runs confined (a link, FIFO or device there"
                    " could lead out of it). Remove it",
                )
            key = (st.st_dev, st.st_ino)
            links.setdefault(key, []).append(entry.path)
            nlink[key] = st.st_nlink
    for key, names in links.items():
        if nlink[key] > len(names):
            raise OSError(
                errno.EPERM,
                f"{names[0]} has {nlink[key]} hard links, {nlink[key] - len(names)} of them"
                " outside the plan directory: a confined command writing it would change the"
                " other file too. Replace it with a copy of its own"
                f" (cp {names[0]} {names[0]}.copy && mv {names[0]}.copy"
                f" {names[0]}) or remove it",
            )


# ---------------------------------------------------------------------------
# The helper.


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
        print(f"guard confine: {exc}; the command was NOT started", file=sys.stderr, flush=True)
    return NOT_STARTED


def main(argv: Sequence[str] | None = None) -> int:
    given = sys.argv[1:] if argv is None else argv
    if list(given) == ["--probe"]:
        why = namespaces.unavailable()
        print(why or "ok")
        return 1 if why else 0
    try:
        args = parse(given)
    except ValueError as exc:
        print(f"guard confine: {exc}\n{_USAGE}", file=sys.stderr)
        return 2
    if args.go_fd is not None and not _await_go(args.go_fd):
        return NOT_STARTED  # the caller gave up (its monitor did not start): nothing done
    try:
        args.plans = [plan_directory(p) for p in args.plans]
        for p in args.plans:
            check_plan_directory(p)
    except OSError as exc:
        return _fail(args, "plans", exc)
    made = tmp = None
    try:
        if args.private_tmp and not args.namespaces:  # in namespaces: a tmpfs of its own
            made = tmp = fresh_tmpdir()
        elif args.tmpdir is not None:
            tmp = private_tmpdir(args.tmpdir)
    except OSError as exc:
        return _fail(args, "tmpdir", exc)
    if tmp is not None:
        args.writable.append(tmp)
        os.environ["TMPDIR"] = os.environ["TMP"] = os.environ["TEMP"] = tmp
    try:
        code = _start(args)
    finally:
        if made is not None and not remove_tree(made):
            print(f"guard confine: cannot remove the command's TMPDIR {made}", file=sys.stderr)
    return _die_of(-code) if code < 0 else code


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


def _start(args: _Args) -> int:
    """The outer process: start the command (in namespaces, or in the fallback a child
    that restricts itself), forward signals, wait, and return its exit status, or minus
    the signal that killed it (this process then dies of it, once it has cleaned up)."""
    _signal.pthread_sigmask(_signal.SIG_BLOCK, _WATCHED)
    if not args.namespaces:
        # The fallback: the command's own process restricts itself and execs; this one
        # stays as it is, to remove the private TMPDIR (in a directory no root grants).
        pid = os.fork()
        if pid == 0:  # pragma: no cover - replaced by the command
            code = NOT_STARTED
            try:
                refused = _restrict(args, [])
                code = _exec(args) if refused is None else refused
            finally:
                os._exit(code)
        for fd in (args.status_fd, args.egress_fd):
            if fd is not None:
                os.close(fd)
        return _ended(_wait(pid, False), b"")
    masks: list[str] = []
    if args.sockets and args.walls:
        allowed = {os.path.realpath(s) for s in args.sockets}
        masks = [s for s in namespaces.listening_sockets() if os.path.realpath(s) not in allowed]
    try:
        args.filter = seccomp.Filter(walls=args.walls, unix_sockets=bool(args.sockets)
                                     or not args.walls)  # fmt: skip
    except OSError as exc:
        return _fail(args, "seccomp", exc)
    channel: int | None = None
    if args.egress is not None:
        try:
            channel = _egress(args)
        except (OSError, ImportError) as exc:
            return _fail(args, "egress", exc)
    try:
        namespaces.enter_user()  # while this process is single-threaded, as it must be
        if channel is not None:
            # the proxy's thread, started before the PID namespace (after it, this thread
            # could start none): it waits for pid 1's listener and serves it when asked
            import _thread

            _thread.start_new_thread(_serve_when_asked, (args.egress or "", channel))
        namespaces.enter_pid()
    except OSError as exc:
        return _fail(args, "namespaces", exc)
    fate_r, fate_w = os.pipe()  # pid 1 -> here: the signal that killed the command
    life_r, life_w = os.pipe()  # held here: pid 1 sees it close when this process dies
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child (measured through the tests' commands)
        code = NOT_STARTED
        try:
            os.close(fate_r)
            os.close(life_w)
            code = _init(args, masks, fate_w, life_r)
        except BaseException as exc:  # a child never returns into main()
            try:
                code = _fail(args, "start", exc)
            except BaseException:
                code = NOT_STARTED
        finally:
            os._exit(code)
    os.close(fate_w)
    os.close(life_r)
    for fd in (args.status_fd, args.egress_fd):
        if fd is not None:
            os.close(fd)  # theirs now: a reader sees end of file when they are done
    status = _wait(pid, True)
    os.close(life_w)
    try:
        fate = os.read(fate_r, 1)
    finally:
        os.close(fate_r)
    return _ended(status, fate)


def _ended(status: int, fate: bytes) -> int:
    """The command's exit status from its wait status, or minus the signal that killed it
    (``fate``: that signal, as pid 1 of the namespace passed it on)."""
    if fate:
        return -fate[0]
    if os.WIFSIGNALED(status):
        return -os.WTERMSIG(status)
    return os.waitstatus_to_exitcode(status) & 0xFF


def _egress_module() -> Any:
    if TYPE_CHECKING or __package__:
        from guard.sandbox import egress
    else:  # the helper: the sibling by its plain name (stdlib only at import)
        import egress
    return egress


def _egress(args: _Args) -> int:
    """The channel pid 1 sends the egress listener over (``--egress SPEC``: this process
    serves it); the proxy variables go into the environment."""
    egress = _egress_module()
    ours, theirs = namespaces.socket_pair()
    args.listen = egress.PROXY_PORT
    args.egress_fd = theirs
    os.environ.update(egress.proxy_env(egress.PROXY_PORT))
    return ours


def _serve_when_asked(spec: str, channel: int) -> None:
    """The egress proxy's thread: receive the listener pid 1 makes, and serve it once the
    first connection waits on it: a command that never connects never pays for the proxy
    (threads, sockets, the policy). Anything that goes wrong closes the listener:
    connections are refused. Nothing comes when pid 1 failed first (it says why)."""
    listener = namespaces.receive_fd(channel)
    os.close(channel)
    if listener is None:
        return
    try:
        import select

        select.select([listener], [], [])
        import socket

        egress = _egress_module()
        proxy = egress.EgressProxy(egress.EgressSpec.from_argv_value(spec))
        proxy.serve(socket.socket(fileno=listener))
    except BaseException as exc:
        try:  # noqa: SIM105 (contextlib would cost start-up time)
            os.close(listener)
        except OSError:
            pass
        print(f"guard confine: the egress proxy cannot serve: {exc}", file=sys.stderr, flush=True)


def _wait(pid: int, queue: bool) -> int:
    """Wait for the child ``pid``, forwarding every signal sent to this process by another
    process (a terminal's signals reach the whole foreground group, the command included:
    they are not repeated). To pid 1 of the namespace (``queue``) a forwarded signal goes
    with sigqueue(3), which is how it tells it from one sent to it directly."""
    sigqueue = _lib().sigqueue if queue else None
    while True:
        info = _signal.sigwaitinfo(_WATCHED)
        if info.si_signo == _signal.SIGCHLD:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done == pid:
                return status
            continue
        if info.si_code == SI_KERNEL:
            continue
        if sigqueue is not None:
            sigqueue(pid, info.si_signo, ctypes.c_long(0))
        else:
            try:  # noqa: SIM105 - not reaped yet, so the pid is still the child's
                os.kill(pid, info.si_signo)
            except ProcessLookupError:
                pass


def _init(args: _Args, masks: list[str], fate_w: int, life_r: int) -> int:
    """Pid 1 of the new PID namespace: the namespaces, the walls, then the command."""
    if not namespaces.die_with_parent(life_r):
        return NOT_STARTED
    os.close(life_r)
    tmpfs = "/dev/shm" if args.private_tmp and args.tmpdir is None else None
    try:
        skipped = namespaces.enter_inner(
            [*args.plans, *args.writable], mask_sockets=masks, tmpfs=tmpfs, hide=args.hide
        )
    except OSError as exc:
        return _fail(args, "namespaces", exc)
    if tmpfs is not None:
        args.writable.append(tmpfs)
        os.environ["TMPDIR"] = os.environ["TMP"] = os.environ["TEMP"] = tmpfs
    if args.listen is not None and args.egress_fd is not None:
        try:
            listener = namespaces.listen_loopback(args.listen)
            try:
                namespaces.send_fd(args.egress_fd, listener)
            finally:
                os.close(listener)
        except OSError as exc:
            return _fail(args, "egress", exc)
    if args.egress_fd is not None:
        os.close(args.egress_fd)
        args.egress_fd = None
    spaces = ["mount", "network", "pid", "ipc"]
    code = _restrict(args, spaces if os.geteuid() == 0 else ["user", *spaces], skipped)
    if code is not None:
        return code
    command = _spawn(args)
    if command is None:
        return 127 if args.command_missing else NOT_STARTED
    while True:
        info = _signal.sigwaitinfo(_WATCHED)
        if info.si_signo == _signal.SIGCHLD:
            ended = None
            while True:  # reap the command and every orphan handed to pid 1
                try:
                    pid, status = os.waitpid(-1, os.WNOHANG)
                except ChildProcessError:
                    break
                if pid == 0:
                    break
                if pid == command:
                    ended = status
            if ended is None:
                continue
            if os.WIFSIGNALED(ended):
                os.write(fate_w, bytes([os.WTERMSIG(ended)]))
                return 128 + os.WTERMSIG(ended)
            return os.waitstatus_to_exitcode(ended) & 0xFF
        if info.si_code == SI_QUEUE and info.si_pid == 0:  # passed on by the outer process
            try:  # noqa: SIM105 - not reaped yet, so the pid is still the command's
                os.kill(command, info.si_signo)
            except ProcessLookupError:
                pass


def _restrict(args: _Args, spaces: list[str], skipped: Sequence[str] = ()) -> int | None:
    """Landlock, the capability drop and the seccomp filter on this process; None when all
    of them hold (reported on the status fd and announced), else the exit status."""
    enforcement: landlock.Enforcement | None = None
    if args.abi != 0:
        try:
            enforcement = landlock.restrict_self(
                args.writable, args.ioctl, plans=args.plans, abi=args.abi,
                scope_signals=args.scope, scope_abstract_unix=args.walls,
            )  # fmt: skip
        except OSError as exc:
            return _fail(args, "landlock", exc)
    hardening = []
    unix = bool(args.sockets) or not args.walls
    try:
        if seccomp.drop_capabilities():
            hardening.append("capabilities")
        (args.filter or seccomp.Filter(walls=args.walls, unix_sockets=unix)).install()
        hardening.append("seccomp")
        if args.walls:
            hardening.append("walls")
            if unix:
                hardening.append("unix-sockets")
    except OSError as exc:
        return _fail(args, "seccomp", exc)
    if enforcement is None:
        # Explicitly without Landlock (guard run --allow-unconfined on a kernel without it).
        _report(args.status_fd, {"ok": True, "stage": "unconfined", "hardening": hardening,
                                 "namespaces": spaces})  # fmt: skip
        return None
    enforcement.hardening = hardening
    enforcement.namespaces = spaces
    report = enforcement.to_json()
    _report(args.status_fd, {"ok": True, "stage": "restricted", "enforcement": report})
    if args.announce is not None:
        # Said here, before exec, so that it comes before anything the command prints.
        for line in landlock.summary_lines(report):
            print(f"{args.announce}{line}", file=sys.stderr, flush=True)
    return None


def _exec(args: _Args) -> int:
    """Exec the command in this (restricted) process: every fd >= 3 closed on exec (the
    status pipe too, which reports a failure), an empty signal mask, SIGPIPE and SIGXFSZ
    back to their defaults. Returns only when exec failed: 127 or 126."""
    landlock.cloexec_from(3)
    seccomp.reset_signals()
    command = args.command
    try:
        os.execvp(command[0], command)
    except OSError as exc:
        msg = f"cannot run {command[0]!r}: {exc.strerror}"
        _report(args.status_fd, {"ok": False, "stage": "exec", "error": msg})
        if args.status_fd is None:
            print(f"guard confine: {msg}", file=sys.stderr)
        return 127 if exc.errno in (errno.ENOENT, errno.ENOTDIR) else NOT_STARTED
    return 0  # pragma: no cover - execvp does not return


def _spawn(args: _Args) -> int | None:
    """Start the command (restricted already, as this process is) with posix_spawn: no
    copy of this interpreter runs between fork and exec. Nothing opened before the
    restriction reaches it (every fd >= 3 is closed on exec, the status pipe included);
    the signal mask is empty and SIGPIPE and SIGXFSZ, which Python ignores, are back to
    their defaults. None when it could not start (said, on the status fd or stderr)."""
    landlock.cloexec_from(3)
    command = args.command
    try:
        pid = os.posix_spawnp(
            command[0], command, os.environ, setsigmask=(),
            setsigdef=(_signal.SIGPIPE, _signal.SIGXFSZ),
        )  # fmt: skip
    except OSError as exc:
        args.command_missing = exc.errno in (errno.ENOENT, errno.ENOTDIR)
        msg = f"cannot run {command[0]!r}: {exc.strerror}"
        _report(args.status_fd, {"ok": False, "stage": "exec", "error": msg})
        if args.status_fd is None:
            print(f"guard confine: {msg}", file=sys.stderr)
        return None
    if args.status_fd is not None:
        os.close(args.status_fd)  # the reader sees end of file: the command runs
        args.status_fd = None
    return pid


def _die_of(signo: int) -> int:
    """End this process with the signal that ended the command (as the command would have
    ended), without a core file; 128+N if the signal does not end a process."""
    rlimit = (ctypes.c_ulong * 2)()  # RLIMIT_CORE 0: a core here would land outside
    _lib().setrlimit(4, ctypes.byref(rlimit))
    try:
        _signal.signal(signo, _signal.SIG_DFL)
        _signal.pthread_sigmask(_signal.SIG_UNBLOCK, (signo,))
    except (OSError, ValueError):
        pass  # SIGKILL and SIGSTOP: their action cannot change, and they cannot be blocked
    os.kill(os.getpid(), signo)
    return 128 + signo


def _lib() -> Any:
    return seccomp._lib()


# ---------------------------------------------------------------------------
# The API for hosts and for guard run (runs in guard's process, not the helper's).


def available() -> str:
    """Why commands cannot be confined on this machine, or "" when they can."""
    if landlock.abi_version() < 1:
        return landlock.unavailable_reason() or "Landlock is not available"
    if not seccomp.supported():
        return f"guard has no seccomp syscall table for {seccomp.machine()}"
    return ""


_NAMESPACES: str | None = None
#: Test seam: a non-empty value makes this process act as if namespaces were unavailable
#: (said as such, loudly, wherever the fallback is said). Used by the tests of the
#: Landlock-only fallback on machines where namespaces work; a user may set it to run the
#: fallback deliberately, and a policy's ``require`` still refuses it.
NO_NAMESPACES_ENV = "GUARD_TEST_NO_NAMESPACES"
#: Test seam: a non-empty value drops the process and IPC walls (seccomp: prlimit, signals
#: and scheduling of other processes) from the shell commands the hooks confine, so that a
#: test can prove what the layers above the kernel catch (tests/e2e/test_claude_code_missed.py).
NO_WALLS_ENV = "GUARD_TEST_NO_WALLS"


def walls_off() -> str:
    """Why the seccomp walls around other processes and Unix sockets are off for the
    commands the hooks confine ("" when they are on). Said wherever the hook's confinement
    is described (the hook's reason, ``guard doctor``), and a policy's ``require``
    refuses to run commands without them."""
    if os.environ.get(NO_WALLS_ENV):
        return (
            f"the process and local-IPC walls are off (${NO_WALLS_ENV} is set): a confined"
            " command can lower other processes' limits and create Unix sockets"
        )
    return ""


def namespaces_unavailable() -> str:
    """Why confined commands cannot run in namespaces here ("" when they can): the helper's
    own probe (``--probe``: the same calls, in a throwaway process), run once per process."""
    global _NAMESPACES
    if os.environ.get(NO_NAMESPACES_ENV):
        return f"namespaces are treated as unavailable (${NO_NAMESPACES_ENV} is set)"
    if _NAMESPACES is None:
        import subprocess

        try:
            proc = subprocess.run(
                [sys.executable, "-E", "-s", "-S", HELPER, "--probe"],
                capture_output=True, text=True, timeout=60, check=False,
            )  # fmt: skip
            out = proc.stdout.strip() or proc.stderr.strip()
            _NAMESPACES = "" if proc.returncode == 0 else (out or f"probe exited {proc.returncode}")
        except (OSError, subprocess.TimeoutExpired) as exc:
            _NAMESPACES = f"the namespace probe could not run: {exc}"
    return _NAMESPACES


def walls(require: Sequence[str] = ()) -> tuple[bool, str, list[str]]:
    """(namespaces?, why not, the required walls missing) for a confined command here:
    without namespaces the network, local IPC (the IPC namespace), processes (the PID
    namespace) and metadata (the read-only view) walls are missing."""
    why = namespaces_unavailable()
    missing = [w for w in require if w in namespaces.WALLS] if why else []
    return not why, why, missing


FALLBACK = (
    "Landlock-only fallback: no namespaces here ({why}); the command can reach the network"
    " and local services, see other processes, and change permission bits and timestamps"
)


def audit_key_dirs() -> list[str]:
    """The directory of this installation's audit key (the key made first when missing,
    so that it cannot appear later in a view that did not cover it); none when it
    cannot be made (then no writer can make it either)."""
    from guard import audit

    try:
        return [str(audit.load_key_path().parent)]
    except (audit.AuditError, OSError):
        return []


def helper_argv(
    command: Sequence[str],
    *,
    plans: Sequence[str] = (),
    writable: Sequence[str] = (),
    ioctl: Sequence[str] = (),
    devices: bool = True,
    tmpdir: str | None = None,
    private_tmp: bool = False,
    isolate: bool = False,
    walls: bool | None = None,
    sockets: Sequence[str] = (),
    python: str | None = None,
    extra: Sequence[str] = (),
    hide: Sequence[str] | None = None,
) -> list[str]:
    """The argv that runs ``command`` under this helper. ``isolate``: in namespaces;
    ``walls`` (default: ``isolate``): the process and IPC walls of seccomp and Landlock;
    ``sockets``: pathname Unix sockets the command may reach; ``hide``: paths covered in
    the namespaces' view (default: the directory of guard's audit key, made first, so
    that the command can never read the key that chains the audit log)."""
    argv = [python or sys.executable, "-E", "-s", "-S", HELPER]
    for h in audit_key_dirs() if hide is None else hide:
        argv += ["--hide", h]
    for p in plans:
        argv += ["--plans", p]
    for w in writable:
        argv += ["--write", w]
    for d in ioctl:
        argv += ["--ioctl", d]
    for s in sockets:
        argv += ["--socket", s]
    if devices:
        argv.append("--devices")
    if tmpdir is not None:
        argv += ["--tmpdir", tmpdir]
    elif private_tmp:
        argv.append("--private-tmp")
    if isolate:
        argv.append("--namespaces")
    if isolate if walls is None else walls:
        argv.append("--walls")
    return [*argv, *extra, "--", *command]


def wrap_command(
    command: str,
    *,
    writable: Sequence[str] = (),
    cwd: str,
    plans: Sequence[str] = (),
    tmpdir: str | None = None,
    shell: Sequence[str] = (),
    python: str | None = None,
    isolate: bool = True,
    sockets: Sequence[str] = (),
    egress: Sequence[str] = (),
) -> str:
    """The shell text a host runs instead of ``command`` so that it runs confined.

    ``plans``: plan directories (regular files only); ``writable``: other
    directories that stay writable (absolute, or relative to ``cwd``). A private
    temporary directory (fresh for each command and removed after it, unless
    ``tmpdir`` names one), ``/dev/null`` and the terminal are writable too.
    ``isolate``: in namespaces with the process and IPC walls (False: the
    Landlock-only fallback, with the walls). ``sockets``: pathname Unix sockets the
    command may reach. ``egress``: the egress proxy's flag (``EgressSpec.to_argv()``):
    the helper serves it for the command, which gets the proxy variables (namespaces
    only). ``shell``: the argv prefix that runs the text (default:
    ``bash -c``). The inner shell receives exactly ``command`` as one argument;
    every word is single-quoted. Raises ValueError for a command the kernel cannot
    pass on (a NUL character).
    """
    import shlex
    import shutil

    if "\0" in command:
        raise ValueError("the command contains a NUL character; no program can receive it")
    roots_plans = [os.path.join(cwd, p) for p in plans]
    roots = [os.path.join(cwd, w) for w in writable]
    if not shell:
        shell = (shutil.which("bash") or "/bin/bash", "-c")
    argv = helper_argv(
        [*shell, command], plans=roots_plans, writable=roots, tmpdir=tmpdir,
        private_tmp=tmpdir is None, isolate=isolate, walls=not walls_off(),
        sockets=sockets, python=python,
        extra=egress if isolate else (),
    )  # fmt: skip
    return " ".join(shlex.quote(a) for a in argv)
