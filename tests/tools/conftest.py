"""Fixtures for the tool-call tests: a worktree that is not inside the temp root."""

from __future__ import annotations

import os
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest


@pytest.fixture
def worktree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A git worktree with src/app.py, a .env secret and an empty plan directory.

    The system temp root ({tmp} in policies) is moved to a sibling directory so that
    paths in the worktree and in $HOME are not also "under {tmp}" (pytest's own
    directories live in /tmp).
    """
    systmp = tmp_path / "systmp"
    systmp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(systmp))
    root = tmp_path / "repo"
    root.mkdir()
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    (root / "src").mkdir()
    (root / "src" / "app.py").write_text("print('hi')\n")
    (root / ".env").write_text("TOKEN=secret\n")
    (root / ".openoxide" / "plans").mkdir(parents=True)
    old = os.getcwd()
    os.chdir(root)
    try:
        yield Path(os.path.realpath(root))
    finally:
        os.chdir(old)
