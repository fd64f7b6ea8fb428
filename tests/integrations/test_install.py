"""`guard install` / `guard uninstall` / `guard doctor` on real settings files."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from guard.hooks.adapter import OUR_COMMAND
from guard.hooks.settings_file import BACKUP_SUFFIX
from guard.setup.install import hook_command

HOSTS = {
    "claude-code": (".claude/settings.json", "PreToolUse"),
    "codex": (".codex/hooks.json", "PreToolUse"),
    "gemini": (".gemini/settings.json", "BeforeTool"),
    "cursor": (".cursor/hooks.json", "beforeShellExecution"),
}


def guard(
    *args: str, cwd: Path, env: dict[str, str], code: int = 0
) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(
        [sys.executable, "-m", "guard", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=env,
        timeout=120,
        check=False,
    )
    assert proc.returncode == code, (proc.stdout, proc.stderr)
    return proc


def commands(settings: dict[str, Any], event: str) -> list[str]:
    """The commands of an event's hooks; the planning hook (tests/planning/test_host.py) aside."""
    out: list[str] = []
    for group in settings.get("hooks", {}).get(event, []):
        if group.get("matcher") in ("ExitPlanMode", "exit_plan_mode"):
            continue
        out.extend(h["command"] for h in group.get("hooks", [group]) if "command" in h)
    return out


@pytest.mark.parametrize("host", list(HOSTS))
def test_install_writes_a_working_entry_once(host: str, repo: Path, env: dict[str, str]) -> None:
    rel, event = HOSTS[host]
    if host == "gemini":  # Gemini loads project hooks only in a trusted workspace
        env = {**env, "GEMINI_CLI_TRUST_WORKSPACE": "true"}
    guard("install", host, "--project", cwd=repo / "src", env=env)
    path = repo / rel
    data = json.loads(path.read_text())
    ours = [c for c in commands(data, event) if OUR_COMMAND.search(c)]
    assert ours == [hook_command(host)]
    before = path.read_bytes()
    proc = guard("install", host, "--project", cwd=repo, env=env)
    assert "unchanged" in proc.stdout
    assert path.read_bytes() == before
    assert not path.with_name(path.name + BACKUP_SUFFIX).exists()


def test_install_keeps_every_other_key_and_hook(repo: Path, env: dict[str, str]) -> None:
    path = repo / ".claude/settings.json"
    path.parent.mkdir()
    theirs = {
        "model": "opus",
        "permissions": {"allow": ["Bash(git status)"]},
        "hooks": {
            "PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "lint"}]}],
            "Stop": [{"hooks": [{"type": "command", "command": "notify"}]}],
        },
    }
    path.write_text(json.dumps(theirs, indent=4))
    original = path.read_bytes()
    guard("install", "claude-code", cwd=repo, env=env)
    data = json.loads(path.read_text())
    assert data["model"] == "opus" and data["permissions"] == theirs["permissions"]
    assert data["hooks"]["Stop"] == theirs["hooks"]["Stop"]
    assert data["hooks"]["PreToolUse"][0] == theirs["hooks"]["PreToolUse"][0]
    assert commands(data, "PreToolUse") == ["lint", hook_command("claude-code")]
    assert path.with_name("settings.json" + BACKUP_SUFFIX).read_bytes() == original

    guard("uninstall", "claude-code", cwd=repo, env=env)
    assert json.loads(path.read_text()) == theirs


def test_install_replaces_a_stale_entry(repo: Path, env: dict[str, str]) -> None:
    """A moved venv leaves an entry pointing nowhere; reinstalling replaces it, no duplicate."""
    path = repo / ".claude/settings.json"
    path.parent.mkdir()
    stale = hook_command("claude-code", python="/old/venv/bin/python")
    path.write_text(
        json.dumps(
            {
                "hooks": {
                    "PreToolUse": [
                        {"matcher": "*", "hooks": [{"type": "command", "command": stale}]}
                    ]
                }
            }
        )
    )
    proc = guard("install", "claude-code", cwd=repo, env=env)
    assert "replaced 1" in proc.stdout
    assert commands(json.loads(path.read_text()), "PreToolUse") == [hook_command("claude-code")]


