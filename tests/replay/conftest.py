"""The replay tests' fixture: all four hosts' transcripts, placed in a real repository."""

from __future__ import annotations

from pathlib import Path

import pytest

from .helpers import HOSTS, make_repo, placed


@pytest.fixture
def sessions(tmp_path: Path) -> tuple[Path, Path]:
    """(a directory holding all four hosts' transcripts, the repository they ran in)."""
    repo = make_repo(tmp_path)
    for name in HOSTS.values():
        placed(name, tmp_path / "transcripts", repo)
    return tmp_path / "transcripts", repo
