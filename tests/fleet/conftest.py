"""Fixtures for the fleet features: root-owned managed directories, guard run as a user."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from components import in_ci
from nobody import reach

NOBODY = 65534


def _trusted_base() -> str | None:
    """A directory whose every component is root's and writable by root alone."""
    for base in ("/run", "/var/lib", "/opt", "/srv"):
        path, ok = Path(base), True
        while True:
            try:
                st = path.stat()
            except OSError:
                ok = False
                break
            if st.st_uid != 0 or st.st_mode & 0o022:
                ok = False
                break
            if path == path.parent:
                break
            path = path.parent
        if ok:
            return base
    return None


class Managed:
    """A root-owned managed directory (``$GUARD_MANAGED_DIR``) the test writes files into."""

    def __init__(self, top: Path) -> None:
        self.top = top
        self.dir = top / "managed.d"
        self.dir.mkdir(mode=0o755)
        os.chmod(self.dir, 0o755)

    def write(self, name: str, text: str, mode: int = 0o644, where: Path | None = None) -> Path:
        path = (where or self.dir) / name
        tmp = path.with_name(f".{name}.tmp")
        tmp.write_text(text)
        os.chmod(tmp, mode)
        os.replace(tmp, path)
        return path


@pytest.fixture
def managed(monkeypatch: pytest.MonkeyPatch) -> Iterator[Managed]:
    """``$GUARD_MANAGED_DIR`` set to a fresh root-owned 0755 directory (needs root)."""
    base = _trusted_base()
    if os.geteuid() != 0 or base is None:
        why = "needs root and a root-owned directory chain (/run) to make managed directories"
        if in_ci():
            pytest.fail(why)
        pytest.skip(why)
    top = Path(tempfile.mkdtemp(prefix="guard-managed-", dir=base))
    os.chmod(top, 0o755)
    m = Managed(top)
    monkeypatch.setenv("GUARD_MANAGED_DIR", str(m.dir))
    try:
        yield m
    finally:
        shutil.rmtree(top, ignore_errors=True)


def guard_cmd(*args: str) -> list[str]:
    return [sys.executable, "-m", "guard", *args]


def run_guard(
    *args: str | os.PathLike[str],
    cwd: Path,
    env: dict[str, str] | None = None,
    user: int | None = None,
    stdin: str | None = None,
) -> subprocess.CompletedProcess[str]:
    """``guard ARGS`` in a fresh process (as ``user`` through setpriv when given)."""
    cmd = guard_cmd(*[os.fspath(a) for a in args])
    if user is not None:
        cmd = [*reach(), "setpriv", f"--reuid={user}", f"--regid={user}", "--clear-groups",
               *cmd]
    return subprocess.run(cmd, cwd=cwd, env=env if env is not None else dict(os.environ),
                          capture_output=True, text=True, timeout=120, input=stdin,
                          check=False)


def nobody_home(tmp_path: Path) -> Path:
    home = tmp_path / "nobody-home"
    home.mkdir(exist_ok=True)
    os.chown(home, NOBODY, NOBODY)
    return home
