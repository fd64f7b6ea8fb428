"""`guard install` for teams that commit their settings, and `guard uninstall` taking out
everything install wrote: real CLI runs in a real git repository."""

from __future__ import annotations

import json
import subprocess
import sys
import tomllib
from pathlib import Path

from guard.setup.install import hook_command


def guard(*args: str, cwd: Path, env: dict[str, str],
          code: int | None = 0) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run([sys.executable, "-m", "guard", *args], capture_output=True,
                          text=True, cwd=cwd, env=env, timeout=120, check=False)
    if code is not None:
        assert proc.returncode == code, (proc.stdout, proc.stderr)
    return proc


def git(repo: Path, *args: str, env: dict[str, str]) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True,
                          env=env, check=True, timeout=60).stdout


def commit_settings(repo: Path, env: dict[str, str], rel: str, text: str) -> None:
    (repo / rel).parent.mkdir(parents=True, exist_ok=True)
    (repo / rel).write_text(text)
    git(repo, "add", rel, env=env)
    git(repo, "-c", "user.email=t@example.com", "-c", "user.name=t", "commit", "-qm", "team",
        env=env)


def test_install_where_the_team_commits_settings_writes_the_local_file(
    repo: Path, env: dict[str, str]
) -> None:
    team = '{"permissions": {"allow": ["Bash(git status)"]}}\n'
    commit_settings(repo, env, ".claude/settings.json", team)
    proc = guard("install", "claude-code", cwd=repo, env=env)
    assert (repo / ".claude/settings.json").read_text() == team  # the team's file untouched
    local = json.loads((repo / ".claude/settings.local.json").read_text())
    assert local["hooks"]["PreToolUse"]
    assert "settings.local.json" in proc.stdout
    # nothing for the user to commit by mistake: git ignores the local file
    assert git(repo, "status", "--porcelain", env=env) == ""
    guard("uninstall", "claude-code", cwd=repo, env=env)
    assert not (repo / ".claude/settings.local.json").exists()
    assert (repo / ".claude/settings.json").read_text() == team
    assert "settings.local.json" not in (repo / ".git/info/exclude").read_text()


def test_install_into_an_untracked_shared_file_warns_in_one_line(
    repo: Path, env: dict[str, str]
) -> None:
    proc = guard("install", "claude-code", cwd=repo, env=env)
    assert (repo / ".claude/settings.json").exists()
    warnings = [line for line in proc.stderr.splitlines() if "teams commit" in line]
    assert len(warnings) == 1 and "--local" in warnings[0], proc.stderr


def test_local_codex_install_is_kept_out_of_git_and_uninstall_takes_out_everything(
    repo: Path, env: dict[str, str], home: Path
) -> None:
    proc = guard("install", "codex", "--local", cwd=repo, env=env)
    assert (repo / ".codex/hooks.json").exists()
    assert "info/exclude" in proc.stdout
    assert git(repo, "status", "--porcelain", env=env) == ""
    config = tomllib.loads((home / ".codex/config.toml").read_text())
    assert config["projects"][str(repo)]["trust_level"] == "trusted"
    proc = guard("uninstall", "codex", cwd=repo, env=env)
    # guard created Codex's config.toml for its trust: with the trust gone, so is the file
    assert not (home / ".codex").exists(), sorted(p.name for p in (home / ".codex").iterdir())
    assert not (repo / ".codex").exists()
    assert "/.codex/hooks.json" not in (repo / ".git/info/exclude").read_text()
    assert "removed the trust of the project" in proc.stdout


def test_local_codex_install_uses_the_user_file_when_the_team_tracks_the_project_one(
    repo: Path, env: dict[str, str], home: Path
) -> None:
    commit_settings(repo, env, ".codex/hooks.json", "{}\n")
    proc = guard("install", "codex", "--local", cwd=repo, env=env)
    assert (repo / ".codex/hooks.json").read_text() == "{}\n"
    assert (home / ".codex/hooks.json").exists()
    assert "tracked by git" in proc.stdout


def test_uninstall_codex_project_removes_the_trust_it_wrote_and_its_folders(
    repo: Path, env: dict[str, str], home: Path
) -> None:
    guard("install", "codex", "--project", cwd=repo, env=env)
    assert (repo / ".codex/hooks.json").exists()
    guard("uninstall", "codex", "--project", cwd=repo, env=env)
    assert not (home / ".codex/config.toml").exists()  # it held nothing but guard's trust
    assert not (repo / ".codex").exists()


