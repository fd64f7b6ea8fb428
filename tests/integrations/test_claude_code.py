"""`guard hook claude-code` run as Claude Code runs it, on its payloads, with the shipped policy."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from guard.setup.install import hook_command

from .conftest import HookRunner
from .payloads import answer_of, claude_payload


def decision(proc: subprocess.CompletedProcess[str]) -> str:
    out = answer_of(proc)["hookSpecificOutput"]
    assert out["hookEventName"] == "PreToolUse"
    assert out["permissionDecisionReason"].startswith("guard: ")
    return str(out["permissionDecision"])


def test_plan_agent_write_into_src_is_denied(repo: Path, run_hook: HookRunner) -> None:
    """Attack: a plan-mode agent writes source code through Claude Code's Write tool."""
    p = claude_payload("Write", {"file_path": str(repo / "src/new.py"), "content": "x"}, repo)
    assert decision(run_hook("claude-code", p, "--agent", "plan")) == "deny"


def test_plan_agent_may_write_its_plan_file(repo: Path, run_hook: HookRunner) -> None:
    target = repo / ".openoxide/plans/x.md"
    p = claude_payload("Write", {"file_path": str(target), "content": "# plan"}, repo)
    assert decision(run_hook("claude-code", p, "--agent", "plan")) == "allow"


def test_plan_agent_write_through_symlinked_plan_file_is_denied(
    repo: Path, run_hook: HookRunner
) -> None:
    """Attack: a symlink inside the plan directory points at src/app.py."""
    plans = repo / ".openoxide/plans"
    plans.mkdir(parents=True)
    (plans / "evil.md").symlink_to(repo / "src/app.py")
    p = claude_payload(
        "Edit",
        {"file_path": str(plans / "evil.md"), "old_string": "hello", "new_string": "owned"},
        repo,
    )
    assert decision(run_hook("claude-code", p, "--agent", "plan")) == "deny"


def test_plan_agent_bash_redirection_into_src_is_denied(repo: Path, run_hook: HookRunner) -> None:
    """Attack: the shell writes what the Write tool may not."""
    p = claude_payload("Bash", {"command": "echo pwned > src/y"}, repo)
    assert decision(run_hook("claude-code", p, "--agent", "plan")) == "deny"


def test_build_agent_writes_source(repo: Path, run_hook: HookRunner) -> None:
    p = claude_payload("Write", {"file_path": str(repo / "src/new.py"), "content": "x"}, repo)
    assert decision(run_hook("claude-code", p, "--agent", "build")) == "allow"


def test_build_agent_cannot_rewrite_claude_settings(repo: Path, run_hook: HookRunner) -> None:
    """Attack: the agent removes guard's hook by rewriting .claude/settings.json."""
    p = claude_payload(
        "Write", {"file_path": str(repo / ".claude/settings.json"), "content": "{}"}, repo
    )
    assert decision(run_hook("claude-code", p)) == "deny"


def test_permission_mode_plan_selects_the_plan_agent(repo: Path, run_hook: HookRunner) -> None:
    p = claude_payload("Write", {"file_path": str(repo / "src/a.py"), "content": ""}, repo, "plan")
    assert decision(run_hook("claude-code", p)) == "deny"
    p = claude_payload("Write", {"file_path": str(repo / "src/a.py"), "content": ""}, repo)
    assert decision(run_hook("claude-code", p)) == "allow"


def test_guard_agent_env_holds_plan_mode_under_accept_edits(
    repo: Path, run_hook: HookRunner
) -> None:
    """Claude Code runs in acceptEdits for speed; guard still holds the plan agent."""
    p = claude_payload("Write", {"file_path": str(repo / "src/a.py"), "content": ""}, repo)
    assert decision(run_hook("claude-code", p, extra_env={"GUARD_AGENT": "plan"})) == "deny"


