"""The confinement helper: runs one command confined, between a launcher and the command.

As the helper (stdlib only, nothing slow to import; it runs before every
confined shell command of a plan-mode agent, under ``guard run`` and around the
confined MCP server; the entry point is the tiny :mod:`guard.sandbox.run_confined`)::

    python3 -E -s -S /path/to/guard/sandbox/run_confined.py \\
        --plans DIR --private-tmp --devices --namespaces --walls [--write DIR]... \\
        -- bash -c 'COMMAND'

it, in this order: (with ``--go-fd``, when it would create a directory on the host: a
missing plan directory, a private TMPDIR) waits for its caller's go, touching nothing
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
capability drop, seccomp: the second wall), waits for the go when it is still due (so
that all of this overlaps the caller's own start, ``guard run``'s monitor), starts the
command and waits: it forwards the signals the outer process passes on, reaps
orphans, and when the command ends it ends, so the kernel ends every process left in
the namespace. Without ``--namespaces`` (the fallback where the kernel cannot make
them) the outer process forks the command, which restricts itself, waits for a go
still due and execs (an error on the way is reported, never a silent exit).

Either way the outer process forwards the signals it is sent (not those a
terminal sends the whole foreground group: the command gets its own), waits,
removes the private temporary directory, and exits as the command did: with
its exit status, or killed by the same signal. The command keeps the caller's
cwd, environment, stdin/stdout/stderr, terminal and process group. Before exec
it closes every fd >= 3, restores the default signal mask, SIGPIPE and SIGXFSZ,
and points ``TMPDIR``/``TMP``/``TEMP`` at the private directory. If any step
fails, the command is **not** started: exit status 126 and one line on stderr
(fail closed), or a JSON report on ``--status-fd``.

Its command line is :mod:`guard.sandbox.helper_args`, the directories it checks,
makes and removes :mod:`guard.sandbox.helper_dirs`; what a caller uses to build its
argv or to read its status reports is :mod:`guard.sandbox.confine`.
"""

# Lazy imports: json, _thread, select, socket, the egress proxy: when used (start-up time).
from __future__ import annotations

import errno
import os
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    import ctypes

    from guard.sandbox import landlock, namespaces, seccomp, terminals
    from guard.sandbox._ffi import libc
    from guard.sandbox.helper_args import NOT_STARTED, USAGE, Args, await_go, parse
    from guard.sandbox.helper_dirs import (
        PlanDirectoryHold,
        check_plan_directory,
        fresh_tmpdir,
        makes_directories,
        plan_directory,
        private_tmpdir,
        remove_tree,
    )
elif __package__:
    from guard.sandbox import _ffi as ctypes
    from guard.sandbox import landlock, namespaces, seccomp, terminals
    from guard.sandbox._ffi import libc
    from guard.sandbox.helper_args import NOT_STARTED, USAGE, Args, await_go, parse
    from guard.sandbox.helper_dirs import (
        PlanDirectoryHold,
        check_plan_directory,
        fresh_tmpdir,
        makes_directories,
        plan_directory,
        private_tmpdir,
        remove_tree,
    )
else:  # imported by run_confined.py: the siblings alone, not the package (start-up cost)
    import _ffi as ctypes
    import landlock
    import namespaces
    import seccomp
    import terminals
    from _ffi import libc
    from helper_args import NOT_STARTED, USAGE, Args, await_go, parse
    from helper_dirs import (
        PlanDirectoryHold,
        check_plan_directory,
        fresh_tmpdir,
        makes_directories,
        plan_directory,
        private_tmpdir,
        remove_tree,
    )
if TYPE_CHECKING:  # the C module under it is all the helper imports (``signal`` costs ~9 ms)
    import signal as _signal
else:
    import _signal

if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Any

# Signals forwarded to the command (by the outer process, and by pid 1 inside).
FORWARDED = (
    _signal.SIGINT, _signal.SIGTERM, _signal.SIGHUP, _signal.SIGQUIT, _signal.SIGUSR1,
    _signal.SIGUSR2, _signal.SIGWINCH, _signal.SIGALRM,
)  # fmt: skip
_WATCHED = (*FORWARDED, _signal.SIGCHLD)
SI_KERNEL, SI_QUEUE = 0x80, -1


def _report(status_fd: int | None, payload: dict[str, object]) -> None:
    if status_fd is None:
        return
    import json

    data = (json.dumps(payload) + "\n").encode()
    while data:
        n = os.write(status_fd, data)
        data = data[n:]



