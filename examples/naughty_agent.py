"""A scripted "agent" in plan mode that tries to escape, one trick at a time.

Shows: what the kernel (namespaces and Landlock, through ``guard run``) blocks,
and what is left to the monitor (nothing, in namespaces: chmod gets EROFS too).
Run it from inside a git worktree, under guard:

    guard run --agent plan -- python examples/naughty_agent.py

Every attempt is made harmless in case it succeeds (it opens for writing
without writing, renames and puts back, removes what it created), so a failed
sandbox would show up as ESCAPED without damaging your project. Outside
``guard run`` it refuses to start unless given ``--unguarded``.
"""

from __future__ import annotations

import errno
import os
import shutil
import signal
import stat
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

BLOCKED, ALLOWED, ESCAPED, MONITOR, OTHER = "BLOCKED", "allowed", "ESCAPED", "MONITOR", "OTHER"
# What a refusal looks like: EROFS (the read-only view), EACCES (Landlock), EPERM
# (signals), EXDEV (links, renames), ESRCH (a process outside the PID namespace).
KERNEL_REFUSALS = (errno.EROFS, errno.EACCES, errno.EPERM, errno.EXDEV, errno.ESRCH)


def _color(text: str, code: str) -> str:
    return f"\033[{code}m{text}\033[0m" if sys.stdout.isatty() else text


LABEL = {
    BLOCKED: _color("BLOCKED by the kernel", "32"),
    ALLOWED: _color("allowed", "36"),
    ESCAPED: _color("ESCAPED", "1;31"),
    MONITOR: _color("not blocked: left to the monitor", "33"),
    OTHER: _color("failed, but not because of the sandbox", "35"),
}


def _worktree() -> Path:
    out = subprocess.run(
        ["git", "rev-parse", "--show-toplevel"], capture_output=True, text=True, check=False
    )
    if out.returncode != 0:
        sys.exit("naughty agent: run me from inside a git worktree")
    return Path(out.stdout.strip())


def _victim(wt: Path) -> Path:
    """A tracked, regular project file to pick on."""
    out = subprocess.run(
        ["git", "-C", str(wt), "ls-files"], capture_output=True, text=True, check=False
    )
    for name in out.stdout.splitlines():
        p = wt / name
        if p.is_file() and not p.is_symlink() and not name.startswith(".openoxide/"):
            return p
    sys.exit("naughty agent: no tracked file to pick on; commit a file first")


def _open_for_writing(path: Path, flags: int = os.O_WRONLY | os.O_APPEND) -> None:
    """Ask the kernel for a writable handle, and write nothing."""
    os.close(os.open(path, flags))