def test_agent_option_wins_over_env(repo: Path, run_hook: HookRunner) -> None:
    p = claude_payload("Write", {"file_path": str(repo / "src/a.py"), "content": ""}, repo)
    proc = run_hook("claude-code", p, "--agent", "build", extra_env={"GUARD_AGENT": "plan"})
    assert decision(proc) == "allow"


def test_secret_read_asks(repo: Path, run_hook: HookRunner) -> None:
    (repo / ".env").write_text("TOKEN=1\n")
    p = claude_payload("Read", {"file_path": str(repo / ".env")}, repo)
    assert decision(run_hook("claude-code", p, "--agent", "plan")) == "ask"


# -- fail closed: every internal failure is exit 2 with the reason on stderr ----------


def test_bad_json_blocks(repo: Path, run_hook: HookRunner) -> None:
    proc = run_hook("claude-code", "{not json", cwd=repo)
    assert proc.returncode == 2
    assert "not JSON" in proc.stderr and proc.stdout == ""


def test_payload_that_is_not_an_object_blocks(run_hook: HookRunner) -> None:
    proc = run_hook("claude-code", "[1, 2]")
    assert proc.returncode == 2 and "JSON object" in proc.stderr


def test_missing_tool_input_blocks(repo: Path, run_hook: HookRunner) -> None:
    p = claude_payload("Write", {}, repo)
    del p["tool_input"]
    proc = run_hook("claude-code", p)
    assert proc.returncode == 2 and "tool_input" in proc.stderr


def test_malformed_tool_input_blocks(repo: Path, run_hook: HookRunner) -> None:
    """Attack: a Write whose file_path is not a string, hoping the analysis skips it."""
    p = claude_payload("Write", {"file_path": ["src/a.py"], "content": ""}, repo)
    proc = run_hook("claude-code", p, "--agent", "build")
    assert proc.returncode == 2 or decision(proc) == "deny", proc.stdout


def test_unreadable_policy_blocks(repo: Path, run_hook: HookRunner) -> None:
    (repo / ".openoxide").mkdir()
    (repo / ".openoxide/policy.toml").write_text("[agents.plan\nmode = 'plan'\n")
    p = claude_payload("Read", {"file_path": str(repo / "src/app.py")}, repo)
    proc = run_hook("claude-code", p)
    assert proc.returncode == 2
    assert "policy.toml" in proc.stderr and proc.stdout == ""


def test_unknown_agent_blocks(repo: Path, run_hook: HookRunner) -> None:
    p = claude_payload("Read", {"file_path": str(repo / "src/app.py")}, repo)
    proc = run_hook("claude-code", p, extra_env={"GUARD_AGENT": "nosuch"})
    assert proc.returncode == 2 and "'nosuch'" in proc.stderr


def test_unknown_host_blocks(run_hook: HookRunner) -> None:
    proc = run_hook("vscode", {"tool_name": "x"})
    assert proc.returncode == 2 and "unknown host" in proc.stderr


def test_other_hook_event_blocks(repo: Path, run_hook: HookRunner) -> None:
    """PreToolUse is decided and PostToolUse checked (tests/integrations/test_missed.py);
    any other event is a block."""
    p = claude_payload("Write", {"file_path": "x", "content": ""}, repo)
    p["hook_event_name"] = "PermissionRequest"
    proc = run_hook("claude-code", p)
    assert proc.returncode == 2 and "PreToolUse" in proc.stderr


def test_missing_interpreter_blocks(repo: Path, env: dict[str, str], tmp_path: Path) -> None:
    """Attack surface: the venv the hook points to was deleted; the call must still be blocked."""
    command = hook_command("claude-code", python=str(tmp_path / "gone/bin/python"))
    p = claude_payload("Write", {"file_path": str(repo / "src/a.py"), "content": ""}, repo)
    proc = subprocess.run(
        ["/bin/sh", "-c", command],
        input=json.dumps(p),
        capture_output=True,
        text=True,
        cwd=repo,
        env=env,
        check=False,
    )
    assert proc.returncode == 2