def _fail(args: Args, stage: str, exc: BaseException) -> int:
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
        print(f"guard confine: {exc}\n{USAGE}", file=sys.stderr)
        return 2
    if args.go_fd is not None and makes_directories(args):
        go, args.go_fd = args.go_fd, None
        if not await_go(go):
            return NOT_STARTED  # the caller gave up (its monitor did not start): nothing done
    holds: list[PlanDirectoryHold] = []
    try:
        args.plans = [plan_directory(p) for p in args.plans]
        for p in args.plans:
            check_plan_directory(p)
            holds.append(PlanDirectoryHold(p))
    except OSError as exc:
        for hold in holds:
            hold.restore()
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
        code = _start(args, holds)
    finally:
        if made is not None and not remove_tree(made):
            print(f"guard confine: cannot remove the command's TMPDIR {made}", file=sys.stderr)
        for hold in holds:  # the plan directory's own mode and times, as they were
            for what in hold.restore():
                print(f"guard confine: the plan directory {hold.path}: {what}", file=sys.stderr)
    return _die_of(-code) if code < 0 else code


def _go(args: Args) -> bool:
    """The last step before the command starts, in the restricted process: wait for the
    caller's go when it is still due (false: no go, the command is not started), then
    announce what is enforced (after the go, so that it follows the caller's own lines)."""
    if args.go_fd is not None:
        go, args.go_fd = args.go_fd, None
        if not await_go(go):
            return False
    if args.announce is not None and args.enforced is not None:
        # Said here, before exec, so that it comes before anything the command prints.
        for line in landlock.summary_lines(args.enforced):
            print(f"{args.announce}{line}", file=sys.stderr, flush=True)
    return True


def _start(args: Args, holds: Sequence[PlanDirectoryHold] = ()) -> int:
    """The outer process: start the command (in namespaces, or in the fallback a child
    that restricts itself), forward signals, wait, and return its exit status, or minus
    the signal that killed it (this process then dies of it, once it has cleaned up)."""
    _signal.pthread_sigmask(_signal.SIG_BLOCK, _WATCHED)
    # chmod and utime go to a thread of this process (:mod:`guard.sandbox.attrs`): it
    # refuses them on the plan directory itself and, in the fallback, on another terminal
    supervised = args.walls and (bool(args.plans) or not args.namespaces)
    channel_attrs: int | None = None
    if supervised:
        try:
            channel_attrs, args.attrs_fd = namespaces.socket_pair()
        except OSError as exc:
            return _fail(args, "seccomp", exc)
    if not args.namespaces:
        # The fallback: the command's own process restricts itself and execs; this one
        # stays as it is, to remove the private TMPDIR (in a directory no root grants).
        pid = os.fork()
        if pid == 0:  # pragma: no cover - replaced by the command
            code = NOT_STARTED
            try:
                refused = _restrict(args, [], supervised=supervised)
                if refused is None and not _go(args):
                    refused = NOT_STARTED
                _hand_listener(args)  # before exec: this process becomes the command
                code = _exec(args) if refused is None else refused
            except Exception as exc:  # on the status fd, never a silent exit
                code = _fail(args, "start", exc)
            finally:
                os._exit(code)
        for fd in (args.status_fd, args.egress_fd, args.attrs_fd, args.go_fd):
            if fd is not None:
                os.close(fd)
        if channel_attrs is not None:
            _attrs().start(channel_attrs, [h.fd for h in holds], chroot=False, walls=args.walls)
        return _ended(_wait(pid, False), b"")
    masks: list[str] = []
    if args.sockets and args.walls:
        allowed = {os.path.realpath(s) for s in args.sockets}
        masks = [s for s in namespaces.listening_sockets() if os.path.realpath(s) not in allowed]
    try:
        args.filter = seccomp.Filter(
            walls=args.walls, unix_sockets=_unix_sockets(args), supervised=supervised
        )
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
        if channel_attrs is not None:  # likewise started before the PID namespace
            _attrs().start(channel_attrs, [h.fd for h in holds], chroot=True, walls=False)
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
    for fd in (args.status_fd, args.egress_fd, args.attrs_fd, args.go_fd):
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


def _attrs() -> Any:
    if TYPE_CHECKING or __package__:
        from guard.sandbox import attrs
    else:  # the helper: the sibling by its plain name
        import attrs
    return attrs


def _egress_module() -> Any:
    if TYPE_CHECKING or __package__:
        from guard.sandbox import egress_proxy as egress
    else:  # the helper: the sibling by its plain name (stdlib only at import)
        import egress_proxy as egress
    return egress


def _egress(args: Args) -> int:
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