def test_install_pins_agent_and_policy(repo: Path, env: dict[str, str]) -> None:
    guard(
        "install",
        "claude-code",
        "--agent",
        "plan",
        "--policy",
        "builtin:default",
        cwd=repo,
        env=env,
    )
    data = json.loads((repo / ".claude/settings.json").read_text())
    [cmd] = commands(data, "PreToolUse")
    assert "--agent plan --policy builtin:default" in cmd


def test_install_refuses_invalid_json_and_leaves_it(repo: Path, env: dict[str, str]) -> None:
    path = repo / ".claude/settings.json"
    path.parent.mkdir()
    path.write_text('{\n  "model": "opus",\n  oops\n}\n')
    before = path.read_bytes()
    proc = guard("install", "claude-code", cwd=repo, env=env, code=2)
    assert f"{path}:3:3" in proc.stderr and "not valid JSON" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert path.read_bytes() == before
    assert sorted(p.name for p in path.parent.iterdir()) == ["settings.json"]


def test_install_refuses_hooks_of_the_wrong_shape(repo: Path, env: dict[str, str]) -> None:
    path = repo / ".gemini/settings.json"
    path.parent.mkdir()
    path.write_text('{"hooks": ["not", "an", "object"]}')
    proc = guard("install", "gemini", "--project", cwd=repo, env=env, code=2)
    assert str(path) in proc.stderr and "'hooks' must be an object" in proc.stderr
    assert json.loads(path.read_text()) == {"hooks": ["not", "an", "object"]}


def test_user_scope_writes_into_home(repo: Path, env: dict[str, str], home: Path) -> None:
    guard("install", "codex", "--user", cwd=repo, env=env)
    assert commands(json.loads((home / ".codex/hooks.json").read_text()), "PreToolUse")
    assert not (repo / ".codex").exists()
    guard("install", "codex", "--user", "--project", cwd=repo, env=env, code=2)


def test_uninstall_removes_only_ours_everywhere(repo: Path, env: dict[str, str]) -> None:
    guard("install", "cursor", cwd=repo, env=env)
    path = repo / ".cursor/hooks.json"
    data = json.loads(path.read_text())
    data["hooks"]["beforeShellExecution"].insert(0, {"command": "./audit.sh"})
    path.write_text(json.dumps(data))
    proc = guard("uninstall", "cursor", cwd=repo, env=env)
    assert "removed 3" in proc.stdout
    assert json.loads(path.read_text()) == {
        "version": 1,
        "hooks": {"beforeShellExecution": [{"command": "./audit.sh"}]},
    }
    assert "not wired" in guard("uninstall", "cursor", cwd=repo, env=env).stdout


def test_uninstall_without_settings_changes_nothing(repo: Path, env: dict[str, str]) -> None:
    guard("uninstall", "gemini", cwd=repo, env=env)
    assert not (repo / ".gemini").exists()


def test_installed_command_answers_like_the_host_expects(repo: Path, env: dict[str, str]) -> None:
    """The exact command written to settings runs through sh and denies a plan-mode write."""
    guard("install", "claude-code", "--agent", "plan", cwd=repo, env=env)
    [cmd] = commands(json.loads((repo / ".claude/settings.json").read_text()), "PreToolUse")
    payload = {
        "hook_event_name": "PreToolUse",
        "tool_name": "Write",
        "cwd": str(repo),
        "tool_input": {"file_path": str(repo / "src/x.py"), "content": ""},
    }
    proc = subprocess.run(
        ["/bin/sh", "-c", cmd],
        input=json.dumps(payload),
        text=True,
        capture_output=True,
        cwd=repo,
        env=env,
        check=False,
    )
    assert json.loads(proc.stdout)["hookSpecificOutput"]["permissionDecision"] == "deny"


def test_doctor_reports_wired_hosts_and_layers(repo: Path, env: dict[str, str]) -> None:
    guard("install", "claude-code", cwd=repo, env=env)
    report = json.loads(guard("doctor", "--json", cwd=repo, env=env).stdout)
    status = {(c["host"], c["scope"]): c["status"] for c in report["hosts"]}
    assert status[("claude-code", "project")] == "ok"
    assert status[("codex", "project")] == "off"
    layers = {c["name"]: c["status"] for c in report["layers"]}
    assert layers["policy evaluator"] == "ok"
    assert set(layers) >= {"tool analysis", "audit log", "kernel confinement", "monitor"}