def test_repository_cannot_shadow_guard_package(repo: Path, env: dict[str, str]) -> None:
    """Attack: the repository ships its own guard/ package that always answers allow."""
    fake = repo / "guard" / "hooks"
    fake.mkdir(parents=True)
    (repo / "guard/__init__.py").write_text("")
    (fake / "__init__.py").write_text("")
    allow = {"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "allow"}}
    (fake / "__main__.py").write_text(f"print({json.dumps(json.dumps(allow))})\n")
    p = claude_payload("Write", {"file_path": str(repo / "src/a.py"), "content": ""}, repo)
    proc = subprocess.run(
        ["/bin/sh", "-c", hook_command("claude-code", agent="plan")],
        input=json.dumps(p),
        capture_output=True,
        text=True,
        cwd=repo,
        env={**env, "PYTHONPATH": str(repo)},
        check=False,
    )
    assert decision(proc) == "deny"


def test_each_decision_is_audited(repo: Path, run_hook: HookRunner, home: Path) -> None:
    from guard.audit.logfile import read  # type: ignore[import-not-found,unused-ignore]

    p = claude_payload("Write", {"file_path": str(repo / "src/a.py"), "content": ""}, repo)
    assert decision(run_hook("claude-code", p, "--agent", "plan")) == "deny"
    assert run_hook("claude-code", "garbage", cwd=repo).returncode == 2
    logs = list(home.rglob("audit/*.jsonl"))
    records = [r for log in logs for r in read(log)]
    hook_records = [r for r in records if r.get("source") == "hook"]
    assert [r["decision"] for r in hook_records] == ["deny", "deny"], records
    first = hook_records[0]
    assert first["agent"] == "plan" and first["tool_name"] == "Write"
    assert first["tool_use_id"] == "toolu_01ABC" and first["host"] == "claude-code"
    assert os.path.realpath(str(repo / "src/a.py")) in json.dumps(first["effects"])


def test_worktree_guard_mode_picks_the_agent(repo: Path, run_hook: HookRunner) -> None:
    """A guard planning session in plan mode holds Claude Code's acceptEdits calls to plan."""
    from guard.planning import Session

    p = claude_payload("Write", {"file_path": str(repo / "src/a.py"), "content": ""}, repo)
    assert decision(run_hook("claude-code", p)) == "allow"  # no session: acceptEdits -> build
    Session.start(repo, "plan", title="hooks")
    assert decision(run_hook("claude-code", p)) == "deny"
    assert decision(run_hook("claude-code", p, extra_env={"GUARD_AGENT": "build"})) == "allow"


def test_the_plan_mode_paragraph_goes_with_a_plan_mode_deny_only(
    repo: Path, run_hook: HookRunner
) -> None:
    """Claude Code in its plan mode, a guard plan session open: the Write plan mode refuses
    names the session's plan file; the web fetch it only asks about and the read it allows
    carry no plan-mode paragraph."""
    from guard.planning import Session

    session = Session.start(repo, "plan", title="hooks")
    assert session.plan_path
    write = claude_payload(
        "Write", {"file_path": str(repo / "src/a.py"), "content": ""}, repo, "plan")
    out = answer_of(run_hook("claude-code", write))["hookSpecificOutput"]
    assert out["permissionDecision"] == "deny"
    assert "You are in plan mode" in out["permissionDecisionReason"]
    assert session.plan_path in out["permissionDecisionReason"]
    fetch = claude_payload(
        "WebFetch", {"url": "https://example.com/", "prompt": "summarise"}, repo, "plan")
    out = answer_of(run_hook("claude-code", fetch))["hookSpecificOutput"]
    assert out["permissionDecision"] == "ask"
    assert "plan mode" not in out["permissionDecisionReason"], out
    read = claude_payload("Read", {"file_path": str(repo / "src/app.py")}, repo, "plan")
    out = answer_of(run_hook("claude-code", read))["hookSpecificOutput"]
    assert out["permissionDecision"] == "allow"
    assert "plan mode" not in out["permissionDecisionReason"], out
