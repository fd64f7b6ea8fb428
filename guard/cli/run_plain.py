"""What ``guard run`` does, without typer or rich, so that a confined command starts soon.

Every confined command pays guard's start-up before it starts; typer, rich and the
other commands' modules cost about as much as everything ``guard run`` needs. So
:func:`guard.cli._main.main` reads a plain ``guard run`` command line here
(:func:`parse`) and runs it (:func:`execute`); anything :func:`parse` does not
recognise as a plain command line (``--help``, an unknown option, a missing value,
``--explain``) goes to the typer command in :mod:`guard.cli.run`, which says it in
the conventional words and then calls the same :func:`execute`. rich is imported
only to show a violation.
"""

# Lazy imports: sandbox, monitor, policy and rich where used: `guard run` starts fast.

from __future__ import annotations

import gc
import os
import sys
from pathlib import Path

from guard.cli._base import a_worktree, enter, hold_standard_streams, print_json
from guard.effects import GuardError
from guard.record import Record

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (guard run's start)
if TYPE_CHECKING:
    from typing import Any

    from rich.console import Console

    from guard.monitor import Violation


class RunOptions(Record, frozen=False):
    """``guard run``'s options, as the typer command and :func:`parse` both give them."""

    __slots__ = ("agent", "allow_unconfined", "audit", "baseline_limit", "command", "cwd",
                 "explain", "no_monitor", "policy", "quiet", "restore", "worktree",
                 "writable")  # fmt: skip
    __match_args__ = ("command", "agent", "policy", "worktree", "cwd", "writable", "restore",
                      "audit", "allow_unconfined", "no_monitor", "explain", "quiet",
                      "baseline_limit")  # fmt: skip

    command: list[str]
    agent: str
    policy: str | None
    worktree: Path | None
    #: -C DIR: work (and start the command) as if guard was started in DIR
    cwd: Path | None
    writable: list[str]
    restore: bool
    audit: Path | None
    allow_unconfined: bool
    no_monitor: bool
    explain: bool
    quiet: bool
    #: most files the monitor's baseline may cover before guard run refuses (0: no limit)
    baseline_limit: int

    def __init__(
        self,
        command: list[str],
        agent: str = "plan",
        policy: str | None = None,
        worktree: Path | None = None,
        cwd: Path | None = None,
        writable: list[str] | None = None,
        restore: bool = False,
        audit: Path | None = None,
        allow_unconfined: bool = False,
        no_monitor: bool = False,
        explain: bool = False,
        quiet: bool = False,
        baseline_limit: int = 20_000,
    ) -> None:
        self.command = command
        self.agent = agent
        self.policy = policy
        self.worktree = worktree
        self.cwd = cwd
        self.writable = [] if writable is None else writable
        self.restore = restore
        self.audit = audit
        self.allow_unconfined = allow_unconfined
        self.no_monitor = no_monitor
        self.explain = explain
        self.quiet = quiet
        self.baseline_limit = baseline_limit


# option -> RunOptions field; the typer command in guard/cli/run.py declares the same options
_VALUED = {
    "--agent": "agent", "-a": "agent",
    "--policy": "policy", "-p": "policy",
    "--worktree": "worktree", "-w": "worktree",
    "--cwd": "cwd", "-C": "cwd",
    "--writable": "writable",
    "--audit": "audit",
    "--baseline-limit": "baseline_limit",
}  # fmt: skip
_FLAGS = {
    "--restore": "restore",
    "--allow-unconfined": "allow_unconfined",
    "--no-monitor": "no_monitor",
    "--quiet": "quiet", "-q": "quiet",
}  # fmt: skip


def parse(args: list[str]) -> RunOptions | None:
    """``guard run ARGS`` as options, or None for anything but a plain command line.

    Plain: the options above, each spelt out (``--name VALUE``, ``--name=VALUE``,
    ``-a VALUE``), values that do not start with ``-`` and are not empty, then the
    command (after ``--``, or from the first word that is not an option, as typer
    reads it). Everything else (help, ``--explain``, bundled or unknown options, a
    missing command) is left to the typer command, so its words stay the only ones.
    """
    values: dict[str, Any] = {"writable": []}
    i = 0
    while i < len(args):
        a = args[i]
        if a == "--":
            i += 1
            break
        if not a.startswith("-") or a == "-":
            break
        if a in _FLAGS:
            values[_FLAGS[a]] = True
            i += 1
            continue
        name, eq, value = a.partition("=") if a.startswith("--") else (a, "", "")
        key = _VALUED.get(name)
        if key is None:
            return None
        if not eq:
            if i + 1 >= len(args):
                return None
            value = args[i + 1]
            i += 1
        i += 1
        if not value or value.startswith("-"):
            return None
        if key == "writable":
            values["writable"].append(value)
        elif key == "baseline_limit":
            if not value.isdigit():
                return None  # typer says what is wrong with it
            values[key] = int(value)
        elif key in ("worktree", "cwd", "audit"):
            values[key] = Path(value)
        else:
            values[key] = value
    command = args[i:]
    if not command:
        return None
    return RunOptions(command=command, **values)


def _load_guard(policy: str | None, worktree: Path | None) -> Any:
    try:
        from guard.decide import Guard
        from guard.policy import valid

        with valid.storing():  # the next guard run of this policy starts without pydantic
            return Guard.load(policy=policy, worktree=worktree)
    finally:
        # the start-up's modules and policy are made: collect from here on (it was off for
        # them: guard.cli.main)
        gc.enable()


class _MonitorHandle:
    """Creates guard's monitor for the run, prints what it reports, keeps it for the summary."""

    def __init__(
        self, guard: Any, agent: str, *, restore: bool, audit: Path | None, quiet: bool
    ) -> None:
        self.guard = guard
        self.agent = agent
        self.restore = restore
        self.audit = audit
        self.quiet = quiet
        self.monitor: Any = None
        self._tty = sys.stderr.isatty()
        self._err: Console | None = None

    def _violation(self, v: Violation) -> None:
        from rich.console import Console

        from guard.cli.show import print_violation

        if self._err is None:
            self._err = Console(stderr=True, highlight=False, soft_wrap=True)
        print_violation(self._err, v, self.guard.roots, prefix="guard monitor: ")

    def _notice(self, n: Any) -> None:
        # -q: warnings and errors only; what was set up and scanned is information, and so
        # is what could not be undone when nothing is undone (no --restore)
        info = n.event in ("backend", "start", "stop", "reconcile", "objects") or (
            n.event == "not-restorable" and not self.restore)
        if self.quiet and info:
            return
        print(f"guard monitor: {n.message}", file=sys.stderr, flush=True)

    def _progress(self, stage: str, done: int, total: int) -> None:
        if self.quiet or not self._tty:
            return
        of = f"/{total}" if total else ""
        end = "\n" if total and done >= total and stage == "hashing" else ""
        print(f"\rguard monitor: baseline {stage} {done}{of} files", end=end, file=sys.stderr)

    def __call__(self) -> Any:
        from guard.monitor import Monitor

        self.monitor = Monitor(
            self.guard,
            self.agent,
            restore=self.restore,
            audit_path=self.audit,
            on_violation=self._violation,
            on_notice=self._notice,
            progress=self._progress,
            background=True,
        )
        return self.monitor

    def summary(self) -> str | None:
        m = self.monitor
        if m is None:
            return None
        n = len(m.violations)
        what = "violation" if n == 1 else "violations"
        return f"monitor: {n} {what} seen; audit log {m.audit_path}"


def execute(o: RunOptions) -> int:
    """Run ``o.command`` confined (or, with ``o.explain``, print the sandbox); its exit status."""
    from guard.sandbox import confine

    if not o.command and not o.explain:
        raise GuardError("no command given; usage: guard run --agent plan -- COMMAND [ARGS]...")
    enter(o.cwd)
    a_worktree(o.worktree)
    hold_standard_streams()
    if not o.explain:
        confine.probe_early()  # the namespace probe's child runs while the policy loads
    try:
        return _execute(o)
    finally:
        confine.reap_early()  # an early probe no plan-mode agent read


def _execute(o: RunOptions) -> int:
    from guard.sandbox import roots, supervise

    guard = _load_guard(o.policy, o.worktree)
    if o.allow_unconfined and guard.managed is not None and "confine" in guard.managed.pins:
        raise GuardError(
            "--allow-unconfined is refused: the managed policy pins confinement"
            f" ([managed] pin in {', '.join(guard.managed.files)})"
        )
    # On the command line a relative directory means one relative to here.
    writable = [w if w.startswith(("{", "~", "/")) else os.path.abspath(w) for w in o.writable]
    plan = roots.derive(
        guard, o.agent, extra_writable=writable, private_tmp=not o.explain, create=not o.explain
    )
    if o.explain:
        _explain(plan)
        return 0
    if guard.roots.worktree is None and not o.quiet:
        from guard.paths import no_worktree_note

        note = no_worktree_note()
        if note is not None:
            print(f"guard run: {note}", file=sys.stderr)
    monitor = None
    if not o.no_monitor:
        _check_baseline_size(guard, o.baseline_limit)
        monitor = _MonitorHandle(guard, o.agent, restore=o.restore, audit=o.audit, quiet=o.quiet)
    elif not o.quiet:
        print("guard run: --no-monitor: chmod/chown/utime/xattr go unwatched", file=sys.stderr)
    egress = None
    if plan.mode == "plan":  # its network is the namespace's loopback and guard's proxy
        policy = o.policy if o.policy is None or o.policy.startswith("builtin:") else (
            os.path.abspath(o.policy))  # fmt: skip
        from guard.sandbox.run_egress import Proxy

        egress = Proxy(o.agent, str(o.worktree or os.getcwd()), policy)
    status = supervise.run(
        plan,
        o.command,
        allow_unconfined=o.allow_unconfined,
        monitor=monitor,
        quiet=o.quiet,
        egress=egress,
    )
    summary = monitor.summary() if monitor is not None else None
    if summary is not None:
        violations = len(monitor.monitor.violations) if monitor and monitor.monitor else 0
        if violations or not o.quiet:
            print(f"guard run: {summary}", file=sys.stderr)
    return status


def _check_baseline_size(guard: Any, limit: int) -> None:
    """Refuse, naming the way on, a baseline of more than ``limit`` files: the monitor would
    read (and copy what git cannot restore of) every one before the command starts."""
    if limit <= 0:
        return
    from guard.monitor import default_roots

    for root in default_roots(guard):
        count = _count_files(str(root), limit + 1)
        if count > limit:
            raise GuardError(
                f"the monitor's baseline would cover more than {limit:,} files under {root};"
                " guard run does not read (and copy) a tree that large unasked: pass"
                f" --baseline-limit N (more than the files there; 0: no limit), --no-monitor"
                " (the kernel layers alone), or run it from the worktree you mean"
            )


def _count_files(top: str, stop: int) -> int:
    """Files and links under ``top`` (``.git`` aside: git restores from it), up to ``stop``."""
    count = 0
    stack = [top]
    while stack and count < stop:
        try:
            with os.scandir(stack.pop()) as entries:
                for e in entries:
                    if e.is_dir(follow_symlinks=False):
                        if e.name != ".git":
                            stack.append(e.path)
                    else:
                        count += 1
        except OSError:
            continue
    return count


def _explain(plan: Any) -> None:
    from guard import probe
    from guard.sandbox import landlock, seccomp

    lay = probe.layers(plan.worktree)  # the one description --version, doctor, review give
    abi = lay.landlock_abi
    why = lay.namespaces if plan.mode == "plan" else "not used in build mode"
    inst = probe.installation()
    doc = {
        "guard": {"version": inst.version, "package": str(inst.package),
                  "checkout": str(inst.checkout) if inst.checkout else None,
                  "python": inst.python},
        "agent": plan.agent,
        "mode": plan.mode,
        "worktree": str(plan.worktree) if plan.worktree else None,
        "landlock_abi": abi,
        "landlock": lay.landlock or "available",
        "handled": landlock.right_names(landlock.handled_rights(abi)),
        "signals_scoped": abi >= 6,
        "tiocsti_filtered": seccomp.supported(),
        "seccomp": "system-state syscalls refused" if seccomp.supported() else "unsupported",
        "capabilities": "all dropped",
        "namespaces": why or "user (unless root), mount, network, pid, ipc",
        "read_only_view": not why,
        "network": "loopback only" if not why else "the host's",
        "require": plan.require,
        "sockets": plan.sockets,
        "writable": [{"path": r.path, "why": r.why, "ioctl": r.ioctl} for r in plan.roots],
        "monitor": lay.monitor,
        "matching": lay.engine,
        "notes": plan.notes,
    }
    print_json(doc, indent=2)
