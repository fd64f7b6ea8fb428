"""builtin:default's build agent asks before writing files that make code run later
without anyone reading it (editor tasks, MCP servers, agent commands and hooks, direnv,
CI workflows, git hook managers)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from guard.decide import Guard
from guard.effects import Effect

from .test_managed import hook, hook_decision

AUTO_RUN = [
    ".vscode/tasks.json", ".vscode/launch.json", ".mcp.json", ".claude/commands/deploy.md",
    ".claude/agents/helper.md", ".claude/skills/s/SKILL.md", ".claude/hooks/pre.sh",
    ".gemini/commands/x.toml", ".envrc", "web/.envrc", ".github/workflows/ci.yml",
    ".husky/pre-commit", ".pre-commit-config.yaml",
]  # fmt: skip


@pytest.mark.parametrize("path", AUTO_RUN)
def test_build_agent_asks_before_writing_auto_run_files(repo: Path, path: str) -> None:
    g = Guard.load("builtin:default", worktree=repo)
    for effect in (Effect.write(path), Effect.delete(path)):
        d = g.decide("build", [effect], cwd=repo)
        assert d.action.value == "ask", (path, d.reason)
        assert "agents.build." in d.rule


def test_ordinary_files_and_a_symlink_into_an_auto_run_dir(repo: Path) -> None:
    g = Guard.load("builtin:default", worktree=repo)
    assert g.decide("build", [Effect.write("src/app.py")], cwd=repo).action.value == "allow"
    assert g.decide("build", [Effect.write(".github/README.md")], cwd=repo).action.value == (
        "allow")
    (repo / ".github" / "workflows").mkdir(parents=True)
    (repo / "src" / "wf").symlink_to(repo / ".github" / "workflows")
    d = g.decide("build", [Effect.write("src/wf/ci.yml")], cwd=repo)
    assert d.action.value == "ask", d.reason  # the link's target is asked about


def test_installed_hook_asks_and_the_file_stays_unwritten(repo: Path) -> None:
    import os

    env = {**os.environ, "GUARD_AGENT": "build"}
    target = repo / ".github" / "workflows" / "ci.yml"
    got = hook(repo, "Write", {"file_path": str(target), "content": "on: push"}, env)
    assert hook_decision(got) == "ask", got.stdout
    assert "agents.build.write.ask" in json.loads(got.stdout)["hookSpecificOutput"][
        "permissionDecisionReason"]
    assert not target.exists()
