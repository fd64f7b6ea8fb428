"""The real MCP filesystem server for tests and the benchmark, installed once into a cache.

``.ci/run`` installs it ahead of time; locally the first test run does
(``npm install`` of the pinned version, ~15 s). Tests skip, saying why, only
when npm itself is missing or cannot install the package (in CI, ``CI=true``, they
fail instead: tests/components.py). :func:`served_project` is the git repository
the tests have the server serve.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
from pathlib import Path

PACKAGE = "@modelcontextprotocol/server-filesystem"
VERSION = "2026.8.31"
BIN = "mcp-server-filesystem"


def _default_cache_dir() -> Path:
    given = os.environ.get("GUARD_MCP_FS_DIR")
    if given:
        return Path(given)
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "openoxide-guard-tests" / f"server-filesystem-{VERSION}"


# fixed at import (test collection), before fixtures point HOME at a temporary directory
_CACHE_DIR = _default_cache_dir()


def cache_dir() -> Path:
    """``$GUARD_MCP_FS_DIR``, else ``~/.cache/openoxide-guard-tests/server-filesystem-VERSION``."""
    return _CACHE_DIR


def server_binary() -> Path:
    """The server's executable, installing it if needed; RuntimeError says why it cannot."""
    prefix = cache_dir()
    binary = prefix / "node_modules" / ".bin" / BIN
    if binary.exists():
        return binary
    npm = shutil.which("npm")
    if npm is None or shutil.which("node") is None:
        raise RuntimeError(f"node/npm not on PATH: cannot install {PACKAGE}@{VERSION}")
    prefix.mkdir(parents=True, exist_ok=True)
    with open(prefix / ".install.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if binary.exists():
            return binary
        print(f"installing {PACKAGE}@{VERSION} into {prefix} ...", file=sys.stderr)
        done = subprocess.run(
            [
                npm,
                "install",
                "--prefix",
                str(prefix),
                "--no-audit",
                "--no-fund",
                f"{PACKAGE}@{VERSION}",
            ],
            capture_output=True,
            text=True,
            timeout=600,
        )
        if done.returncode != 0 or not binary.exists():
            raise RuntimeError(
                f"npm install {PACKAGE}@{VERSION} failed ({done.returncode}):"
                f" {done.stderr.strip()[-500:]}"
            )
    return binary


def required_server() -> Path:
    """:func:`server_binary` for a test: skips it (locally) or fails it (``CI=true``) saying
    why the server cannot be had."""
    from components import require_component  # tests/ is on sys.path under pytest

    try:
        return server_binary()
    except RuntimeError as exc:
        return require_component("the real MCP filesystem server", None, str(exc))


def served_project(tmp_path: Path, files: dict[str, str] | None = None) -> Path:
    """``tmp_path/project``, a fresh git repository holding src/app.py and ``files``
    (name in the project's root -> text); its resolved path."""
    root = tmp_path / "project"
    (root / "src").mkdir(parents=True)
    (root / "src" / "app.py").write_text("print('hello')\n")
    for name, text in (files or {}).items():
        (root / name).write_text(text)
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    return root.resolve()
