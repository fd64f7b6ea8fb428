"""Shared fixtures: real git repositories in temporary directories."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

# CI never passes by skipping: a hook from tests/components.py (tests/ is on sys.path here)
from components import pytest_runtest_makereport  # noqa: F401
from engines import require_engine

from guard.match import ENGINES

MCP_TESTS = Path(__file__).parent / "mcp"


@pytest.fixture(autouse=True)
def _isolated_home(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Never touch the real user's data dir, home or policy while testing."""
    home = tmp_path_factory.mktemp("home")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_DATA_HOME", str(home / ".local" / "share"))
    monkeypatch.delenv("GUARD_POLICY", raising=False)
    monkeypatch.delenv("GUARD_AGENT", raising=False)


@pytest.fixture(autouse=True)
def _no_path_cache_on_a_fake_filesystem(request: pytest.FixtureRequest) -> Iterator[None]:
    """pyfakefs replaces ``os``: the process-wide canonical-path cache (real inotify, answers
    about the real disk) is emptied before it does, and stays off until it is undone."""
    if "fs" not in request.fixturenames:
        yield
        return
    from guard.pathcache import CACHE

    CACHE.reset()  # closes its real descriptors with the real os
    was = CACHE.enabled
    CACHE.enabled = False
    try:
        yield
    finally:
        CACHE.enabled = was
        CACHE.reset()


@pytest.fixture(params=ENGINES)
def engine(request: pytest.FixtureRequest) -> str:
    """Each gitignore matching engine in turn (guard/match/): "python", "re2"."""
    return require_engine(str(request.param))


@pytest.fixture
def repo(tmp_path: Path) -> Iterator[Path]:
    """A fresh git worktree with a source file and an empty plan directory."""
    root = tmp_path / "repo"
    root.mkdir()
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    (root / "src").mkdir()
    (root / "src" / "app.py").write_text("print('hi')\n")
    (root / ".openoxide" / "plans").mkdir(parents=True)
    old = os.getcwd()
    os.chdir(root)
    try:
        yield Path(os.path.realpath(root))
    finally:
        os.chdir(old)


@pytest.fixture(scope="session")
def fs_server() -> Path:
    """The real MCP filesystem server, pinned and installed once (tests/mcp/fsserver.py); a
    test that needs it skips (locally) or fails (``CI=true``) when it cannot be installed."""
    if str(MCP_TESTS) not in sys.path:  # tests outside tests/mcp
        sys.path.insert(0, str(MCP_TESTS))
    from fsserver import required_server

    return required_server()
