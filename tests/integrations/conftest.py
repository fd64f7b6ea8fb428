"""Fixtures for the host adapters: a real git repo, an isolated HOME, the real hook process."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

HookRunner = Callable[..., subprocess.CompletedProcess[str]]


@pytest.fixture
def home(tmp_path: Path) -> Path:
    h = tmp_path / "home"
    h.mkdir()
    return h


def stop_hookd(home: Path, settle: float = 3.0) -> None:
    """Stop the hook daemons a test started, by the pids they recorded.

    A daemon started by the test's last call may still be coming up, so pids
    are collected for ``settle`` seconds once any daemon has run under ``home``.
    """
    run = home / ".local/share/openoxide/run"
    if not run.exists():
        return
    stopped: set[int] = set()
    deadline = time.monotonic() + settle
    while time.monotonic() < deadline:
        for pidfile in run.glob("hookd-*.pid"):  # one per installation
            try:
                pid = int(pidfile.read_text().strip())
            except (OSError, ValueError):
                continue
            if pid not in stopped:
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGTERM)
                stopped.add(pid)
        time.sleep(0.2)


@pytest.fixture
def env(home: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, str]]:
    """A process environment whose HOME (and so guard's data dir) is a temporary directory.

    The hook daemon is off unless a test turns it on; daemons started under it
    idle out after 60 s and are stopped at teardown.
    """
    out = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("GUARD_", "XDG_")) and k not in ("PYTHONPATH",)
    }
    out["HOME"] = str(home)
    out["GUARD_HOOKD_IDLE"] = "60"
    out["GUARD_HOOK_DAEMON"] = "0"  # tests of the daemon turn it on
    monkeypatch.setenv("HOME", str(home))
    for key in list(os.environ):
        if key.startswith(("GUARD_", "XDG_")):
            monkeypatch.delenv(key)
    yield out
    stop_hookd(home)


@pytest.fixture
def repo(tmp_path: Path, env: dict[str, str]) -> Path:
    """A real git repository with one committed source file."""
    r = tmp_path / "repo"
    (r / "src").mkdir(parents=True)
    (r / "src" / "app.py").write_text("print('hello')\n")
    git = ["git", "-c", "user.email=t@example.com", "-c", "user.name=t"]
    subprocess.run([*git, "init", "-q", str(r)], check=True, env=env)
    subprocess.run([*git, "-C", str(r), "add", "."], check=True, env=env)
    subprocess.run([*git, "-C", str(r), "commit", "-qm", "init"], check=True, env=env)
    return Path(os.path.realpath(r))


@pytest.fixture
def run_hook(env: dict[str, str]) -> HookRunner:
    """Run the hook exactly as hosts do: a separate process, payload on stdin."""

    def run(
        host: str,
        payload: dict[str, Any] | str,
        *args: str,
        cwd: Path | None = None,
        extra_env: dict[str, str] | None = None,
    ) -> subprocess.CompletedProcess[str]:
        text = payload if isinstance(payload, str) else json.dumps(payload)
        return subprocess.run(
            [sys.executable, "-I", "-m", "guard.hooks", host, *args],
            input=text,
            capture_output=True,
            text=True,
            cwd=cwd,
            env={**env, **(extra_env or {})},
            timeout=60,
            check=False,
        )

    return run


@pytest.fixture
def decide_hook(env: dict[str, str]) -> HookRunner:
    """The same pipeline as the hook process, called in this process (faster, same answers)."""
    from guard.hooks.__main__ import parse_args
    from guard.hooks.front_door import decide

    def run(
        host: str,
        payload: dict[str, Any] | str,
        *args: str,
        cwd: Path | None = None,
        extra_env: dict[str, str] | None = None,
    ) -> subprocess.CompletedProcess[str]:
        text = payload if isinstance(payload, str) else json.dumps(payload)
        _host, agent, policy = parse_args([host, *args])
        answer = decide(
            host,
            text,
            agent=agent,
            policy=policy,
            env={**env, **(extra_env or {})},
            cwd=str(cwd) if cwd else None,
        )
        return subprocess.CompletedProcess(
            [host, *args], answer.exit_code, answer.stdout, answer.stderr
        )

    return run
