"""``guard run``: derive writable roots from an agent's policy and run a command confined.

The flow:

1. :func:`derive` turns (policy, agent) into a :class:`SandboxPlan`: the plan
   directory, ``/dev/null``, the terminal devices, a private ``TMPDIR``, the
   policy's extra writable directories (``[agents.NAME.sandbox] writable``),
   and, for a build-mode agent, the worktree.
2. :func:`run` blocks the signals it forwards, starts the monitor, then
   starts the command through the Landlock helper (``landlock.py`` run as a
   script: it restricts itself, closes every fd >= 3 and execs the command),
   reads what the helper enforced, forwards signals, waits, stops the
   monitor, and returns the command's exit status (128+N for signal N).

No policy logic lives in :mod:`guard.sandbox.landlock`; no kernel code lives here.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Protocol

from guard.effects import GuardError
from guard.sandbox import landlock

# Writable, with device ioctls allowed: what a terminal program needs.
TERMINAL_DEVICES = ("/dev/tty", "/dev/pts", "/dev/ptmx")
# Writable sinks every shell script assumes.
SINK_DEVICES = ("/dev/null",)

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

ROOT_PLACEHOLDERS = ("worktree", "plans", "data", "home", "tmp")


class SandboxError(GuardError):
    """The sandbox cannot be set up as asked; the command was not started."""


@dataclass(frozen=True, slots=True)
class WritableRoot:
    path: str
    why: str
    ioctl: bool = False


@dataclass(slots=True)
class SandboxPlan:
    """Everything :func:`run` needs, computed before anything starts."""

    agent: str
    mode: str
    worktree: Path | None
    plans: Path
    roots: list[WritableRoot] = field(default_factory=list)
    tmpdir: Path | None = None
    env: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    @property
    def writable(self) -> list[str]:
        return [r.path for r in self.roots]

    @property
    def ioctl(self) -> list[str]:
        return [r.path for r in self.roots if r.ioctl]

    def describe(self) -> list[str]:
        return [f"{r.path}  ({r.why})" for r in self.roots]


class _Monitor(Protocol):
    def start(self) -> Any: ...

    def stop(self) -> Any: ...


MonitorFactory = Callable[[], _Monitor]


# ---------------------------------------------------------------------------
# Deriving the writable roots


def _expand(entry: str, roots: Any, where: str) -> Path:
    """``{tmp}/agent-cache`` -> an absolute path; ``~`` expanded; errors name the entry."""
    text = entry.strip()
    if not text:
        raise SandboxError(f"{where}: empty path; remove the entry or name a directory")
    if text.startswith("{"):
        end = text.find("}")
        name = text[1:end] if end > 0 else ""
        if name not in ROOT_PLACEHOLDERS:
            raise SandboxError(
                f"{where}: unknown root {text[: end + 1] if end > 0 else text!r};"
                f" use one of {', '.join('{' + n + '}' for n in ROOT_PLACEHOLDERS)}"
            )
        base = getattr(roots, name, None)
        if base is None:
            raise SandboxError(f"{where}: {{{name}}} is not defined here (no worktree found)")
        text = os.path.join(str(base), text[end + 1 :].lstrip("/"))
    text = os.path.expanduser(text)
    if text.startswith("//"):  # the policy's //absolute spelling
        text = text[1:]
    if not os.path.isabs(text):
        raise SandboxError(
            f"{where}: {entry!r} is relative; write an absolute path or start it with a root"
            " such as {tmp}/ or {home}/"
        )
    return Path(os.path.realpath(text))


def _policy_writable(agent_obj: Any) -> list[str]:
    """``[agents.NAME.sandbox] writable`` when the policy schema has it (read defensively)."""
    sandbox = getattr(agent_obj, "sandbox", None)
    if sandbox is None:
        return []
    value = (
        sandbox.get("writable") if isinstance(sandbox, dict) else getattr(sandbox, "writable", None)
    )
    if value is None:
        return []
    if isinstance(value, str) or not all(isinstance(v, str) for v in value):
        raise SandboxError(
            f"agents.{getattr(agent_obj, 'name', '?')}.sandbox.writable must be a list of"
            f" strings, got {value!r}"
        )
    return list(value)


def _inside(path: Path, root: Path) -> bool:
    return path == root or root in path.parents


def _refuse_protected(path: Path, entry: str, where: str, roots: Any) -> None:
    """No extra root may expose the home directory as a whole (shell rc files, agent
    settings) or guard's data directory (policies, audit logs) beyond its plans."""
    home = Path(roots.home)
    data = Path(roots.data)
    if _inside(home, path):
        raise SandboxError(
            f"{where}: {entry!r} ({path}) would make the whole home directory {home} writable"
            " (shell rc files, agent settings); name the agent's own directory, e.g."
            " {home}/.aider"
        )
    if _inside(data, path) or (_inside(path, data) and not _inside(path, data / "plans")):
        raise SandboxError(
            f"{where}: {entry!r} ({path}) would make guard's data directory {data} writable"
            " (policies, audit logs); name a directory outside it"
        )


