"""Supervising a confined command: spawn it through the helper, forward signals, wait.

:func:`run` takes a :class:`~guard.sandbox.roots.SandboxPlan`, blocks the
signals it forwards, starts the confinement helper (:mod:`guard.sandbox.helper`
run as a script), which waits for a go before it does anything, starts the
monitor meanwhile, then gives the go: the helper applies Landlock, the
capability drop, the seccomp filter and fd hygiene, then ``exec``s the command.
It reads what the helper enforced, forwards signals, waits, stops the monitor,
and returns the command's exit status (128+N for signal N). A helper that gets
no go (the monitor failed to start, an early signal) exits without starting
the command.
"""

# Lazy imports: egress, socket, namespaces and subprocess (a helper started from a process
# with threads) only when used: `guard run` start-up speed.

from __future__ import annotations

import contextlib
import gc
import os
import signal
import sys
from collections.abc import Callable, Iterator, Sequence

from guard.sandbox import confine, landlock
from guard.sandbox.roots import CommandNotStarted, SandboxError, SandboxPlan

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (guard run's start)
if TYPE_CHECKING:
    import subprocess
    from typing import IO, Any, Protocol
else:
    Protocol = object  # the protocols below are mypy's: no typing at guard run's start

# Signals forwarded to the command. Terminal-generated ones (si_code
# SI_KERNEL) reach the command directly, as it shares guard's process group.
FORWARDED = (
    signal.SIGINT,
    signal.SIGTERM,
    signal.SIGHUP,
    signal.SIGQUIT,
    signal.SIGUSR1,
    signal.SIGUSR2,
    signal.SIGWINCH,
    signal.SIGALRM,
)
_SI_KERNEL = 0x80


class _Monitor(Protocol):
    def start(self) -> Any: ...

    def stop(self) -> Any: ...


MonitorFactory = Callable[[], _Monitor]


class Egress(Protocol):
    """What serves the connections a confined command makes (part of :func:`run`'s
    contract with the egress proxy): the port it listens on inside the network
    namespace, the variables the command gets to use it, and a listener descriptor to
    serve, handed over once the helper made it."""

    port: int
    env: dict[str, str]

    def start(self, listener: int) -> None:
        """Serve ``listener`` (owned from now on) until :meth:`close`; returns at once."""
        ...

    def close(self) -> None: ...


def helper_command(
    plan: SandboxPlan,
    command: Sequence[str],
    *,
    status_fd: int | None,
    abi: int | None,
    announce: str | None = None,
    go_fd: int | None = None,
    isolate: bool = False,
    walls: bool = False,
    listen: tuple[int, int] | None = None,
) -> list[str]:
    """The argv that starts ``command`` under the confinement helper. ``listen``: (port,
    fd): a listener on 127.0.0.1:port in the network namespace, sent over fd."""
    extra: list[str] = []
    if abi is not None:
        extra += ["--abi", str(abi)]  # 0: no Landlock; capabilities, seccomp and fds only
    if status_fd is not None:
        extra += ["--status-fd", str(status_fd)]
    if go_fd is not None:
        extra += ["--go-fd", str(go_fd)]
    if announce is not None:
        extra += ["--announce", announce]
    if listen is not None:
        extra += ["--listen", str(listen[0]), "--egress-fd", str(listen[1])]
    return confine.helper_argv(
        command,
        plans=plan.plan_dirs,
        writable=plan.writable,
        ioctl=plan.ioctl,
        devices=False,
        isolate=isolate,
        walls=walls,
        sockets=plan.sockets if walls else (),
        extra=extra,
        # guard's state out of view; in plan mode the worktree's sessions too
        hide=confine.hidden_state(
            str(plan.worktree) if plan.worktree is not None and plan.mode == "plan" else None
        ),
    )


def isolation(plan: SandboxPlan, say: Callable[..., None] | None = None) -> bool:
    """Whether ``plan``'s command runs in namespaces: a plan-mode agent's does where the
    kernel can make them. Without them, a policy that requires a wall refuses
    (:class:`SandboxError`, nothing started); otherwise the Landlock-only fallback is
    said loudly through ``say``."""
    if plan.mode != "plan":
        return False
    ok, why, missing = confine.walls(plan.require)
    if ok:
        return True
    if missing:
        raise SandboxError(
            f"the policy requires the {', '.join(missing)} wall(s) for agent {plan.agent!r}"
            f" ([agents.{plan.agent}.sandbox] require), and this machine cannot make the"
            f" namespaces they need: {why}. Nothing was started; enable unprivileged user"
            " namespaces (or run as root), or remove the requirement"
        )
    if say is not None:
        say(confine.FALLBACK.format(why=why), force=True)
    return False


@contextlib.contextmanager
def _blocked(signals: Sequence[int]) -> Iterator[None]:
    old = signal.pthread_sigmask(signal.SIG_BLOCK, signals)
    try:
        yield
    finally:
        # Drain what is still pending so that unblocking does not act on it late.
        pending = signal.sigpending() & set(signals)
        for sig in pending:
            with contextlib.suppress(OSError):
                signal.sigtimedwait([sig], 0)
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


class _Child(Protocol):
    """The helper's process as :func:`run` waits for it: a :class:`subprocess.Popen`, or a
    :class:`_Forked` child."""

    pid: int
    returncode: int | Any

    def poll(self) -> int | None: ...

    def wait(self) -> int: ...

    def kill(self) -> None: ...


class _Forked:
    """A child forked from this process (no new interpreter), waited for like a Popen."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.returncode: int | None = None

    def _reaped(self, flags: int) -> int | None:
        if self.returncode is None:
            try:
                pid, status = os.waitpid(self.pid, flags)
            except ChildProcessError:
                return self.returncode
            if pid:
                self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def poll(self) -> int | None:
        return self._reaped(os.WNOHANG)

    def wait(self) -> int:
        code = self._reaped(0)
        return 0 if code is None else code

    def kill(self) -> None:
        if self.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signal.SIGKILL)


def _fork_helper(argv: Sequence[str], env: dict[str, str], passed: Sequence[int]) -> _Forked:
    """Run the helper of ``argv`` (``python -E -s -S HELPER ARGS``) in a child forked from
    this single-threaded process: what :class:`subprocess.Popen` would start, the same
    file descriptors (0-2 and ``passed``), environment and signal mask, without starting
    and importing a second interpreter before every command (the confined command's
    start-up). The child never returns into guard: it ends with ``os._exit``."""
    args = list(argv[list(argv).index(confine.HELPER) + 1 :])
    keep = sorted({0, 1, 2, *passed})
    _flush()
    pid = os.fork()
    if pid:
        return _Forked(pid)
    code = 126  # pragma: no cover - the child; the helper's own "not started"
    try:  # pragma: no cover
        gc.disable()  # no finalizer of this process's objects may close a descriptor reused
        for low, high in zip(keep, [*keep[1:], os.sysconf("SC_OPEN_MAX")], strict=True):
            if high > low + 1:  # never empty: closerange(0, 0) closes every descriptor
                os.closerange(low + 1, high)
        for fd in passed:
            os.set_inheritable(fd, True)
        os.environ.clear()
        os.environ.update(env)
        from guard.sandbox import helper

        code = helper.main(args)
        _flush()
    except BaseException as exc:  # pragma: no cover - said as the helper says a failure
        with contextlib.suppress(OSError):
            os.write(2, f"guard confine: {exc!r}; the command was NOT started\n".encode())
    finally:  # pragma: no cover
        os._exit(code)


def _popen(
    argv: Sequence[str], env: dict[str, str], passed: Sequence[int]
) -> subprocess.Popen[bytes]:
    """The helper as a new interpreter (a process with threads must not fork and go on)."""
    import subprocess

    return subprocess.Popen(argv, env=env, close_fds=True, pass_fds=tuple(passed))


def _flush() -> None:
    """Flush guard's stdout and stderr before a fork (either may be None: guard started
    without that descriptor)."""
    for stream in (sys.stdout, sys.stderr):
        if stream is not None:
            stream.flush()


def _wait_forwarding(proc: _Child, watched: Sequence[int]) -> int:
    """Wait for ``proc``, forwarding every signal sent to guard by another process.

    Signals go through a pidfd taken while the command is known to be alive (it
    has not been waited for), so a forwarded signal can only ever reach the
    command: never another process that reused its pid after it exited.
    """
    pidfd = _pidfd(proc)
    try:
        while True:
            info = signal.sigtimedwait(watched, 0.5)
            if info is not None and info.si_signo != signal.SIGCHLD:
                if info.si_code != _SI_KERNEL:
                    _forward(proc, pidfd, info.si_signo)
                continue
            code = proc.poll()
            if code is not None:
                return code if code >= 0 else 128 - code
    finally:
        if pidfd is not None:
            os.close(pidfd)


def _pidfd(proc: _Child) -> int | None:
    try:
        return os.pidfd_open(proc.pid)
    except (AttributeError, OSError):  # before Linux 5.3: plain kill() below
        return None


def _forward(proc: _Child, pidfd: int | None, signo: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        if pidfd is not None:
            signal.pidfd_send_signal(pidfd, signo)
        elif proc.returncode is None:
            os.kill(proc.pid, signo)


def enforcement_summary(report: dict[str, Any]) -> str:
    return landlock.summary_lines(report)[0]


def run(
    plan: SandboxPlan,
    command: Sequence[str],
    *,
    abi: int | None = None,
    allow_unconfined: bool = False,
    monitor: MonitorFactory | None = None,
    quiet: bool = False,
    err: IO[str] | None = None,
    keep_tmp: bool = False,
    egress: Egress | None = None,
) -> int:
    """Run ``command`` confined by ``plan``; return its exit status (128+N for signal N).

    ``abi``: cap the Landlock ABI (None: the kernel's; 0: act as if the kernel
    had no Landlock). Without Landlock the command runs only when
    ``allow_unconfined`` is true, under the monitor alone, with a loud warning.
    A plan-mode agent's command runs in namespaces (:func:`isolation`); ``egress``
    then serves the connections it makes to 127.0.0.1:``egress.port``.
    """
    out = err if err is not None else sys.stderr

    def say(msg: str, *, force: bool = False) -> None:
        if force or not quiet:
            print(f"guard run: {msg}", file=out, flush=True)

    try:
        return _run(plan, command, abi, allow_unconfined, monitor, say, quiet, egress)
    finally:
        _cleanup_tmp(plan, keep_tmp, say)


def _run(
    plan: SandboxPlan,
    command: Sequence[str],
    abi: int | None,
    allow_unconfined: bool,
    monitor: MonitorFactory | None,
    say: Callable[..., None],
    quiet: bool,
    egress: Egress | None = None,
) -> int:
    if not command:
        raise SandboxError("no command given; usage: guard run --agent plan -- CMD [ARGS...]")
    kernel_abi = landlock.abi_version()
    use_abi = kernel_abi if abi is None else min(abi, kernel_abi)
    confined = use_abi >= 1
    if not confined and not allow_unconfined:
        why = landlock.unavailable_reason() or "Landlock disabled for this run (ABI 0)"
        raise SandboxError(
            f"cannot confine the command: {why}. Nothing was started. To run it anyway under"
            " the monitor alone (which reports changes after the fact but cannot prevent"
            " them), pass --allow-unconfined"
        )
    if not confined and monitor is None:
        raise SandboxError(
            "no monitor available, and Landlock is not either: refusing to run"
            " the command with no protection at all"
        )
    if "/" not in command[0] and _which(command[0], _child_env(plan).get("PATH")) is None:
        raise CommandNotStarted(f"command not found: {command[0]!r} (not on PATH)", 127)
    if "/" in command[0] and not os.path.exists(command[0]):
        raise CommandNotStarted(f"command not found: {command[0]!r} (no such file)", 127)
    if "/" in command[0] and (os.path.isdir(command[0]) or not os.access(command[0], os.X_OK)):
        raise CommandNotStarted(f"cannot run {command[0]!r}: not an executable file", 126)
    isolate = isolation(plan, say)
    if isolate and egress is not None:
        plan.env.update(egress.env)

    if confined:
        say(f"agent {plan.agent!r} ({plan.mode} mode); writes allowed only in:")
        for line in plan.describe():
            say(f"  {line}")
    else:
        bar = "!" * 72
        say(bar, force=True)
        say(
            "UNCONFINED: Landlock is not available, and --allow-unconfined was given.",
            force=True,
        )
        say(
            "The kernel will NOT stop writes; the monitor only reports (and with --restore"
            " undoes) them afterwards.",
            force=True,
        )
        say(bar, force=True)
    for note in plan.notes:
        say(note)

    # Block the forwarded signals before any thread starts (the monitor's threads
    # inherit the mask), so that only the wait loop below ever receives them.
    watched = [*FORWARDED, signal.SIGCHLD]
    with _blocked(watched):
        mon: _Monitor | None = None
        helper: _Helper | None = None
        try:
            # The helper's interpreter starts, makes its namespaces and restricts itself
            # while the monitor starts (the other CPU); the command starts only on the go
            # below, once the monitor's watch and phase 1 are in place.
            helper = _Helper(plan, command, confined=confined, abi=abi,
                             announce=None if quiet else "guard run: ", isolate=isolate,
                             egress=egress if isolate else None)  # fmt: skip
            if monitor is not None:
                mon = monitor()
                mon.start()
                # the monitor names violations made inside the command's process tree
                on_spawn = getattr(mon, "set_guarded_process", None)
                if on_spawn is not None:
                    on_spawn(helper.proc.pid)
            early = signal.sigpending() & {signal.SIGINT, signal.SIGTERM, signal.SIGHUP}
            if early:
                names = ", ".join(signal.Signals(s).name for s in early)
                raise SandboxError(f"interrupted ({names}) before the command started")
            helper.go()
            return _wait_forwarding(helper.proc, watched)
        finally:
            if helper is not None:
                helper.abandon()
            if egress is not None:
                egress.close()
            if mon is not None:
                mon.stop()


def _child_env(plan: SandboxPlan) -> dict[str, str]:
    env = dict(os.environ)
    env.update(plan.env)
    return env


class _Helper:
    """The confinement helper, started at once and told to go later (``--go-fd``).

    Until :meth:`go` it waits having done nothing; :meth:`abandon` (always called)
    closes the go pipe of a helper that never got the go, so that it exits without
    starting the command, and reaps it.
    """

    def __init__(
        self,
        plan: SandboxPlan,
        command: Sequence[str],
        *,
        confined: bool,
        abi: int | None,
        announce: str | None,
        isolate: bool = False,
        egress: Egress | None = None,
    ) -> None:
        env = _child_env(plan)
        env["GUARD_SANDBOX"] = ("namespaces+" if isolate else "") + (
            "landlock" if confined else "none"
        )
        self._status_r, status_w = os.pipe()
        go_r, self._go_w = os.pipe()
        self._gone = False
        self.egress = egress
        self._channel: int | None = None
        passed = [status_w, go_r]
        listen: tuple[int, int] | None = None
        child: int | None = None
        if egress is not None:
            from guard.sandbox.namespaces import socket_pair  # not the socket module's cost

            self._channel, child = socket_pair()
            passed.append(child)
            listen = (egress.port, child)
        argv = helper_command(plan, command, status_fd=status_w, abi=abi if confined else 0,
                              announce=announce, go_fd=go_r, isolate=isolate,
                              walls=plan.mode == "plan", listen=listen)  # fmt: skip
        try:
            self.proc: _Child = (
                _fork_helper(argv, env, passed) if confine.single_threaded()
                else _popen(argv, env, passed)
            )
        except OSError as exc:
            os.close(self._status_r)
            os.close(self._go_w)
            if self._channel is not None:
                os.close(self._channel)
            raise SandboxError(f"cannot start the sandbox helper: {exc.strerror}") from exc
        finally:
            os.close(status_w)
            os.close(go_r)
            if child is not None:
                os.close(child)

    def go(self) -> None:
        """Let the helper confine itself and exec the command; raise unless it did."""
        self._gone = True
        try:
            os.write(self._go_w, b"g")
        except OSError:
            pass  # it is gone already: its status (none) says so below
        finally:
            os.close(self._go_w)
        try:
            reports = confine.read_status(self._status_r)
        finally:
            os.close(self._status_r)
        failure = next((rep for rep in reports if not rep.get("ok")), None)
        if failure is not None:
            self.proc.wait()
            if failure.get("stage") == "exec":
                error = str(failure.get("error"))
                raise CommandNotStarted(error, 127 if "No such file" in error else 126)
            what = {"landlock": "the Landlock sandbox could not be applied",
                    "plans": "the plan directory cannot be used as it is",
                    "tmpdir": "the private TMPDIR cannot be used",
                    "namespaces": "the namespaces could not be made",
                    "egress": "the egress listener could not be made"}.get(
                str(failure.get("stage")), "the sandbox could not be set up")  # fmt: skip
            raise SandboxError(f"{what}: {failure.get('error')}; the command was NOT started")
        restricted = next(
            (rep for rep in reports if rep.get("stage") in ("restricted", "unconfined")), None
        )
        if restricted is None:
            code = self.proc.wait()
            raise SandboxError(
                f"the sandbox helper exited ({code}) without confirming the restriction;"
                " the command was NOT started"
            )
        if self._channel is not None and self.egress is not None:
            # made and sent before the restriction was reported: here already
            from guard.sandbox.namespaces import receive_fd

            channel, self._channel = self._channel, None
            try:
                listener = receive_fd(channel)
            finally:
                os.close(channel)
            if listener is None:
                self.proc.kill()
                self.proc.wait()
                raise SandboxError(
                    "the sandbox helper did not hand over the egress listener; the command was"
                    " stopped"
                )
            self.egress.start(listener)
        # The helper announced what it enforced (before exec, so before the command's
        # own output) unless quiet.

    def abandon(self) -> None:
        """A helper that never got the go: close its pipes (it exits, nothing started)."""
        if self._channel is not None:
            os.close(self._channel)
            self._channel = None
        if self._gone:
            return
        self._gone = True
        os.close(self._go_w)
        os.close(self._status_r)
        self.proc.wait()


def _cleanup_tmp(plan: SandboxPlan, keep: bool, say: Callable[..., None]) -> None:
    tmp = plan.tmpdir
    if tmp is None or keep:
        return
    if not confine.remove_private_tmpdir(tmp):
        say(f"cannot remove the command's TMPDIR {tmp}; remove it by hand", force=True)


def _which(name: str, path: str | None) -> str | None:
    """``shutil.which()`` of a bare command name, without importing shutil (start-up)."""
    if path is None:
        path = os.environ.get("PATH")
        if path is None:
            try:
                path = os.confstr("CS_PATH")
            except (AttributeError, ValueError):
                path = os.defpath
    if not path:
        return None
    seen: set[str] = set()
    for d in path.split(os.pathsep):
        if d in seen:
            continue
        seen.add(d)
        f = os.path.join(d, name)
        if os.path.exists(f) and os.access(f, os.X_OK) and not os.path.isdir(f):
            return f
    return None
