"""Fixtures for the monitor: a committed git worktree, a loaded Guard, started monitors."""

from __future__ import annotations

import ctypes
import os
import subprocess
import time
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from guard.decide import Guard
from guard.monitor import Monitor

# a generous upper bound for the real inotify pipeline, never a performance check
WAIT = float(os.environ.get("GUARD_TEST_WAIT", "60"))


_RENAME_EXCHANGE = 2  # <linux/fs.h>


def exchange(a: Path, b: Path) -> None:
    """Swap two paths in one step (``renameat2(RENAME_EXCHANGE)``): nothing can run between."""
    libc = ctypes.CDLL(None, use_errno=True)
    at_fdcwd = -100
    if libc.renameat2(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), _RENAME_EXCHANGE) != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err), str(a), None, str(b))


def git(root: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(root), *args], check=True, capture_output=True, text=True
    ).stdout


@pytest.fixture(autouse=True)
def _quiet_watchdog_race() -> None:
    """watchdog warns when its own directory-creation race re-adds a watch (harmless; the
    monitor filters it too, but pytest resets warning filters for each test)."""
    warnings.filterwarnings("ignore", message="Callback with id", category=RuntimeWarning)


@pytest.fixture
def wt(tmp_path: Path) -> Path:
    """A git worktree with committed files, an untracked file and an empty plan directory."""
    root = tmp_path / "wt"
    root.mkdir()
    git(root, "init", "-q")
    git(root, "config", "user.email", "tests@guard.invalid")
    git(root, "config", "user.name", "guard tests")
    (root / "src").mkdir()
    (root / "src" / "app.py").write_text("print('hi')\n")
    (root / "src" / "tool.sh").write_text("#!/bin/sh\necho tool\n")
    (root / "src" / "tool.sh").chmod(0o755)
    (root / "docs").mkdir()
    (root / "docs" / "a.md").write_text("# a\n")
    (root / "docs" / "b.md").write_text("# b\n")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "init")
    (root / "notes.txt").write_bytes(b"untracked \x00\xff bytes\n")
    (root / "notes.txt").chmod(0o600)
    (root / ".openoxide" / "plans").mkdir(parents=True)
    return Path(os.path.realpath(root))


@pytest.fixture
def guard_for(wt: Path) -> Guard:
    return Guard.load(worktree=wt)


@pytest.fixture
def start_monitor(guard_for: Guard) -> Iterator[Callable[..., Monitor]]:
    """Start a monitor on the worktree (no periodic scans unless asked); stopped at teardown."""
    started: list[Monitor] = []

    def start(agent: str = "plan", **kw: Any) -> Monitor:
        kw.setdefault("reconcile_interval", None)
        kw.setdefault("session", "test-session")
        m = Monitor(guard_for, agent, **kw)
        m.start()
        started.append(m)
        return m

    yield start
    for m in started:
        m.stop()


def holds(path: Path, content: str | bytes) -> bool:
    """Does ``path`` hold exactly ``content`` now? False while it is absent: a restore
    may rename the file away and back between an exists() and a read, so a poll must
    never read it twice."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return False
    return data == (content.encode() if isinstance(content, str) else content)


def wait_for(
    cond: Callable[[], bool], what: str, timeout: float = WAIT,
    progress: Callable[[], object] | None = None,
) -> None:
    """Poll until ``cond()`` holds; fail naming ``what`` if it never does.

    With ``progress``, the timeout runs from the last change of ``progress()``: long
    work that keeps moving (a scan reporting thousands of files on a busy machine) is
    waited for, work that stalls fails after ``timeout``."""
    deadline = time.monotonic() + timeout
    last = progress() if progress is not None else None
    while not cond():
        if progress is not None:
            now = progress()
            if now != last:
                last, deadline = now, time.monotonic() + timeout
        if time.monotonic() > deadline:
            stalled = " with no progress" if progress is not None else ""
            raise AssertionError(f"timed out after {timeout:.0f} s{stalled} waiting for: {what}")
        time.sleep(0.02)


def settle(m: Monitor, quiet: float = 0.5) -> None:
    """Wait until the monitor has reported nothing new for ``quiet`` seconds."""
    last = -1
    stable_since = time.monotonic()
    deadline = time.monotonic() + WAIT
    while time.monotonic() < deadline:
        n = len(m.violations)
        if n != last:
            last, stable_since = n, time.monotonic()
        elif time.monotonic() - stable_since >= quiet:
            return
        time.sleep(0.02)


def paths_of(m: Monitor, event_prefix: str = "") -> list[str]:
    return [v.path for v in m.violations if v.event.startswith(event_prefix)]