def _init(args: Args, masks: list[str], fate_w: int, life_r: int) -> int:
    """Pid 1 of the new PID namespace: the namespaces, the walls, then the command."""
    if not namespaces.die_with_parent(life_r):
        return NOT_STARTED
    os.close(life_r)
    tmpfs = "/dev/shm" if args.private_tmp and args.tmpdir is None else None
    try:
        skipped, terminal = namespaces.enter_inner(
            [*args.plans, *args.writable], mask_sockets=masks, tmpfs=tmpfs, hide=args.hide,
            terminals=True,
        )  # fmt: skip
    except OSError as exc:
        return _fail(args, "namespaces", exc)
    if terminal is not None and "/dev/tty" in args.ioctl:  # --devices: the terminal's too
        args.writable.append(terminal)
        args.ioctl.append(terminal)
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
    code = _restrict(args, spaces if os.geteuid() == 0 else ["user", *spaces], skipped,
                     supervised=args.attrs_fd is not None)  # fmt: skip
    if code is not None:
        _hand_listener(args)
        return code
    if not _go(args):
        _hand_listener(args)
        return NOT_STARTED
    command = _spawn(args)
    # Only now to the supervisor: its thread, woken to receive it, would compete with the
    # command's start for a CPU. A call the command makes meanwhile waits for it.
    _hand_listener(args)
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


def _restrict(
    args: Args, spaces: list[str], skipped: Sequence[str] = (), *, supervised: bool = False
) -> int | None:
    """Landlock, the capability drop and the seccomp filter on this process; None when all
    of them hold (reported on the status fd and announced), else the exit status."""
    enforcement: landlock.Enforcement | None = None
    readable = _own_terminal_only(args) if args.walls and not args.namespaces else None
    if args.abi != 0:
        try:
            enforcement = landlock.restrict_self(
                args.writable, args.ioctl, plans=args.plans, abi=args.abi,
                scope_signals=args.scope, scope_abstract_unix=args.walls, readable=readable,
            )  # fmt: skip
        except OSError as exc:
            return _fail(args, "landlock", exc)
    hardening = []
    unix = _unix_sockets(args)
    try:
        if seccomp.drop_capabilities():
            hardening.append("capabilities")
        installed = args.filter or seccomp.Filter(
            walls=args.walls, unix_sockets=unix, supervised=supervised
        )
        listener = None
        if installed.supervised:
            listener = _attrs().install(installed)
        else:
            installed.install()
        hardening.append("seccomp")
        if args.attrs_fd is not None and listener is not None:
            args.listener = listener  # for the supervisor (:func:`_hand_listener`)
            hardening.append("metadata-supervised")
        if args.walls:
            hardening.append("walls")
            if readable is not None and enforcement is not None:
                hardening.append("own-terminal")
            if unix:
                hardening.append("unix-sockets")
            elif args.sockets:
                hardening.append("listed-sockets-refused")
    except OSError as exc:
        return _fail(args, "seccomp", exc)
    if enforcement is None:
        # Explicitly without Landlock (guard run --allow-unconfined on a kernel without it).
        _report(args.status_fd, {"ok": True, "stage": "unconfined", "hardening": hardening,
                                 "namespaces": spaces})  # fmt: skip
        return None
    enforcement.hardening = hardening
    enforcement.namespaces = spaces
    args.enforced = enforcement.to_json()
    _report(args.status_fd, {"ok": True, "stage": "restricted", "enforcement": args.enforced})
    return None


def _hand_listener(args: Args) -> None:
    """The seccomp listener to the supervisor's thread, this process's ends closed."""
    if args.attrs_fd is not None:
        _attrs().hand_over(args.attrs_fd, args.listener)
    args.attrs_fd = args.listener = None


def _own_terminal_only(args: Args) -> list[str]:
    """The fallback (no mount namespace to hide them): the command's own terminal alone
    stays writable with its ioctls (not ``/dev/pts`` as a whole, nor ``/dev/ptmx``), and
    reading is allowed everywhere but the other terminals. Returns what may be read."""
    own = terminals.own_terminal()
    own = own if own is not None and own.startswith("/dev/") else None
    gone = ("/dev/pts", "/dev/ptmx")
    args.writable = [w for w in args.writable if w not in gone]
    if own is not None and "/dev/tty" in args.ioctl:  # --devices: the terminal's too
        args.writable.append(own)
        args.ioctl.append(own)
    args.ioctl = [i for i in args.ioctl if i not in gone]
    return terminals.readable_roots(own, args.hide)


def _unix_sockets(args: Args) -> bool:
    """Whether the command may make Unix sockets: without the walls, or when the policy
    lists a socket and the namespaces cover every other one in its view. The fallback
    cannot open one socket alone (a pathname socket is no Landlock right), so there a
    listed socket is refused with the rest, and the announcement says so."""
    return not args.walls or (bool(args.sockets) and args.namespaces)


def _exec(args: Args) -> int:
    """Exec the command in this (restricted) process: every fd >= 3 closed on exec (the
    status pipe too, which reports a failure), an empty signal mask, SIGPIPE and SIGXFSZ
    back to their defaults. Returns only when exec failed: 127 or 126."""
    landlock.cloexec_from(3)
    landlock.reset_signals()
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


def _spawn(args: Args) -> int | None:
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
    return libc()