def derive(
    guard: Any,
    agent: str,
    *,
    extra_writable: Sequence[str] = (),
    private_tmp: bool = True,
    create: bool = True,
) -> SandboxPlan:
    """The writable roots for ``agent`` under ``guard``'s policy.

    Raises :class:`SandboxError` for an unknown agent, a malformed entry, or
    an extra root that would let a plan-mode agent change its worktree.
    ``create``: make the plan directory and missing extra directories (Landlock
    can only grant what exists); False for a dry run.
    """
    names = list(getattr(guard, "agent_names", []) or [])
    if names and agent not in names:
        raise SandboxError(f"no agent {agent!r} in the policy; agents defined: {', '.join(names)}")
    try:
        agent_obj = guard.agent(agent)
    except GuardError:
        raise
    except Exception as exc:
        raise SandboxError(f"cannot load agent {agent!r} from the policy: {exc}") from exc
    mode = str(getattr(agent_obj, "mode", "plan"))
    roots = guard.roots
    worktree: Path | None = roots.worktree
    plans = Path(roots.plans)
    plan = SandboxPlan(agent=agent, mode=mode, worktree=worktree, plans=plans)

    if create:
        plans.mkdir(parents=True, exist_ok=True)
    plan.roots.append(WritableRoot(str(plans), "the plan directory"))
    if mode == "build" and worktree is not None:
        plan.roots.append(WritableRoot(str(worktree), "the worktree (build mode)"))
    for dev in SINK_DEVICES:
        plan.roots.append(WritableRoot(dev, "discarded output"))
    for dev in TERMINAL_DEVICES:
        if os.path.exists(dev):
            plan.roots.append(WritableRoot(dev, "terminal", ioctl=True))

    extras: list[tuple[str, str]] = [
        (e, f"agents.{agent}.sandbox.writable[{i}]")
        for i, e in enumerate(_policy_writable(agent_obj))
    ]
    extras += [(e, f"--writable {e}") for e in extra_writable]
    for entry, where in extras:
        path = _expand(entry, roots, where)
        if (
            mode == "plan"
            and worktree is not None
            and (_inside(worktree, path) or (_inside(path, worktree) and not _inside(path, plans)))
        ):
            raise SandboxError(
                f"{where}: {entry!r} ({path}) would make the worktree {worktree} writable to the"
                f" plan-mode agent {agent!r}; name a directory outside the worktree (state, cache,"
                " temp), or use {plans}"
            )
        _refuse_protected(path, entry, where, roots)
        if not path.exists():
            if create:
                path.mkdir(parents=True, exist_ok=True)
            plan.notes.append(f"{'created' if create else 'would create'} {path} ({where})")
        plan.roots.append(WritableRoot(str(path), where))

    if private_tmp:
        tmp = Path(tempfile.mkdtemp(prefix=f"guard-run-{agent}-"))
        plan.tmpdir = tmp
        plan.roots.append(WritableRoot(str(tmp), "private TMPDIR for this run"))
        plan.env.update({"TMPDIR": str(tmp), "TMP": str(tmp), "TEMP": str(tmp)})
    else:
        plan.notes.append("a private TMPDIR is created for each run (writable)")
    plan.env.update(
        {
            "GUARD_AGENT": agent,
            "GUARD_MODE": mode,
            "GUARD_PLANS": str(plans),
        }
    )
    return plan


# ---------------------------------------------------------------------------
# Running


def helper_command(
    plan: SandboxPlan,
    command: Sequence[str],
    *,
    status_fd: int | None,
    abi: int | None,
    announce: str | None = None,
) -> list[str]:
    """The argv that starts ``command`` under the Landlock helper."""
    argv = [sys.executable, "-E", "-s", "-S", landlock.__file__]
    for path in plan.writable:
        argv += ["--write", path]
    for path in plan.ioctl:
        argv += ["--ioctl", path]
    if abi is not None:
        argv += ["--abi", str(abi)]  # 0: no Landlock, only fd and signal hygiene
    if status_fd is not None:
        argv += ["--status-fd", str(status_fd)]
    if announce is not None:
        argv += ["--announce", announce]
    return [*argv, "--", *command]


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


