"""Fixtures of the replay tests: the checked-in real transcripts, placed in a real repository."""

from __future__ import annotations

import subprocess
from pathlib import Path

FIXTURES = Path(__file__).parent / "fixtures"
#: The repository path the fixtures were recorded in (see fixtures/README.md).
RECORDED = "/tmp/guard-replay/repo"
HOSTS = {"claude-code": "claude-code.jsonl", "codex": "codex.jsonl", "gemini": "gemini.jsonl",
         "opencode": "opencode.json"}


def make_repo(root: Path) -> Path:
    repo = root / "repo"
    (repo / "src").mkdir(parents=True)
    (repo / "src/app.py").write_text("print('hello')\n")
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    return repo.resolve()


def placed(name: str, dest: Path, repo: Path | str) -> Path:
    """Fixture ``name`` copied to ``dest`` with its recorded repository path replaced."""
    dest.mkdir(parents=True, exist_ok=True)
    out = dest / name
    out.write_text((FIXTURES / name).read_text().replace(RECORDED, str(repo)))
    return out


