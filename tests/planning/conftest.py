from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from guard.planning import Session


@pytest.fixture(autouse=True)
def _private_data_dir(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> Path:
    """Point guard's user data dir at a temp dir (inherited by subprocesses)."""
    data = tmp_path_factory.mktemp("xdg-data")
    monkeypatch.setenv("XDG_DATA_HOME", str(data))
    return data


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A real git repository."""
    root = tmp_path / "repo"
    root.mkdir()
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    return root.resolve()


@pytest.fixture
def plain_dir(tmp_path: Path) -> Path:
    """A directory under no version control."""
    root = tmp_path / "plain"
    root.mkdir()
    return root.resolve()


@pytest.fixture
def session(repo: Path) -> Session:
    return Session.start(repo)


@pytest.fixture
def plan_session(repo: Path) -> Session:
    return Session.start(repo, "plan", title="Add a greeting")


def write_plan_file(session: Session, text: str = "# Plan\n\n1. Do the thing\n") -> Path:
    assert session.plan_path
    path = Path(session.plan_path)
    path.write_text(text, encoding="utf-8")
    return path