def test_doctor_flags_a_hook_whose_interpreter_is_gone(
    repo: Path, env: dict[str, str], tmp_path: Path, home: Path
) -> None:
    venv = tmp_path / "venv/bin"
    venv.mkdir(parents=True)
    fake = venv / "python"
    fake.write_text(f'#!/bin/sh\nexec {sys.executable} "$@"\n')
    fake.chmod(0o755)
    from guard.setup.install import install

    (home / ".gemini").mkdir()  # a trusted workspace: Gemini loads its project hooks
    (home / ".gemini/trustedFolders.json").write_text(json.dumps({str(repo): "TRUST_FOLDER"}))
    assert install("gemini", "project", cwd=repo, python=str(fake)).problems == []
    assert "ok" in guard("doctor", cwd=repo, env=env).stdout
    fake.unlink()
    proc = guard("doctor", "--json", cwd=repo, env=env, code=1)
    [gem] = [c for c in json.loads(proc.stdout)["hosts"] if c["name"] == "gemini (project)"]
    assert gem["status"] == "broken" and "missing" in gem["detail"]


@pytest.mark.parametrize("host", list(HOSTS))
def test_uninstall_removes_a_settings_file_guard_created(
    host: str, repo: Path, env: dict[str, str]
) -> None:
    """No `{}` and no backup left behind: the file guard created goes, even after a second
    install (which must not forget that guard created it)."""
    path = repo / HOSTS[host][0]
    assert not path.exists()
    if host == "gemini":  # Gemini loads project hooks only in a trusted workspace
        env = {**env, "GEMINI_CLI_TRUST_WORKSPACE": "true"}
    guard("install", host, "--project", cwd=repo, env=env)
    guard("install", host, "--project", cwd=repo, env=env)
    assert path.is_file()
    proc = guard("uninstall", host, "--project", cwd=repo, env=env)
    assert "guard had created it" in proc.stdout
    assert not path.exists()
    assert not path.with_name(path.name + BACKUP_SUFFIX).exists()


@pytest.mark.parametrize("host", list(HOSTS))
def test_uninstall_restores_the_file_guard_found_byte_for_byte(
    host: str, repo: Path, env: dict[str, str]
) -> None:
    path = repo / HOSTS[host][0]
    path.parent.mkdir()
    theirs = {"version": 1, "hooks": {}} if host == "cursor" else {"model": "x", "hooks": {}}
    found = ("{\"model-of-theirs\" : 1 ,\n\n  " + json.dumps(theirs)[1:]).encode()
    path.write_bytes(found)
    path.chmod(0o600)
    if host == "gemini":  # Gemini loads project hooks only in a trusted workspace
        env = {**env, "GEMINI_CLI_TRUST_WORKSPACE": "true"}
    guard("install", host, "--project", cwd=repo, env=env)
    assert path.read_bytes() != found
    proc = guard("uninstall", host, "--project", cwd=repo, env=env)
    assert "restored the file as guard found it" in proc.stdout
    assert path.read_bytes() == found and (path.stat().st_mode & 0o777) == 0o600
    assert not path.with_name(path.name + BACKUP_SUFFIX).exists()


def test_uninstall_keeps_what_the_user_changed_since(repo: Path, env: dict[str, str]) -> None:
    """The backup no longer says what is left: guard removes only its entries, keeps the
    user's later key, and the backup stays."""
    path = repo / ".claude/settings.json"
    path.parent.mkdir()
    path.write_text('{"model": "opus"}\n')
    guard("install", "claude-code", cwd=repo, env=env)
    data = json.loads(path.read_text())
    data["theme"] = "dark"
    path.write_text(json.dumps(data))
    proc = guard("uninstall", "claude-code", cwd=repo, env=env)
    assert "previous file kept" in proc.stdout
    assert json.loads(path.read_text()) == {"model": "opus", "theme": "dark"}
    assert path.with_name(path.name + BACKUP_SUFFIX).exists()