def test_uninstall_codex_removes_the_config_it_created_and_keeps_one_it_found(
    repo: Path, env: dict[str, str], home: Path
) -> None:
    """Codex's user config.toml holds only guard's trust when guard's install created it."""
    for scope in ("--project", "--user"):
        guard("install", "codex", scope, cwd=repo, env=env)
        assert (home / ".codex/config.toml").exists()
        proc = guard("uninstall", "codex", scope, cwd=repo, env=env)
        assert not (home / ".codex").exists(), (scope, proc.stdout)
        assert "removed " + str(home / ".codex/config.toml") in proc.stdout
    # two installs share the file guard created: the first uninstall leaves it and says why
    guard("install", "codex", "--project", cwd=repo, env=env)
    guard("install", "codex", "--user", cwd=repo, env=env)
    proc = guard("uninstall", "codex", "--project", cwd=repo, env=env)
    assert "still needs it" in proc.stdout
    assert (home / ".codex/config.toml").exists()
    guard("uninstall", "codex", "--user", cwd=repo, env=env)
    assert not (home / ".codex").exists()
    # a config.toml that was there before: kept with its own settings, the backup named
    (home / ".codex").mkdir()
    (home / ".codex/config.toml").write_text('model = "o3"\n')
    guard("install", "codex", "--project", cwd=repo, env=env)
    proc = guard("uninstall", "codex", "--project", cwd=repo, env=env)
    assert (home / ".codex/config.toml").read_text() == 'model = "o3"\n'
    assert "config.toml.guard-backup" in proc.stdout


def test_uninstall_leaves_a_trust_it_found_and_says_why(
    repo: Path, env: dict[str, str], home: Path
) -> None:
    (home / ".codex").mkdir()
    (home / ".codex/config.toml").write_text(f'[projects."{repo}"]\ntrust_level = "trusted"\n')
    guard("install", "codex", "--project", cwd=repo, env=env)
    proc = guard("uninstall", "codex", "--project", cwd=repo, env=env)
    config = tomllib.loads((home / ".codex/config.toml").read_text())
    assert config["projects"][str(repo)]["trust_level"] == "trusted"
    assert "it was there before" in proc.stdout


def test_uninstall_leaves_a_folder_holding_other_files_and_says_so(
    repo: Path, env: dict[str, str]
) -> None:
    guard("install", "claude-code", "--project", cwd=repo, env=env)
    (repo / ".claude/agents.md").write_text("mine\n")
    proc = guard("uninstall", "claude-code", "--project", cwd=repo, env=env)
    assert not (repo / ".claude/settings.json").exists()
    assert (repo / ".claude/agents.md").read_text() == "mine\n"
    assert "left" in proc.stdout and "agents.md" in proc.stdout


def test_a_hook_command_on_a_machine_without_guard_blocks_and_names_guard(
    repo: Path, env: dict[str, str]
) -> None:
    """A teammate's machine: the interpreter the committed hook names does not exist."""
    command = hook_command("claude-code", python="/nonexistent/venv/bin/python")
    payload = json.dumps({"hook_event_name": "PreToolUse", "tool_name": "Read",
                          "tool_input": {"file_path": "src/app.py"}, "cwd": str(repo)})
    proc = subprocess.run(["sh", "-c", command], input=payload, capture_output=True,
                          text=True, cwd=repo, env=env, timeout=60, check=False)
    assert proc.returncode == 2
    assert "OpenOxide Guard" in proc.stderr and "pip install" in proc.stderr
    assert "remove guard's hook entries" in proc.stderr


def test_a_block_by_guard_itself_carries_no_install_message(
    repo: Path, env: dict[str, str]
) -> None:
    command = hook_command("claude-code", agent="plan")
    payload = json.dumps({"hook_event_name": "PreToolUse", "tool_name": "Write",
                          "tool_input": {"file_path": str(repo / "src/x.py"), "content": ""},
                          "cwd": str(repo), "session_id": "s1"})
    proc = subprocess.run(["sh", "-c", command], input=payload, capture_output=True,
                          text=True, cwd=repo, env=env, timeout=120, check=False)
    assert "deny" in proc.stdout or proc.returncode == 2, (proc.stdout, proc.stderr)
    assert "not installed" not in proc.stderr
    assert not (repo / "src/x.py").exists()
