"""Shared by the end-to-end tests of real host CLIs: installs, a private home, a repo.

Each CLI is installed once, pinned, into a versioned folder of the test cache
(``~/.cache/openoxide-guard/<name>-<version>``), as scripts/test.sh does. Where
it cannot be installed the test is skipped, except in CI (``CI=true``), where a
component that fails to install fails the run.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from components import require_component

REAL_HOME = os.path.expanduser("~")
CACHE = Path(os.environ.get("XDG_CACHE_HOME") or os.path.join(REAL_HOME, ".cache"))
PREFIX_ROOT = CACHE / "openoxide-guard"


def unavailable(why: str) -> None:
    """Skip, or in CI fail: CI must run every host (tests/components.py)."""
    require_component("a host CLI", None, why)


def npm_binary(package: str, version: str, folder: str, binary: str) -> str:
    """``binary`` of ``package@version``, npm-installed into the cache on first use."""
    prefix = PREFIX_ROOT / f"{folder}-{version}"
    path = prefix / "node_modules" / ".bin" / binary
    if not path.exists():
        npm = shutil.which("npm")
        if npm is None:
            unavailable(f"npm is not installed, so {package} cannot be installed")
        assert npm is not None
        proc = subprocess.run(
            [npm, "install", "--prefix", str(prefix), "--no-fund", "--no-audit",
             "--loglevel=error", f"{package}@{version}"],
            capture_output=True, text=True, timeout=900, check=False,
        )
        if proc.returncode != 0 or not path.exists():
            tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
            unavailable(f"npm install {package}@{version} failed: {' | '.join(tail)}")
    return str(path)


def check_version(binary: str, version: str, env: dict[str, str] | None = None) -> None:
    proc = subprocess.run([binary, "--version"], capture_output=True, text=True, timeout=120,
                          check=False, env=env, stdin=subprocess.DEVNULL)
    if version not in proc.stdout + proc.stderr:
        unavailable(f"{binary} --version gave {proc.stdout.strip()!r} {proc.stderr[-300:]!r}")


def clean_env(home: Path) -> dict[str, str]:
    """This process's environment for a host CLI: no guard/host/python variables, a private
    home (HOME and XDG folders inside it)."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("GUARD_", "XDG_", "ANTHROPIC_", "CLAUDE", "PYTHON", "CODEX_",
                                "GEMINI_", "GOOGLE_", "OPENAI_", "OPENCODE", "AIDER_"))
           and k not in ("PWD", "OLDPWD")}  # OpenCode takes $PWD over its real cwd
    env.update(
        HOME=str(home),
        XDG_CONFIG_HOME=str(home / ".config"),
        XDG_DATA_HOME=str(home / ".local/share"),
        XDG_CACHE_HOME=str(home / ".cache"),
        XDG_STATE_HOME=str(home / ".local/state"),
        GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@example.com",
        GIT_COMMITTER_NAME="t", GIT_COMMITTER_EMAIL="t@example.com",
        NO_COLOR="1",
    )
    return env


def make_repo(root: Path, env: dict[str, str]) -> Path:
    repo = root / "repo"
    (repo / "src").mkdir(parents=True)
    (repo / "src" / "app.py").write_text("print('hello')\n")
    (repo / "README.md").write_text("demo\n")
    subprocess.run(["git", "init", "-q", str(repo)], check=True, env=env)
    subprocess.run(["git", "-C", str(repo), "add", "."], check=True, env=env)
    subprocess.run(["git", "-C", str(repo), "commit", "-qm", "init"], check=True, env=env)
    return Path(os.path.realpath(repo))


def guard(*args: str, cwd: Path, env: dict[str, str], check: bool = True
          ) -> subprocess.CompletedProcess[str]:
    """The guard CLI of this checkout, as a user runs it."""
    proc = subprocess.run([sys.executable, "-m", "guard", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300, check=False)
    if check:
        assert proc.returncode == 0, (args, proc.stdout, proc.stderr)
    return proc


def doctor(cwd: Path, env: dict[str, str]) -> tuple[int, dict[str, Any], str]:
    """(exit status, --json report, the human report) of guard doctor."""
    as_json = guard("doctor", "--json", cwd=cwd, env=env, check=False)
    human = guard("doctor", cwd=cwd, env={**env, "COLUMNS": "200"}, check=False)
    return as_json.returncode, json.loads(as_json.stdout), human.stdout


def host_check(report: dict[str, Any], name: str) -> dict[str, Any]:
    [found] = [c for c in report["hosts"] if c["name"] == name]
    return found


def snapshot(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


def audit_records(home: Path) -> list[dict[str, Any]]:
    from guard.audit.logfile import read

    return [r for log in sorted(home.rglob("audit/*.jsonl")) for r in read(log)
            if r.get("source") == "hook"]


def stop_hookd(home: Path, settle: float = 5.0) -> None:
    """Stop the hook daemons a run started under ``home``: each records its pid in
    ``hookd-<key>.pid`` (one per installation) and may still be starting, so SIGTERM every
    pid recorded until one poll after the last finds no new one, for ``settle`` s at most."""
    run = home / ".local/share/openoxide/run"
    deadline = time.monotonic() + settle
    stopped: set[int] = set()
    while time.monotonic() < deadline:
        found = set()
        for pidfile in run.glob("hookd-*.pid"):
            with contextlib.suppress(OSError, ValueError):  # one being written: next poll
                found.add(int(pidfile.read_text().strip()))
        for pid in found - stopped:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGTERM)
        if stopped and found <= stopped:
            return
        stopped |= found
        time.sleep(0.2)


def venv_binary(requirement: str, folder: str, binary: str) -> str:
    """``binary`` of a PyPI package installed into its own venv in the cache (its
    dependencies may clash with guard's)."""
    prefix = PREFIX_ROOT / folder
    path = prefix / "bin" / binary
    if not path.exists():
        python = shutil.which("python3") or sys.executable
        steps = [[python, "-m", "venv", str(prefix)],
                 [str(prefix / "bin/python"), "-m", "pip", "install", "-q", requirement]]
        for step in steps:
            proc = subprocess.run(step, capture_output=True, text=True, timeout=1800,
                                  check=False)
            if proc.returncode != 0:
                tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
                unavailable(f"{' '.join(step[:4])} failed: {' | '.join(tail)}")
    return str(path)