def _attempts(wt: Path, plans: Path, victim: Path) -> list[tuple[str, Callable[[], str]]]:
    rel = victim.relative_to(wt)
    stamp = time.strftime("%Y%m%d-%H%M%S")

    def write_plan() -> str:
        plans.mkdir(parents=True, exist_ok=True)
        p = plans / f"{stamp}-naughty-plan.md"
        p.write_text("# Plan\n\n1. Try every escape.\n2. Report honestly.\n")
        return ALLOWED

    def create_file() -> str:
        p = wt / "NAUGHTY-WAS-HERE.txt"
        _open_for_writing(p, os.O_WRONLY | os.O_CREAT | os.O_EXCL)
        p.unlink()
        return ESCAPED

    def append() -> str:
        _open_for_writing(victim)
        return ESCAPED

    def truncate() -> str:
        os.truncate(victim, victim.stat().st_size)  # same size: no change if it works
        return ESCAPED

    def move_away() -> str:
        aside = victim.with_name(victim.name + ".naughty")
        os.rename(victim, aside)
        os.rename(aside, victim)
        return ESCAPED

    def rename_into_plans() -> str:
        dest = plans / "stolen.md"
        os.rename(victim, dest)
        os.rename(dest, victim)
        return ESCAPED

    def hard_link() -> str:
        link = plans / "hardlink.md"
        os.link(victim, link)
        link.unlink()
        return ESCAPED

    def symlink_trap() -> str:
        trap = plans / "trap.md"
        try:
            os.symlink(victim, trap)  # allowed: it is in the plan directory
            _open_for_writing(trap)  # but writing goes to the target
            return ESCAPED
        finally:
            if trap.is_symlink():
                trap.unlink()

    def git_hook() -> str:
        hooks = subprocess.run(
            ["git", "-C", str(wt), "rev-parse", "--path-format=absolute", "--git-path", "hooks"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        hook = Path(hooks) / "pre-commit"
        made_dir = False
        if not hook.parent.exists():
            hook.parent.mkdir()
            made_dir = True
        if hook.exists():
            _open_for_writing(hook)
        else:
            _open_for_writing(hook, os.O_WRONLY | os.O_CREAT | os.O_EXCL)
            hook.unlink()
        if made_dir:
            hook.parent.rmdir()
        return ESCAPED

    def shell_rc() -> str:
        rc = Path.home() / ".bashrc"
        if rc.exists():
            _open_for_writing(rc)
        else:
            _open_for_writing(rc, os.O_WRONLY | os.O_CREAT | os.O_EXCL)
            rc.unlink()
        return ESCAPED

    def grandchild() -> str:
        sh = shutil.which("sh") or "/bin/sh"
        res = subprocess.run([sh, "-c", f': >> "{victim}"'], capture_output=True, check=False)
        if res.returncode == 0:
            return ESCAPED
        raise PermissionError(errno.EACCES, res.stderr.decode(errors="replace").strip())

    def shared_tmp() -> str:
        p = Path("/tmp") / f"naughty-{os.getpid()}"
        _open_for_writing(p, os.O_WRONLY | os.O_CREAT | os.O_EXCL)
        p.unlink()
        return ESCAPED

    def signal_guard() -> str:
        parent = os.getppid()
        if parent == 1:
            # the child of a PID namespace's init: guard runs outside, out of sight
            raise ProcessLookupError(errno.ESRCH, "guard is outside this PID namespace")
        os.kill(parent, 0)  # signal 0: only asks whether we may
        return ESCAPED

    def chmod() -> str:
        mode = stat.S_IMODE(victim.stat().st_mode)
        os.chmod(victim, mode ^ stat.S_IXOTH)
        time.sleep(1.0)  # long enough for the monitor to see it
        os.chmod(victim, mode)
        return MONITOR

    return [
        (f"write my plan into {plans}", write_plan),
        ("create NAUGHTY-WAS-HERE.txt in the project", create_file),
        (f"open {rel} for appending", append),
        (f"truncate {rel}", truncate),
        (f"move {rel} aside (deleting it from the project)", move_away),
        (f"move {rel} into the plan directory", rename_into_plans),
        (f"hard-link {rel} into the plan directory, then edit the link", hard_link),
        (f"plant a symlink to {rel} in the plan directory and write through it", symlink_trap),
        ("install a git pre-commit hook (runs code at your next commit)", git_hook),
        ("append to ~/.bashrc", shell_rc),
        (f"have a grandchild shell run ': >> {rel}'", grandchild),
        ("create a file in the shared /tmp", shared_tmp),
        ("signal the guard process that supervises me", signal_guard),
        (f"chmod {rel} (flip o+x, then put it back after 1 s)", chmod),
    ]


def main(argv: list[str]) -> int:
    sandbox = os.environ.get("GUARD_SANDBOX")
    if sandbox is None and "--unguarded" not in argv:
        print(
            "naughty agent: I am not running under `guard run`, so nothing would stop me.\n"
            "Run me confined:  guard run --agent plan -- python examples/naughty_agent.py\n"
            "(or pass --unguarded to watch every attempt succeed; each is undone at once)",
            file=sys.stderr,
        )
        return 2
    wt = _worktree()
    plans = Path(os.environ.get("GUARD_PLANS") or wt / ".openoxide" / "plans")
    victim = _victim(wt)
    print(
        f"naughty agent: plan mode, sandbox {sandbox or 'none'}."
        f" I will now try {len(_attempts(wt, plans, victim))} ways to change {wt.name}.\n"
    )
    counts = {BLOCKED: 0, ALLOWED: 0, ESCAPED: 0, MONITOR: 0, OTHER: 0}
    for i, (what, attempt) in enumerate(_attempts(wt, plans, victim), 1):
        try:
            outcome, detail = attempt(), ""
        except OSError as exc:
            outcome = BLOCKED if exc.errno in KERNEL_REFUSALS else OTHER
            detail = f" ({exc.strerror or exc})"
        counts[outcome] += 1
        print(f"  {i:2}. {what}\n      -> {LABEL[outcome]}{detail}", flush=True)
    print(
        f"\nnaughty agent: {counts[BLOCKED]} blocked by the kernel, {counts[ALLOWED]} allowed"
        f" (the plan file), {counts[MONITOR]} left to the monitor, {counts[ESCAPED]} escaped."
        + (f" {counts[OTHER]} failed for other reasons." if counts[OTHER] else "")
    )
    if counts[MONITOR]:
        print(
            "  Landlock does not govern chmod (here without namespaces); under `guard run` the"
            " monitor reports it: see the 'guard monitor: VIOLATION attrib' line."
        )
    return 1 if counts[ESCAPED] else 0


if __name__ == "__main__":
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    sys.exit(main(sys.argv[1:]))
