"""Fixtures for the reliability tests: isolated homes, real git repos, copies of guard.

Every daemon a test starts runs under the test's own HOME and is stopped at
teardown by the pids it recorded; nothing here touches the real user's data.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

import guard
from guard.audit import logfile

PACKAGE = Path(guard.__file__).resolve().parent


def run_dir(home: Path) -> Path:
    return home / ".local/share/openoxide/run"


def daemon_pids(home: Path) -> dict[str, int]:
    """pid file name -> pid, for every hook daemon that recorded one under ``home``."""
    out: dict[str, int] = {}
    for pidfile in run_dir(home).glob("hookd-*.pid"):
        with contextlib.suppress(OSError, ValueError):
            out[pidfile.name] = int(pidfile.read_text().strip())
    return out


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie still answers kill(0): look at its state
    with contextlib.suppress(OSError):
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        return state != "Z"
    return False


def stop_daemons(home: Path, settle: float = 3.0) -> None:
    """SIGTERM every daemon that recorded a pid under ``home`` (some may still be starting)."""
    if not run_dir(home).exists():
        return
    stopped: set[int] = set()
    deadline = time.monotonic() + settle
    while time.monotonic() < deadline:
        for pid in daemon_pids(home).values():
            if pid not in stopped:
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGTERM)
                stopped.add(pid)
        time.sleep(0.2)


@pytest.fixture(autouse=True)
def _no_driver_outlives_its_test() -> Iterator[None]:
    """Drivers started with :func:`tests.reliability.faults.start` are killed at the end."""
    from .faults import kill_started

    try:
        yield
    finally:
        kill_started()


@pytest.fixture
def home(tmp_path: Path) -> Path:
    h = tmp_path / "home"
    h.mkdir()
    return h


@pytest.fixture
def env(home: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, str]]:
    """A process environment whose HOME (and so guard's data dir) is a temporary directory."""
    out = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("GUARD_", "XDG_")) and k not in ("PYTHONPATH",)
    }
    out["HOME"] = str(home)
    out["GUARD_HOOKD_IDLE"] = "60"
    out["GUARD_HOOK_DAEMON"] = "1"
    out["GUARD_HOOK_TRACE"] = "1"
    monkeypatch.setenv("HOME", str(home))
    for key in list(os.environ):
        if key.startswith(("GUARD_", "XDG_")):
            monkeypatch.delenv(key)
    yield out
    stop_daemons(home)


@pytest.fixture
def repo(tmp_path: Path, env: dict[str, str]) -> Path:
    """A real git repository with one committed source file and a plan directory."""
    r = tmp_path / "repo"
    (r / "src").mkdir(parents=True)
    (r / ".openoxide" / "plans").mkdir(parents=True)
    (r / "src" / "app.py").write_text("print('hello')\n")
    git = ["git", "-c", "user.email=t@example.com", "-c", "user.name=t"]
    subprocess.run([*git, "init", "-q", str(r)], check=True, env=env)
    subprocess.run([*git, "-C", str(r), "add", "."], check=True, env=env)
    subprocess.run([*git, "-C", str(r), "commit", "-qm", "init"], check=True, env=env)
    return Path(os.path.realpath(r))


def claude_payload(tool_name: str, tool_input: dict[str, Any], cwd: Path) -> dict[str, Any]:
    """A PreToolUse payload in the shape Claude Code sends."""
    return {
        "session_id": "0b7c6f2e-0000-4000-8000-000000000001",
        "transcript_path": str(cwd / "transcript.jsonl"),
        "cwd": str(cwd),
        "permission_mode": "acceptEdits",
        "hook_event_name": "PreToolUse",
        "tool_name": tool_name,
        "tool_input": tool_input,
        "tool_use_id": "toolu_01ABC",
    }


@dataclass(frozen=True)
class Installation:
    """One guard installation: a package directory and the hook command that uses it."""

    package: Path

    @property
    def client(self) -> Path:
        return self.package / "hooks" / "_client.py"

    def hook(
        self,
        payload: dict[str, Any],
        cwd: Path,
        env: dict[str, str],
        *args: str,
        timeout: float = 120,
    ) -> subprocess.CompletedProcess[str]:
        """One hook call as a host makes it: the installed command line, payload on stdin."""
        return subprocess.run(
            [sys.executable, "-I", str(self.client), "claude-code", *args],
            input=json.dumps(payload),
            capture_output=True,
            text=True,
            cwd=cwd,
            env=env,
            timeout=timeout,
            check=False,
        )


def copy_installation(dest: Path) -> Installation:
    """A second copy of guard's package: another installation for the same interpreter."""
    target = dest / "guard"
    shutil.copytree(PACKAGE, target, ignore=shutil.ignore_patterns("__pycache__"))
    return Installation(target)


@pytest.fixture
def this_install() -> Installation:
    return Installation(PACKAGE)


def decision_of(proc: subprocess.CompletedProcess[str]) -> str:
    assert proc.returncode == 0, proc.stderr
    return str(json.loads(proc.stdout)["hookSpecificOutput"]["permissionDecision"])


def answered_by(proc: subprocess.CompletedProcess[str]) -> int | None:
    """The daemon pid that answered a traced call, None when it was decided in-process."""
    for line in proc.stderr.splitlines():
        if line.startswith("guard hook: answered by hookd pid "):
            return int(line.rsplit(" ", 1)[1])
    assert "guard hook: answered in-process" in proc.stderr, proc.stderr
    return None


def wait_for_daemon(
    inst: Installation, payload: dict[str, Any], cwd: Path, env: dict[str, str]
) -> int:
    """Call until a daemon answers; its pid."""
    for _ in range(200):
        pid = answered_by(inst.hook(payload, cwd, env))
        if pid is not None:
            return pid
        time.sleep(0.2)
    raise AssertionError(f"no hook daemon of {inst.package} ever answered")


def all_lines(log: Path) -> list[bytes]:
    """Every line of an audit log and its rotated parts, each part ending in a whole record."""
    lines = []
    for part in [*logfile.rotated(log), log]:
        data = part.read_bytes()
        assert data.endswith(b"\n"), f"{part} ends inside a record"
        lines += data.splitlines()
    return lines
