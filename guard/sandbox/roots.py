"""From a policy to writable roots: what ``guard run`` lets an agent write.

:func:`derive` turns (policy, agent) into a :class:`SandboxPlan`: the plan
directory (regular files only), ``/dev/null``, the terminal devices, a private
``TMPDIR``, the policy's extra writable directories
(``[agents.NAME.sandbox] writable``), ``--writable`` directories, and, for a
build-mode agent, the worktree; and the Unix sockets it may reach and the walls it
requires (``sockets``, ``require``). No process is started here
(:mod:`guard.sandbox.supervise` does that) and no kernel code lives here.
"""

from __future__ import annotations

import os
from pathlib import Path

from guard.effects import Effect, GuardError, did_you_mean
from guard.paths import temp_dir
from guard.record import Record
from guard.record import set_field as _set
from guard.sandbox.helper_args import SINK_DEVICES, TERMINAL_DEVICES
from guard.sandbox.helper_dirs import fresh_tmpdir

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (guard run's start)
if TYPE_CHECKING:
    from collections.abc import Sequence

    from guard.decide import Guard
    from guard.paths import Roots

ROOT_PLACEHOLDERS = ("worktree", "plans", "data", "home", "tmp")


class SandboxError(GuardError):
    """The sandbox cannot be set up as asked; the command was not started."""


class CommandNotStarted(SandboxError):
    """The command itself cannot be started; ``exit_code`` as shells say it: 127 when it is
    not found, 126 when it is found but cannot be run."""

    def __init__(self, message: str, exit_code: int) -> None:
        super().__init__(message)
        self.exit_code = exit_code


class WritableRoot(Record):
    """A directory (or device) the command may write, and why (frozen)."""

    __slots__ = ("ioctl", "path", "plans", "why")
    __match_args__ = ("path", "why", "ioctl", "plans")

    path: str
    why: str
    ioctl: bool
    #: a plan directory: regular files only
    plans: bool

    def __init__(self, path: str, why: str, ioctl: bool = False, plans: bool = False) -> None:
        _set(self, "path", path)
        _set(self, "why", why)
        _set(self, "ioctl", ioctl)
        _set(self, "plans", plans)


class SandboxPlan(Record, frozen=False):
    """Everything a confined run needs, computed before anything starts."""

    __slots__ = ("agent", "env", "mode", "notes", "plans", "require", "roots", "sockets",
                 "tmpdir", "worktree")  # fmt: skip
    __match_args__ = ("agent", "mode", "worktree", "plans", "roots", "tmpdir", "env", "notes",
                      "sockets", "require")  # fmt: skip

    agent: str
    mode: str
    worktree: Path | None
    plans: Path
    roots: list[WritableRoot]
    tmpdir: Path | None
    env: dict[str, str]
    notes: list[str]
    #: pathname Unix sockets the command may reach (``[agents.NAME.sandbox] sockets``)
    sockets: list[str]
    #: walls the command must have (``[agents.NAME.sandbox] require``)
    require: list[str]

    def __init__(
        self,
        agent: str,
        mode: str,
        worktree: Path | None,
        plans: Path,
        roots: list[WritableRoot] | None = None,
        tmpdir: Path | None = None,
        env: dict[str, str] | None = None,
        notes: list[str] | None = None,
        sockets: list[str] | None = None,
        require: list[str] | None = None,
    ) -> None:
        self.agent = agent
        self.mode = mode
        self.worktree = worktree
        self.plans = plans
        self.roots = [] if roots is None else roots
        self.tmpdir = tmpdir
        self.env = {} if env is None else env
        self.notes = [] if notes is None else notes
        self.sockets = [] if sockets is None else sockets
        self.require = [] if require is None else require

    @property
    def writable(self) -> list[str]:
        """Writable roots other than plan directories."""
        return [r.path for r in self.roots if not r.plans]

    @property
    def plan_dirs(self) -> list[str]:
        return [r.path for r in self.roots if r.plans]

    @property
    def ioctl(self) -> list[str]:
        return [r.path for r in self.roots if r.ioctl]

    def describe(self) -> list[str]:
        return [f"{r.path}  ({r.why})" for r in self.roots]


def _expand(entry: str, roots: Roots, where: str) -> Path:
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
        base = roots.get(name)
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


def policy_of(guard: Guard) -> str | None:
    """The policy ``guard`` was loaded from, as the egress proxy takes it (an absolute path
    or ``builtin:NAME``), so that it decides connections by the very same policy."""
    name = guard.loaded.name
    return name if name.startswith("builtin:") or os.path.isabs(name) else None


def socket_paths(guard: Guard, agent: str) -> list[str]:
    """The pathname Unix sockets ``agent`` may reach (``[agents.NAME.sandbox] sockets``),
    as absolute real paths. Raises :class:`SandboxError` for a malformed entry."""
    entries = guard.agent(agent).sandbox.sockets
    return [
        str(_expand(e, guard.roots, f"agents.{agent}.sandbox.sockets[{i}]"))
        for i, e in enumerate(entries)
    ]


def _inside(path: Path, root: Path) -> bool:
    return path == root or root in path.parents


def _refuse_protected(path: Path, entry: str, where: str, roots: Roots) -> None:
    """No extra root may expose the home directory as a whole (shell rc files, agent
    settings) or guard's data directory (policies, audit logs) beyond its plans."""
    if _inside(roots.home, path):
        raise SandboxError(
            f"{where}: {entry!r} ({path}) would make the whole home directory {roots.home}"
            " writable (shell rc files, agent settings); name the agent's own directory, e.g."
            " {home}/.aider"
        )
    data = roots.data
    if _inside(data, path) or (_inside(path, data) and not _inside(path, data / "plans")):
        raise SandboxError(
            f"{where}: {entry!r} ({path}) would make guard's data directory {data} writable"
            " (policies, audit logs); name a directory outside it"
        )


def _refuse_managed(guard: Guard, agent: str, path: Path, entry: str, where: str) -> None:
    """No extra root where the managed layer denies writing (the directory itself, or a
    file directly in it): the kernel would let through what the managed layer refuses."""
    managed = getattr(guard, "managed", None)
    if managed is None:
        return

    for probe in (path, path / "guard-probe"):
        d = guard.decide_effect(agent, Effect.write(str(probe)))
        if d.action.value == "deny" and any(d.rule.startswith(f + ":") for f in managed.files):
            raise SandboxError(
                f"{where}: {entry!r} ({path}) would make writable what the managed policy"
                f" denies ({d.rule}); name another directory"
            )


def derive(
    guard: Guard,
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
    names = guard.agent_names
    if agent not in names:
        hint = did_you_mean(agent, names)
        raise SandboxError(
            f"no agent {agent!r} in the policy; {hint}agents defined: {', '.join(names)}"
        )
    policy = guard.agent(agent)
    mode = policy.mode
    roots = guard.roots
    worktree = roots.worktree
    plans = roots.plans
    plan = SandboxPlan(agent=agent, mode=mode, worktree=worktree, plans=plans)

    if create:
        plans.mkdir(parents=True, exist_ok=True)
    plan.roots.append(WritableRoot(str(plans), "the plan directory (regular files)", plans=True))
    if mode == "build" and worktree is not None:
        plan.roots.append(WritableRoot(str(worktree), "the worktree (build mode)"))
    for dev in SINK_DEVICES:
        plan.roots.append(WritableRoot(dev, "discarded output"))
    for dev in TERMINAL_DEVICES:
        if os.path.exists(dev):
            plan.roots.append(WritableRoot(dev, "terminal", ioctl=True))

    extras = [
        (e, f"agents.{agent}.sandbox.writable[{i}]") for i, e in enumerate(policy.sandbox.writable)
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
        _refuse_managed(guard, agent, path, entry, where)
        if not path.exists():
            if create:
                path.mkdir(parents=True, exist_ok=True)
            plan.notes.append(f"{'created' if create else 'would create'} {path} ({where})")
        plan.roots.append(WritableRoot(str(path), where))

    for i, entry in enumerate(policy.sandbox.sockets):
        where = f"agents.{agent}.sandbox.sockets[{i}]"
        path = _expand(entry, roots, where)
        if not path.is_socket():
            plan.notes.append(f"{path} ({where}) is not a socket here: nothing to reach there")
        plan.sockets.append(str(path))
    plan.require = list(policy.sandbox.require)

    if private_tmp:
        tmp = Path(fresh_tmpdir(temp_dir(), prefix=f"guard-run-{agent}-"))
        plan.tmpdir = tmp
        plan.roots.append(WritableRoot(str(tmp), "private TMPDIR for this run"))
        plan.env.update({"TMPDIR": str(tmp), "TMP": str(tmp), "TEMP": str(tmp)})
    else:
        plan.notes.append("a private TMPDIR is created for each run (writable)")
    plan.env.update({"GUARD_AGENT": agent, "GUARD_MODE": mode, "GUARD_PLANS": str(plans)})
    return plan