def _read_status(fd: int) -> list[dict[str, Any]]:
    chunks = []
    while True:
        data = os.read(fd, 65536)
        if not data:
            break
        chunks.append(data)
    out = []
    for line in b"".join(chunks).decode("utf-8", "replace").splitlines():
        if line.strip():
            out.append(json.loads(line))
    return out


def _wait_forwarding(proc: subprocess.Popen[bytes], watched: Sequence[int]) -> int:
    """Wait for ``proc``, forwarding every signal sent to guard by another process."""
    while True:
        info = signal.sigtimedwait(watched, 0.5)
        if info is not None and info.si_signo != signal.SIGCHLD:
            if info.si_code != _SI_KERNEL:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(proc.pid, info.si_signo)
            continue
        code = proc.poll()
        if code is not None:
            return code if code >= 0 else 128 - code


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
) -> int:
    """Run ``command`` confined by ``plan``; return its exit status (128+N for signal N).

    ``abi``: cap the Landlock ABI (None: the kernel's; 0: act as if the kernel
    had no Landlock). Without Landlock the command runs only when
    ``allow_unconfined`` is true, under the monitor alone, with a loud warning.
    """
    out = err if err is not None else sys.stderr

    def say(msg: str, *, force: bool = False) -> None:
        if force or not quiet:
            print(f"guard run: {msg}", file=out, flush=True)

    try:
        return _run(plan, command, abi, allow_unconfined, monitor, say, quiet)
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
    if (
        shutil.which(command[0], path=_child_env(plan).get("PATH")) is None
        and "/" not in command[0]
    ):
        raise SandboxError(f"command not found: {command[0]!r} (not on PATH)")

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
        try:
            if monitor is not None:
                mon = monitor()
                mon.start()
            early = signal.sigpending() & {signal.SIGINT, signal.SIGTERM, signal.SIGHUP}
            if early:
                names = ", ".join(signal.Signals(s).name for s in early)
                raise SandboxError(f"interrupted ({names}) before the command started")
            return _spawn_and_wait(
                plan,
                command,
                confined=confined,
                abi=abi,
                watched=watched,
                announce=None if quiet else "guard run: ",
            )
        finally:
            if mon is not None:
                mon.stop()


def _child_env(plan: SandboxPlan) -> dict[str, str]:
    env = dict(os.environ)
    env.update(plan.env)
    return env


def _spawn_and_wait(
    plan: SandboxPlan,
    command: Sequence[str],
    *,
    confined: bool,
    abi: int | None,
    watched: Sequence[int],
    announce: str | None,
) -> int:
    env = _child_env(plan)
    env["GUARD_SANDBOX"] = "landlock" if confined else "none"
    r, w = os.pipe()
    try:
        proc = subprocess.Popen(
            helper_command(
                plan, command, status_fd=w, abi=abi if confined else 0, announce=announce
            ),
            env=env,
            close_fds=True,
            pass_fds=(w,),
        )
    except OSError as exc:
        os.close(r)
        raise SandboxError(f"cannot start the sandbox helper: {exc.strerror}") from exc
    finally:
        os.close(w)
    try:
        reports = _read_status(r)
    finally:
        os.close(r)
    failure = next((rep for rep in reports if not rep.get("ok")), None)
    if failure is not None:
        proc.wait()
        if failure.get("stage") == "exec":
            raise SandboxError(str(failure.get("error")))
        raise SandboxError(
            f"the Landlock sandbox could not be applied: {failure.get('error')}; the command was"
            " NOT started"
        )
    restricted = next(
        (rep for rep in reports if rep.get("stage") in ("restricted", "unconfined")), None
    )
    if restricted is None:
        code = proc.wait()
        raise SandboxError(
            f"the sandbox helper exited ({code}) without confirming the restriction;"
            " the command was NOT started"
        )
    if not confined:
        return _wait_forwarding(proc, watched)
    # The helper announced what it enforced (before exec, so before the command's
    # own output) unless quiet; the report is kept for callers in the status.
    return _wait_forwarding(proc, watched)


def _cleanup_tmp(plan: SandboxPlan, keep: bool, say: Callable[..., None]) -> None:
    tmp = plan.tmpdir
    if tmp is None or keep:
        return
    try:
        tmp.rmdir()
    except FileNotFoundError:
        return
    except OSError:
        say(f"the command's scratch files are kept in {tmp} (TMPDIR); remove it when done")
